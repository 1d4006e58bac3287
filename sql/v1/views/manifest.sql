-- name: manifest
-- kind: view
-- depends: src_manifest
-- doc: One row per run: the manifest written when its recording started. trainer_config and
-- doc: environment are JSON; reach into them with json_extract_string(trainer_config, '$.lr').
-- columns: run_id VARCHAR, run_dir VARCHAR, schema_version BIGINT, created_at VARCHAR,
-- columns: algorithm VARCHAR, model_name VARCHAR, world_size BIGINT, trainer_config JSON,
-- columns: environment JSON

CREATE OR REPLACE VIEW v1.manifest AS
SELECT
    coalesce(run_id, regexp_extract(run_dir, '[^/]*$', 0)) AS run_id,
    run_dir,
    schema_version,
    created_at,
    algorithm,
    model_name,
    world_size,
    trainer_config,
    environment
FROM v1.src_manifest;
