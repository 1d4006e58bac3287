-- name: records_manifests
-- kind: source
-- depends: records_files
-- doc: One row per manifest-<attempt>.json: whether it parses, and the fields the summary and
-- doc: selection read (lineage, protocol and its digest, rollout seed, deterministic inference).
-- columns: path VARCHAR, relpath VARCHAR, run_dir VARCHAR, attempt VARCHAR, ok BOOLEAN,
-- columns: manifest JSON, lineage VARCHAR, protocol_digest VARCHAR, protocol JSON, run_name VARCHAR,
-- columns: run_id VARCHAR, fresh BOOLEAN, rollout_seed BIGINT, deterministic_inference BOOLEAN,
-- columns: selection_sha256 VARCHAR

CREATE OR REPLACE TABLE records_manifests AS
WITH texts AS (
    SELECT path, relpath, run_dir, attempt, try(decode(content)) AS text
    FROM records_files
    WHERE file_kind = 'manifest'
),
parsed AS (
    -- TRY_CAST, not a cast guarded by CASE: DuckDB evaluates both branches for a whole vector
    SELECT *, TRY_CAST(text AS JSON) AS doc FROM texts
),
checked AS (
    SELECT *, coalesce(json_type(doc) = 'OBJECT', false) AS ok FROM parsed
)
SELECT
    path,
    relpath,
    run_dir,
    attempt,
    ok,
    CASE WHEN ok THEN doc END AS manifest,
    CASE WHEN ok THEN doc ->> '$.lineage' END AS lineage,
    CASE WHEN ok THEN doc ->> '$.protocol_digest' END AS protocol_digest,
    CASE WHEN ok THEN doc -> '$.protocol' END AS protocol,
    CASE WHEN ok THEN doc ->> '$.run.name' END AS run_name,
    CASE WHEN ok THEN doc ->> '$.run.id' END AS run_id,
    CASE WHEN ok THEN TRY_CAST(doc ->> '$.run.fresh' AS BOOLEAN) END AS fresh,
    CASE WHEN ok THEN TRY_CAST(doc ->> '$.rollout_seed' AS BIGINT) END AS rollout_seed,
    CASE WHEN ok THEN coalesce(TRY_CAST(doc ->> '$.deterministic_inference' AS BOOLEAN), false) END
        AS deterministic_inference,
    CASE WHEN ok THEN doc ->> '$.selection_sha256' END AS selection_sha256
FROM checked;
