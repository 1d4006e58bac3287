-- name: manifest
-- kind: view
-- depends: src_manifest
-- doc: One row per run: the manifest written when its recording started. trainer_config and
-- doc: environment are JSON; reach into them with json_extract_string(trainer_config, '$.lr').
-- doc: name and tags are as written (NULL and an empty list when the recording has none; the
-- doc: runs view names such a run by its run_id).
-- columns: run_id VARCHAR, run_dir VARCHAR, schema_version BIGINT, created_at VARCHAR,
-- columns: algorithm VARCHAR, model_name VARCHAR, world_size BIGINT, trainer_config JSON,
-- columns: environment JSON, name VARCHAR, tags VARCHAR[]

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
    environment,
    name,
    coalesce(tags, CAST([] AS VARCHAR[])) AS tags
FROM v1.src_manifest;
