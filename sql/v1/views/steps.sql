-- name: steps
-- kind: view
-- depends: src_steps, src_manifest
-- doc: One row per optimizer step per run: rank 0's series only, since the trainer already
-- doc: aggregated across ranks before logging and a detector must never see a step twice.
-- doc: Every StepRecord field is a column (NULL where the run did not log it); reward
-- doc: components and extra metrics are the "reward_component.<name>" and "extra.<name>" columns.
-- columns: run_id VARCHAR, step BIGINT, reward_mean .. wall_time DOUBLE, kl_positional DOUBLE[],
-- columns: "reward_component.<name>" DOUBLE, "extra.<name>" DOUBLE

CREATE OR REPLACE VIEW v1.steps AS
SELECT
    coalesce(m.run_id, regexp_extract(s.run_dir, '[^/]*$', 0)) AS run_id,
    s.* EXCLUDE (rec_dir, run_dir, rank, filename)
FROM v1.src_steps AS s
LEFT JOIN v1.src_manifest AS m ON m.run_dir = s.run_dir
WHERE s.rank = 0;
