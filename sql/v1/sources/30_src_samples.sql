-- name: src_samples
-- kind: source
-- depends: paths, sample_columns, sample_files
-- doc: Captured samples from every shard of every recording below the root, rank
-- doc: sub-recordings included. A full shard is samples/shard-NNNNN.parquet, written once; the
-- doc: shard still filling is its deltas, shard-NNNNN.delta-VVVVVV.parquet, one per flush with
-- doc: that flush's rows, and every few flushes shard-NNNNN.open-VVVVVV.parquet, which holds
-- doc: deltas 1..V merged (no file is ever rewritten; rlprobe.layout). Per shard the scan keeps
-- doc: the sealed file when there is one, else the newest open version and the deltas newer
-- doc: than it (earlier writers wrote only open versions: the newest one). With the variable
-- doc: rlprobe_sample_files set (by v1.sample_files_listed() and v1.sample_files_relisted(): rlprobe
-- doc: does so for each query),
-- doc: exactly those files are read, as a plain scan: a filter on step, the run's folder or the
-- doc: columns a query uses reach the parquet reader, and text columns are read only by queries
-- doc: that use them. Unset, the choice is made per file from the files this very scan read,
-- doc: after reading all of them (the same rows, without that narrowing).
-- columns: every sample column, then rec_dir VARCHAR, run_dir VARCHAR, filename VARCHAR

CREATE OR REPLACE VIEW v1.src_samples AS
WITH listed AS (
    -- the files chosen by name before the query (one listing): nothing left to choose
    SELECT
        *,
        v1.rec_dir(filename) AS rec_dir,
        v1.run_dir(v1.rec_dir(filename)) AS run_dir,
        v1.rank_of(v1.rec_dir(filename)) AS file_rank
    FROM (
        SELECT * FROM v1.sample_columns
        UNION ALL BY NAME
        SELECT COLUMNS(v1.columns_read()) FROM read_parquet(
            v1.listed_sample_globs(),
            union_by_name = true, filename = true, hive_partitioning = false,
            -- an empty list (no shard yet, or the other branch taken) reads nothing; a listed
            -- file that is gone fails the query (rlprobe lists again and retries), never
            -- silently reads as no rows
            allow_empty = (len(v1.listed_sample_globs()) = 0)))
    WHERE getvariable('rlprobe_sample_files') IS NOT NULL
), scanned AS MATERIALIZED (
    -- no list bound: every shard file below the root, the choice made from this scan's files.
    -- getvariable folds to a constant, so the branch a query does not take is never executed.
    SELECT * FROM v1.sample_columns
    UNION ALL BY NAME
    SELECT COLUMNS(v1.columns_read()) FROM read_parquet(
        CASE WHEN getvariable('rlprobe_sample_files') IS NULL THEN v1.globs('samples/shard-*.parquet') ELSE []::VARCHAR[] END,
        union_by_name = true, filename = true, hive_partitioning = false, allow_empty = true)
    WHERE getvariable('rlprobe_sample_files') IS NULL
), files AS (
    -- paths are parsed once per file, not once per row
    SELECT
        filename, rec_dir, v1.run_dir(rec_dir) AS run_dir, v1.rank_of(rec_dir) AS file_rank,
        regexp_extract(filename, '/shard-([0-9]+)[^/]*$', 1) AS shard,
        regexp_extract(filename, '/shard-[0-9]+\.(open|delta)-[0-9]+\.parquet$', 1) AS kind,  -- '' when sealed
        TRY_CAST(regexp_extract(filename, '/shard-[0-9]+\.(open|delta)-([0-9]+)\.parquet$', 2) AS BIGINT) AS version
    FROM (SELECT filename, v1.rec_dir(filename) AS rec_dir FROM (SELECT DISTINCT filename FROM scanned))
), kept AS (
    SELECT * FROM files
    QUALIFY CASE
        WHEN bool_or(kind = '') OVER (PARTITION BY rec_dir, shard) THEN kind = ''
        WHEN kind = 'open' THEN version = max(CASE WHEN kind = 'open' THEN version END) OVER (PARTITION BY rec_dir, shard)
        ELSE version > coalesce(max(CASE WHEN kind = 'open' THEN version END) OVER (PARTITION BY rec_dir, shard), 0)
    END
), rows_ AS (
    SELECT * FROM listed
    UNION ALL BY NAME
    SELECT r.*, f.rec_dir, f.run_dir, f.file_rank
    FROM scanned AS r
    JOIN kept AS f ON f.filename = r.filename
)
SELECT
    * EXCLUDE (filename, rank, "empty", rec_dir, run_dir, file_rank),
    coalesce(rank, file_rank) AS rank,
    rec_dir,
    run_dir,
    filename
FROM rows_;
