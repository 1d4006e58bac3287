-- name: reward_samples
-- kind: feature
-- depends: samples
-- doc: Per run and step, what the captured rollouts say about the reward (steps with at least 4
-- doc: captured samples with a reward). reward_sd is the spread of their rewards: a scale for
-- doc: "how big is a change in the mean reward" that does not depend on what a trainer logs as
-- doc: reward_std (TRL logs the mean within-group std, tiny when most groups are degenerate);
-- doc: capture keeps the best and worst rollouts of a step, so it errs on the large side.
-- doc: len_reward_corr is the Pearson correlation of completion_len and reward_total: a reward
-- doc: that pays for length (a judge or reward model with a length bias) makes the longer
-- doc: rollouts of a batch the better-paid ones; a verifier does not, and in reasoning RL the
-- doc: correct answers are often the shorter ones. NULL where length or reward does not vary.
-- doc: distinct_share is the share of distinct completion texts among the step's captured
-- doc: samples: a policy collapsed onto one output writes the same completion again and again.
-- columns: run_id VARCHAR, step BIGINT, n BIGINT, len_mean DOUBLE, reward_mean DOUBLE,
-- columns: reward_sd DOUBLE, len_reward_corr DOUBLE, distinct_share DOUBLE

CREATE OR REPLACE VIEW v1.feat_reward_samples AS
SELECT
    run_id,
    step,
    count(*) AS n,
    avg(completion_len) AS len_mean,
    avg(reward_total) AS reward_mean,
    stddev_samp(reward_total) AS reward_sd,
    CASE WHEN stddev_pop(completion_len) > 0 AND stddev_pop(reward_total) > 0
        THEN corr(CAST(completion_len AS DOUBLE), reward_total)
    END AS len_reward_corr,
    CASE WHEN count(completion_text) > 0
        THEN count(DISTINCT completion_text) / count(completion_text)
    END AS distinct_share
FROM v1.samples
WHERE reward_total IS NOT NULL
  AND NOT isnan(reward_total)
GROUP BY run_id, step
HAVING count(*) >= 4;
