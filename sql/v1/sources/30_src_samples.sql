-- name: src_samples
-- kind: source
-- depends: paths, sample_columns
-- doc: Captured samples from every shard of every recording below the root, rank
-- doc: sub-recordings included. A full shard is samples/shard-NNNNN.parquet, written once; the
-- doc: shard still filling is its deltas, shard-NNNNN.delta-VVVVVV.parquet, one per flush with
-- doc: that flush's rows, and every few flushes shard-NNNNN.open-VVVVVV.parquet, which holds
-- doc: deltas 1..V merged (no file is ever rewritten; rlprobe.layout). Per shard the scan keeps
-- doc: the sealed file when there is one, else the newest open version and the deltas newer
-- doc: than it (earlier writers wrote only open versions: the newest one). The choice is made
-- doc: per file, from the files this very scan read.
-- columns: every sample column, then rec_dir VARCHAR, run_dir VARCHAR, filename VARCHAR

CREATE OR REPLACE VIEW v1.src_samples AS
WITH rows_ AS MATERIALIZED (
    SELECT * FROM v1.sample_columns
    UNION ALL BY NAME
    SELECT COLUMNS(v1.columns_read()) FROM read_parquet(
        v1.globs('samples/shard-*.parquet'),
        union_by_name = true, filename = true, allow_empty = true)
), files AS (
    -- paths are parsed once per file, not once per row
    SELECT
        filename, rec_dir, v1.run_dir(rec_dir) AS run_dir, v1.rank_of(rec_dir) AS file_rank,
        regexp_extract(filename, '/shard-([0-9]+)[^/]*$', 1) AS shard,
        regexp_extract(filename, '/shard-[0-9]+\.(open|delta)-[0-9]+\.parquet$', 1) AS kind,  -- '' when sealed
        TRY_CAST(regexp_extract(filename, '/shard-[0-9]+\.(open|delta)-([0-9]+)\.parquet$', 2) AS BIGINT) AS version
    FROM (SELECT filename, v1.rec_dir(filename) AS rec_dir FROM (SELECT DISTINCT filename FROM rows_))
), kept AS (
    SELECT * FROM files
    QUALIFY CASE
        WHEN bool_or(kind = '') OVER (PARTITION BY rec_dir, shard) THEN kind = ''
        WHEN kind = 'open' THEN version = max(CASE WHEN kind = 'open' THEN version END) OVER (PARTITION BY rec_dir, shard)
        ELSE version > coalesce(max(CASE WHEN kind = 'open' THEN version END) OVER (PARTITION BY rec_dir, shard), 0)
    END
)
SELECT
    r.* EXCLUDE (filename, rank, "empty"),
    coalesce(r.rank, f.file_rank) AS rank,
    f.rec_dir,
    f.run_dir,
    r.filename
FROM rows_ AS r
JOIN kept AS f ON f.filename = r.filename;
