-- name: show_events
-- kind: query
-- depends: events
-- doc: Events of every rank whose step is in [$step_from, $step_to], in time order.
-- columns: step BIGINT, kind VARCHAR, rank BIGINT, message VARCHAR, data JSON, timestamp DOUBLE

SELECT step, kind, rank, message, data, timestamp
FROM v1.events
WHERE step BETWEEN $step_from AND $step_to
ORDER BY step, timestamp, rank
