-- name: records_prompts
-- kind: query
-- depends: records_groups, records_responses
-- doc: prompts.jsonl: one row per input_key and policy_scope. A group counts in the row of every
-- doc: policy_scope its responses carry (a group without responses has scope NULL), classified
-- doc: from all its rewards whatever the filter decided: unscored (no reward), all_zero,
-- doc: constant (one nonzero value) or mixed. Reward statistics cover responses with
-- doc: validity.valid = true only; unknown validity (NULL) gets its own statistics, never pooled.
-- doc: independent_units: distinct attempts for start_checkpoint (independent draws from one
-- doc: policy), distinct runs for the other scopes (one trajectory's observations correlate).
-- columns: input_key VARCHAR, policy_scope VARCHAR, task_key VARCHAR, query_sha256 VARCHAR,
-- columns: verifiers VARCHAR[], lineages VARCHAR[], groups STRUCT, filter_decisions STRUCT,
-- columns: filter_reasons STRUCT[], responses BIGINT, validity STRUCT, truncated_responses BIGINT,
-- columns: valid_reward STRUCT, unknown_validity_reward STRUCT, independent_units BIGINT

WITH group_rewards AS (
    SELECT
        g.group_key,
        g.input_key,
        g.task_key,
        g.query_sha256,
        g.verifiers,
        g.lineage,
        g.run_dir,
        g.attempt,
        g.filter_decision,
        g.filter_reason,
        count(r.reward) AS scored,
        min(r.reward) AS min_reward,
        max(r.reward) AS max_reward
    FROM records_groups AS g
    LEFT JOIN records_responses AS r ON r.group_key = g.group_key
    GROUP BY g.group_key, g.input_key, g.task_key, g.query_sha256, g.verifiers, g.lineage, g.run_dir,
             g.attempt, g.filter_decision, g.filter_reason
),
group_outcomes AS (
    SELECT
        *,
        CASE
            WHEN scored = 0 THEN 'unscored'
            WHEN min_reward = 0 AND max_reward = 0 THEN 'all_zero'
            WHEN min_reward = max_reward THEN 'constant'
            ELSE 'mixed'
        END AS outcome
    FROM group_rewards
),
group_scopes AS (
    SELECT DISTINCT g.group_key, r.policy_scope
    FROM records_groups AS g
    LEFT JOIN records_responses AS r ON r.group_key = g.group_key
),
by_group AS (
    SELECT
        o.input_key,
        s.policy_scope,
        min(o.task_key) AS task_key,
        min(o.query_sha256) AS query_sha256,
        min(o.verifiers) AS verifiers,
        list(DISTINCT o.lineage ORDER BY o.lineage) AS lineages,
        {'total': count(*),
         'all_zero': count(*) FILTER (WHERE o.outcome = 'all_zero'),
         'constant': count(*) FILTER (WHERE o.outcome = 'constant'),
         'mixed': count(*) FILTER (WHERE o.outcome = 'mixed'),
         'unscored': count(*) FILTER (WHERE o.outcome = 'unscored')} AS groups,
        {'passed': count(*) FILTER (WHERE o.filter_decision = 'passed'),
         'filtered': count(*) FILTER (WHERE o.filter_decision = 'filtered'),
         'aborted': count(*) FILTER (WHERE o.filter_decision = 'aborted'),
         'other': count(*) FILTER (WHERE o.filter_decision IS NULL
                                   OR o.filter_decision NOT IN ('passed', 'filtered', 'aborted'))} AS filter_decisions,
        count(DISTINCT CASE WHEN s.policy_scope = 'start_checkpoint' THEN o.run_dir || '/' || o.attempt
                            ELSE o.run_dir END) AS independent_units
    FROM group_outcomes AS o
    JOIN group_scopes AS s ON s.group_key = o.group_key
    GROUP BY o.input_key, s.policy_scope
),
reasons AS (
    SELECT input_key, policy_scope,
           list({'reason': filter_reason, 'groups': n} ORDER BY filter_reason) AS filter_reasons
    FROM (
        SELECT o.input_key, s.policy_scope, coalesce(o.filter_reason, '') AS filter_reason, count(*) AS n
        FROM group_outcomes AS o
        JOIN group_scopes AS s ON s.group_key = o.group_key
        WHERE o.filter_decision = 'filtered'
        GROUP BY o.input_key, s.policy_scope, coalesce(o.filter_reason, '')
    ) AS per_reason
    GROUP BY input_key, policy_scope
),
by_response AS (
    SELECT
        input_key,
        policy_scope,
        count(*) AS responses,
        {'valid': count(*) FILTER (WHERE valid),
         'invalid': count(*) FILTER (WHERE NOT valid),
         'unknown': count(*) FILTER (WHERE valid IS NULL)} AS validity,
        count(*) FILTER (WHERE truncated) AS truncated_responses,
        count(reward) FILTER (WHERE valid) AS valid_count,
        avg(reward) FILTER (WHERE valid) AS valid_mean,
        var_samp(reward) FILTER (WHERE valid) AS valid_variance,
        min(reward) FILTER (WHERE valid) AS valid_min,
        max(reward) FILTER (WHERE valid) AS valid_max,
        count(reward) FILTER (WHERE valid IS NULL) AS unknown_count,
        avg(reward) FILTER (WHERE valid IS NULL) AS unknown_mean,
        var_samp(reward) FILTER (WHERE valid IS NULL) AS unknown_variance,
        min(reward) FILTER (WHERE valid IS NULL) AS unknown_min,
        max(reward) FILTER (WHERE valid IS NULL) AS unknown_max
    FROM records_responses
    GROUP BY input_key, policy_scope
),
histograms AS (
    SELECT
        input_key,
        policy_scope,
        list({'reward': reward, 'count': n} ORDER BY reward) FILTER (WHERE valid) AS valid_histogram,
        list({'reward': reward, 'count': n} ORDER BY reward) FILTER (WHERE valid IS NULL) AS unknown_histogram
    FROM (
        SELECT input_key, policy_scope, valid, reward, count(*) AS n
        FROM records_responses
        WHERE reward IS NOT NULL AND (valid OR valid IS NULL)
        GROUP BY input_key, policy_scope, valid, reward
    ) AS per_value
    GROUP BY input_key, policy_scope
)
SELECT
    g.input_key,
    g.policy_scope,
    g.task_key,
    g.query_sha256,
    g.verifiers,
    g.lineages,
    g.groups,
    g.filter_decisions,
    coalesce(f.filter_reasons, []) AS filter_reasons,
    coalesce(r.responses, 0) AS responses,
    coalesce(r.validity, {'valid': 0, 'invalid': 0, 'unknown': 0}) AS validity,
    coalesce(r.truncated_responses, 0) AS truncated_responses,
    {'count': coalesce(r.valid_count, 0), 'mean': r.valid_mean, 'variance': r.valid_variance,
     'min': r.valid_min, 'max': r.valid_max, 'histogram': coalesce(h.valid_histogram, [])} AS valid_reward,
    {'count': coalesce(r.unknown_count, 0), 'mean': r.unknown_mean, 'variance': r.unknown_variance,
     'min': r.unknown_min, 'max': r.unknown_max, 'histogram': coalesce(h.unknown_histogram, [])}
        AS unknown_validity_reward,
    g.independent_units
FROM by_group AS g
LEFT JOIN by_response AS r
    ON r.input_key IS NOT DISTINCT FROM g.input_key AND r.policy_scope IS NOT DISTINCT FROM g.policy_scope
LEFT JOIN histograms AS h
    ON h.input_key IS NOT DISTINCT FROM g.input_key AND h.policy_scope IS NOT DISTINCT FROM g.policy_scope
LEFT JOIN reasons AS f
    ON f.input_key IS NOT DISTINCT FROM g.input_key AND f.policy_scope IS NOT DISTINCT FROM g.policy_scope
ORDER BY g.input_key NULLS LAST, g.policy_scope NULLS LAST
