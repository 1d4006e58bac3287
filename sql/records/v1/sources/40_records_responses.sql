-- name: records_responses
-- kind: source
-- depends: records_groups
-- doc: One row per response of every group row, with the group's identity beside it. valid is
-- doc: the recorded validity.valid: true, false, or NULL for unknown (never evidence either way).
-- doc: policy_versions_text is the version list as text, to name the policy a response came from.
-- columns: group_key VARCHAR, run_dir VARCHAR, attempt VARCHAR, lineage VARCHAR,
-- columns: protocol_digest VARCHAR, rollout_seed BIGINT, deterministic_inference BOOLEAN,
-- columns: input_key VARCHAR, task_key VARCHAR, query_sha256 VARCHAR, domain VARCHAR,
-- columns: verifiers VARCHAR[], response_index BIGINT, reward DOUBLE, valid BOOLEAN,
-- columns: response_tokens BIGINT, status VARCHAR, truncated BOOLEAN, policy_scope VARCHAR,
-- columns: policy_versions_text VARCHAR, has_text BOOLEAN

CREATE OR REPLACE VIEW records_responses AS
WITH unnested AS (
    SELECT g.*, unnest(json_extract(g.responses, '$[*]')) AS resp
    FROM records_groups AS g
)
SELECT
    group_key,
    run_dir,
    attempt,
    lineage,
    protocol_digest,
    rollout_seed,
    deterministic_inference,
    input_key,
    task_key,
    query_sha256,
    domain,
    verifiers,
    TRY_CAST(resp ->> '$.index' AS BIGINT) AS response_index,
    TRY_CAST(resp ->> '$.reward' AS DOUBLE) AS reward,
    TRY_CAST(resp ->> '$.validity.valid' AS BOOLEAN) AS valid,
    TRY_CAST(resp ->> '$.response_tokens' AS BIGINT) AS response_tokens,
    resp ->> '$.status' AS status,
    coalesce(TRY_CAST(resp ->> '$.truncated' AS BOOLEAN), false) AS truncated,
    resp ->> '$.policy_scope' AS policy_scope,
    CAST(json_extract(resp, '$.policy_versions') AS VARCHAR) AS policy_versions_text,
    json_type(resp, '$.response') = 'VARCHAR' AS has_text
FROM unnested;
