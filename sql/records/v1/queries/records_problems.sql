-- name: records_problems
-- kind: query
-- depends: records_files, records_manifests, records_lines, records_groups, records_dispositions
-- doc: What summary.json warns about, one row per problem and file: incomplete final lines of a
-- doc: stopped writer, complete lines that are not a JSON object, records files that are not
-- doc: UTF-8, records files without a manifest beside them, manifests that do not parse, and
-- doc: disposition rows whose observation_id names no group row.
-- columns: problem VARCHAR, path VARCHAR, n BIGINT, example VARCHAR

SELECT 'incomplete_final_line' AS problem, relpath AS path, count(*) AS n, min(CAST(line_no AS VARCHAR)) AS example
FROM records_lines WHERE NOT complete GROUP BY relpath
UNION ALL
SELECT 'unparseable_line', relpath, count(*), CAST(min(line_no) AS VARCHAR)
FROM records_lines WHERE complete AND NOT ok GROUP BY relpath
UNION ALL
SELECT 'unreadable_records_file', f.relpath, 1, NULL
FROM records_files AS f
WHERE f.file_kind = 'records' AND f.size > 0
  AND NOT EXISTS (SELECT 1 FROM records_lines AS l WHERE l.path = f.path)
UNION ALL
SELECT 'records_without_manifest', f.relpath, 1, NULL
FROM records_files AS f
WHERE f.file_kind = 'records'
  AND NOT EXISTS (SELECT 1 FROM records_manifests AS m
                  WHERE m.run_dir = f.run_dir AND m.attempt = f.attempt AND m.ok)
UNION ALL
SELECT 'unreadable_manifest', relpath, 1, NULL
FROM records_manifests WHERE NOT ok
UNION ALL
SELECT 'disposition_without_group', d.relpath, count(*), min(d.observation_id)
FROM records_dispositions AS d
WHERE NOT EXISTS (SELECT 1 FROM records_groups AS g WHERE g.observation_id = d.observation_id)
GROUP BY d.relpath
ORDER BY problem, path
