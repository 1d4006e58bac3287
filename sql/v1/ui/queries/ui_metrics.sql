-- name: ui_metrics
-- kind: query
-- depends: steps
-- doc: The dashboard's metric picker: every numeric column of the steps view (StepRecord fields,
-- doc: "reward_component.<name>" and "extra.<name>") that at least one of the runs in $run_ids
-- doc: logged, with how many values it holds and which of those runs logged it. step and
-- doc: wall_time are the x axes, not metrics. Parameters: $run_ids VARCHAR[].
-- columns: metric VARCHAR, n BIGINT, runs VARCHAR[]

WITH logged AS (
    SELECT *
    FROM (
        UNPIVOT (
            SELECT run_id, count(COLUMNS(* EXCLUDE (run_id, step, wall_time)))
            FROM v1.steps
            WHERE list_contains($run_ids, run_id)
            GROUP BY run_id
        )
        ON COLUMNS(* EXCLUDE (run_id))
        INTO NAME metric VALUE n
    )
),
numeric AS (
    SELECT column_name AS metric
    FROM (DESCRIBE v1.steps)
    WHERE column_type IN ('DOUBLE', 'FLOAT', 'BIGINT', 'INTEGER', 'SMALLINT', 'TINYINT', 'HUGEINT', 'UBIGINT', 'UINTEGER')
      AND column_name NOT IN ('step', 'wall_time')
)
SELECT l.metric, sum(l.n)::BIGINT AS n, list(l.run_id ORDER BY l.run_id) FILTER (WHERE l.n > 0) AS runs
FROM logged AS l
SEMI JOIN numeric AS c ON c.metric = l.metric
GROUP BY l.metric
HAVING sum(l.n) > 0
ORDER BY l.metric
