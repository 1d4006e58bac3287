-- name: show_steps
-- kind: query
-- depends: steps
-- doc: One run's step rows in [$step_from, $step_to], one row per step: while a run is live a
-- doc: step logged twice has two rows until close() compacts it, and the latest write wins,
-- doc: as compaction would decide.
-- columns: run_id VARCHAR, step BIGINT, reward_mean .. wall_time DOUBLE, kl_positional DOUBLE[],
-- columns: "reward_component.<name>" DOUBLE, "extra.<name>" DOUBLE

SELECT *
FROM v1.steps
WHERE step BETWEEN $step_from AND $step_to
QUALIFY row_number() OVER (PARTITION BY run_id, step ORDER BY wall_time DESC NULLS LAST) = 1
ORDER BY run_id, step
