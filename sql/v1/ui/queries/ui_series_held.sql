-- name: ui_series_held
-- kind: query
-- depends: series_bins, (a relation named ui_held_rows that rlprobe.ui.catalog registers)
-- doc: ui_series_files over the step files' columns the dashboard holds in memory
-- doc: (rlprobe.ui.columns, read with ui_step_file_columns) instead of the files: the same bins,
-- doc: figures and columns, to the bit (tests/test_ui_series.py). ui_held_rows has a file_index
-- doc: (0-based position in $file_run_ids), step BIGINT, wall_time DOUBLE and one DOUBLE column
-- doc: per name in $metrics, each file's rows in file order. Every other line is ui_series_files':
-- doc: the same placed rows, the same series_bins call. Parameters: $file_run_ids VARCHAR[],
-- doc: $file_first_wall_times DOUBLE[], $metrics VARCHAR[], $clean VARCHAR[], $x VARCHAR,
-- doc: $bins BIGINT, $lo DOUBLE, $hi DOUBLE (as in ui_series_files). The rows come in no
-- doc: particular order.
-- columns: run_id VARCHAR, metric VARCHAR, bin BIGINT, n BIGINT, x_min DOUBLE, step_min BIGINT,
-- columns: v_min DOUBLE, x_max DOUBLE, step_max BIGINT, v_max DOUBLE, x_mean DOUBLE,
-- columns: v_mean DOUBLE, n_nonfinite BIGINT, nonfinite_step BIGINT

WITH files AS (
    -- one row per file: its run, and the run's first wall_time (the zero of the 'relative' axis)
    SELECT *, hash(run_id) AS run_key, min(first_wall_time) OVER (PARTITION BY run_id) AS t0
    FROM (SELECT unnest(range(len($file_run_ids::VARCHAR[])))::INTEGER AS file_index, unnest($file_run_ids::VARCHAR[]) AS run_id,
                 unnest($file_first_wall_times::DOUBLE[]) AS first_wall_time)
),
per_run AS (
    SELECT DISTINCT run_key, run_id FROM files
),
placed AS (
    SELECT
        o.run_key, r.step::BIGINT AS step, CAST(COLUMNS($metrics) AS DOUBLE),
        CASE $x WHEN 'wall_time' THEN r.wall_time::DOUBLE WHEN 'relative' THEN r.wall_time::DOUBLE - o.t0 ELSE r.step::DOUBLE END AS x
    FROM ui_held_rows AS r
    JOIN files AS o ON o.file_index = r.file_index
),
binned AS (
    SELECT * FROM v1.series_bins('placed', $lo::DOUBLE, $hi::DOUBLE, $metrics, $clean::VARCHAR[], $bins, $x)
)
SELECT c.run_id, b.* EXCLUDE (run_key)
FROM binned AS b
JOIN per_run AS c ON c.run_key = b.run_key
