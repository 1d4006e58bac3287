-- name: src_events
-- kind: source
-- depends: paths, event_columns
-- doc: Events from every events.jsonl below the root, rank sub-recordings included. A line
-- doc: that does not parse (the torn last line of a killed writer, say) is dropped, never
-- doc: returned as a row of NULLs: every event has a kind.
-- columns: timestamp DOUBLE, kind VARCHAR, step BIGINT, rank BIGINT, message VARCHAR, data JSON,
-- columns: rec_dir VARCHAR, run_dir VARCHAR, filename VARCHAR

CREATE OR REPLACE VIEW v1.src_events AS
WITH rows_ AS (
    SELECT * FROM v1.event_columns
    UNION ALL BY NAME
    SELECT * FROM read_json(
        v1.globs('events.jsonl'),
        format = 'newline_delimited',
        columns = {timestamp: 'DOUBLE', kind: 'VARCHAR', step: 'BIGINT', rank: 'BIGINT',
                   message: 'VARCHAR', data: 'JSON'},
        ignore_errors = true, filename = true, hive_partitioning = false, allow_empty = true)
)
SELECT
    timestamp,
    kind,
    step,
    coalesce(rank, v1.rank_of(v1.rec_dir(filename))) AS rank,
    coalesce(message, '') AS message,
    data,
    v1.rec_dir(filename) AS rec_dir,
    v1.run_dir(v1.rec_dir(filename)) AS run_dir,
    filename
FROM rows_
WHERE kind IS NOT NULL;
