-- name: sample_columns
-- kind: source
-- depends: (none)
-- doc: Every known SampleRecord column with its type and no rows, unioned under the shards.
-- doc: Kept in step with rlprobe/schemas.py (tests/test_sql_contract.py checks it).
-- columns: step, sample_id, rank, prompt_text, completion_text, completion_token_ids, reward_total, advantage, logprob_mean, kl_contribution, completion_len, truncated, group_id, capture_reason, filename

CREATE OR REPLACE VIEW v1.sample_columns AS
SELECT
    CAST(NULL AS BIGINT) AS step,
    CAST(NULL AS VARCHAR) AS sample_id,
    CAST(NULL AS BIGINT) AS rank,
    CAST(NULL AS VARCHAR) AS prompt_text,
    CAST(NULL AS VARCHAR) AS completion_text,
    CAST(NULL AS BIGINT[]) AS completion_token_ids,
    CAST(NULL AS DOUBLE) AS reward_total,
    CAST(NULL AS DOUBLE) AS advantage,
    CAST(NULL AS DOUBLE) AS logprob_mean,
    CAST(NULL AS DOUBLE) AS kl_contribution,
    CAST(NULL AS BIGINT) AS completion_len,
    CAST(NULL AS BOOLEAN) AS truncated,
    CAST(NULL AS VARCHAR) AS group_id,
    CAST(NULL AS VARCHAR) AS capture_reason,
    CAST(NULL AS VARCHAR) AS filename,
    -- DuckDB's read_* with allow_empty returns one column named "empty" when no file
    -- matches; naming it here lets the sources always drop it with EXCLUDE.
    CAST(NULL AS BOOLEAN) AS "empty"
WHERE false;
