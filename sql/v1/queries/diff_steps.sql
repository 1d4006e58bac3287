-- name: diff_steps
-- kind: query
-- depends: steps
-- doc: One run's steps for a diff: one row per step (the latest write of a step logged twice
-- doc: while live), ordered by step; every metric column the run has.
-- columns: run_id VARCHAR, step BIGINT, reward_mean .. wall_time DOUBLE, kl_positional DOUBLE[],
-- columns: "reward_component.<name>" DOUBLE, "extra.<name>" DOUBLE

SELECT *
FROM v1.steps
QUALIFY row_number() OVER (PARTITION BY run_id, step ORDER BY wall_time DESC NULLS LAST) = 1
ORDER BY step
