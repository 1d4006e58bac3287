-- name: show_sample_count
-- kind: query
-- depends: samples
-- doc: How many samples were captured at $step (rlprobe show --max-samples 0; otherwise
-- doc: samples_ranked counts them in the read that ranks them).
-- columns: samples_at_step BIGINT

SELECT count(*) AS samples_at_step
FROM v1.samples
WHERE step = $step
