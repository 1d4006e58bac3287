-- name: doctor_binned
-- kind: feature
-- depends: doctor_series
-- doc: Each series cut into at most 1,000 bins of consecutive steps (one step per bin for runs
-- doc: of up to 1,000 steps; doctor_series gives each step its bin), so every later window works
-- doc: on a bounded number of points: a 100k-step run is diagnosed at 100-step resolution, in the
-- doc: same time as a 1k-step one.
-- doc: value is the mean of the finite values in the bin; non-finite values (NaN/inf: evidence of
-- doc: a numerical blow-up, not noise) are counted apart (a count, so BIGINT on every engine: a
-- doc: sum of ones would be HUGEINT in DuckDB), vmin/vmax keep the spikes.
-- columns: run_id VARCHAR, metric VARCHAR, bin BIGINT, step BIGINT, step_hi BIGINT, n BIGINT,
-- columns: value DOUBLE, vmin DOUBLE, vmax DOUBLE, n_nonfinite BIGINT

CREATE OR REPLACE VIEW v1.doctor_binned AS
WITH tagged AS (
    SELECT run_id, metric, bin, step, value, (isnan(value) OR isinf(value)) AS nonfinite
    FROM v1.doctor_series
)
SELECT
    run_id,
    metric,
    bin,
    min(step) AS step,
    max(step) AS step_hi,
    count(*) AS n,
    avg(CASE WHEN NOT nonfinite THEN value END) AS value,
    min(CASE WHEN NOT nonfinite THEN value END) AS vmin,
    max(CASE WHEN NOT nonfinite THEN value END) AS vmax,
    count(*) FILTER (WHERE nonfinite) AS n_nonfinite
FROM tagged
GROUP BY run_id, metric, bin;
