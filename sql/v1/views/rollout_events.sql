-- name: rollout_events
-- kind: view
-- depends: src_rollout_trace, src_manifest
-- doc: One row per rollout trace line (rollout_trace.jsonl in a run directory, or a trace file
-- doc: bound with rlprobe_rollout_traces): rollout attempts (rollout_dispatch, rollout_seal,
-- doc: rollout_refusal, rollout_abandon, rollout_resume), prompt groups (group_reserve,
-- doc: group_admit, group_seal, group_discard, group_publish), refit, train_step, weight_sync,
-- doc: checkpoint_publish, checkpoint_restore; names from other tools are kept. trace_run_id is
-- doc: the writing process's id (new in every process, so a resumed run's lines stay apart);
-- doc: seq is the line number in trace_file. Torn lines are dropped. Fields an event lacks are
-- doc: NULL; data is the whole line.
-- columns: run_id VARCHAR, trace_run_id VARCHAR, t DOUBLE, seq BIGINT, event VARCHAR,
-- columns: attempt_id VARCHAR, group_id VARCHAR, prompt_id VARCHAR, generation_index BIGINT,
-- columns: version BIGINT, tokens BIGINT, reason VARCHAR, replaced_version BIGINT,
-- columns: new_version BIGINT, calls STRUCT(attempt_id VARCHAR, tokens_so_far BIGINT)[],
-- columns: step BIGINT, tokens_by_version STRUCT("version" BIGINT, tokens BIGINT)[],
-- columns: trained_version BIGINT, path VARCHAR, data JSON, trace_file VARCHAR

CREATE OR REPLACE VIEW v1.rollout_events AS
SELECT
    coalesce(m.run_id, regexp_replace(regexp_extract(e.run_dir, '[^/]*$', 0), '\.jsonl$', '')) AS run_id,
    e.trace_run_id,
    e.t,
    e.seq,
    e.event,
    e.attempt_id,
    e.group_id,
    e.prompt_id,
    e.generation_index,
    e.version,
    e.tokens,
    e.reason,
    e.replaced_version,
    e.new_version,
    e.calls,
    e.step,
    e.tokens_by_version,
    e.trained_version,
    e.path,
    e.data,
    e.trace_file
FROM v1.src_rollout_trace AS e
LEFT JOIN v1.src_manifest AS m ON m.run_dir = e.run_dir;
