-- name: reward_noise
-- kind: feature
-- depends: doctor_binned
-- doc: How much the batch-mean reward moves from one point to the next, against how much it moved
-- doc: early in the run. The batch mean of a reward is an average over rollouts, so its
-- doc: point-to-point jitter measures how much the rollouts of a batch disagree: when every
-- doc: rollout earns the same reward (variance death) the jitter collapses towards zero; when
-- doc: GRPO groups polarise (each prompt all-right or all-wrong) the batch mean is effectively an
-- doc: average over a few prompts and the jitter grows. jump is |value - previous value|, noise
-- doc: its trailing 11-point mean, b_noise its mean over the baseline window (the same
-- doc: rule as doctor_baseline: skip the first 5% of the points, take the next 15%, at least 8),
-- doc: noise_ratio = noise / b_noise. Means, not medians: with small batches the batch mean
-- doc: moves in steps of 1/batch and a median of a few such jumps sticks to one value. Built on
-- doc: doctor_binned directly, which keeps it cheap.
-- columns: run_id VARCHAR, metric VARCHAR, i BIGINT, step BIGINT, step_hi BIGINT, jump DOUBLE,
-- columns: noise DOUBLE, b_noise DOUBLE, noise_ratio DOUBLE

CREATE OR REPLACE VIEW v1.feat_reward_noise AS
WITH ordered AS (
    SELECT
        run_id, metric, bin, step, step_hi,
        row_number() OVER w AS i,
        count(*) OVER (PARTITION BY run_id, metric) AS points,
        abs(value - lag(value) OVER w) AS jump
    FROM v1.doctor_binned
    WHERE metric IN ('reward_mean', 'reward_std', 'zero_variance_group_frac')
      AND value IS NOT NULL
    WINDOW w AS (PARTITION BY run_id, metric ORDER BY bin)
), early AS (
    SELECT run_id, metric, avg(jump) AS b_noise
    FROM ordered
    WHERE i > floor(0.05 * points)
      AND i <= floor(0.05 * points) + greatest(8, floor(0.15 * points))
    GROUP BY run_id, metric
)
SELECT
    o.run_id, o.metric, o.i, o.step, o.step_hi, o.jump,
    avg(o.jump) OVER (PARTITION BY o.run_id, o.metric ORDER BY o.i ROWS BETWEEN 10 PRECEDING AND CURRENT ROW) AS noise,
    e.b_noise,
    CASE WHEN e.b_noise > 0
        THEN avg(o.jump) OVER (PARTITION BY o.run_id, o.metric ORDER BY o.i ROWS BETWEEN 10 PRECEDING AND CURRENT ROW) / e.b_noise
    END AS noise_ratio
FROM ordered AS o
LEFT JOIN early AS e ON e.run_id = o.run_id AND e.metric = o.metric;
