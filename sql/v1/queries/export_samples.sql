-- name: export_samples
-- kind: query
-- depends: samples, runs
-- doc: Every row of the samples view with the run's name and tags beside its run_id, for `rlprobe
-- doc: export`: one table over every run of a root, in the view's unified schema (a column one
-- doc: run did not log is NULL in its rows). A run_id that two run directories share takes the
-- doc: name and tags of the first of them, so no row is repeated.
-- columns: run_id VARCHAR, name VARCHAR, tags VARCHAR[], then every column of samples but run_id

SELECT t.run_id AS run_id, r.name AS name, r.tags AS tags, t.* EXCLUDE (run_id)
FROM samples AS t
LEFT JOIN (
    SELECT DISTINCT ON (run_id) run_id, name, tags FROM runs ORDER BY run_id, run_dir
) AS r ON r.run_id = t.run_id
ORDER BY t.run_id, t.step, t.rank, t.sample_id
