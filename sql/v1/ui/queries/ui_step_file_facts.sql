-- name: ui_step_file_facts
-- kind: query
-- depends: step_files_read
-- doc: What the dashboard needs to know of a step file's rows before it reads them for a chart
-- doc: (ui_series_files): its first and last step, how many steps it holds and how many distinct
-- doc: ones (a file that repeats a step must be merged as the steps view merges it, so the chart
-- doc: reads it through the views), and its first and last wall_time (each run's extent on the
-- doc: time axes). Distinct steps are counted with one bit per possible step, from $offsets (a
-- doc: lower bound of each file's steps, from its statistics) to $offsets + $bits: a fixed-size
-- doc: bitmap per file instead of a hash table of every step (several times faster). A step
-- doc: outside that range is an error, never a wrong count. Read once per file, kept by the
-- doc: dashboard while the file's size and mtime stay. Parameters: $files VARCHAR[], $offsets
-- doc: BIGINT[] (one per file), $bits BIGINT.
-- columns: filename VARCHAR, rows BIGINT, first_step BIGINT, last_step BIGINT, steps BIGINT,
-- columns: distinct_steps BIGINT, first_wall_time DOUBLE, last_wall_time DOUBLE

SELECT
    filename,
    count(*) AS rows,
    min(step)::BIGINT AS first_step,
    max(step)::BIGINT AS last_step,
    count(step) AS steps,
    coalesce(bit_count(bitstring_agg(step::BIGINT - list_extract($offsets::BIGINT[], list_position($files::VARCHAR[], filename)), 0, $bits::BIGINT)), 0) AS distinct_steps,
    min(wall_time)::DOUBLE AS first_wall_time,
    max(wall_time)::DOUBLE AS last_wall_time
FROM v1.step_file_rows($files)
GROUP BY filename
ORDER BY filename
