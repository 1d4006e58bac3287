-- name: reward_noise
-- kind: feature
-- depends: doctor_features, doctor_baseline
-- doc: How much the batch-mean reward moves from one point to the next, against how much it moved
-- doc: early in the run. The batch mean of a reward is an average over rollouts, so its
-- doc: point-to-point jitter measures how much the rollouts of a batch disagree: when every
-- doc: rollout earns the same reward (variance death) the jitter collapses towards zero; when
-- doc: GRPO groups polarise (each prompt all-right or all-wrong) the batch mean is effectively an
-- doc: average over a few prompts and the jitter grows. jump is |value - previous value|, noise
-- doc: its trailing 11-point median, b_noise its median over the baseline window of
-- doc: doctor_baseline, noise_ratio = noise / b_noise.
-- columns: run_id VARCHAR, metric VARCHAR, i BIGINT, step BIGINT, step_hi BIGINT, jump DOUBLE,
-- columns: noise DOUBLE, b_noise DOUBLE, noise_ratio DOUBLE

CREATE OR REPLACE VIEW v1.feat_reward_noise AS
WITH jumps AS (
    SELECT
        run_id, metric, i, step, step_hi,
        abs(value - lag(value) OVER (PARTITION BY run_id, metric ORDER BY i)) AS jump
    FROM v1.doctor_features
    WHERE metric IN ('reward_mean', 'reward_std', 'zero_variance_group_frac')
      AND value IS NOT NULL
), rolled AS (
    SELECT
        *,
        median(jump) OVER (PARTITION BY run_id, metric ORDER BY i ROWS BETWEEN 10 PRECEDING AND CURRENT ROW) AS noise
    FROM jumps
), early AS (
    SELECT j.run_id, j.metric, median(j.jump) AS b_noise
    FROM jumps AS j
    JOIN v1.doctor_baseline AS b ON b.run_id = j.run_id AND b.metric = j.metric
    WHERE j.step BETWEEN b.b_step_lo AND b.b_step_hi
    GROUP BY j.run_id, j.metric
)
SELECT
    r.run_id, r.metric, r.i, r.step, r.step_hi, r.jump, r.noise, e.b_noise,
    CASE WHEN e.b_noise > 0 THEN r.noise / e.b_noise END AS noise_ratio
FROM rolled AS r
LEFT JOIN early AS e ON e.run_id = r.run_id AND e.metric = r.metric;
