-- name: ui_series
-- kind: query
-- depends: steps
-- doc: The dashboard's overlay charts: the metrics $metrics of the runs $run_ids on an x axis
-- doc: ($x: 'step', 'wall_time' in Unix seconds, or 'relative': seconds since the run's first
-- doc: step), cut into $bins bins of equal x width over [$lo, $hi] (NULL: the whole extent of
-- doc: those runs; every metric shares the bins, as the charts share their x range). Per run,
-- doc: metric and bin: the smallest and the largest finite value with the x and step where each
-- doc: occurs, so a one-step spike survives any zoom level; the mean of the finite values at their
-- doc: mean x (what smoothing starts from); and the count of non-finite values (NaN/inf, never
-- doc: drawn as numbers) with the first step holding one. The metrics are aggregated side by side
-- doc: (one struct per metric) and unpivoted only then, so a bin costs one pass whatever the
-- doc: number of metrics. A step logged twice (a resumed run, before compaction merges it) counts
-- doc: once, the latest; only the runs in $live_run_ids (those not closed) are looked at for that.
-- doc: Parameters: $run_ids VARCHAR[], $metrics VARCHAR[] (numeric columns of the steps view),
-- doc: $live_run_ids VARCHAR[], $x VARCHAR, $bins BIGINT, $lo DOUBLE, $hi DOUBLE.
-- columns: run_id VARCHAR, metric VARCHAR, bin BIGINT, n BIGINT, x_min DOUBLE, step_min BIGINT,
-- columns: v_min DOUBLE, x_max DOUBLE, step_max BIGINT, v_max DOUBLE, x_mean DOUBLE,
-- columns: v_mean DOUBLE, n_nonfinite BIGINT, nonfinite_step BIGINT

WITH picked AS (
    SELECT run_id, step, wall_time, CAST(COLUMNS($metrics) AS DOUBLE)
    FROM v1.steps
    WHERE list_contains($run_ids, run_id)
),
superseded AS (
    -- steps logged more than once: all rows but the latest are dropped (closed runs are merged)
    SELECT run_id, step, max(wall_time) AS latest
    FROM picked
    WHERE list_contains($live_run_ids, run_id)
    GROUP BY run_id, step
    HAVING count(*) > 1
),
started AS (
    -- each run's first wall_time, for the 'relative' axis (a join, not a window: no sort)
    SELECT run_id, min(wall_time) AS t0
    FROM picked
    GROUP BY run_id
),
placed AS (
    SELECT
        p.* EXCLUDE (wall_time),
        CASE $x
            WHEN 'wall_time' THEN p.wall_time
            WHEN 'relative' THEN p.wall_time - s.t0
            ELSE p.step::DOUBLE
        END AS x
    FROM picked AS p
    JOIN started AS s ON s.run_id = p.run_id
    ANTI JOIN superseded AS d ON d.run_id = p.run_id AND d.step = p.step AND p.wall_time IS DISTINCT FROM d.latest
),
in_range AS (
    SELECT * FROM placed
    WHERE x IS NOT NULL AND ($lo::DOUBLE IS NULL OR x >= $lo::DOUBLE) AND ($hi::DOUBLE IS NULL OR x <= $hi::DOUBLE)
),
extent AS (
    SELECT coalesce($lo::DOUBLE, min(x)) AS lo, coalesce($hi::DOUBLE, max(x)) AS hi FROM in_range
),
per_bin AS (
    -- one struct of figures per metric column, named after it
    SELECT
        r.run_id,
        CASE WHEN e.hi > e.lo THEN least(floor((r.x - e.lo) * $bins / (e.hi - e.lo)), $bins - 1) ELSE 0 END::BIGINT AS bin,
        {
            'n': count(COLUMNS($metrics)),
            'x_min': arg_min(r.x, CASE WHEN isfinite(COLUMNS($metrics)) THEN COLUMNS($metrics) END),
            'step_min': arg_min(r.step, CASE WHEN isfinite(COLUMNS($metrics)) THEN COLUMNS($metrics) END),
            'v_min': min(CASE WHEN isfinite(COLUMNS($metrics)) THEN COLUMNS($metrics) END),
            'x_max': arg_max(r.x, CASE WHEN isfinite(COLUMNS($metrics)) THEN COLUMNS($metrics) END),
            'step_max': arg_max(r.step, CASE WHEN isfinite(COLUMNS($metrics)) THEN COLUMNS($metrics) END),
            'v_max': max(CASE WHEN isfinite(COLUMNS($metrics)) THEN COLUMNS($metrics) END),
            'x_mean': avg(CASE WHEN isfinite(COLUMNS($metrics)) THEN r.x END),
            'v_mean': avg(CASE WHEN isfinite(COLUMNS($metrics)) THEN COLUMNS($metrics) END),
            'n_nonfinite': count(CASE WHEN NOT isfinite(COLUMNS($metrics)) THEN 1 END),
            'nonfinite_step': min(CASE WHEN NOT isfinite(COLUMNS($metrics)) THEN r.step END)
        }
    FROM in_range AS r, extent AS e
    GROUP BY ALL
),
long AS (
    SELECT * FROM (UNPIVOT per_bin ON COLUMNS(* EXCLUDE (run_id, bin)) INTO NAME metric VALUE s)
)
SELECT run_id, metric, bin, s.*
FROM long
WHERE s.n > 0
ORDER BY run_id, metric, bin
