-- name: show_run
-- kind: query
-- depends: runs, samples
-- doc: The run `rlprobe show` describes (id, directory, live/closed/crashed) and how many
-- doc: samples were captured at $step.
-- columns: run_id VARCHAR, run_dir VARCHAR, status VARCHAR, samples_at_step BIGINT

SELECT
    r.run_id,
    r.run_dir,
    r.status,
    (SELECT count(*) FROM v1.samples AS s WHERE s.step = $step) AS samples_at_step
FROM v1.runs AS r
ORDER BY r.run_dir
