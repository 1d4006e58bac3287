-- name: events
-- kind: view
-- depends: src_events, src_manifest
-- doc: Sparse events of every rank: lifecycle (recorder_open, recorder_close, crash, sigterm),
-- doc: trainer events (train_begin, checkpoint, nan_detected, ...) and the recorder's own
-- doc: reports (bad_record, recorder_drops, write_failed). data is JSON.
-- columns: run_id VARCHAR, timestamp DOUBLE, kind VARCHAR, step BIGINT, rank BIGINT,
-- columns: message VARCHAR, data JSON

CREATE OR REPLACE VIEW v1.events AS
SELECT
    coalesce(m.run_id, regexp_extract(e.run_dir, '[^/]*$', 0)) AS run_id,
    e.timestamp,
    e.kind,
    e.step,
    e.rank,
    e.message,
    e.data
FROM v1.src_events AS e
LEFT JOIN v1.src_manifest AS m ON m.run_dir = e.run_dir;
