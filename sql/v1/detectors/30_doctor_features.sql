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
WITH scored AS (
    SELECT
        b.run_id, b.metric, b.step, b.step_hi, b.value, b.vmin, b.vmax, b.n_nonfinite,
        row_number() OVER w AS i,
        -- the median of the last 5 points, from lags: the same value as a sliding
        -- median(value) OVER (ROWS 4 PRECEDING) and a fraction of its cost
        list_median([b.value, lag(b.value, 1) OVER w, lag(b.value, 2) OVER w, lag(b.value, 3) OVER w, lag(b.value, 4) OVER w]) AS smooth,
        base.b_median,
        greatest(1.4826 * base.b_mad, 0.05 * abs(base.b_median), coalesce(f.abs_floor, 1e-9)) AS scale
    FROM v1.doctor_binned AS b
    JOIN v1.doctor_baseline AS base ON base.run_id = b.run_id AND base.metric = b.metric
    LEFT JOIN v1.doctor_metric_floors AS f ON f.metric = b.metric
    WINDOW w AS (PARTITION BY b.run_id, b.metric ORDER BY b.bin)
), z AS (
    SELECT
        *,
        CASE WHEN b_median <> 0 THEN smooth / b_median END AS ratio,
        (smooth - b_median) / scale AS z,
        (coalesce(value, b_median) - b_median) / scale AS z_raw
    FROM scored
), cumulative AS (
    SELECT
        *,
        sum(z_raw - 0.5) OVER w AS c_up,
        sum(-z_raw - 0.5) OVER w AS c_down,
        -- consecutive points beyond 3 robust z: distance to the last point that was not
        i - coalesce(max(CASE WHEN z > 3 THEN NULL ELSE i END) OVER w, 0) AS sustained_up,
        i - coalesce(max(CASE WHEN z < -3 THEN NULL ELSE i END) OVER w, 0) AS sustained_down
    FROM z
    WINDOW w AS (PARTITION BY run_id, metric ORDER BY i ROWS BETWEEN UNBOUNDED PRECEDING AND CURRENT ROW)
)
SELECT
    run_id, metric, i, step, step_hi, value, vmin, vmax, n_nonfinite, smooth, b_median, scale,
    ratio, z, z_raw,
    c_up - least(0, min(c_up) OVER w) AS cusum_up,
    c_down - least(0, min(c_down) OVER w) AS cusum_down,
    sustained_up,
    sustained_down
FROM cumulative
WINDOW w AS (PARTITION BY run_id, metric ORDER BY i ROWS BETWEEN UNBOUNDED PRECEDING AND CURRENT ROW);
