-- name: src_step_files
-- kind: source
-- depends: paths, step_columns
-- doc: One row per step file the steps view reads (rank sub-recordings included), with the same
-- doc: per-file choice as src_steps (a compacted steps.parquet wins over parts listed beside it):
-- doc: its rows, first and last step, and last wall_time. Only the step and wall_time columns are
-- doc: read, in one scan grouped by file, so listing runs never pulls a run's metrics.
-- columns: filename VARCHAR, rec_dir VARCHAR, run_dir VARCHAR, rank BIGINT, rows BIGINT,
-- columns: first_step BIGINT, last_step BIGINT, last_step_at DOUBLE, compacted BOOLEAN

CREATE OR REPLACE VIEW v1.src_step_files AS
WITH per_file AS (
    SELECT filename, count(*) AS rows, min(step) AS first_step, max(step) AS last_step, max(wall_time) AS last_step_at
    FROM (
        SELECT * FROM v1.step_columns
        UNION ALL BY NAME
        -- parts before the compacted file, as in src_steps (one scan, one listing)
        SELECT * FROM read_parquet(
            list_concat(v1.globs('steps/part-*.parquet'), v1.globs('steps.parquet')),
            union_by_name = true, filename = true, allow_empty = true)
    )
    WHERE filename IS NOT NULL
    GROUP BY filename
), located AS (
    SELECT *, v1.rec_dir(filename) AS rec_dir, filename LIKE '%/steps.parquet' AS compacted
    FROM per_file
)
SELECT
    filename, rec_dir, v1.run_dir(rec_dir) AS run_dir, v1.rank_of(rec_dir) AS rank,
    rows, first_step, last_step, last_step_at, compacted
FROM located
QUALIFY compacted OR NOT bool_or(compacted) OVER (PARTITION BY rec_dir);
