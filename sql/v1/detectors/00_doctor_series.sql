-- name: doctor_series
-- kind: feature
-- depends: steps
-- doc: The step metrics the doctor's detectors read, in long form: one row per run, step and
-- doc: metric. Metrics a run did not log produce no rows (UNPIVOT drops NULLs), which is how a
-- doc: detector whose inputs are absent knows to stay silent.
-- columns: run_id VARCHAR, step BIGINT, metric VARCHAR, value DOUBLE

CREATE OR REPLACE VIEW v1.doctor_series AS
SELECT run_id, step, metric, value
FROM v1.steps
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
