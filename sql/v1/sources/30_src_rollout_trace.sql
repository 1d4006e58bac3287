-- name: src_rollout_trace
-- kind: source
-- depends: paths
-- doc: Rollout trace lines (rollout_trace.jsonl, written by rlprobe.rollouts.RolloutTrace or by
-- doc: any controller using the same keys) from every run below the root, plus the trace files
-- doc: bound in the variable rlprobe_rollout_traces (a MAP from a file's absolute path to the run
-- doc: directory it belongs to, or NULL: then a file named rollout_trace.jsonl belongs to its
-- doc: folder, any other file is a run of its own). Each file is read whole and split into lines,
-- doc: so seq is the exact line number: order within a file is what the batch age follows. A
-- doc: line that is not a JSON object with a string event (the torn last line of a killed
-- doc: writer) is dropped. The JSON is typed here, so the views stay portable: ids become text
-- doc: (17 -> '17'), counts BIGINT (NULL unless a whole number), refit calls and
-- doc: tokens_by_version lists of structs. A file that is not UTF-8 fails the query.
-- columns: run_dir VARCHAR, trace_file VARCHAR, seq BIGINT, t DOUBLE, trace_run_id VARCHAR,
-- columns: event VARCHAR, attempt_id VARCHAR, group_id VARCHAR, prompt_id VARCHAR,
-- columns: generation_index BIGINT, version BIGINT, tokens BIGINT, reason VARCHAR,
-- columns: replaced_version BIGINT, new_version BIGINT,
-- columns: calls STRUCT(attempt_id VARCHAR, tokens_so_far BIGINT)[], step BIGINT,
-- columns: tokens_by_version STRUCT(version BIGINT, tokens BIGINT)[], trained_version BIGINT,
-- columns: path VARCHAR, data JSON; (macro) v1.trace_int(text)

-- A whole number or NULL: TRY_CAST alone would round 3.5 to 4, where Python refuses it.
CREATE OR REPLACE MACRO v1.trace_int(text) AS
    CASE WHEN TRY_CAST(text AS DOUBLE) = trunc(TRY_CAST(text AS DOUBLE)) THEN TRY_CAST(text AS BIGINT) END;

CREATE OR REPLACE VIEW v1.src_rollout_trace AS
WITH files AS (
    SELECT filename, content
    FROM read_text(
        v1.globs('rollout_trace.jsonl')
        || coalesce(map_keys(getvariable('rlprobe_rollout_traces')), []::VARCHAR[]))
    -- a bound file may also match the glob: read it once
    QUALIFY row_number() OVER (PARTITION BY filename) = 1
), owners AS (
    SELECT
        filename,
        content,
        coalesce(
            getvariable('rlprobe_rollout_traces')[filename],
            CASE WHEN filename LIKE '%/rollout_trace.jsonl'
                 THEN v1.run_dir(regexp_extract(filename, '(?s)^(.*)/rollout_trace\.jsonl$', 1))
                 ELSE filename END) AS run_dir
    FROM files
), split AS (
    SELECT run_dir, filename, string_split(content, chr(10)) AS lines FROM owners
), lines AS (
    -- unnest in the select list, not as a lateral join: a join would carry the whole file's
    -- text along with every line
    SELECT run_dir, filename, rtrim(line, chr(13)) AS line, seq
    FROM (SELECT run_dir, filename, unnest(lines) AS line, generate_subscripts(lines, 1) AS seq FROM split)
), docs AS (
    SELECT run_dir, filename, seq, line::JSON AS doc
    FROM lines
    WHERE json_valid(line) AND json_type(line) = 'OBJECT' AND json_type(line, '$.event') = 'VARCHAR'
)
SELECT
    run_dir,
    filename AS trace_file,
    seq,
    TRY_CAST(json_extract_string(doc, '$.t') AS DOUBLE) AS t,
    json_extract_string(doc, '$.run_id') AS trace_run_id,
    json_extract_string(doc, '$.event') AS event,
    json_extract_string(doc, '$.attempt_id') AS attempt_id,
    json_extract_string(doc, '$.group_id') AS group_id,
    json_extract_string(doc, '$.prompt_id') AS prompt_id,
    v1.trace_int(json_extract_string(doc, '$.generation_index')) AS generation_index,
    v1.trace_int(json_extract_string(doc, '$.version')) AS version,
    v1.trace_int(json_extract_string(doc, '$.tokens')) AS tokens,
    json_extract_string(doc, '$.reason') AS reason,
    v1.trace_int(json_extract_string(doc, '$.replaced_version')) AS replaced_version,
    v1.trace_int(json_extract_string(doc, '$.new_version')) AS new_version,
    CASE WHEN json_type(doc, '$.calls') = 'ARRAY' THEN list_filter(
        list_transform(
            CAST(json_extract(doc, '$.calls') AS JSON[]),
            lambda c: {'attempt_id': CASE WHEN json_type(c) = 'ARRAY' THEN json_extract_string(c, '$[0]') END,
                       'tokens_so_far': CASE WHEN json_type(c) = 'ARRAY' THEN v1.trace_int(json_extract_string(c, '$[1]')) END}),
        lambda c: c.attempt_id IS NOT NULL AND c.tokens_so_far IS NOT NULL) END AS calls,
    v1.trace_int(json_extract_string(doc, '$.step')) AS step,
    CASE WHEN json_type(doc, '$.tokens_by_version') = 'OBJECT' THEN list_filter(
        list_transform(
            map_entries(CAST(json_extract(doc, '$.tokens_by_version') AS MAP(VARCHAR, VARCHAR))),
            lambda e: {'version': v1.trace_int(e.key), 'tokens': v1.trace_int(e.value)}),
        lambda e: e.version IS NOT NULL AND e.tokens IS NOT NULL) END AS tokens_by_version,
    v1.trace_int(json_extract_string(doc, '$.trained_version')) AS trained_version,
    json_extract_string(doc, '$.path') AS path,
    doc AS data
FROM docs;
