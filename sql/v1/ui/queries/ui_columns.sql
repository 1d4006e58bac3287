-- name: ui_columns
-- kind: query
-- depends: steps
-- doc: The numeric columns of the steps view over the runs in scope (rlprobe_scope): the metrics
-- doc: a chart may ask for. Binding the view reads only the files' schemas, so this is cheap; a
-- doc: column may still be NULL for some of those runs (it then draws nothing). No parameters.
-- columns: metric VARCHAR, column_type VARCHAR

SELECT column_name AS metric, column_type
FROM (DESCRIBE v1.steps)
WHERE column_type IN ('DOUBLE', 'FLOAT', 'BIGINT', 'INTEGER', 'SMALLINT', 'TINYINT', 'HUGEINT', 'UBIGINT', 'UINTEGER')
  AND column_name NOT IN ('step', 'wall_time')
ORDER BY column_name
