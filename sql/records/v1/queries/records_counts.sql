-- name: records_counts
-- kind: query
-- depends: records_files, records_manifests, records_lines, records_groups, records_responses, records_dispositions
-- doc: One row of totals for summary.json: files, lines (complete, torn, unparseable), rows by
-- doc: kind, responses, distinct input keys, runs and attempts, and dispositions that name no group.
-- columns: manifests BIGINT, unreadable_manifests BIGINT, record_files BIGINT, lines BIGINT,
-- columns: incomplete_lines BIGINT, unparseable_lines BIGINT, group_rows BIGINT,
-- columns: disposition_rows BIGINT, other_rows BIGINT, responses BIGINT, input_keys BIGINT,
-- columns: runs BIGINT, attempts BIGINT, dispositions_without_group BIGINT

SELECT
    (SELECT count(*) FROM records_manifests) AS manifests,
    (SELECT count(*) FROM records_manifests WHERE NOT ok) AS unreadable_manifests,
    (SELECT count(*) FROM records_files WHERE file_kind = 'records') AS record_files,
    (SELECT count(*) FROM records_lines) AS lines,
    (SELECT count(*) FROM records_lines WHERE NOT complete) AS incomplete_lines,
    (SELECT count(*) FROM records_lines WHERE complete AND NOT ok) AS unparseable_lines,
    (SELECT count(*) FROM records_groups) AS group_rows,
    (SELECT count(*) FROM records_dispositions) AS disposition_rows,
    (SELECT count(*) FROM records_lines
     WHERE ok AND coalesce(obj ->> '$.kind', '') NOT IN ('group', 'disposition')) AS other_rows,
    (SELECT count(*) FROM records_responses) AS responses,
    (SELECT count(DISTINCT input_key) FROM records_groups) AS input_keys,
    (SELECT count(DISTINCT run_dir) FROM records_files) AS runs,
    (SELECT count(DISTINCT run_dir || '/' || attempt) FROM records_files) AS attempts,
    (SELECT count(*) FROM records_dispositions AS d
     WHERE NOT EXISTS (SELECT 1 FROM records_groups AS g WHERE g.observation_id = d.observation_id))
        AS dispositions_without_group
