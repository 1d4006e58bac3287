-- name: paths
-- kind: source
-- depends: variable rlprobe_root, variable rlprobe_scope, variable rlprobe_runs, variable rlprobe_columns
-- doc: Path helpers shared by the sources. A recording directory (rec_dir) is the folder that
-- doc: holds manifest.json, steps, samples and events; a rank-NNN sub-recording belongs to the
-- doc: run directory above it (run_dir) and carries that rank. rlprobe_root is the absolute path
-- doc: of one run directory or of a runs root; '**' matches runs nested at any depth.
-- doc: rlprobe_scope, when set to a list of run directories, narrows every source to the files
-- doc: of those runs: other runs' folders are not even listed. rlprobe_runs, when set, is the
-- doc: list of every run directory of the root that can be read (rlprobe sets it once it finds
-- doc: a broken run, so the others read on); rlprobe_scope narrows it further. Both unset
-- doc: (NULL), the whole root is read. rlprobe_columns, when set, is a regular expression of
-- doc: the step and sample columns a query needs: the files' other columns are not read (a
-- doc: recording with thousands of extra.* metrics stays quick to query); unset, all of them.
-- columns: (macros) v1.root(), v1.glob_escape(path), v1.root_glob(), v1.run_globs(dir, suffix),
-- columns: v1.globs(suffix), v1.columns_read(), v1.rec_dir(path), v1.run_dir(rec_dir), v1.rank_of(rec_dir)

CREATE OR REPLACE MACRO v1.root() AS rtrim(getvariable('rlprobe_root'), '/');

-- The root as a glob prefix: '[', '*' and '?' in a folder name (sweep[lr=1e-5]) are literal
-- characters, not patterns, so each becomes a one-character class.
CREATE OR REPLACE MACRO v1.glob_escape(path) AS
    replace(replace(replace(path, '[', '[[]'), '*', '[*]'), '?', '[?]');

CREATE OR REPLACE MACRO v1.root_glob() AS v1.glob_escape(v1.root());

-- The files named suffix (a path below a recording directory, such as 'steps.parquet') of one
-- run directory: its own and its rank sub-recordings', not those of runs nested below it (they
-- are runs of their own, listed or left out by their own directory).
CREATE OR REPLACE MACRO v1.run_globs(dir, suffix) AS [
    v1.glob_escape(rtrim(dir, '/')) || '/' || suffix,
    v1.glob_escape(rtrim(dir, '/')) || '/rank-[0-9]*/' || suffix];

-- The globs that find the files named suffix, as a list for the readers: one below the root, or
-- two per run directory in rlprobe_scope (else rlprobe_runs). A filter in a query cannot reach
-- past the views' per-file choices (a materialized scan) to the file list; a scope set before
-- the query can. rlprobe sets it itself when a query provably reads only some run_ids
-- (rlprobe.store.scope), and sets rlprobe_runs to leave a broken run out (rlprobe.store.health).
CREATE OR REPLACE MACRO v1.globs(suffix) AS CASE
    WHEN getvariable('rlprobe_scope') IS NOT NULL THEN
        flatten(list_transform(getvariable('rlprobe_scope')::VARCHAR[], lambda d: v1.run_globs(d, suffix)))
    WHEN getvariable('rlprobe_runs') IS NOT NULL THEN
        flatten(list_transform(getvariable('rlprobe_runs')::VARCHAR[], lambda d: v1.run_globs(d, suffix)))
    ELSE [v1.root_glob() || '/**/' || suffix]
END;

-- The columns of the step and sample files to read, as a pattern for COLUMNS(): every one
-- unless rlprobe_columns names them (rlprobe sets it for one query that provably reads no
-- others: rlprobe.store.scope.columns_read). A pattern, not a lambda: DuckDB matches a pattern
-- against ten thousand column names in milliseconds, a lambda in tens of seconds.
CREATE OR REPLACE MACRO v1.columns_read() AS coalesce(getvariable('rlprobe_columns'), '.*');

-- (?s): a folder name may hold a newline, and '.' must match it too (else the path reads as '')
CREATE OR REPLACE MACRO v1.rec_dir(path) AS regexp_extract(
    path,
    '(?s)^(.*)/(manifest\.json|steps\.parquet|steps/part-[^/]*\.parquet|samples/shard-[^/]*\.parquet|events\.jsonl)$',
    1);

CREATE OR REPLACE MACRO v1.run_dir(rec_dir) AS regexp_replace(rec_dir, '/rank-[0-9]+$', '');

CREATE OR REPLACE MACRO v1.rank_of(rec_dir) AS
    coalesce(TRY_CAST(regexp_extract(rec_dir, '/rank-([0-9]+)$', 1) AS BIGINT), 0);
