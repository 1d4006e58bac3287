-- name: step_columns
-- kind: source
-- depends: (none)
-- doc: Every known StepRecord column with its type and no rows. Unioned by name under the
-- doc: files so that a column a run never logged reads as NULL instead of failing the query.
-- doc: Kept in step with rlprobe/schemas.py (tests/test_sql_contract.py checks it).
-- columns: step, reward_mean, reward_std, reward_min, reward_max, kl_mean, kl_max, entropy_mean, logprob_mean, ratio_mean, ratio_p95, clip_fraction, adv_mean, adv_std, adv_zero_frac, group_reward_std_mean, zero_variance_group_frac, value_loss, value_explained_variance, value_clip_fraction, loss, lr, grad_norm, grad_norm_post_clip, nan_count, inf_count, weight_update_ratio, completion_len_mean, completion_len_p95, completion_len_max, max_len_hit_frac, eos_rate, repetition_rate, truncation_rate, step_time_s, generation_time_s, optimization_time_s, batch_age, logprob_mismatch, wall_time, kl_positional, filename, file_row_number

CREATE OR REPLACE VIEW v1.step_columns AS
SELECT
    CAST(NULL AS BIGINT) AS step,
    CAST(NULL AS DOUBLE) AS reward_mean,
    CAST(NULL AS DOUBLE) AS reward_std,
    CAST(NULL AS DOUBLE) AS reward_min,
    CAST(NULL AS DOUBLE) AS reward_max,
    CAST(NULL AS DOUBLE) AS kl_mean,
    CAST(NULL AS DOUBLE) AS kl_max,
    CAST(NULL AS DOUBLE) AS entropy_mean,
    CAST(NULL AS DOUBLE) AS logprob_mean,
    CAST(NULL AS DOUBLE) AS ratio_mean,
    CAST(NULL AS DOUBLE) AS ratio_p95,
    CAST(NULL AS DOUBLE) AS clip_fraction,
    CAST(NULL AS DOUBLE) AS adv_mean,
    CAST(NULL AS DOUBLE) AS adv_std,
    CAST(NULL AS DOUBLE) AS adv_zero_frac,
    CAST(NULL AS DOUBLE) AS group_reward_std_mean,
    CAST(NULL AS DOUBLE) AS zero_variance_group_frac,
    CAST(NULL AS DOUBLE) AS value_loss,
    CAST(NULL AS DOUBLE) AS value_explained_variance,
    CAST(NULL AS DOUBLE) AS value_clip_fraction,
    CAST(NULL AS DOUBLE) AS loss,
    CAST(NULL AS DOUBLE) AS lr,
    CAST(NULL AS DOUBLE) AS grad_norm,
    CAST(NULL AS DOUBLE) AS grad_norm_post_clip,
    CAST(NULL AS DOUBLE) AS nan_count,
    CAST(NULL AS DOUBLE) AS inf_count,
    CAST(NULL AS DOUBLE) AS weight_update_ratio,
    CAST(NULL AS DOUBLE) AS completion_len_mean,
    CAST(NULL AS DOUBLE) AS completion_len_p95,
    CAST(NULL AS DOUBLE) AS completion_len_max,
    CAST(NULL AS DOUBLE) AS max_len_hit_frac,
    CAST(NULL AS DOUBLE) AS eos_rate,
    CAST(NULL AS DOUBLE) AS repetition_rate,
    CAST(NULL AS DOUBLE) AS truncation_rate,
    CAST(NULL AS DOUBLE) AS step_time_s,
    CAST(NULL AS DOUBLE) AS generation_time_s,
    CAST(NULL AS DOUBLE) AS optimization_time_s,
    CAST(NULL AS DOUBLE) AS batch_age,
    CAST(NULL AS DOUBLE) AS logprob_mismatch,
    CAST(NULL AS DOUBLE) AS wall_time,
    CAST(NULL AS DOUBLE[]) AS kl_positional,
    CAST(NULL AS VARCHAR) AS filename,
    CAST(NULL AS BIGINT) AS file_row_number,
    -- DuckDB's read_* with allow_empty returns one column named "empty" when no file
    -- matches; naming it here lets the sources always drop it with EXCLUDE.
    CAST(NULL AS BOOLEAN) AS "empty"
WHERE false;
