-- name: report_step_files
-- kind: query
-- depends: src_step_files
-- doc: The step files the steps view reads rank 0's steps of a one-run store from (a file whose
-- doc: steps were all written again later is left out), for report_metric_names. Only the step
-- doc: and wall_time columns are read. No parameters.
-- columns: filename VARCHAR

SELECT filename FROM v1.src_step_files WHERE rank = 0 AND rows > 0 ORDER BY filename
