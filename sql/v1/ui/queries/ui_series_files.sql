-- name: ui_series_files
-- kind: query
-- depends: step_files_read
-- doc: ui_series read straight from the runs' step files: the same bins, figures and columns,
-- doc: for runs whose files need no merging (rlprobe.ui.series decides that from each file's
-- doc: steps and falls back to ui_series otherwise). $files are the files the steps view would
-- doc: read for rank 0 of each run (a compacted steps.parquet, else its parts) and
-- doc: $file_run_ids the run each belongs to; only the step, wall_time and $metrics columns are
-- doc: read (projection pushdown into the parquet reader), where the views read every column and
-- doc: group every step to check for repeats. Parameters: $files VARCHAR[], $file_run_ids
-- doc: VARCHAR[], $metrics VARCHAR[] (columns some of the files hold), $x VARCHAR, $bins BIGINT,
-- doc: $lo DOUBLE, $hi DOUBLE.
-- columns: run_id VARCHAR, metric VARCHAR, bin BIGINT, n BIGINT, x_min DOUBLE, step_min BIGINT,
-- columns: v_min DOUBLE, x_max DOUBLE, step_max BIGINT, v_max DOUBLE, x_mean DOUBLE,
-- columns: v_mean DOUBLE, n_nonfinite BIGINT, nonfinite_step BIGINT

WITH files AS (
    -- one row per file: its run, and the run's first wall_time (the zero of the 'relative' axis)
    SELECT *, hash(run_id) AS run_key, min(first_wall_time) OVER (PARTITION BY run_id) AS t0
    FROM (SELECT unnest($files::VARCHAR[]) AS filename, unnest($file_run_ids::VARCHAR[]) AS run_id,
                 unnest($file_first_steps::BIGINT[]) AS first_step, unnest($file_last_steps::BIGINT[]) AS last_step,
                 unnest($file_first_wall_times::DOUBLE[]) AS first_wall_time,
                 unnest($file_last_wall_times::DOUBLE[]) AS last_wall_time)
),
per_run AS (
    -- each run's extent on every axis, from its files' (the same figures ui_series takes from the rows)
    SELECT run_key, any_value(run_id) AS run_id, min(first_step) AS s0, max(last_step) AS s1,
           min(first_wall_time) AS t0, max(last_wall_time) AS t1
    FROM files
    GROUP BY run_key
),
extent AS (
    SELECT
        coalesce($lo::DOUBLE, CASE $x WHEN 'wall_time' THEN min(t0) WHEN 'relative' THEN 0.0 ELSE min(s0) END) AS lo,
        coalesce($hi::DOUBLE, CASE $x WHEN 'wall_time' THEN max(t1) WHEN 'relative' THEN max(t1 - t0) ELSE max(s1) END) AS hi
    FROM per_run
),
placed AS (
    -- the one pass over the rows: only these columns are read from the files
    SELECT
        o.run_key, r.step::BIGINT AS step, CAST(COLUMNS($metrics) AS DOUBLE),
        CASE $x WHEN 'wall_time' THEN r.wall_time::DOUBLE WHEN 'relative' THEN r.wall_time::DOUBLE - o.t0 ELSE r.step::DOUBLE END AS x
    FROM v1.step_file_rows($files) AS r
    JOIN files AS o ON o.filename = r.filename
),
-- from here on as ui_series
per_bin AS (
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
JOIN per_run AS c ON c.run_key = l.run_key
WHERE l.s.n > 0
ORDER BY c.run_id, l.metric, l.bin
