-- name: doctor_baseline
-- kind: feature
-- depends: doctor_binned
-- doc: Each series' own early level: median and MAD over an early window that skips the first 5%
-- doc: of the run (LR warm-up transients) and covers the next 15% (at least 8 points). Detectors
-- doc: compare against this rather than against fixed thresholds, because absolute levels of
-- doc: entropy, KL or length depend on the model, tokenizer and task.
-- columns: run_id VARCHAR, metric VARCHAR, points BIGINT, b_points BIGINT, b_step_lo BIGINT,
-- columns: b_step_hi BIGINT, b_median DOUBLE, b_mad DOUBLE, b_min DOUBLE, b_max DOUBLE

CREATE OR REPLACE VIEW v1.doctor_baseline AS
WITH ordered AS (
    SELECT
        run_id, metric, step, value,
        row_number() OVER (PARTITION BY run_id, metric ORDER BY bin) AS i,
        count(*) OVER (PARTITION BY run_id, metric) AS points
    FROM v1.doctor_binned
    WHERE value IS NOT NULL
), early AS (
    SELECT *
    FROM ordered
    WHERE i > floor(0.05 * points)
      AND i <= floor(0.05 * points) + greatest(8, floor(0.15 * points))
), centre AS (
    SELECT
        run_id, metric,
        max(points) AS points,
        count(*) AS b_points,
        min(step) AS b_step_lo,
        max(step) AS b_step_hi,
        median(value) AS b_median,
        min(value) AS b_min,
        max(value) AS b_max
    FROM early
    GROUP BY run_id, metric
)
SELECT
    c.run_id, c.metric, c.points, c.b_points, c.b_step_lo, c.b_step_hi, c.b_median,
    median(abs(e.value - c.b_median)) AS b_mad,
    c.b_min, c.b_max
FROM centre AS c
JOIN early AS e ON e.run_id = c.run_id AND e.metric = c.metric
GROUP BY c.run_id, c.metric, c.points, c.b_points, c.b_step_lo, c.b_step_hi, c.b_median, c.b_min, c.b_max;
