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

CREATE OR REPLACE TABLE records_responses AS
WITH unnested AS (
    SELECT
        g.*,
        unnest(json_transform(g.responses, '[{"index": "BIGINT", "reward": "DOUBLE",
            "validity": {"valid": "BOOLEAN"}, "response_tokens": "BIGINT", "status": "VARCHAR",
            "truncated": "BOOLEAN", "policy_scope": "VARCHAR", "policy_versions": ["BIGINT"],
            "response": "JSON"}]')) AS r
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
    r.index AS response_index,
    r.reward,
    r.validity.valid AS valid,
    r.response_tokens,
    r.status,
    coalesce(r.truncated, false) AS truncated,
    r.policy_scope,
    CAST(r.policy_versions AS VARCHAR) AS policy_versions_text,
    coalesce(json_type(r.response) = 'VARCHAR', false) AS has_text
FROM unnested;
