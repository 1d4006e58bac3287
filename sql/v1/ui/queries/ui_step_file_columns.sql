-- name: ui_step_file_columns
-- kind: query
-- depends: step_files_read
-- doc: Some columns of some step files, as the dashboard holds them in memory between charts
-- doc: (rlprobe.ui.columns): step as BIGINT, wall_time and each of $metrics as DOUBLE (the casts
-- doc: ui_series_files makes), every row of every file in file order, files in the order of
-- doc: $files. file_number is the file's position in $files (1-based): a number per row, cheap to
-- doc: hand over (the filename is a long string on each of a million rows; DuckDB computes the
-- doc: position once per chunk, the filename being the same in all its rows), by which
-- doc: rlprobe.ui.columns checks where each file's rows begin and end. A metric a file lacks is NULL in its rows (the
-- doc: files are read by name, as the views read them). Parameters: $files VARCHAR[] (paths
-- doc: below the root), $metrics VARCHAR[] (columns at least one of the files holds; may be empty).
-- columns: file_number INTEGER, step BIGINT, wall_time DOUBLE, "<metric>" DOUBLE

SELECT
    list_position($files::VARCHAR[], filename)::INTEGER AS file_number,
    step::BIGINT AS step,
    -- wall_time is named by the lambda too, so the list is never empty (COLUMNS of no column is an error)
    CAST(COLUMNS(lambda c: c = 'wall_time' OR list_contains($metrics::VARCHAR[], c)) AS DOUBLE)
FROM v1.step_file_rows($files)
