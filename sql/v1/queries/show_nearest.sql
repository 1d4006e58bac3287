-- name: show_nearest
-- kind: query
-- depends: steps
-- doc: Where $step sits among a run's recorded steps: the nearest recorded step below and
-- doc: above it (NULL when none), and the run's first and last step and step count.
-- columns: below BIGINT, above BIGINT, first_step BIGINT, last_step BIGINT, steps BIGINT

SELECT
    max(step) FILTER (WHERE step < $step) AS below,
    min(step) FILTER (WHERE step > $step) AS above,
    min(step) AS first_step,
    max(step) AS last_step,
    count(DISTINCT step) AS steps
FROM v1.steps
