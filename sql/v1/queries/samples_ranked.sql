-- name: samples_ranked
-- kind: query
-- depends: samples
-- doc: Captured samples in steps [$step_from, $step_to] (NULL = open end), ranked by one of a
-- doc: closed set of sort keys ($sort: reward, advantage, kl, length, logprob), highest first
-- doc: unless $ascending; samples without a value for the key come last. Ties break on step,
-- doc: rank, sample_id so the same call always returns the same rows. $k limits the rows;
-- doc: matched counts every sample in the range, before the limit.
-- columns: run_id VARCHAR, step BIGINT, rank BIGINT, sample_id VARCHAR, sort_value DOUBLE,
-- columns: reward_total DOUBLE, advantage DOUBLE, kl_contribution DOUBLE, completion_len BIGINT,
-- columns: logprob_mean DOUBLE, truncated BOOLEAN, group_id VARCHAR, capture_reason VARCHAR,
-- columns: prompt_text VARCHAR, completion_text VARCHAR, matched BIGINT,
-- columns: "reward_component.<name>" DOUBLE, "extra.<name>" DOUBLE

WITH picked AS (
    SELECT
        *,
        CAST(CASE $sort
            WHEN 'reward' THEN reward_total
            WHEN 'advantage' THEN advantage
            WHEN 'kl' THEN kl_contribution
            WHEN 'length' THEN completion_len
            WHEN 'logprob' THEN logprob_mean
        END AS DOUBLE) AS sort_value
    FROM v1.samples
    WHERE ($step_from IS NULL OR step >= $step_from)
      AND ($step_to IS NULL OR step <= $step_to)
)
SELECT
    run_id, step, rank, sample_id, sort_value,
    reward_total, advantage, kl_contribution, completion_len, logprob_mean,
    truncated, group_id, capture_reason, prompt_text, completion_text,
    count(*) OVER () AS matched,
    -- what is left: the run's "reward_component.<name>" and "extra.<name>" columns, if any
    picked.* EXCLUDE (run_id, step, rank, sample_id, sort_value, reward_total, advantage, kl_contribution,
                      completion_len, logprob_mean, truncated, group_id, capture_reason, prompt_text,
                      completion_text, completion_token_ids)
FROM picked
-- NaN sorts above every number in DuckDB: treat it like a missing value, never as the "top" sample
ORDER BY
    (sort_value IS NULL OR isnan(sort_value)),
    CASE WHEN $ascending THEN sort_value ELSE -sort_value END,
    run_id, step, rank, sample_id
LIMIT $k
