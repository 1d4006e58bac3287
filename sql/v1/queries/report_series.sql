-- name: report_series
-- kind: query
-- depends: steps
-- doc: The HTML report's chart data: each metric one run logged cut into at most $buckets
-- doc: buckets of consecutive steps (one step per bucket for shorter runs), with the bucket's
-- doc: first step, the mean of its finite values and their min/max envelope, so a 100k-step run
-- doc: draws from a few thousand points and a one-step spike still shows. Non-finite values
-- doc: (NaN/inf) are counted apart. A live run's step logged twice counts once (the latest).
-- doc: A metric never logged (all NULL) has no rows. Parameters: $run_id VARCHAR, $buckets BIGINT.
-- columns: metric VARCHAR, bucket BIGINT, step BIGINT, step_hi BIGINT, n BIGINT, mean DOUBLE,
-- columns: vmin DOUBLE, vmax DOUBLE, n_nonfinite BIGINT

WITH superseded AS (
    -- steps logged more than once (live runs only): all rows but the latest are dropped. Found on
    -- two narrow columns, so a compacted run is not sorted whole to find that nothing repeats.
    SELECT step, max(wall_time) AS latest
    FROM v1.steps
    WHERE run_id = $run_id
    GROUP BY step
    HAVING count(*) > 1
),
one_row_per_step AS (
    SELECT s.*
    FROM v1.steps AS s
    ANTI JOIN superseded AS d ON d.step = s.step AND s.wall_time IS DISTINCT FROM d.latest
    WHERE s.run_id = $run_id
),
extent AS (
    SELECT min(step) AS lo, max(step) AS hi FROM one_row_per_step
),
long AS (
    UNPIVOT (SELECT * EXCLUDE (run_id, kl_positional, wall_time) FROM one_row_per_step)
    ON COLUMNS(* EXCLUDE (step))
    INTO NAME metric VALUE value
)
SELECT
    l.metric,
    (l.step - e.lo) * $buckets // (e.hi - e.lo + 1) AS bucket,
    min(l.step) AS step,
    max(l.step) AS step_hi,
    count(*) AS n,
    avg(l.value) FILTER (WHERE isfinite(l.value)) AS mean,
    min(l.value) FILTER (WHERE isfinite(l.value)) AS vmin,
    max(l.value) FILTER (WHERE isfinite(l.value)) AS vmax,
    count(*) FILTER (WHERE NOT isfinite(l.value)) AS n_nonfinite
FROM long AS l, extent AS e
GROUP BY ALL
ORDER BY l.metric, bucket
