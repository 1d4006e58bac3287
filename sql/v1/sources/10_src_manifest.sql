-- name: src_manifest
-- kind: source
-- depends: paths, manifest_files
-- doc: Every run's manifest.json (rank sub-recordings excluded), parsed as text so that one
-- doc: unreadable manifest cannot hide the others. A manifest written by a newer recording format
-- doc: than this reader knows, or declaring a version that is not an integer, makes every query
-- doc: over that run fail with an upgrade message: a newer recording must never be read as if it
-- doc: were an old one. A rank sub-recording's manifest counts too (rank-001 of a v1 run may have
-- doc: been written by a newer rlprobe); schema_version is the run's own manifest's. The macro
-- doc: v1.upgrade_hint() holds the words of that message saying how to upgrade.
-- columns: run_dir VARCHAR, manifest_ok BOOLEAN, schema_version BIGINT, run_id VARCHAR,
-- columns: created_at VARCHAR, algorithm VARCHAR, model_name VARCHAR, world_size BIGINT,
-- columns: trainer_config JSON, environment JSON, name VARCHAR, tags VARCHAR[]

-- PyPI's "rlprobe" is another project: rlprobe is upgraded where it was installed from. The same
-- words as rlprobe.errors.UPGRADE_HINT (tests/test_cli_setup.py checks it), which Python raises.
CREATE OR REPLACE MACRO v1.upgrade_hint() AS
    'upgrade rlprobe (in its clone: git pull && pip install -e .; installed from a git URL: pip install --force-reinstall "rlprobe @ git+<url>@<new commit>")';

CREATE OR REPLACE VIEW v1.src_manifest AS
WITH versions AS (
    -- per run, its newest declared version over every manifest of it (rank ones included), and
    -- whether one of them declares a version that is not an integer
    SELECT
        run_dir,
        max(schema_version) AS newest,
        bool_or(ok AND schema_version IS NULL AND version_text IS NOT NULL) AS unknown
    FROM v1.manifest_files
    GROUP BY run_dir
), parsed AS (
    SELECT f.run_dir AS rec_dir, f.ok, f.schema_version, v.newest, v.unknown,
           CASE WHEN f.ok THEN f.content::JSON END AS doc
    FROM v1.manifest_files AS f
    JOIN versions AS v ON v.run_dir = f.run_dir
    WHERE f.rank = 0 AND f.rec_dir = f.run_dir
)
SELECT
    CASE
        WHEN newest > 1 THEN error(
            'recording ' || rec_dir || ' uses recording format v' || newest
            || ' but this rlprobe reads up to v1: ' || v1.upgrade_hint())
        WHEN unknown THEN error(
            'recording ' || rec_dir || ' declares a schema_version that is not an integer, so no '
            || 'rlprobe can tell which recording format it is: ' || v1.upgrade_hint()
            || ' or fix its manifest.json')
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
