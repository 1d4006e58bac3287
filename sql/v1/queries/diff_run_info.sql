-- name: diff_run_info
-- kind: query
-- depends: runs, manifest
-- doc: What a diff says about each side: the run's identity, status, step range and its
-- doc: trainer_config (JSON, flattened in Python).
-- columns: run_id VARCHAR, run_dir VARCHAR, algorithm VARCHAR, model_name VARCHAR,
-- columns: status VARCHAR, steps_recorded BIGINT, first_step BIGINT, last_step BIGINT,
-- columns: trainer_config JSON

SELECT
    r.run_id, r.run_dir, r.algorithm, r.model_name, r.status,
    r.steps_recorded, r.first_step, r.last_step,
    m.trainer_config
FROM v1.runs AS r
LEFT JOIN v1.manifest AS m ON m.run_dir = r.run_dir
ORDER BY r.run_dir
