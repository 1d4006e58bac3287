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
-- doc: (one struct per metric) and unpivoted only then: one pass over the steps whatever the
-- doc: number of metrics. A step logged twice (a resumed run, before compaction merges it) counts
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
per_bin AS (
    -- one struct of figures per metric column, named after it; lo and hi carry where the
    -- smallest and the largest finite value occur
    SELECT
        r.run_key,
        CASE WHEN e.hi > e.lo THEN least(floor((r.x - e.lo) * $bins / (e.hi - e.lo)), $bins - 1) ELSE 0 END::BIGINT AS bin,
        {
            'n': count(COLUMNS($metrics)),
            'lo': arg_min({'x': r.x, 'step': r.step, 'v': COLUMNS($metrics)}, CASE WHEN isfinite(COLUMNS($metrics)) THEN COLUMNS($metrics) END),
            'hi': arg_max({'x': r.x, 'step': r.step, 'v': COLUMNS($metrics)}, CASE WHEN isfinite(COLUMNS($metrics)) THEN COLUMNS($metrics) END),
            'x_mean': avg(CASE WHEN isfinite(COLUMNS($metrics)) THEN r.x END),
            'v_mean': avg(CASE WHEN isfinite(COLUMNS($metrics)) THEN COLUMNS($metrics) END),
            'n_nonfinite': count(CASE WHEN NOT isfinite(COLUMNS($metrics)) THEN 1 END),
            'nonfinite_step': min(CASE WHEN NOT isfinite(COLUMNS($metrics)) THEN r.step END)
        }
    FROM placed AS r, extent AS e
    WHERE r.x BETWEEN e.lo AND e.hi
    GROUP BY ALL
),
long AS (
    SELECT * FROM (UNPIVOT per_bin ON COLUMNS(* EXCLUDE (run_key, bin)) INTO NAME metric VALUE s)
)
SELECT
    c.run_id, l.metric, l.bin, l.s.n,
    l.s.lo.x AS x_min, l.s.lo.step AS step_min, l.s.lo.v AS v_min,
    l.s.hi.x AS x_max, l.s.hi.step AS step_max, l.s.hi.v AS v_max,
    l.s.x_mean, l.s.v_mean, l.s.n_nonfinite, l.s.nonfinite_step
FROM long AS l
JOIN chosen AS c ON c.run_key = l.run_key
WHERE l.s.n > 0
ORDER BY c.run_id, l.metric, l.bin
