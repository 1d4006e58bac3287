-- name: src_step_files
-- kind: source
-- depends: paths, step_columns
-- doc: One row per step file the steps view reads (rank sub-recordings included), with the same
-- doc: per-file choice as src_steps (a compacted steps.parquet wins over parts listed beside it):
-- doc: its rows, first and last step, and last wall_time. rows counts the steps this file is the
-- doc: last writer of (a step re-logged in a later part belongs to that part), so the rows of a
-- doc: recording add up to its distinct steps, as the steps view shows them. Only the step and
-- doc: wall_time columns are read, in one scan, so listing runs never pulls a run's metrics.
-- columns: filename VARCHAR, rec_dir VARCHAR, run_dir VARCHAR, rank BIGINT, rows BIGINT,
-- columns: first_step BIGINT, last_step BIGINT, last_step_at DOUBLE, compacted BOOLEAN

CREATE OR REPLACE VIEW v1.src_step_files AS
WITH keys AS MATERIALIZED (
    SELECT filename, step, wall_time
    FROM (
        SELECT * FROM v1.step_columns
        UNION ALL BY NAME
        -- parts before the compacted file, as in src_steps (one scan, one listing)
        -- only the columns used here are read: a file with thousands of metrics costs its footer
        SELECT COLUMNS('^(step|wall_time|filename|empty)$') FROM read_parquet(
            list_concat(v1.globs('steps/part-*.parquet'), v1.globs('steps.parquet')),
            union_by_name = true, filename = true, hive_partitioning = false, allow_empty = true)
    )
    WHERE filename IS NOT NULL
), files AS (
    SELECT
        filename, v1.rec_dir(filename) AS rec_dir, filename LIKE '%/steps.parquet' AS compacted,
        coalesce(TRY_CAST(regexp_extract(filename, '/part-([0-9]+)\.parquet$', 1) AS BIGINT), 0) AS file_order,
        count(*) AS n, min(step) AS lo, max(step) AS hi, max(wall_time) AS last_step_at,
        count(step) <> count(DISTINCT step) AS repeats
    FROM keys
    GROUP BY filename
), kept AS (
    SELECT * FROM files
    QUALIFY compacted OR NOT bool_or(compacted) OVER (PARTITION BY rec_dir)
), checked AS (
    -- as in src_steps: only a recording whose files repeat a step or overlap is counted by step
    SELECT *, bool_or(repeats OR lo <= coalesce(hi_before, lo - 1)) OVER (PARTITION BY rec_dir) AS merge
    FROM (SELECT *, max(hi) OVER (PARTITION BY rec_dir ORDER BY lo, filename
                                  ROWS BETWEEN UNBOUNDED PRECEDING AND 1 PRECEDING) AS hi_before
          FROM kept)
), owners AS (
    -- in such a recording, the file that wrote each step last
    SELECT arg_max(k.filename, f.file_order) AS filename
    FROM keys AS k JOIN checked AS f ON f.filename = k.filename
    WHERE f.merge
    GROUP BY f.rec_dir, k.step
)
SELECT
    f.filename, f.rec_dir, v1.run_dir(f.rec_dir) AS run_dir, v1.rank_of(f.rec_dir) AS rank,
    CASE WHEN f.merge THEN coalesce(o.rows, 0) ELSE f.n END AS rows,
    f.lo AS first_step, f.hi AS last_step, f.last_step_at, f.compacted
FROM checked AS f
LEFT JOIN (SELECT filename, count(*) AS rows FROM owners GROUP BY filename) AS o ON o.filename = f.filename;
