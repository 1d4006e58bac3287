-- name: records_tokens
-- kind: query
-- depends: records_groups, records_responses, records_dispositions
-- doc: tokens.json: per domain (the group's verifier names, sorted and joined with ',') and
-- doc: disposition, the groups, responses, tokens, truncated responses and their tokens. A passed
-- doc: group is consumed or expired by its latest disposition row, unused without one (still
-- doc: queued when the run ended); a filtered group is filtered:<reason>; aborted stays aborted.
-- columns: domain VARCHAR, verifiers VARCHAR[], disposition VARCHAR, groups BIGINT,
-- columns: responses BIGINT, tokens BIGINT, truncated_responses BIGINT, truncated_tokens BIGINT

WITH latest AS (
    SELECT observation_id, arg_max(disposition, relpath || ':' || lpad(CAST(line_no AS VARCHAR), 12, '0')) AS disposition
    FROM records_dispositions
    WHERE observation_id IS NOT NULL
    GROUP BY observation_id
),
placed AS (
    SELECT
        g.group_key,
        g.domain,
        g.verifiers,
        CASE
            WHEN g.filter_decision = 'passed' THEN coalesce(d.disposition, 'unused')
            WHEN g.filter_decision = 'filtered' THEN 'filtered:' || coalesce(g.filter_reason, '')
            WHEN g.filter_decision = 'aborted' THEN 'aborted'
            ELSE 'undecided'
        END AS disposition
    FROM records_groups AS g
    LEFT JOIN latest AS d ON d.observation_id = g.observation_id
)
SELECT
    p.domain,
    min(p.verifiers) AS verifiers,
    p.disposition,
    count(DISTINCT p.group_key) AS groups,
    count(r.group_key) AS responses,
    coalesce(sum(r.response_tokens), 0) AS tokens,
    count(*) FILTER (WHERE r.truncated) AS truncated_responses,
    coalesce(sum(r.response_tokens) FILTER (WHERE r.truncated), 0) AS truncated_tokens
FROM placed AS p
LEFT JOIN records_responses AS r ON r.group_key = p.group_key
GROUP BY p.domain, p.disposition
ORDER BY p.domain, p.disposition
