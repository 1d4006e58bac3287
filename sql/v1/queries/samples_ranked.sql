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

-- The k rows are ranked without their text, then only their text is read: the step filter of
-- that second read reaches the parquet scan (sql/v1/sources/30_src_samples.sql), so a top 10 of
-- 800k samples reads ten samples' text, not all of it (over a few steps, where the step filter
-- leaves few rows anyway, the second scan costs more than it saves: it opens every file again;
-- benchmarks/samples_read.py measures both). Every
-- read of picked sees the same sample files (Python binds one listing per statement:
-- rlprobe.store.sample_files).
WITH picked AS NOT MATERIALIZED (
    SELECT
        *,
        CAST(CASE $sort
            WHEN 'reward' THEN reward_total
            WHEN 'advantage' THEN advantage
            WHEN 'kl' THEN kl_contribution
            WHEN 'length' THEN completion_len
            WHEN 'logprob' THEN logprob_mean
        END AS DOUBLE) AS sort_value,
        -- NaN sorts above every number in DuckDB: treat it like a missing value, never as the "top" sample
        (sort_value IS NULL OR isnan(sort_value)) AS missing,
        CASE WHEN $ascending THEN sort_value ELSE -sort_value END AS signed
    FROM v1.samples
    WHERE ($step_from IS NULL OR step >= $step_from)
      AND ($step_to IS NULL OR step <= $step_to)
), top AS MATERIALIZED (
    -- the k rows by their sort key alone (the few columns the ranking reads)
    SELECT run_id, step, rank, sample_id, missing, signed
    FROM picked
    ORDER BY missing, signed, run_id, step, rank, sample_id
    LIMIT $k
), numbered AS (
    -- rows sharing run_id, step, rank and sample_id (ids a caller chose) are told apart by rank
    -- order, on both sides of the join: the i-th of them in the top is the i-th of them by rank
    SELECT *, row_number() OVER (PARTITION BY run_id, step, rank, sample_id ORDER BY missing, signed) AS twin
    FROM top
), rows_ AS (
    -- the rest of those rows: the step filter of this join reaches the scan
    SELECT *, row_number() OVER (PARTITION BY run_id, step, rank, sample_id ORDER BY missing, signed) AS twin
    FROM picked
    WHERE step IN (SELECT step FROM top)
)
SELECT
    t.run_id, t.step, t.rank, t.sample_id, x.sort_value,
    x.reward_total, x.advantage, x.kl_contribution, x.completion_len, x.logprob_mean,
    x.truncated, x.group_id, x.capture_reason, x.prompt_text, x.completion_text,
    -- counted in a pass of its own: a window over the rows would hold them all, and keep the
    -- top from skipping row groups that cannot hold one of the k
    (SELECT count(*) FROM picked) AS matched,
    -- what is left: the run's "reward_component.<name>" and "extra.<name>" columns, if any
    x.* EXCLUDE (run_id, step, rank, sample_id, sort_value, reward_total, advantage, kl_contribution,
                 completion_len, logprob_mean, truncated, group_id, capture_reason, prompt_text,
                 completion_text, completion_token_ids, missing, signed, twin)
FROM numbered AS t
LEFT JOIN rows_ AS x
    ON x.step = t.step AND x.twin = t.twin AND x.run_id IS NOT DISTINCT FROM t.run_id
   AND x.rank IS NOT DISTINCT FROM t.rank AND x.sample_id IS NOT DISTINCT FROM t.sample_id
ORDER BY t.missing, t.signed, t.run_id, t.step, t.rank, t.sample_id
