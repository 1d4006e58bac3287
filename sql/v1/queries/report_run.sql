-- name: report_run
-- kind: query
-- depends: runs, manifest
-- doc: The HTML report's header: each run's row of the runs view (status, steps, last write) with
-- doc: its manifest's trainer_config and environment as JSON text (a report is made over one run,
-- doc: so one row). No parameters.
-- columns: run_id .. events (the runs view's columns), trainer_config VARCHAR, environment VARCHAR

SELECT
    r.*,
    CAST(m.trainer_config AS VARCHAR) AS trainer_config,
    CAST(m.environment AS VARCHAR) AS environment
FROM v1.runs AS r
LEFT JOIN v1.manifest AS m USING (run_id)
ORDER BY r.run_dir
