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
WITH rows_ AS MATERIALIZED (
    SELECT * FROM v1.step_columns
    UNION ALL BY NAME
    -- Parts are listed before the compacted file, on purpose. Compaction renames steps.parquet
    -- into place and only then deletes the parts, so a scan that lists parts first sees at
    -- least one complete copy whatever instant it lands on (a part deleted between listing and
    -- opening is an IO error that the reader retries, never a silent gap).
    SELECT * FROM read_parquet(
        list_concat(v1.globs('steps/part-*.parquet'), v1.globs('steps.parquet')),
        union_by_name = true, filename = true, allow_empty = true)
), files AS (
    -- paths are parsed once per file, not once per row
    SELECT filename, v1.rec_dir(filename) AS rec_dir
    FROM (SELECT DISTINCT filename FROM rows_)
), kept AS (
    -- which copy wins is decided from the files this very scan read (rows_ is materialized,
    -- so it is read once): a second directory listing could see the compaction at another
    -- instant and drop every row, or count every row twice
    SELECT
        filename, rec_dir, v1.run_dir(rec_dir) AS run_dir, v1.rank_of(rec_dir) AS rank,
        max(CASE WHEN filename LIKE '%/steps.parquet' THEN 1 ELSE 0 END)
            OVER (PARTITION BY rec_dir) AS compacted
    FROM files
)
SELECT r.* EXCLUDE (filename, "empty"), k.rec_dir, k.run_dir, k.rank, r.filename
FROM rows_ AS r
JOIN kept AS k ON k.filename = r.filename
WHERE k.compacted = 0 OR k.filename NOT LIKE '%/steps/part-%';
