-- name: feat_opt_grad_spikes
-- kind: feature
-- depends: steps
-- doc: Every logged grad_norm step against the local level of its own run: log_ratio is
-- doc: ln(grad_norm) minus the local level of the per-bin mean of ln(grad_norm): the median over the
-- doc: 21 surrounding bins, or the 75th percentile over the 201 surrounding bins if that is higher
-- doc: (bins of consecutive steps sized like doctor_binned's: at most 1,000 per run, one step each
-- doc: for runs of up to 1,000 steps). A spike is a step far above the level a quarter of a wide
-- doc: stretch of steps reach: in group-relative RL only batches with reward variance (and the
-- doc: first of two optimizer updates per batch) give a sizeable gradient, so the median of a
-- doc: mostly-degenerate stretch is not the level of an informative step, and such steps can come
-- doc: in bursts a few dozen steps apart. A slow trend moves the local median with it and never
-- doc: looks like a spike. noise_scale is the
-- doc: run's robust spread of log_ratio (1.4826 MAD about its median, over all its steps: the
-- doc: level is an upper quantile, so log_ratio sits below 0 on most steps), so a detector can ask
-- doc: for spikes that stand out from this run's own noise rather than from a fixed multiple. Zero grad norms (steps skipped on dead
-- doc: batches) carry no log value and no log_ratio; non-finite ones have nonfinite = true.
-- columns: run_id VARCHAR, step BIGINT, grad_norm DOUBLE, log_level DOUBLE, log_ratio DOUBLE,
-- columns: noise_scale DOUBLE, nonfinite BOOLEAN

CREATE OR REPLACE VIEW v1.feat_opt_grad_spikes AS
WITH g AS (
    SELECT
        run_id,
        step,
        grad_norm,
        NOT isfinite(grad_norm) AS nonfinite,
        CASE WHEN isfinite(grad_norm) AND grad_norm > 0 THEN ln(grad_norm) END AS lg
    FROM v1.steps
    WHERE grad_norm IS NOT NULL
), extent AS (
    SELECT run_id, min(step) AS step_min, greatest(1, CAST(ceil((max(step) - min(step) + 1) / 1000.0) AS BIGINT)) AS width
    FROM g
    GROUP BY run_id
), tagged AS (
    SELECT g.*, CAST(floor((g.step - e.step_min) / e.width) AS BIGINT) AS bin
    FROM g
    JOIN extent AS e ON e.run_id = g.run_id
), bins AS (
    SELECT run_id, bin, avg(lg) AS bin_lg
    FROM tagged
    GROUP BY run_id, bin
), levels AS (
    SELECT
        run_id, bin,
        greatest(
            median(bin_lg) OVER (PARTITION BY run_id ORDER BY bin ROWS BETWEEN 10 PRECEDING AND 10 FOLLOWING),
            quantile_cont(bin_lg, 0.75) OVER (PARTITION BY run_id ORDER BY bin ROWS BETWEEN 100 PRECEDING AND 100 FOLLOWING)
        ) AS log_level
    FROM bins
), ratios AS (
    SELECT t.run_id, t.step, t.grad_norm, l.log_level, t.lg - l.log_level AS log_ratio, t.nonfinite
    FROM tagged AS t
    JOIN levels AS l ON l.run_id = t.run_id AND l.bin = t.bin
), centred AS (
    SELECT *, log_ratio - median(log_ratio) OVER (PARTITION BY run_id) AS dev
    FROM ratios
)
SELECT
    run_id, step, grad_norm, log_level, log_ratio,
    1.4826 * median(abs(dev)) OVER (PARTITION BY run_id) AS noise_scale,
    nonfinite
FROM centred;
