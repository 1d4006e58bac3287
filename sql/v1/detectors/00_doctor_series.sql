-- name: doctor_series
-- kind: feature
-- depends: steps, doctor_bin_width
-- doc: The step metrics the doctor's detectors read, in long form: one row per run, step and
-- doc: metric. Metrics a run did not log produce no rows (UNPIVOT drops NULLs), which is how a
-- doc: detector whose inputs are absent knows to stay silent. bin is the step's bin in
-- doc: doctor_binned: each run's steps cut into at most 1,000 bins of consecutive steps of equal
-- doc: width (one step per bin for runs of up to 1,000 steps; doctor_bin_width). It is found per
-- doc: step before the unpivot, a join of one row per step rather than one per step and metric.
-- columns: run_id VARCHAR, step BIGINT, metric VARCHAR, value DOUBLE, bin BIGINT

CREATE OR REPLACE VIEW v1.doctor_series AS
WITH tagged AS (
    SELECT s.*, CAST(floor((s.step - z.step_min) / z.width) AS BIGINT) AS bin
    FROM v1.steps AS s
    JOIN v1.doctor_bin_width AS z ON z.run_id = s.run_id
)
SELECT run_id, step, metric, value, bin
FROM tagged
UNPIVOT (value FOR metric IN (
    reward_mean, reward_std, reward_min, reward_max,
    kl_mean, kl_max,
    entropy_mean, logprob_mean, ratio_mean, ratio_p95, clip_fraction,
    adv_mean, adv_std, adv_zero_frac,
    group_reward_std_mean, zero_variance_group_frac,
    value_loss, value_explained_variance, value_clip_fraction,
    loss, grad_norm, grad_norm_post_clip, nan_count, inf_count,
    completion_len_mean, completion_len_p95, completion_len_max,
    max_len_hit_frac, eos_rate, repetition_rate, truncation_rate,
    step_time_s, generation_time_s, batch_age, logprob_mismatch
));
