-- name: report_events
-- kind: query
-- depends: events, steps
-- doc: The events the HTML report shows on its timeline and in its table, for one run, in time
-- doc: order: at most $per_kind of each kind (a flood of bad_record events must not crowd out a
-- doc: crash) and $limit in all; of_kind counts every event of the kind. at_step is the event's
-- doc: step, or for an event logged without one (crash, sigterm, recorder_close) the last step
-- doc: whose wall_time is at or before the event's timestamp, if that is within the run's steps
-- doc: or at most an hour after the last (else NULL: a clock that disagrees places nothing).
-- doc: Texts cut at 300 characters.
-- doc: Parameters: $run_id VARCHAR, $per_kind BIGINT, $limit BIGINT.
-- columns: timestamp DOUBLE, kind VARCHAR, step BIGINT, at_step BIGINT, rank BIGINT,
-- columns: message VARCHAR, data VARCHAR, of_kind BIGINT

WITH ordered AS (
    SELECT
        timestamp, kind, step, rank, message, CAST(data AS VARCHAR) AS data_text,
        count(*) OVER (PARTITION BY kind) AS of_kind,
        row_number() OVER (PARTITION BY kind ORDER BY timestamp) AS nth_of_kind
    FROM v1.events
    WHERE run_id = $run_id
    QUALIFY nth_of_kind <= $per_kind
),
clock AS (
    SELECT step, wall_time, max(wall_time) OVER () AS last_wall_time
    FROM v1.steps
    WHERE run_id = $run_id AND wall_time IS NOT NULL
)
SELECT
    o.timestamp, o.kind, o.step, coalesce(o.step, CASE WHEN o.timestamp <= c.last_wall_time + 3600 THEN c.step END) AS at_step, o.rank,
    left(o.message, 300) AS message, left(o.data_text, 300) AS data, o.of_kind
FROM ordered AS o
ASOF LEFT JOIN clock AS c ON o.timestamp >= c.wall_time
ORDER BY o.timestamp, o.kind
LIMIT $limit
