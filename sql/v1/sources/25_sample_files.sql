-- name: sample_files
-- kind: source
-- depends: paths
-- doc: The sample shard files a read of src_samples takes, chosen from their names alone (one
-- doc: directory listing, no file opened): per recording and shard index, the sealed
-- doc: shard-NNNNN.parquet when there is one, else the newest shard-NNNNN.open-VVVVVV.parquet and
-- doc: every shard-NNNNN.delta-VVVVVV.parquet newer than it (rlprobe.layout.newest_shards).
-- doc: v1.sample_files_listed() lists them now; rlprobe binds that list to the variable
-- doc: rlprobe_sample_files before each query that names samples (rlprobe.store.sample_files), so
-- doc: the scan reads a fixed list of files and a step range, a run or a column list reaches the
-- doc: parquet reader. In a DuckDB session of your own, run
-- doc: SET VARIABLE rlprobe_sample_files = v1.sample_files_listed(); before a query for the same
-- doc: speed (and again before the next: the list is the files of that instant), or leave it
-- doc: unset: src_samples then lists and chooses the files itself, slower but always current.
-- columns: (macro) v1.sample_files_listed() -> VARCHAR[]

-- The rule is rlprobe.layout's, on the names this one listing returned: every row of a shard
-- is in the file that replaces it, so the chosen files hold each row once.
CREATE OR REPLACE MACRO v1.sample_files_listed() AS (
    WITH listed AS (
        SELECT
            file, seq, v1.rec_dir(file) AS rec_dir,
            regexp_extract(file, '/shard-([0-9]+)[^/]*$', 1) AS shard,
            regexp_extract(file, '/shard-[0-9]+\.(open|delta)-[0-9]+\.parquet$', 1) AS kind,  -- '' when sealed
            TRY_CAST(regexp_extract(file, '/shard-[0-9]+\.(open|delta)-([0-9]+)\.parquet$', 2) AS BIGINT) AS version
        FROM (SELECT file, row_number() OVER () AS seq FROM glob(v1.globs('samples/shard-*.parquet')))
    ), kept AS (
        SELECT file, seq FROM listed
        QUALIFY CASE
            WHEN bool_or(kind = '') OVER (PARTITION BY rec_dir, shard) THEN kind = ''
            WHEN kind = 'open' THEN version = max(CASE WHEN kind = 'open' THEN version END) OVER (PARTITION BY rec_dir, shard)
            ELSE version > coalesce(max(CASE WHEN kind = 'open' THEN version END) OVER (PARTITION BY rec_dir, shard), 0)
        END
    )
    -- in listing order, as a glob would pass them to the reader
    SELECT coalesce(list(file ORDER BY seq), []::VARCHAR[]) FROM kept
);
