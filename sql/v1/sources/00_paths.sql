-- name: paths
-- kind: source
-- depends: variable rlprobe_root
-- doc: Path helpers shared by the sources. A recording directory (rec_dir) is the folder that
-- doc: holds manifest.json, steps, samples and events; a rank-NNN sub-recording belongs to the
-- doc: run directory above it (run_dir) and carries that rank. rlprobe_root is the absolute path
-- doc: of one run directory or of a runs root; '**' matches runs nested at any depth.
-- columns: (macros) v1.root(), v1.root_glob(), v1.rec_dir(path), v1.run_dir(rec_dir), v1.rank_of(rec_dir)

CREATE OR REPLACE MACRO v1.root() AS rtrim(getvariable('rlprobe_root'), '/');

-- The root as a glob prefix: '[', '*' and '?' in a folder name (sweep[lr=1e-5]) are literal
-- characters, not patterns, so each becomes a one-character class.
CREATE OR REPLACE MACRO v1.root_glob() AS
    replace(replace(replace(v1.root(), '[', '[[]'), '*', '[*]'), '?', '[?]');

CREATE OR REPLACE MACRO v1.rec_dir(path) AS regexp_extract(
    path,
    '^(.*)/(manifest\.json|steps\.parquet|steps/part-[^/]*\.parquet|samples/shard-[^/]*\.parquet|events\.jsonl)$',
    1);

CREATE OR REPLACE MACRO v1.run_dir(rec_dir) AS regexp_replace(rec_dir, '/rank-[0-9]+$', '');

CREATE OR REPLACE MACRO v1.rank_of(rec_dir) AS
    coalesce(TRY_CAST(regexp_extract(rec_dir, '/rank-([0-9]+)$', 1) AS BIGINT), 0);
