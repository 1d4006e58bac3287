-- name: ui_run_dirs
-- kind: query
-- depends: manifest_files
-- doc: Every run directory below the root that holds a manifest.json, read as text (so a broken
-- doc: data file or manifest cannot fail it). When listing the runs fails, the dashboard lists
-- doc: these one by one to tell the broken run from the others. No parameters.
-- columns: run_dir VARCHAR

SELECT DISTINCT run_dir
FROM v1.manifest_files
ORDER BY run_dir
