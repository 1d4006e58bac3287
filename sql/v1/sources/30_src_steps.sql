-- name: src_steps
-- kind: source
-- depends: paths, step_columns
-- doc: Step rows from every recording below the root, with where they came from. A live run
-- doc: writes immutable steps/part-*.parquet files; close() compacts them into steps.parquet. Where
-- doc: both exist (the instant between compaction's rename and the parts' removal), the compacted
-- doc: file wins: the choice is made per file, never by comparing rows. Columns that differ across
-- doc: files (schema evolution) are unioned by name.
-- columns: every step column, then rec_dir VARCHAR, run_dir VARCHAR, rank BIGINT, filename VARCHAR

CREATE OR REPLACE VIEW v1.src_steps AS
WITH rows_ AS (
    SELECT * FROM v1.step_columns
    UNION ALL BY NAME
    SELECT * FROM read_parquet(
        [v1.root() || '/**/steps.parquet', v1.root() || '/**/steps/part-*.parquet'],
        union_by_name = true, filename = true, allow_empty = true)
), compacted AS (
    SELECT v1.rec_dir(file) AS rec_dir FROM glob(v1.root() || '/**/steps.parquet')
), located AS (
    SELECT *, v1.rec_dir(filename) AS rec_dir FROM rows_
)
SELECT
    * EXCLUDE (rec_dir, filename, "empty"),
    rec_dir,
    v1.run_dir(rec_dir) AS run_dir,
    v1.rank_of(rec_dir) AS rank,
    filename
FROM located
WHERE filename NOT LIKE '%/steps/part-%'
   OR rec_dir NOT IN (SELECT rec_dir FROM compacted);
