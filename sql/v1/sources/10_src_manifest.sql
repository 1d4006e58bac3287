-- name: src_manifest
-- kind: source
-- depends: paths, manifest_files
-- doc: Every run's manifest.json (rank sub-recordings excluded), parsed as text so that one
-- doc: unreadable manifest cannot hide the others. A manifest written by a newer recording format
-- doc: than this reader knows makes every query over that run fail with an upgrade message:
-- doc: a newer recording must never be read as if it were an old one.
-- columns: run_dir VARCHAR, manifest_ok BOOLEAN, schema_version BIGINT, run_id VARCHAR,
-- columns: created_at VARCHAR, algorithm VARCHAR, model_name VARCHAR, world_size BIGINT,
-- columns: trainer_config JSON, environment JSON, name VARCHAR, tags VARCHAR[]

CREATE OR REPLACE VIEW v1.src_manifest AS
WITH parsed AS (
    SELECT run_dir AS rec_dir, ok, schema_version, CASE WHEN ok THEN content::JSON END AS doc
    FROM v1.manifest_files
)
SELECT
    CASE
        WHEN schema_version > 1 THEN error(
            'recording ' || rec_dir || ' uses recording format v' || schema_version
            || ' but this rlprobe reads up to v1: upgrade rlprobe (pip install -U rlprobe)')
        ELSE rec_dir
    END AS run_dir,
    ok AS manifest_ok,
    schema_version,
    json_extract_string(doc, '$.run_id') AS run_id,
    json_extract_string(doc, '$.created_at') AS created_at,
    json_extract_string(doc, '$.algorithm') AS algorithm,
    json_extract_string(doc, '$.model_name') AS model_name,
    TRY_CAST(json_extract(doc, '$.world_size') AS BIGINT) AS world_size,
    json_extract(doc, '$.trainer_config') AS trainer_config,
    json_extract(doc, '$.environment') AS environment,
    json_extract_string(doc, '$.name') AS name,
    TRY_CAST(json_extract(doc, '$.tags') AS VARCHAR[]) AS tags
FROM parsed;
