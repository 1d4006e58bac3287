-- name: src_steps
-- kind: source
-- depends: paths, step_columns
-- doc: Step rows from every recording below the root, one row per step per recording, with where
-- doc: they came from. A live run writes immutable steps/part-*.parquet files; close() compacts
-- doc: them into steps.parquet. Where both exist (the instant between compaction's rename and the
-- doc: parts' removal), the compacted file wins: the choice is made per file, never by comparing
-- doc: rows. A step written more than once (logged twice, or re-run by a resumed session) is
-- doc: merged as compaction merges it: each column keeps its last non-NULL value in write order
-- doc: (part index, then row), so a live, crashed and closed run read the same. Columns that
-- doc: differ across files (schema evolution) are unioned by name.
-- columns: every step column, then rec_dir VARCHAR, run_dir VARCHAR, rank BIGINT, filename VARCHAR

CREATE OR REPLACE VIEW v1.src_steps AS
WITH rows_ AS MATERIALIZED (
    SELECT * FROM v1.step_columns
    UNION ALL BY NAME
    -- Parts are listed before the compacted file, on purpose. Compaction renames steps.parquet
    -- into place and only then deletes the parts, so a scan that lists parts first sees at
    -- least one complete copy whatever instant it lands on (a part deleted between listing and
    -- opening is an IO error that the reader retries, never a silent gap).
    SELECT COLUMNS(v1.columns_read()) FROM read_parquet(
        list_concat(v1.globs('steps/part-*.parquet'), v1.globs('steps.parquet')),
        union_by_name = true, filename = true, file_row_number = true, hive_partitioning = false, allow_empty = true)
), files AS (
    -- per file, once (paths are parsed per file, not per row): its write order within its
    -- recording (the part index; the compacted file, when it is read, is alone) and its steps
    SELECT
        filename, v1.rec_dir(filename) AS rec_dir,
        coalesce(TRY_CAST(regexp_extract(filename, '/part-([0-9]+)\.parquet$', 1) AS BIGINT), 0) AS file_order,
        min(step) AS lo, max(step) AS hi, count(step) <> count(DISTINCT step) AS repeats
    FROM rows_
    GROUP BY filename
), kept AS (
    -- which copy wins is decided from the files this very scan read (rows_ is materialized,
    -- so it is read once): a second directory listing could see the compaction at another
    -- instant and drop every row, or count every row twice
    SELECT *, v1.run_dir(rec_dir) AS run_dir, v1.rank_of(rec_dir) AS rank
    FROM files
    QUALIFY bool_or(filename LIKE '%/steps.parquet') OVER (PARTITION BY rec_dir) = (filename LIKE '%/steps.parquet')
), checked AS (
    -- a recording may hold a step twice only if one of its files repeats a step or two of its
    -- files' step ranges overlap: decided per file, so the usual recording is never regrouped
    SELECT *, bool_or(repeats OR lo <= coalesce(hi_before, lo - 1)) OVER (PARTITION BY rec_dir) AS merge
    FROM (SELECT *, max(hi) OVER (PARTITION BY rec_dir ORDER BY lo, filename
                                  ROWS BETWEEN UNBOUNDED PRECEDING AND 1 PRECEDING) AS hi_before
          FROM kept)
), plain AS (
    -- the usual recording: its rows as read. Each branch joins the rows on its own: one CTE
    -- read by both would be materialized, every row and column copied once more (a root of 1M
    -- steps: 0.4 GB more at peak and a quarter more CPU)
    SELECT
        r.* EXCLUDE (filename, file_row_number, "empty"), k.rec_dir, k.run_dir, k.rank, r.filename
    FROM rows_ AS r
    JOIN checked AS k ON k.filename = r.filename
    WHERE NOT k.merge
), merged AS (
    SELECT
        r.* EXCLUDE (filename, file_row_number, "empty"), k.rec_dir, k.run_dir, k.rank, r.filename,
        k.file_order * 4294967296 + r.file_row_number AS write_order
    FROM rows_ AS r
    JOIN checked AS k ON k.filename = r.filename
    WHERE k.merge
)
SELECT * FROM plain
UNION ALL BY NAME
-- arg_max skips NULLs: per column, the last value written for the step, as compaction keeps it
SELECT rec_dir, step, arg_max(COLUMNS(* EXCLUDE (rec_dir, step, write_order)), write_order)
FROM merged
GROUP BY rec_dir, step;
