-- name: records_dispositions
-- kind: source
-- depends: records_lines
-- doc: One row per disposition line (kind = disposition): a passed group leaving the completed
-- doc: queue as consumed (given to training) or expired (past the policy-lag limit).
-- columns: path VARCHAR, relpath VARCHAR, line_no BIGINT, run_dir VARCHAR, attempt VARCHAR,
-- columns: observation_id VARCHAR, disposition VARCHAR, staleness BIGINT

CREATE OR REPLACE VIEW records_dispositions AS
SELECT
    path,
    relpath,
    line_no,
    run_dir,
    attempt,
    obj ->> '$.observation_id' AS observation_id,
    obj ->> '$.disposition' AS disposition,
    TRY_CAST(obj ->> '$.staleness' AS BIGINT) AS staleness
FROM records_lines
WHERE ok AND obj ->> '$.kind' = 'disposition';
