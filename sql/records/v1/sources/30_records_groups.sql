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

CREATE OR REPLACE TABLE records_groups AS
WITH parsed AS (
    -- one parse per line into typed fields: a value of the wrong type becomes NULL, not an error
    SELECT
        l.*,
        json_transform(l.obj, '{"kind": "VARCHAR", "observation_id": "VARCHAR", "task_key": "VARCHAR",
            "task_key_basis": "VARCHAR", "input_key": "VARCHAR", "query_sha256": "VARCHAR",
            "prompt_token_sha256": "VARCHAR", "prepared_sample_id": "VARCHAR", "source_dataset": "VARCHAR",
            "source_row": "BIGINT", "verifiers": ["VARCHAR"], "group_index": "BIGINT", "rollout_id": "BIGINT",
            "group_size": "BIGINT", "group_attempt": "VARCHAR", "filter_decision": "VARCHAR",
            "filter_reason": "VARCHAR", "responses_included": "BOOLEAN", "responses": "JSON"}') AS g
    FROM records_lines AS l
    WHERE l.ok
)
SELECT
    p.path || ':' || p.line_no AS group_key,
    p.path,
    p.relpath,
    p.line_no,
    p.run_dir,
    p.attempt,
    m.path IS NOT NULL AS has_manifest,
    coalesce(m.lineage, p.lineage_dir) AS lineage,
    m.protocol_digest,
    m.rollout_seed,
    coalesce(m.deterministic_inference, false) AS deterministic_inference,
    p.g.observation_id,
    p.g.task_key,
    p.g.task_key_basis,
    p.g.input_key,
    p.g.query_sha256,
    p.g.prompt_token_sha256,
    p.g.prepared_sample_id,
    p.g.source_dataset,
    p.g.source_row,
    coalesce(p.g.verifiers, []) AS verifiers,
    array_to_string(list_sort(coalesce(p.g.verifiers, [])), ',') AS domain,
    p.g.group_index,
    p.g.rollout_id,
    p.g.group_size,
    p.g.group_attempt,
    p.g.filter_decision,
    p.g.filter_reason,
    coalesce(p.g.responses_included, false) AS responses_included,
    coalesce(p.g.responses, '[]'::JSON) AS responses
FROM parsed AS p
LEFT JOIN records_manifests AS m ON m.run_dir = p.run_dir AND m.attempt = p.attempt AND m.ok
WHERE p.g.kind = 'group';
