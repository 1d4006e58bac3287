-- name: doctor_features
-- kind: feature
-- depends: doctor_binned, doctor_baseline, doctor_metric_floors
-- doc: Per run, metric and bin: a trailing 5-point median (smooth), its ratio to the baseline
-- doc: median and its robust z against the baseline (scale: 1.4826 MAD, floored at 5% of the
-- doc: baseline level and at the metric's absolute floor, so a flat baseline does not turn noise
-- doc: into huge z), one-sided CUSUMs of
-- doc: the raw z (k = 0.5) that grow while the series sits above (cusum_up) or below
-- doc: (cusum_down) its baseline, and how many consecutive points the smooth series has stayed
-- doc: beyond +-3 robust z (sustained_up, sustained_down).
-- columns: run_id VARCHAR, metric VARCHAR, i BIGINT, step BIGINT, step_hi BIGINT, value DOUBLE,
-- columns: vmin DOUBLE, vmax DOUBLE, n_nonfinite BIGINT, smooth DOUBLE, b_median DOUBLE,
-- columns: scale DOUBLE, ratio DOUBLE, z DOUBLE, z_raw DOUBLE, cusum_up DOUBLE,
-- columns: cusum_down DOUBLE, sustained_up BIGINT, sustained_down BIGINT

CREATE OR REPLACE VIEW v1.doctor_features AS
WITH based AS (
    SELECT
        b.run_id, b.metric, b.bin, b.step, b.step_hi, b.value, b.vmin, b.vmax, b.n_nonfinite,
        base.b_median,
        greatest(1.4826 * base.b_mad, 0.05 * abs(base.b_median), coalesce(f.abs_floor, 1e-9)) AS scale
    FROM v1.doctor_binned AS b
    JOIN v1.doctor_baseline AS base ON base.run_id = b.run_id AND base.metric = b.metric
    LEFT JOIN v1.doctor_metric_floors AS f ON f.metric = b.metric
), raw AS (
    SELECT *, (coalesce(value, b_median) - b_median) / scale AS z_raw
    FROM based
), scored AS (
    -- Two window passes over the chunk's binned series, not three: the CUSUM's running sums
    -- read only z_raw, known before any window, so they share this pass (ordered by bin, the
    -- order of i) with the smoothing lags; only what reads smooth or a running sum waits for
    -- the next. A window pass sorts and carries every row of every series: each one saved is
    -- a fifth of the feature pass.
    SELECT
        *,
        row_number() OVER w AS i,
        -- the median of the last 5 points, from lags: the same value as a sliding
        -- median(value) OVER (ROWS 4 PRECEDING) and a fraction of its cost
        list_median([value, lag(value, 1) OVER w, lag(value, 2) OVER w, lag(value, 3) OVER w, lag(value, 4) OVER w]) AS smooth,
        sum(z_raw - 0.5) OVER running AS c_up,
        sum(-z_raw - 0.5) OVER running AS c_down
    FROM raw
    WINDOW w AS (PARTITION BY run_id, metric ORDER BY bin),
           running AS (PARTITION BY run_id, metric ORDER BY bin ROWS BETWEEN UNBOUNDED PRECEDING AND CURRENT ROW)
), z AS (
    SELECT
        *,
        CASE WHEN b_median <> 0 THEN smooth / b_median END AS ratio,
        (smooth - b_median) / scale AS z
    FROM scored
)
SELECT
    run_id, metric, i, step, step_hi, value, vmin, vmax, n_nonfinite, smooth, b_median, scale,
    ratio, z, z_raw,
    c_up - least(0, min(c_up) OVER w) AS cusum_up,
    c_down - least(0, min(c_down) OVER w) AS cusum_down,
    -- consecutive points beyond 3 robust z: distance to the last point that was not
    i - coalesce(max(CASE WHEN z > 3 THEN NULL ELSE i END) OVER w, 0) AS sustained_up,
    i - coalesce(max(CASE WHEN z < -3 THEN NULL ELSE i END) OVER w, 0) AS sustained_down
FROM z
WINDOW w AS (PARTITION BY run_id, metric ORDER BY i ROWS BETWEEN UNBOUNDED PRECEDING AND CURRENT ROW);
