-- name: ui_series
-- kind: query
-- depends: steps
-- doc: The dashboard's overlay charts: the metrics $metrics of the runs $run_ids on an x axis
-- doc: ($x: 'step', 'wall_time' in Unix seconds, or 'relative': seconds since the run's first
-- doc: step), cut into $bins bins of equal x width over [$lo, $hi] (NULL: each metric's whole
-- doc: extent over those runs). Per run, metric and bin: the smallest and the largest finite value
-- doc: with the x and step where each occurs, so a one-step spike survives any zoom level, the
-- doc: mean of the finite values at the mean x of the bin (what smoothing starts from), and the
-- doc: count of non-finite values (NaN/inf, never drawn as numbers) with the first step holding one.
-- doc: A live run's step logged twice counts once (the latest), as in the report.
-- doc: Parameters: $run_ids VARCHAR[], $metrics VARCHAR[] (columns of the steps view), $x VARCHAR,
-- doc: $bins BIGINT, $lo DOUBLE, $hi DOUBLE.
-- columns: run_id VARCHAR, metric VARCHAR, bin BIGINT, n BIGINT, x_min DOUBLE, step_min BIGINT,
-- columns: v_min DOUBLE, x_max DOUBLE, step_max BIGINT, v_max DOUBLE, x_mean DOUBLE,
-- columns: v_mean DOUBLE, n_nonfinite BIGINT, nonfinite_step BIGINT

WITH picked AS (
    SELECT run_id, step, wall_time, COLUMNS($metrics)
    FROM v1.steps
    WHERE list_contains($run_ids, run_id)
),
superseded AS (
    -- steps logged more than once (live runs only): all rows but the latest are dropped
    SELECT run_id, step, max(wall_time) AS latest
    FROM picked
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
        p.*,
        CASE $x
            WHEN 'wall_time' THEN p.wall_time
            WHEN 'relative' THEN p.wall_time - s.t0
            ELSE p.step::DOUBLE
        END AS x
    FROM picked AS p
    JOIN started AS s ON s.run_id = p.run_id
    ANTI JOIN superseded AS d ON d.run_id = p.run_id AND d.step = p.step AND p.wall_time IS DISTINCT FROM d.latest
),
long AS (
    SELECT *
    FROM (
        UNPIVOT (
            SELECT * EXCLUDE (wall_time)
            FROM placed
            WHERE x IS NOT NULL AND ($lo::DOUBLE IS NULL OR x >= $lo::DOUBLE) AND ($hi::DOUBLE IS NULL OR x <= $hi::DOUBLE)
        )
        ON COLUMNS(* EXCLUDE (run_id, step, x))
        INTO NAME metric VALUE value
    )
),
extent AS (
    SELECT metric, coalesce($lo::DOUBLE, min(x)) AS lo, coalesce($hi::DOUBLE, max(x)) AS hi
    FROM long
    GROUP BY metric
),
binned AS (
    SELECT
        l.run_id, l.metric, l.step, l.x, l.value, isfinite(l.value) AS finite,
        CASE WHEN e.hi > e.lo THEN least(floor((l.x - e.lo) * $bins / (e.hi - e.lo)), $bins - 1) ELSE 0 END::BIGINT AS bin
    FROM long AS l
    JOIN extent AS e ON e.metric = l.metric
)
SELECT
    run_id,
    metric,
    bin,
    count(*) AS n,
    arg_min(x, value) FILTER (WHERE finite) AS x_min,
    arg_min(step, value) FILTER (WHERE finite) AS step_min,
    min(value) FILTER (WHERE finite) AS v_min,
    arg_max(x, value) FILTER (WHERE finite) AS x_max,
    arg_max(step, value) FILTER (WHERE finite) AS step_max,
    max(value) FILTER (WHERE finite) AS v_max,
    avg(x) FILTER (WHERE finite) AS x_mean,
    avg(value) FILTER (WHERE finite) AS v_mean,
    count(*) FILTER (WHERE NOT finite) AS n_nonfinite,
    min(step) FILTER (WHERE NOT finite) AS nonfinite_step
FROM binned
GROUP BY run_id, metric, bin
ORDER BY run_id, metric, bin
