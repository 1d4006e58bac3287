-- name: records_files
-- kind: source
-- depends: records_paths
-- doc: Every manifest-<attempt>.json and records-<attempt>.jsonl below the store (the records
-- doc: root, one lineage directory or one run directory), read once into a table: the bytes
-- doc: every other records query reads, with their size and SHA-256, so the input snapshot a
-- doc: summary or selection table reports is exactly what was aggregated, even while a writer
-- doc: keeps appending. records_store is the store's absolute path.
-- columns: path VARCHAR, relpath VARCHAR, file_kind VARCHAR, attempt VARCHAR, run_dir VARCHAR,
-- columns: run_dir_name VARCHAR, lineage_dir VARCHAR, size BIGINT, sha256 VARCHAR, content BLOB

CREATE OR REPLACE TABLE records_files AS
SELECT
    filename AS path,
    substr(filename, length(records_root()) + 2) AS relpath,
    CASE WHEN regexp_matches(filename, '/manifest-[^/]*\.json$') THEN 'manifest' ELSE 'records' END AS file_kind,
    regexp_extract(filename, '/(?:manifest|records)-([^/]*)\.jsonl?$', 1) AS attempt,
    regexp_extract(filename, '^(.*)/[^/]*$', 1) AS run_dir,
    regexp_extract(filename, '([^/]*)/[^/]*$', 1) AS run_dir_name,
    regexp_extract(filename, '([^/]*)/[^/]*/[^/]*$', 1) AS lineage_dir,
    size,
    sha256(content) AS sha256,
    content
FROM read_blob([records_glob() || '/**/manifest-*.json', records_glob() || '/**/records-*.jsonl']);
