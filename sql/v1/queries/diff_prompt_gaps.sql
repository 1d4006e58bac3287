-- name: diff_prompt_gaps
-- kind: query
-- depends: (tables prompts_a and prompts_b: diff_prompt_rewards of each run registered from Arrow)
-- doc: Prompts captured in both runs, ranked by how differently they were rewarded:
-- doc: gap = reward_mean_b - reward_mean_a, largest |gap| first (ties: more samples, then text).
-- doc: $k limits the rows; shared counts every prompt the two runs have in common.
-- columns: prompt_text VARCHAR, gap DOUBLE, reward_mean_a DOUBLE, reward_mean_b DOUBLE,
-- columns: n_a BIGINT, n_b BIGINT, first_step_a BIGINT, last_step_a BIGINT,
-- columns: first_step_b BIGINT, last_step_b BIGINT, shared BIGINT

SELECT
    a.prompt_text,
    b.reward_mean - a.reward_mean AS gap,
    a.reward_mean AS reward_mean_a,
    b.reward_mean AS reward_mean_b,
    a.n AS n_a,
    b.n AS n_b,
    a.first_step AS first_step_a,
    a.last_step AS last_step_a,
    b.first_step AS first_step_b,
    b.last_step AS last_step_b,
    count(*) OVER () AS shared
FROM prompts_a AS a
JOIN prompts_b AS b ON a.prompt_text = b.prompt_text
ORDER BY abs(b.reward_mean - a.reward_mean) DESC, a.n + b.n DESC, a.prompt_text
LIMIT $k
