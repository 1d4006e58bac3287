-- name: sample_files
-- kind: source
-- depends: paths
-- doc: The sample shard files a read of src_samples takes, chosen from their names alone (no file
-- doc: opened): per recording and shard index, the sealed shard-NNNNN.parquet when there is one,
-- doc: else the newest shard-NNNNN.open-VVVVVV.parquet and every shard-NNNNN.delta-VVVVVV.parquet
-- doc: newer than it (rlprobe.layout.newest_shards). v1.sample_files_listed() lists them now;
-- doc: v1.sample_files_relisted() lists again and chooses from both listings. A listing that reads
-- doc: a samples folder while the writer seals a shard there (a rename, or a new file and its
-- doc: copies deleted) can see neither the old names nor the new one; the second listing, begun
-- doc: after the first ended, sees the sealed file, so the two together never miss a shard.
-- doc: rlprobe binds the list to the variable rlprobe_sample_files before each query that names
-- doc: samples (rlprobe.store.sample_files), so the scan reads a fixed list of files and a step
-- doc: range, a run or a column list reaches the parquet reader. In a DuckDB session of your own,
-- doc: run SET VARIABLE rlprobe_sample_files = v1.sample_files_listed(); and then
-- doc: SET VARIABLE rlprobe_sample_files = v1.sample_files_relisted(); before a query for the same
-- doc: speed (and again before the next: the list is the files of that instant), or leave it
-- doc: unset: src_samples then lists and chooses the files itself (one listing), slower but current.
-- columns: (macros) v1.sample_shard_files() -> VARCHAR[], v1.sample_files_chosen(files) -> VARCHAR[],
-- columns: v1.sample_files_listed() -> VARCHAR[], v1.sample_files_relisted() -> VARCHAR[],
-- columns: v1.listed_sample_globs() -> VARCHAR[]

-- Every shard file below the root (or the runs in scope), in listing order.
CREATE OR REPLACE MACRO v1.sample_shard_files() AS (
    SELECT coalesce(list(file), []::VARCHAR[]) FROM glob(v1.globs('samples/shard-*.parquet'))
);

-- The rule is rlprobe.layout's, on names alone: every row of a shard is in the file that
-- replaces it, so the chosen files hold each row once. files may name a file twice (two
-- listings put together): it is chosen once, at its first place.
CREATE OR REPLACE MACRO v1.sample_files_chosen(files) AS (
    WITH given AS (
        SELECT file, min(seq) AS seq
        FROM (SELECT unnest(files) AS file, generate_subscripts(files, 1) AS seq)
        GROUP BY file
    ), listed AS (
        SELECT
            file, seq, v1.rec_dir(file) AS rec_dir,
            regexp_extract(file, '/shard-([0-9]+)[^/]*$', 1) AS shard,
            regexp_extract(file, '/shard-[0-9]+\.(open|delta)-[0-9]+\.parquet$', 1) AS kind,  -- '' when sealed
            TRY_CAST(regexp_extract(file, '/shard-[0-9]+\.(open|delta)-([0-9]+)\.parquet$', 2) AS BIGINT) AS version
        FROM given
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

CREATE OR REPLACE MACRO v1.sample_files_listed() AS v1.sample_files_chosen(v1.sample_shard_files());

-- Choosing again from the files already bound and a new listing gives what one choice from both
-- listings would: a file the first choice dropped was replaced by one it kept.
CREATE OR REPLACE MACRO v1.sample_files_relisted() AS v1.sample_files_chosen(
    list_concat(coalesce(getvariable('rlprobe_sample_files')::VARCHAR[], []::VARCHAR[]), v1.sample_shard_files()));

-- The bound files as the parquet reader must be given them: it reads each name as a glob, so a
-- run folder named 'a*' would also read its sibling 'ab' unless '*', '?' and '[' are escaped.
CREATE OR REPLACE MACRO v1.listed_sample_globs() AS list_transform(
    coalesce(getvariable('rlprobe_sample_files')::VARCHAR[], []::VARCHAR[]), lambda f: v1.glob_escape(f));
