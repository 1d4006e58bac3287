-- name: records_groups
-- kind: source
-- depends: records_lines, records_manifests
-- doc: One row per group line (kind = group) of a complete, parseable line, with its run
-- doc: directory, attempt and the manifest fields that qualify it. lineage is the manifest's, or
-- doc: the lineage directory's name for a records file without a manifest (has_manifest false).
-- doc: group_key (file and line) identifies the row even when an observation_id repeats.
-- columns: group_key VARCHAR, path VARCHAR, relpath VARCHAR, line_no BIGINT, run_dir VARCHAR,
-- columns: attempt VARCHAR, has_manifest BOOLEAN, lineage VARCHAR, protocol_digest VARCHAR,
-- columns: rollout_seed BIGINT, deterministic_inference BOOLEAN, observation_id VARCHAR,
-- columns: task_key VARCHAR, task_key_basis VARCHAR, input_key VARCHAR, query_sha256 VARCHAR,
-- columns: prompt_token_sha256 VARCHAR, prepared_sample_id VARCHAR, source_dataset VARCHAR,
-- columns: source_row BIGINT, verifiers VARCHAR[], domain VARCHAR, group_index BIGINT,
-- columns: rollout_id BIGINT, group_size BIGINT, group_attempt VARCHAR, filter_decision VARCHAR,
-- columns: filter_reason VARCHAR, responses_included BOOLEAN, responses JSON

CREATE OR REPLACE VIEW records_groups AS
SELECT
    l.path || ':' || l.line_no AS group_key,
    l.path,
    l.relpath,
    l.line_no,
    l.run_dir,
    l.attempt,
    m.path IS NOT NULL AS has_manifest,
    coalesce(m.lineage, l.lineage_dir) AS lineage,
    m.protocol_digest,
    m.rollout_seed,
    coalesce(m.deterministic_inference, false) AS deterministic_inference,
    l.obj ->> '$.observation_id' AS observation_id,
    l.obj ->> '$.task_key' AS task_key,
    l.obj ->> '$.task_key_basis' AS task_key_basis,
    l.obj ->> '$.input_key' AS input_key,
    l.obj ->> '$.query_sha256' AS query_sha256,
    l.obj ->> '$.prompt_token_sha256' AS prompt_token_sha256,
    l.obj ->> '$.prepared_sample_id' AS prepared_sample_id,
    l.obj ->> '$.source_dataset' AS source_dataset,
    TRY_CAST(l.obj ->> '$.source_row' AS BIGINT) AS source_row,
    coalesce(TRY_CAST(json_extract(l.obj, '$.verifiers') AS VARCHAR[]), []) AS verifiers,
    array_to_string(list_sort(coalesce(TRY_CAST(json_extract(l.obj, '$.verifiers') AS VARCHAR[]), [])), ',')
        AS domain,
    TRY_CAST(l.obj ->> '$.group_index' AS BIGINT) AS group_index,
    TRY_CAST(l.obj ->> '$.rollout_id' AS BIGINT) AS rollout_id,
    TRY_CAST(l.obj ->> '$.group_size' AS BIGINT) AS group_size,
    l.obj ->> '$.group_attempt' AS group_attempt,
    l.obj ->> '$.filter_decision' AS filter_decision,
    l.obj ->> '$.filter_reason' AS filter_reason,
    coalesce(TRY_CAST(l.obj ->> '$.responses_included' AS BOOLEAN), false) AS responses_included,
    coalesce(json_extract(l.obj, '$.responses'), '[]'::JSON) AS responses
FROM records_lines AS l
LEFT JOIN records_manifests AS m ON m.run_dir = l.run_dir AND m.attempt = l.attempt AND m.ok
WHERE l.ok AND l.obj ->> '$.kind' = 'group';
