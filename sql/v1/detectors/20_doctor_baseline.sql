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
WITH present AS (
    SELECT run_id, metric, bin, step, value
    FROM v1.doctor_binned
    WHERE value IS NOT NULL
), counted AS (
    -- The early window is a range of ranks (the points in bin order); it is found as the range
    -- of bins those ranks hold, from each series' sorted bins, rather than by numbering every
    -- point with a window: a window pass sorts and carries every row of the chunk (a third of
    -- the cost of the whole feature pass), this sorts one list of bins per series.
    SELECT run_id, metric, count(*) AS points, list_sort(list(bin)) AS bins
    FROM present
    GROUP BY run_id, metric
), bounds AS (
    -- list indices are 1-based; cast to BIGINT so that sqlglot knows them for integers and
    -- shifts them for Spark's 0-based arrays
    SELECT
        run_id, metric, points,
        bins[CAST(floor(0.05 * points) + 1 AS BIGINT)] AS bin_lo,
        bins[CAST(least(points, floor(0.05 * points) + greatest(8, floor(0.15 * points))) AS BIGINT)] AS bin_hi
    FROM counted
), early AS (
    SELECT p.run_id, p.metric, p.step, p.value, b.points
    FROM present AS p
    JOIN bounds AS b ON b.run_id = p.run_id AND b.metric = p.metric
    WHERE p.bin BETWEEN b.bin_lo AND b.bin_hi
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
