-- name: ui_series
-- kind: query
-- depends: steps, series_bins
-- doc: The dashboard's overlay charts: the metrics $metrics of the runs $run_ids on an x axis
-- doc: ($x: 'step', 'wall_time' in Unix seconds, or 'relative': seconds since the run's first
-- doc: step), cut into $bins bins of equal x width over [$lo, $hi] (NULL: the whole extent of
-- doc: those runs; every metric shares the bins, as the charts share their x range). Per run,
-- doc: metric and bin: the smallest and the largest finite value with the x and step where each
-- doc: occurs, so a one-step spike survives any zoom level; the mean of the finite values at their
-- doc: mean x (what smoothing starts from); and the count of non-finite values (NaN/inf, never
-- doc: drawn as numbers) with the first step holding one. The bins are v1.series_bins
-- doc: (sql/v1/sources/45_series_bins.sql), shared with ui_series_files: one pass over the steps
-- doc: whatever the number of metrics. A step logged twice (a resumed run, before compaction merges it) counts
-- doc: once, the latest; only the runs in $live_run_ids (those not closed) are looked at for that.
-- doc: Parameters: $run_ids VARCHAR[], $metrics VARCHAR[] (numeric columns of the steps view),
-- doc: $live_run_ids VARCHAR[], $x VARCHAR, $bins BIGINT, $lo DOUBLE, $hi DOUBLE.
-- columns: run_id VARCHAR, metric VARCHAR, bin BIGINT, n BIGINT, x_min DOUBLE, step_min BIGINT,
-- columns: v_min DOUBLE, x_max DOUBLE, step_max BIGINT, v_max DOUBLE, x_mean DOUBLE,
-- columns: v_mean DOUBLE, n_nonfinite BIGINT, nonfinite_step BIGINT

WITH picked AS (
    -- the runs are picked by a join on this integer key (hashing each row's run_id once), not by
    -- comparing strings: the views are already narrowed to the runs' directories, and grouping
    -- or joining a million rows on a VARCHAR costs more than all the rest
    SELECT hash(run_id) AS run_key, run_id, step, wall_time, CAST(COLUMNS($metrics) AS DOUBLE)
    FROM v1.steps
),
per_run AS (
    -- each run's extent on every axis, and its first wall_time for the 'relative' one
    SELECT run_key, any_value(run_id) AS run_id, min(step) AS s0, max(step) AS s1, min(wall_time) AS t0, max(wall_time) AS t1
    FROM picked
    GROUP BY run_key
),
chosen AS (
    SELECT * FROM per_run WHERE list_contains($run_ids, run_id)
),
extent AS (
    SELECT
        coalesce($lo::DOUBLE, CASE $x WHEN 'wall_time' THEN min(t0) WHEN 'relative' THEN 0.0 ELSE min(s0) END) AS lo,
        coalesce($hi::DOUBLE, CASE $x WHEN 'wall_time' THEN max(t1) WHEN 'relative' THEN max(t1 - t0) ELSE max(s1) END) AS hi
    FROM chosen
),
superseded AS (
    -- steps logged more than once: all rows but the latest are dropped (closed runs are merged)
    SELECT p.run_key, p.step, max(p.wall_time) AS latest
    FROM picked AS p
    SEMI JOIN (SELECT hash(unnest($live_run_ids::VARCHAR[])) AS run_key) AS l ON l.run_key = p.run_key
    GROUP BY p.run_key, p.step
    HAVING count(*) > 1
),
placed AS (
    SELECT
        p.* EXCLUDE (run_id, wall_time),
        CASE $x WHEN 'wall_time' THEN p.wall_time WHEN 'relative' THEN p.wall_time - c.t0 ELSE p.step::DOUBLE END AS x
    FROM picked AS p
    JOIN chosen AS c ON c.run_key = p.run_key
    ANTI JOIN superseded AS d ON d.run_key = p.run_key AND d.step = p.step AND p.wall_time IS DISTINCT FROM d.latest
),
binned AS (
    SELECT * FROM v1.series_bins('placed', (SELECT lo FROM extent), (SELECT hi FROM extent), $metrics, []::VARCHAR[], $bins, $x)
)
SELECT c.run_id, b.* EXCLUDE (run_key)
FROM binned AS b
JOIN chosen AS c ON c.run_key = b.run_key
ORDER BY c.run_id, b.metric, b.bin
