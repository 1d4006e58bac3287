-- name: feat_opt_offpolicy
-- kind: feature
-- depends: steps
-- doc: How a run's off-policy gap moves with its clipping, per run over every step: the Pearson
-- doc: correlation of batch_age with clip_fraction and with |ratio_mean - 1| (stale rollouts show
-- doc: up as ratios drifting from 1 and more clipped tokens), and of ln(logprob_mismatch) with
-- doc: clip_fraction and with ln(entropy_mean) (a train/inference gap that only follows entropy is
-- doc: a symptom of the entropy, not of the engine). Non-finite values are left out; a
-- doc: correlation is NULL when fewer than two steps logged both fields or one of them is flat.
-- columns: run_id VARCHAR, age_steps BIGINT, corr_age_clip DOUBLE, corr_age_ratio_dev DOUBLE,
-- columns: mismatch_steps BIGINT, corr_mismatch_clip DOUBLE, corr_mismatch_entropy DOUBLE

CREATE OR REPLACE VIEW v1.feat_opt_offpolicy AS
WITH clean AS (
    SELECT
        run_id,
        CASE WHEN isfinite(batch_age) THEN batch_age END AS age,
        CASE WHEN isfinite(clip_fraction) THEN clip_fraction END AS clip,
        CASE WHEN isfinite(ratio_mean) THEN abs(ratio_mean - 1) END AS ratio_dev,
        CASE WHEN isfinite(logprob_mismatch) AND logprob_mismatch > 0 THEN ln(logprob_mismatch) END AS log_mismatch,
        CASE WHEN isfinite(entropy_mean) AND entropy_mean > 0 THEN ln(entropy_mean) END AS log_entropy
    FROM v1.steps
)
SELECT
    run_id,
    count(age) AS age_steps,
    corr(age, clip) AS corr_age_clip,
    corr(age, ratio_dev) AS corr_age_ratio_dev,
    count(log_mismatch) AS mismatch_steps,
    corr(log_mismatch, clip) AS corr_mismatch_clip,
    corr(log_mismatch, log_entropy) AS corr_mismatch_entropy
FROM clean
GROUP BY run_id;
