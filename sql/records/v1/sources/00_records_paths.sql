-- name: records_paths
-- kind: source
-- depends: variable records_store
-- doc: The store as a path and as a glob prefix. records_store is the absolute path of a records
-- doc: root, one lineage directory or one run directory; '[', '*' and '?' in a folder name are
-- doc: literal characters there, not glob patterns.
-- columns: (macros) records_root(), records_glob()

CREATE OR REPLACE MACRO records_root() AS rtrim(getvariable('records_store'), '/');

CREATE OR REPLACE MACRO records_glob() AS
    replace(replace(replace(records_root(), '[', '[[]'), '*', '[*]'), '?', '[?]');
