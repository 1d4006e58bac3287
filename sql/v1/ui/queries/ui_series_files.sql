-- name: ui_series_files
-- kind: query
-- depends: step_files_read, file_series
-- doc: ui_series read straight from the runs' step files: the same bins (both call
-- doc: v1.series_bins, here through v1.file_series as ui_series_held), figures and columns, for runs whose files need no merging (rlprobe.ui
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

WITH file_rows AS (
    -- only the columns v1.file_series names are read from the files (projection pushdown)
    SELECT * RENAME (filename AS file_id) FROM v1.step_file_rows($files)
)
-- not sorted: ui_series_json, which the dashboard runs over these rows in the same statement,
-- puts each series' bins in order, and sorting 80k rows by run_id and metric first cost as much
-- again as writing their JSON (an 8-metric chart of 10 runs)
SELECT * FROM v1.file_series('file_rows', $files::VARCHAR[], $file_run_ids, $file_first_wall_times, $metrics, $clean, $x, $bins, $lo, $hi)
