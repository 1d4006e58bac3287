-- name: step_metrics
-- kind: source
-- depends: paths
-- doc: A table macro: the numeric step columns that hold a value (NaN and inf count) in the
-- doc: given step files, read from the files' footers (each column chunk's value and null
-- doc: counts), not from their rows, so the report lists a run's thousands of extra.* metrics
-- doc: without reading them. files is a list of step files (the src_step_files a run reads,
-- doc: those with rows > 0); a chunk written without statistics counts as holding values.
-- doc: Columns inside a list (kl_positional's elements) are left out.
-- columns: (macro) v1.step_metrics(files) -> metric VARCHAR

CREATE OR REPLACE MACRO v1.step_metrics(files) AS TABLE
SELECT DISTINCT path_in_schema AS metric
FROM parquet_metadata(files)
WHERE type IN ('DOUBLE', 'FLOAT', 'INT64', 'INT32')
  AND NOT contains(path_in_schema, ', list, ')
  AND (stats_null_count IS NULL OR stats_null_count < num_values);
