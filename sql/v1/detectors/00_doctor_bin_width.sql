-- name: doctor_bin_width
-- kind: feature
-- depends: steps
-- doc: How the doctor cuts each run's steps into bins, one row per run: at most 1,000 bins of
-- doc: consecutive steps of equal width (one step per bin for runs of up to 1,000 steps),
-- doc: counted from the run's first step, so a step's bin is floor((step - step_min) / width).
-- doc: doctor_series (and through it doctor_binned) and feat_policy_kl_positional read it, so
-- doc: a bin of one is a bin of the other.
-- columns: run_id VARCHAR, step_min BIGINT, width BIGINT

CREATE OR REPLACE VIEW v1.doctor_bin_width AS
SELECT
    run_id,
    min(step) AS step_min,
    greatest(1, CAST(ceil((max(step) - min(step) + 1) / 1000.0) AS BIGINT)) AS width
FROM v1.steps
GROUP BY run_id;
