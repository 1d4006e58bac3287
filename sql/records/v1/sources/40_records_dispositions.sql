-- name: records_dispositions
-- kind: source
-- depends: records_lines
-- doc: One row per disposition line (kind = disposition): a passed group leaving the completed
-- doc: queue as consumed (given to training) or expired (past the policy-lag limit).
-- columns: path VARCHAR, relpath VARCHAR, line_no BIGINT, run_dir VARCHAR, attempt VARCHAR,
-- columns: observation_id VARCHAR, disposition VARCHAR, staleness BIGINT

CREATE OR REPLACE TABLE records_dispositions AS
WITH parsed AS (
    SELECT *, json_transform(obj, '{"kind": "VARCHAR", "observation_id": "VARCHAR",
        "disposition": "VARCHAR", "staleness": "BIGINT"}') AS d
    FROM records_lines
    WHERE ok
)
SELECT
    path,
    relpath,
    line_no,
    run_dir,
    attempt,
    d.observation_id,
    d.disposition,
    d.staleness
FROM parsed
WHERE d.kind = 'disposition';
