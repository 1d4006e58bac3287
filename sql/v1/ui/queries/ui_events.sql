-- name: ui_events
-- kind: query
-- depends: events, steps
-- doc: Events of the runs $run_ids for the dashboard: markers on its charts (checkpoints, crashes,
-- doc: halts) and a run page's events table. Kinds in $skip_kinds are left out (lifecycle
-- doc: bookkeeping on the charts, none on a run page); at most $per_kind of each kind per run (a
-- doc: flood of bad_record events must not crowd out a crash), of_kind counts them all. at_step
-- doc: is the event's step, or for one logged without (crash, sigterm, recorder_close) the last
-- doc: step whose wall_time is at or before the event, when that is within the run or at most an
-- doc: hour after it, as in the report. Texts cut at $max_chars characters.
-- doc: Parameters: $run_ids VARCHAR[], $skip_kinds VARCHAR[], $per_kind BIGINT, $max_chars BIGINT.
-- columns: run_id VARCHAR, timestamp DOUBLE, kind VARCHAR, step BIGINT, at_step BIGINT,
-- columns: rank BIGINT, message VARCHAR, data VARCHAR, of_kind BIGINT

WITH ordered AS (
    SELECT
        run_id, timestamp, kind, step, rank, message, CAST(data AS VARCHAR) AS data_text,
        count(*) OVER (PARTITION BY run_id, kind) AS of_kind,
        row_number() OVER (PARTITION BY run_id, kind ORDER BY timestamp) AS nth_of_kind
    FROM v1.events
    WHERE list_contains($run_ids, run_id) AND NOT list_contains($skip_kinds, kind)
    QUALIFY nth_of_kind <= $per_kind
),
clock AS (
    SELECT run_id, step, wall_time, max(wall_time) OVER (PARTITION BY run_id) AS last_wall_time
    FROM v1.steps
    WHERE list_contains($run_ids, run_id) AND wall_time IS NOT NULL
)
SELECT
    o.run_id, o.timestamp, o.kind, o.step,
    coalesce(o.step, CASE WHEN o.timestamp <= c.last_wall_time + 3600 THEN c.step END) AS at_step,
    o.rank, left(o.message, $max_chars) AS message, left(o.data_text, $max_chars) AS data, o.of_kind
FROM ordered AS o
ASOF LEFT JOIN clock AS c ON o.run_id = c.run_id AND o.timestamp >= c.wall_time
ORDER BY o.run_id, o.timestamp, o.kind
