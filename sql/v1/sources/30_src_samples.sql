-- name: src_samples
-- kind: source
-- depends: paths, sample_columns
-- doc: Captured samples from every shard of every recording below the root, rank
-- doc: sub-recordings included. A full shard is samples/shard-NNNNN.parquet; the shard still
-- doc: filling is written at each flush as a new version, shard-NNNNN.open-VVVVVV.parquet, and the
-- doc: version before it is deleted afterwards (no file is ever rewritten under its own name). A
-- doc: listing that catches two copies of one shard keeps the newest: sealed over open, then the
-- doc: highest version. The choice is made per file, from the files this very scan read.
-- columns: every sample column, then rec_dir VARCHAR, run_dir VARCHAR, filename VARCHAR

CREATE OR REPLACE VIEW v1.src_samples AS
WITH rows_ AS MATERIALIZED (
    SELECT * FROM v1.sample_columns
    UNION ALL BY NAME
    SELECT * FROM read_parquet(
        v1.globs('samples/shard-*.parquet'),
        union_by_name = true, filename = true, allow_empty = true)
), files AS (
    -- paths are parsed once per file, not once per row
    SELECT
        filename, rec_dir, v1.run_dir(rec_dir) AS run_dir, v1.rank_of(rec_dir) AS file_rank,
        regexp_extract(filename, '/shard-([0-9]+)[^/]*$', 1) AS shard,
        -- sealed ranks above every open version, as in rlprobe.layout
        coalesce(TRY_CAST(regexp_extract(filename, '/shard-[0-9]+\.open-([0-9]+)\.parquet$', 1) AS BIGINT),
                 4611686018427387904) AS version
    FROM (SELECT filename, v1.rec_dir(filename) AS rec_dir FROM (SELECT DISTINCT filename FROM rows_))
), kept AS (
    SELECT * FROM files
    QUALIFY version = max(version) OVER (PARTITION BY rec_dir, shard)
)
SELECT
    r.* EXCLUDE (filename, rank, "empty"),
    coalesce(r.rank, f.file_rank) AS rank,
    f.rec_dir,
    f.run_dir,
    r.filename
FROM rows_ AS r
JOIN kept AS f ON f.filename = r.filename;
