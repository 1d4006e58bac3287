-- name: report_samples
-- kind: query
-- depends: samples
-- doc: The samples the HTML report embeds for one run (all of them would not fit in one file):
-- doc: the $n_extreme best and worst by reward_total over the run, the $per_range best and worst in
-- doc: each of $ranges equal step ranges, and the samples findings cite ($cited sample ids). Texts
-- doc: are cut at $max_chars characters (prompt_chars and completion_chars give the full length).
-- doc: Ranking reads no text; only the chosen rows' texts are fetched.
-- doc: Parameters: $run_id VARCHAR, $n_extreme, $ranges, $per_range, $max_chars BIGINT,
-- doc: $cited VARCHAR[].
-- columns: step BIGINT, rank BIGINT, sample_id VARCHAR, reward_total .. capture_reason,
-- columns: step_range BIGINT, top_rank BIGINT, bottom_rank BIGINT, range_top_rank BIGINT,
-- columns: range_bottom_rank BIGINT, cited BOOLEAN, prompt VARCHAR, completion VARCHAR,
-- columns: prompt_chars BIGINT, completion_chars BIGINT, "reward_component.<name>" DOUBLE

WITH keys AS (
    SELECT step, rank, sample_id, reward_total
    FROM v1.samples
    WHERE run_id = $run_id
),
extent AS (
    SELECT min(step) AS lo, max(step) AS hi FROM keys
),
in_range AS (
    SELECT k.*, (k.step - e.lo) * $ranges // (e.hi - e.lo + 1) AS step_range
    FROM keys AS k, extent AS e
),
ranked AS (
    SELECT
        *,
        row_number() OVER (ORDER BY reward_total DESC NULLS LAST, step, rank, sample_id) AS top_rank,
        row_number() OVER (ORDER BY reward_total ASC NULLS LAST, step, rank, sample_id) AS bottom_rank,
        row_number() OVER (PARTITION BY step_range ORDER BY reward_total DESC NULLS LAST, step, rank, sample_id) AS range_top_rank,
        row_number() OVER (PARTITION BY step_range ORDER BY reward_total ASC NULLS LAST, step, rank, sample_id) AS range_bottom_rank,
        list_contains($cited, sample_id) AS cited
    FROM in_range
),
chosen AS (
    SELECT * EXCLUDE (reward_total)
    FROM ranked
    WHERE cited
       OR (reward_total IS NOT NULL AND least(top_rank, bottom_rank) <= $n_extreme)
       OR (reward_total IS NOT NULL AND least(range_top_rank, range_bottom_rank) <= $per_range)
)
SELECT
    c.*,
    s.* EXCLUDE (run_id, step, rank, sample_id, prompt_text, completion_text, completion_token_ids),
    left(s.prompt_text, $max_chars) AS prompt,
    left(s.completion_text, $max_chars) AS completion,
    length(s.prompt_text) AS prompt_chars,
    length(s.completion_text) AS completion_chars
FROM chosen AS c
JOIN v1.samples AS s
  ON s.run_id = $run_id AND s.step = c.step AND s.rank = c.rank AND s.sample_id = c.sample_id
ORDER BY c.step, c.rank, c.sample_id
