-- name: report_metric_names
-- kind: query
-- depends: step_metrics
-- doc: The numeric step columns that hold a value in the given step files (report_step_files),
-- doc: named from the files' footers (v1.step_metrics): what the report lists as logged without
-- doc: reading a wide run's thousands of extra.* columns. Parameters: $files VARCHAR[].
-- columns: metric VARCHAR

SELECT metric FROM v1.step_metrics($files) ORDER BY metric
