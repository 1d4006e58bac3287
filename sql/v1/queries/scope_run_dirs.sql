-- name: scope_run_dirs
-- kind: query
-- depends: manifest_files
-- doc: Each run directory with a manifest.json and the run_id the views give it (its manifest's,
-- doc: else its folder name), for the run_ids in $run_ids. rlprobe.store.scope narrows a query
-- doc: to these directories. Reads the manifests only.
-- columns: run_dir VARCHAR, run_id VARCHAR

SELECT run_dir, run_id
FROM (
    SELECT
        run_dir,
        coalesce(CASE WHEN ok THEN json_extract_string(content, '$.run_id') END, regexp_extract(run_dir, '[^/]*$', 0)) AS run_id
    FROM v1.manifest_files
    WHERE rec_dir = run_dir  -- the run's own manifest, not a rank sub-recording's
)
WHERE list_contains($run_ids, run_id)
ORDER BY run_dir;
