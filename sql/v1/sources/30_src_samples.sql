-- name: src_samples
-- kind: source
-- depends: paths, sample_columns
-- doc: Captured samples from every shard of every recording below the root, rank
-- doc: sub-recordings included. The open shard of a live run is rewritten atomically as it grows,
-- doc: so each shard file read is complete.
-- columns: every sample column, then rec_dir VARCHAR, run_dir VARCHAR, filename VARCHAR

CREATE OR REPLACE VIEW v1.src_samples AS
WITH rows_ AS MATERIALIZED (
    SELECT * FROM v1.sample_columns
    UNION ALL BY NAME
    SELECT * FROM read_parquet(
        v1.root_glob() || '/**/samples/shard-*.parquet',
        union_by_name = true, filename = true, allow_empty = true)
), files AS (
    -- paths are parsed once per file, not once per row; rows_ is read once, so a shard
    -- rewritten mid-query cannot show two versions
    SELECT filename, rec_dir, v1.run_dir(rec_dir) AS run_dir, v1.rank_of(rec_dir) AS file_rank
    FROM (SELECT filename, v1.rec_dir(filename) AS rec_dir FROM (SELECT DISTINCT filename FROM rows_))
)
SELECT
    r.* EXCLUDE (filename, rank, "empty"),
    coalesce(r.rank, f.file_rank) AS rank,
    f.rec_dir,
    f.run_dir,
    r.filename
FROM rows_ AS r
JOIN files AS f ON f.filename = r.filename;
