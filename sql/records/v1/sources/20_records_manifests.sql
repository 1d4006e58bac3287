-- name: records_manifests
-- kind: source
-- depends: records_files
-- doc: One row per manifest-<attempt>.json: whether it parses, and the fields the summary and
-- doc: selection read (lineage, protocol and its digest, rollout seed, deterministic inference).
-- columns: path VARCHAR, relpath VARCHAR, run_dir VARCHAR, attempt VARCHAR, ok BOOLEAN,
-- columns: manifest JSON, lineage VARCHAR, protocol_digest VARCHAR, protocol JSON, run_name VARCHAR,
-- columns: run_id VARCHAR, fresh BOOLEAN, rollout_seed BIGINT, deterministic_inference BOOLEAN,
-- columns: selection_sha256 VARCHAR

CREATE OR REPLACE VIEW records_manifests AS
WITH texts AS (
    SELECT path, relpath, run_dir, attempt, try(decode(content)) AS text
    FROM records_files
    WHERE file_kind = 'manifest'
),
parsed AS (
    SELECT *, coalesce(json_valid(text) AND json_type(text) = 'OBJECT', false) AS ok FROM texts
)
SELECT
    path,
    relpath,
    run_dir,
    attempt,
    ok,
    CASE WHEN ok THEN text::JSON END AS manifest,
    CASE WHEN ok THEN text::JSON ->> '$.lineage' END AS lineage,
    CASE WHEN ok THEN text::JSON ->> '$.protocol_digest' END AS protocol_digest,
    CASE WHEN ok THEN text::JSON -> '$.protocol' END AS protocol,
    CASE WHEN ok THEN text::JSON ->> '$.run.name' END AS run_name,
    CASE WHEN ok THEN text::JSON ->> '$.run.id' END AS run_id,
    CASE WHEN ok THEN TRY_CAST(text::JSON ->> '$.run.fresh' AS BOOLEAN) END AS fresh,
    CASE WHEN ok THEN TRY_CAST(text::JSON ->> '$.rollout_seed' AS BIGINT) END AS rollout_seed,
    CASE WHEN ok THEN coalesce(TRY_CAST(text::JSON ->> '$.deterministic_inference' AS BOOLEAN), false) END
        AS deterministic_inference,
    CASE WHEN ok THEN text::JSON ->> '$.selection_sha256' END AS selection_sha256
FROM parsed;
