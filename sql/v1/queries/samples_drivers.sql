-- name: samples_drivers
-- kind: query
-- depends: samples
-- doc: The captured samples of steps [$step - $window, $step + $window] ranked by |advantage|,
-- doc: the weight each sample's log-probability gradient gets in a policy-gradient update:
-- doc: the samples that moved the policy most around a step. weight_share is a sample's
-- doc: |advantage| over the sum of |advantage| of the captured samples in the window (captured
-- doc: samples are a selection, so it is a share of what was kept, not of the batch).
-- doc: Samples without an advantage come last. $k limits the rows; matched counts them all.
-- columns: run_id VARCHAR, step BIGINT, step_offset BIGINT, rank BIGINT, sample_id VARCHAR,
-- columns: advantage DOUBLE, abs_advantage DOUBLE, weight_share DOUBLE, reward_total DOUBLE,
-- columns: kl_contribution DOUBLE, completion_len BIGINT, logprob_mean DOUBLE, truncated BOOLEAN,
-- columns: group_id VARCHAR, capture_reason VARCHAR, prompt_text VARCHAR, completion_text VARCHAR,
-- columns: matched BIGINT, with_advantage BIGINT

WITH win AS (
    SELECT
        *,
        CASE WHEN isnan(advantage) THEN NULL ELSE abs(advantage) END AS abs_advantage
    FROM v1.samples
    WHERE step BETWEEN $step - $window AND $step + $window
)
SELECT
    run_id, step, step - $step AS step_offset, rank, sample_id,
    advantage, abs_advantage,
    abs_advantage / nullif(sum(abs_advantage) OVER (PARTITION BY run_id), 0) AS weight_share,
    reward_total, kl_contribution, completion_len, logprob_mean, truncated,
    group_id, capture_reason, prompt_text, completion_text,
    count(*) OVER () AS matched,
    count(abs_advantage) OVER () AS with_advantage
FROM win
ORDER BY abs_advantage DESC NULLS LAST, abs(step - $step), run_id, step, rank, sample_id
LIMIT $k
