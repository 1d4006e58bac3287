-- name: diff_prompt_rewards
-- kind: query
-- depends: samples
-- doc: One run's captured samples grouped by prompt text: how often each prompt was captured,
-- doc: its mean reward and the steps it was seen at (one side of the per-prompt gaps).
-- columns: prompt_text VARCHAR, n BIGINT, reward_mean DOUBLE, first_step BIGINT, last_step BIGINT

SELECT
    prompt_text,
    count(*) AS n,
    avg(reward_total) AS reward_mean,
    min(step) AS first_step,
    max(step) AS last_step
FROM v1.samples
WHERE prompt_text IS NOT NULL AND reward_total IS NOT NULL AND NOT isnan(reward_total)
GROUP BY prompt_text
