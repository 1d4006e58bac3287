-- name: show_run
-- kind: query
-- depends: runs
-- doc: The run `rlprobe show` describes (id, directory, live/closed/crashed). The samples
-- doc: captured at the step are counted by samples_ranked (its matched), or by
-- doc: show_sample_count when no sample is shown: each read of the samples opens every shard.
-- columns: run_id VARCHAR, run_dir VARCHAR, status VARCHAR

SELECT
    r.run_id,
    r.run_dir,
    r.status
FROM v1.runs AS r
ORDER BY r.run_dir
