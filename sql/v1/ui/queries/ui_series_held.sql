-- name: ui_series_held
-- kind: query
-- depends: file_series, (a relation named ui_held_rows that rlprobe.ui.catalog registers)
-- doc: ui_series_files over the step files' columns the dashboard holds in memory
-- doc: (rlprobe.ui.columns, read with ui_step_file_columns) instead of the files: the same bins,
-- doc: figures and columns, to the bit (tests/test_ui_series.py). ui_held_rows has a file_index
-- doc: (0-based position in $file_run_ids), step BIGINT, wall_time DOUBLE and one DOUBLE column
-- doc: per name in $metrics, each file's rows in file order. Both call v1.file_series, which
-- doc: places and bins the rows. Parameters: $file_run_ids VARCHAR[],
-- doc: $file_first_wall_times DOUBLE[], $metrics VARCHAR[], $clean VARCHAR[], $x VARCHAR,
-- doc: $bins BIGINT, $lo DOUBLE, $hi DOUBLE (as in ui_series_files). The rows come in no
-- doc: particular order.
-- columns: run_id VARCHAR, metric VARCHAR, bin BIGINT, n BIGINT, x_min DOUBLE, step_min BIGINT,
-- columns: v_min DOUBLE, x_max DOUBLE, step_max BIGINT, v_max DOUBLE, x_mean DOUBLE,
-- columns: v_mean DOUBLE, n_nonfinite BIGINT, nonfinite_step BIGINT

WITH held_rows AS (
    SELECT * RENAME (file_index AS file_id) FROM ui_held_rows
)
SELECT * FROM v1.file_series('held_rows', range(len($file_run_ids::VARCHAR[]))::INTEGER[], $file_run_ids, $file_first_wall_times, $metrics, $clean, $x, $bins, $lo, $hi)
