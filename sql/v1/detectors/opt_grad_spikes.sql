-- name: feat_opt_grad_spikes
-- kind: feature
-- depends: steps
-- doc: Every logged grad_norm step against the local level of its own run: log_ratio is
-- doc: ln(grad_norm) minus the 75th percentile of the per-bin mean of ln(grad_norm) over the 21
-- doc: surrounding bins, or over the 201 surrounding bins if that is higher (bins of consecutive
-- doc: steps sized like doctor_binned's: at most 1,000 per run, one step each for runs of up to
-- doc: 1,000 steps). A spike is a step far above the level a quarter of its neighbours reach: in
-- doc: group-relative RL only batches with reward variance (and the first of two optimizer updates
-- doc: per batch) give a sizeable gradient, so the median of a mostly-degenerate stretch is not the
-- doc: level of an informative step, and such steps can come in bursts a few dozen steps apart
-- doc: (the wide window). A slow trend moves the level with it and never looks like a spike. noise_scale is the
-- doc: run's robust spread of log_ratio (1.4826 MAD over all its steps), so a detector can ask
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
            quantile_cont(bin_lg, 0.75) OVER (PARTITION BY run_id ORDER BY bin ROWS BETWEEN 10 PRECEDING AND 10 FOLLOWING),
            quantile_cont(bin_lg, 0.75) OVER (PARTITION BY run_id ORDER BY bin ROWS BETWEEN 100 PRECEDING AND 100 FOLLOWING)
        ) AS log_level
    FROM bins
), ratios AS (
    SELECT t.run_id, t.step, t.grad_norm, l.log_level, t.lg - l.log_level AS log_ratio, t.nonfinite
    FROM tagged AS t
    JOIN levels AS l ON l.run_id = t.run_id AND l.bin = t.bin
)
SELECT
    run_id, step, grad_norm, log_level, log_ratio,
    1.4826 * median(abs(log_ratio)) OVER (PARTITION BY run_id) AS noise_scale,
    nonfinite
FROM ratios;
