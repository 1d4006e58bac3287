-- name: paths
-- kind: source
-- depends: variable rlprobe_root, variable rlprobe_scope
-- doc: Path helpers shared by the sources. A recording directory (rec_dir) is the folder that
-- doc: holds manifest.json, steps, samples and events; a rank-NNN sub-recording belongs to the
-- doc: run directory above it (run_dir) and carries that rank. rlprobe_root is the absolute path
-- doc: of one run directory or of a runs root; '**' matches runs nested at any depth.
-- doc: rlprobe_scope, when set to a list of run directories, narrows every source to the files
-- doc: below them: other runs' folders are not even listed. Unset (NULL), the whole root is read.
-- columns: (macros) v1.root(), v1.glob_escape(path), v1.root_glob(), v1.globs(suffix),
-- columns: v1.rec_dir(path), v1.run_dir(rec_dir), v1.rank_of(rec_dir)

CREATE OR REPLACE MACRO v1.root() AS rtrim(getvariable('rlprobe_root'), '/');

-- The root as a glob prefix: '[', '*' and '?' in a folder name (sweep[lr=1e-5]) are literal
-- characters, not patterns, so each becomes a one-character class.
CREATE OR REPLACE MACRO v1.glob_escape(path) AS
    replace(replace(replace(path, '[', '[[]'), '*', '[*]'), '?', '[?]');

CREATE OR REPLACE MACRO v1.root_glob() AS v1.glob_escape(v1.root());

-- The globs that find the files named suffix (a path below a recording directory, such as
-- 'steps.parquet'), as a list for the readers: one below the root, or one per run directory
-- in rlprobe_scope. A filter in a query cannot reach past the views' per-file choices (a
-- materialized scan) to the file list; a scope set before the query can. rlprobe sets it
-- itself when a query provably reads only some run_ids (rlprobe.store.scope).
CREATE OR REPLACE MACRO v1.globs(suffix) AS CASE
    WHEN getvariable('rlprobe_scope') IS NULL THEN [v1.root_glob() || '/**/' || suffix]
    ELSE list_transform(getvariable('rlprobe_scope')::VARCHAR[], lambda d: v1.glob_escape(rtrim(d, '/')) || '/**/' || suffix)
END;

-- (?s): a folder name may hold a newline, and '.' must match it too (else the path reads as '')
CREATE OR REPLACE MACRO v1.rec_dir(path) AS regexp_extract(
    path,
    '(?s)^(.*)/(manifest\.json|steps\.parquet|steps/part-[^/]*\.parquet|samples/shard-[^/]*\.parquet|events\.jsonl)$',
    1);

CREATE OR REPLACE MACRO v1.run_dir(rec_dir) AS regexp_replace(rec_dir, '/rank-[0-9]+$', '');

CREATE OR REPLACE MACRO v1.rank_of(rec_dir) AS
    coalesce(TRY_CAST(regexp_extract(rec_dir, '/rank-([0-9]+)$', 1) AS BIGINT), 0);
