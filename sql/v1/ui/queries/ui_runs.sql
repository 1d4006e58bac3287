-- name: ui_runs
-- kind: query
-- depends: runs, manifest
-- doc: The dashboard's runs table (rlprobe ui): each run's row of the runs view (name, tags,
-- doc: status, progress, last write) and the steps it plans to make when its trainer_config says
-- doc: (max_steps > 0, as the Hugging Face Trainer and TRL write it), else NULL. Reads manifests,
-- doc: events and the step files' step and wall_time columns only. No parameters: the runs in
-- doc: scope (rlprobe_scope) are listed.
-- columns: run_id VARCHAR, name VARCHAR, tags VARCHAR[], run_dir VARCHAR, algorithm VARCHAR,
-- columns: model_name VARCHAR, status VARCHAR, steps_recorded BIGINT, first_step BIGINT,
-- columns: last_step BIGINT, last_write_at DOUBLE, created_at VARCHAR, events BIGINT,
-- columns: planned_steps BIGINT

SELECT
    r.run_id, r.name, r.tags, r.run_dir, r.algorithm, r.model_name, r.status, r.steps_recorded,
    r.first_step, r.last_step, r.last_write_at, r.created_at, r.events,
    CASE WHEN TRY_CAST(json_extract(m.trainer_config, '$.max_steps') AS BIGINT) > 0
         THEN TRY_CAST(json_extract(m.trainer_config, '$.max_steps') AS BIGINT) END AS planned_steps
FROM v1.runs AS r
LEFT JOIN v1.manifest AS m ON m.run_dir = r.run_dir
ORDER BY r.created_at NULLS LAST, r.run_dir
