-- name: runs
-- kind: view
-- depends: src_manifest, src_step_files, src_events
-- doc: One row per run below the root (rank-NNN sub-recordings are part of their run, not runs).
-- doc: status comes from the recorder's lifecycle events, the latest session winning: crashed
-- doc: (a crash or SIGTERM after the last open), interrupted (stopped with Ctrl-C after the last
-- doc: open), closed (a clean close after the last open, or a compacted recording with no
-- doc: lifecycle events, such as an import), otherwise live. A run killed with SIGKILL cannot
-- doc: say so and stays live; last_write_at tells how stale it is.
-- doc: name and tags are the manifest's (Recorder(name=, tags=), rlprobe import --name --tag);
-- doc: a run without a name is named by its run_id, one without tags has an empty list.
-- columns: run_id VARCHAR, run_dir VARCHAR, algorithm VARCHAR, model_name VARCHAR,
-- columns: world_size BIGINT, created_at VARCHAR, schema_version BIGINT, steps_recorded BIGINT,
-- columns: first_step BIGINT, last_step BIGINT, status VARCHAR, last_write_at DOUBLE,
-- columns: events BIGINT, name VARCHAR, tags VARCHAR[]

CREATE OR REPLACE VIEW v1.runs AS
WITH step_stats AS (
    -- per-file figures (step and wall_time only), never the run's metrics
    SELECT
        run_dir,
        sum(rows)::BIGINT AS steps_recorded,
        min(first_step) AS first_step,
        max(last_step) AS last_step,
        max(last_step_at) AS last_step_at,
        bool_or(compacted) AS compacted
    FROM v1.src_step_files
    WHERE rank = 0
    GROUP BY run_dir
), lifecycle AS (
    SELECT
        run_dir,
        max(CASE WHEN kind = 'recorder_open' THEN timestamp END) AS opened_at,
        max(CASE WHEN kind IN ('crash', 'sigterm') THEN timestamp END) AS crashed_at,
        max(CASE WHEN kind = 'interrupted' THEN timestamp END) AS interrupted_at,
        max(CASE WHEN kind = 'recorder_close' THEN timestamp END) AS closed_at,
        max(timestamp) AS last_event_at,
        count(*) AS events
    FROM v1.src_events
    WHERE rank = 0
    GROUP BY run_dir
), dirs AS (
    SELECT run_dir FROM v1.src_manifest
    UNION
    SELECT run_dir FROM step_stats
    UNION
    SELECT run_dir FROM lifecycle
)
SELECT
    coalesce(m.run_id, regexp_extract(d.run_dir, '[^/]*$', 0)) AS run_id,
    d.run_dir,
    m.algorithm,
    m.model_name,
    m.world_size,
    m.created_at,
    m.schema_version,
    coalesce(st.steps_recorded, 0) AS steps_recorded,
    st.first_step,
    st.last_step,
    CASE
        WHEN l.crashed_at IS NOT NULL AND l.crashed_at >= coalesce(l.opened_at, l.crashed_at) THEN 'crashed'
        WHEN l.interrupted_at IS NOT NULL AND l.interrupted_at >= coalesce(l.opened_at, l.interrupted_at) THEN 'interrupted'
        WHEN l.closed_at IS NOT NULL AND l.closed_at >= coalesce(l.opened_at, l.closed_at) THEN 'closed'
        WHEN l.opened_at IS NULL AND st.compacted THEN 'closed'
        ELSE 'live'
    END AS status,
    greatest(coalesce(st.last_step_at, l.last_event_at), coalesce(l.last_event_at, st.last_step_at)) AS last_write_at,
    coalesce(l.events, 0) AS events,
    coalesce(m.name, m.run_id, regexp_extract(d.run_dir, '[^/]*$', 0)) AS name,
    coalesce(m.tags, CAST([] AS VARCHAR[])) AS tags
FROM dirs AS d
LEFT JOIN v1.src_manifest AS m ON m.run_dir = d.run_dir
LEFT JOIN step_stats AS st ON st.run_dir = d.run_dir
LEFT JOIN lifecycle AS l ON l.run_dir = d.run_dir;
