-- name: ui_step_file_meta
-- kind: query
-- depends: step_files_read
-- doc: What the footers of some step files say, without reading their rows: per file, its rows,
-- doc: the bounds of its step column from the row groups' statistics (NULL unless every row group
-- doc: has them), its row groups' sizes in order, the values each leaf column holds (rows less
-- doc: NULLs, from the statistics: NULL when a row group has none; in leaf order), and its schema's fields in order with their number of children, from which
-- doc: rlprobe.ui.stepfiles takes the top-level column names. The dashboard reads these once per
-- doc: file (a part never changes; a replaced file is a new one) to decide whether a chart can read
-- doc: the files directly (ui_series_files). Parameters: $files VARCHAR[] (paths of files below
-- doc: the root).
-- columns: filename VARCHAR, rows BIGINT, step_lo BIGINT, step_hi BIGINT, row_groups BIGINT[],
-- columns: leaf_values BIGINT[], fields STRUCT(name VARCHAR, children BIGINT)[]

WITH stats AS (
    SELECT
        file_name AS filename,
        -- one entry per row group and leaf column: the first leaf counts each row group once
        sum(row_group_num_rows) FILTER (WHERE column_id = 0) AS rows,
        list(row_group_num_rows ORDER BY row_group_id) FILTER (WHERE column_id = 0) AS row_groups,
        -- a row group without statistics leaves the bounds unknown (NULL), never too narrow
        CASE WHEN bool_and(stats_min_value IS NOT NULL AND stats_max_value IS NOT NULL) FILTER (WHERE path_in_schema = 'step')
             THEN min(TRY_CAST(stats_min_value AS BIGINT)) FILTER (WHERE path_in_schema = 'step') END AS step_lo,
        CASE WHEN bool_and(stats_min_value IS NOT NULL AND stats_max_value IS NOT NULL) FILTER (WHERE path_in_schema = 'step')
             THEN max(TRY_CAST(stats_max_value AS BIGINT)) FILTER (WHERE path_in_schema = 'step') END AS step_hi
    FROM v1.step_file_chunks($files)
    GROUP BY file_name
),
leaves AS (
    -- per leaf column, its non-NULL values: a row group without a null count makes it unknown
    SELECT file_name AS filename, list(n ORDER BY column_id) AS leaf_values
    FROM (
        SELECT file_name, column_id,
               CASE WHEN bool_and(stats_null_count IS NOT NULL) THEN sum(row_group_num_rows - stats_null_count) END::BIGINT AS n
        FROM v1.step_file_chunks($files)
        GROUP BY file_name, column_id
    )
    GROUP BY file_name
),
fields AS (
    -- the schema in file order (column_id): the root, then each field followed by its children
    SELECT file_name AS filename, list({'name': name, 'children': coalesce(num_children, 0)} ORDER BY column_id) AS fields
    FROM v1.step_file_fields($files)
    GROUP BY file_name
)
SELECT f.filename, coalesce(s.rows, 0) AS rows, s.step_lo, s.step_hi, coalesce(s.row_groups, []) AS row_groups,
       coalesce(l.leaf_values, []) AS leaf_values, f.fields
FROM fields AS f
LEFT JOIN stats AS s ON s.filename = f.filename
LEFT JOIN leaves AS l ON l.filename = f.filename
ORDER BY f.filename
