-- name: ui_series_files
-- kind: query
-- depends: step_files_read, series_bins
-- doc: ui_series read straight from the runs' step files: the same bins (both call
-- doc: v1.series_bins), figures and columns, for runs whose files need no merging (rlprobe.ui
-- doc: decides that from each file's steps and falls back to ui_series otherwise). $files are
-- doc: the files the steps view would read for rank 0 of each run (a compacted steps.parquet,
-- doc: else its parts) and $file_run_ids the run each belongs to; only the step, wall_time and
-- doc: $metrics columns are read (projection pushdown into the parquet reader), where the views
-- doc: read every column and group every step to check for repeats. $lo and $hi are the x range,
-- doc: never left open: where the request left it open, rlprobe.ui takes it from what it learned
-- doc: of each file (its first and last step and wall_time: the same figures ui_series takes from
-- doc: the rows), so both are constants and DuckDB drops the range filter on files whose
-- doc: statistics lie inside it. Parameters: $files VARCHAR[], $file_run_ids VARCHAR[],
-- doc: $file_first_wall_times DOUBLE[] (per file: the zero of the 'relative' axis is its run's
-- doc: smallest), $metrics VARCHAR[] (columns some of the files hold), $x VARCHAR, $bins BIGINT,
-- doc: $lo DOUBLE, $hi DOUBLE, $clean VARCHAR[] (those of $metrics that hold a finite value in every
-- doc: row of every file: v1.series_bins aggregates them without its CASEs). The rows come in no particular order (ui_series' are sorted by
-- doc: run_id, metric and bin).
-- columns: run_id VARCHAR, metric VARCHAR, bin BIGINT, n BIGINT, x_min DOUBLE, step_min BIGINT,
-- columns: v_min DOUBLE, x_max DOUBLE, step_max BIGINT, v_max DOUBLE, x_mean DOUBLE,
-- columns: v_mean DOUBLE, n_nonfinite BIGINT, nonfinite_step BIGINT

WITH files AS (
    -- one row per file: its run, and the run's first wall_time (the zero of the 'relative' axis)
    SELECT *, hash(run_id) AS run_key, min(first_wall_time) OVER (PARTITION BY run_id) AS t0
    FROM (SELECT unnest($files::VARCHAR[]) AS filename, unnest($file_run_ids::VARCHAR[]) AS run_id,
                 unnest($file_first_wall_times::DOUBLE[]) AS first_wall_time)
),
per_run AS (
    SELECT DISTINCT run_key, run_id FROM files
),
placed AS (
    -- the one pass over the rows: only these columns are read from the files
    SELECT
        o.run_key, r.step::BIGINT AS step, CAST(COLUMNS($metrics) AS DOUBLE),
        CASE $x WHEN 'wall_time' THEN r.wall_time::DOUBLE WHEN 'relative' THEN r.wall_time::DOUBLE - o.t0 ELSE r.step::DOUBLE END AS x
    FROM v1.step_file_rows($files) AS r
    JOIN files AS o ON o.filename = r.filename
),
binned AS (
    SELECT * FROM v1.series_bins('placed', $lo::DOUBLE, $hi::DOUBLE, $metrics, $clean::VARCHAR[], $bins, $x)
)
-- not sorted: ui_series_json, which the dashboard runs over these rows in the same statement,
-- puts each series' bins in order, and sorting 80k rows by run_id and metric first cost as much
-- again as writing their JSON (an 8-metric chart of 10 runs)
SELECT c.run_id, b.* EXCLUDE (run_key)
FROM binned AS b
JOIN per_run AS c ON c.run_key = b.run_key
