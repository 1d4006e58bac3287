-- name: records_evidence
-- kind: query
-- depends: records_responses
-- doc: The evidence `records select` decides on: per input_key, valid responses only, of one
-- doc: lineage ($lineage), one protocol digest ($protocol) and the policy scopes in $scopes.
-- doc: Under deterministic inference a response's effective seed (the manifest's rollout_seed
-- doc: plus its sibling position) counts once per prompt and policy, however many groups repeat
-- doc: it; a seed recorded with two different rewards makes the prompt conflicting. Other
-- doc: responses count one each. units: distinct attempts for start_checkpoint (attempts of
-- doc: one rollout seed count once under deterministic inference), distinct runs otherwise.
-- columns: input_key VARCHAR, task_key VARCHAR, query_sha256 VARCHAR, domain VARCHAR,
-- columns: verifiers VARCHAR[], responses BIGINT, observations BIGINT, units BIGINT,
-- columns: min_reward DOUBLE, max_reward DOUBLE, conflicting BOOLEAN

WITH evidence AS (
    SELECT
        input_key,
        task_key,
        query_sha256,
        domain,
        verifiers,
        reward,
        CASE
            WHEN deterministic_inference AND rollout_seed IS NOT NULL AND response_index IS NOT NULL THEN
                (CASE WHEN policy_scope = 'start_checkpoint' THEN 'start'
                      ELSE run_dir || '@' || coalesce(policy_versions_text, '') END)
                || '#seed:' || CAST(rollout_seed + response_index AS VARCHAR)
            ELSE group_key || '#' || CAST(coalesce(response_index, -1) AS VARCHAR)
        END AS observation,
        CASE
            WHEN policy_scope <> 'start_checkpoint' THEN 'run:' || run_dir
            WHEN deterministic_inference AND rollout_seed IS NOT NULL THEN 'seed:' || CAST(rollout_seed AS VARCHAR)
            ELSE 'attempt:' || run_dir || '/' || attempt
        END AS unit
    FROM records_responses
    WHERE valid
      AND reward IS NOT NULL
      AND lineage = $lineage
      AND protocol_digest = $protocol
      AND list_contains($scopes, policy_scope)
),
observations AS (
    SELECT input_key, observation, count(DISTINCT reward) AS rewards
    FROM evidence
    GROUP BY input_key, observation
),
per_prompt AS (
    SELECT input_key, count(*) AS observations, max(rewards) > 1 AS conflicting
    FROM observations
    GROUP BY input_key
)
SELECT
    e.input_key,
    min(e.task_key) AS task_key,
    min(e.query_sha256) AS query_sha256,
    min(e.domain) AS domain,
    min(e.verifiers) AS verifiers,
    count(*) AS responses,
    min(p.observations) AS observations,
    count(DISTINCT e.unit) AS units,
    min(e.reward) AS min_reward,
    max(e.reward) AS max_reward,
    bool_or(p.conflicting) AS conflicting
FROM evidence AS e
JOIN per_prompt AS p ON p.input_key = e.input_key
GROUP BY e.input_key
ORDER BY e.input_key
