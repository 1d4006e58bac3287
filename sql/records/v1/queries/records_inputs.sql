-- name: records_inputs
-- kind: query
-- depends: records_files
-- doc: The input snapshot: every manifest and records file read, relative to the store, with
-- doc: its size in bytes and the SHA-256 of exactly the bytes aggregated.
-- columns: path VARCHAR, kind VARCHAR, size BIGINT, sha256 VARCHAR

SELECT relpath AS path, file_kind AS kind, size, sha256
FROM records_files
ORDER BY relpath
