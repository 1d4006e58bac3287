-- name: file_series
-- kind: source
-- depends: series_bins, (the calling query's relation named by rows)
-- doc: Table macro: a chart's bins over rows of the runs' step files, the one definition that
-- doc: ui_series_files (rows read from the files) and ui_series_held (the same rows, held in
-- doc: memory by the dashboard) both call, so the two ways of drawing a chart from its files place
-- doc: and bin every row alike (tests/test_ui_series.py). rows names a relation (a CTE of the
-- doc: calling query) with file_id (which file a row comes from: an element of files), step,
-- doc: wall_time and one column per name in metrics; files, run_ids and first_wall_times are
-- doc: lists of one element per file (the file, its run, its first wall_time: the zero of the
-- doc: 'relative' axis is its run's smallest). axis, bins, lo, hi and clean are
-- doc: v1.series_bins' (lo and hi constants: DuckDB then drops the range filter on files whose
-- doc: statistics lie inside it). DuckDB-only (COLUMNS, query_table): a source, never transpiled.
-- doc: The rows come in no particular order.
-- columns: (macro) v1.file_series(rows, files, run_ids, first_wall_times, metrics, clean, axis, bins,
-- columns: lo, hi) -> run_id VARCHAR, then v1.series_bins' columns but run_key

CREATE OR REPLACE MACRO v1.file_series(rows, files, run_ids, first_wall_times, metrics, clean, axis, bins, lo, hi) AS TABLE
WITH file_runs AS (
    -- one row per file: its run, and the run's first wall_time (the zero of the 'relative' axis)
    SELECT *, hash(run_id) AS run_key, min(first_wall_time) OVER (PARTITION BY run_id) AS t0
    FROM (SELECT unnest(files) AS file_id, unnest(run_ids::VARCHAR[]) AS run_id,
                 unnest(first_wall_times::DOUBLE[]) AS first_wall_time)
),
per_run AS (
    SELECT DISTINCT run_key, run_id FROM file_runs
),
placed AS (
    -- the one pass over the rows: only these columns are read from them
    SELECT
        o.run_key, r.step::BIGINT AS step, CAST(COLUMNS(metrics) AS DOUBLE),
        CASE axis WHEN 'wall_time' THEN r.wall_time::DOUBLE WHEN 'relative' THEN r.wall_time::DOUBLE - o.t0 ELSE r.step::DOUBLE END AS x
    FROM query_table(rows) AS r
    JOIN file_runs AS o ON o.file_id = r.file_id
),
binned AS (
    SELECT * FROM v1.series_bins('placed', lo::DOUBLE, hi::DOUBLE, metrics, clean::VARCHAR[], bins, axis)
)
SELECT c.run_id, b.* EXCLUDE (run_key)
FROM binned AS b
JOIN per_run AS c ON c.run_key = b.run_key;
