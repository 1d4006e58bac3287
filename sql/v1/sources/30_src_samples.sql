-- name: src_samples
-- kind: source
-- depends: paths, sample_columns
-- doc: Captured samples from every shard of every recording below the root, rank
-- doc: sub-recordings included. The open shard of a live run is rewritten atomically as it grows,
-- doc: so each shard file read is complete.
-- columns: every sample column, then rec_dir VARCHAR, run_dir VARCHAR, filename VARCHAR

CREATE OR REPLACE VIEW v1.src_samples AS
WITH rows_ AS (
    SELECT * FROM v1.sample_columns
    UNION ALL BY NAME
    SELECT * FROM read_parquet(
        v1.root_glob() || '/**/samples/shard-*.parquet',
        union_by_name = true, filename = true, allow_empty = true)
)
SELECT
    * EXCLUDE (filename, rank, "empty"),
    coalesce(rank, v1.rank_of(v1.rec_dir(filename))) AS rank,
    v1.rec_dir(filename) AS rec_dir,
    v1.run_dir(v1.rec_dir(filename)) AS run_dir,
    filename
FROM rows_;
