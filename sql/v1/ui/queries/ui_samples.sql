-- name: ui_samples
-- kind: query
-- depends: samples
-- doc: One page of a run page's sample browser: the samples of run $run_id within steps
-- doc: [$lo, $hi] (NULL: no bound), whose prompt or completion contains $q (any case; '' for
-- doc: all), only the ids in $cited when it is not NULL (the samples a finding cites), ordered by
-- doc: $order ('top' or 'bottom' by reward_total, else by step), $limit rows from $offset.
-- doc: matching counts every sample that matched. Ranking reads no text unless $q searches it;
-- doc: only the page's texts are fetched, cut at $max_chars characters (prompt_chars and
-- doc: completion_chars give the full length).
-- doc: Parameters: $run_id VARCHAR, $lo BIGINT, $hi BIGINT, $q VARCHAR, $cited VARCHAR[],
-- doc: $order VARCHAR, $limit BIGINT, $offset BIGINT, $max_chars BIGINT.
-- columns: matching BIGINT, sort_key BIGINT, step BIGINT, rank BIGINT, sample_id VARCHAR,
-- columns: reward_total .. capture_reason, prompt VARCHAR, completion VARCHAR,
-- columns: prompt_chars BIGINT, completion_chars BIGINT, "reward_component.<name>" DOUBLE

WITH matched AS (
    SELECT step, rank, sample_id, reward_total
    FROM v1.samples
    WHERE run_id = $run_id
      AND ($lo::BIGINT IS NULL OR step >= $lo::BIGINT)
      AND ($hi::BIGINT IS NULL OR step <= $hi::BIGINT)
      AND ($cited::VARCHAR[] IS NULL OR list_contains($cited::VARCHAR[], sample_id))
      AND ($q = '' OR strpos(lower(prompt_text), lower($q)) > 0 OR strpos(lower(completion_text), lower($q)) > 0)
),
page AS (
    SELECT
        step, rank, sample_id,
        count(*) OVER () AS matching,
        row_number() OVER (ORDER BY
            CASE WHEN $order = 'top' THEN -reward_total WHEN $order = 'bottom' THEN reward_total END NULLS LAST,
            step, rank, sample_id) AS sort_key
    FROM matched
    QUALIFY sort_key > $offset AND sort_key <= $offset + $limit
)
SELECT
    p.matching,
    p.sort_key,
    s.* EXCLUDE (run_id, prompt_text, completion_text, completion_token_ids),
    left(s.prompt_text, $max_chars) AS prompt,
    left(s.completion_text, $max_chars) AS completion,
    length(s.prompt_text) AS prompt_chars,
    length(s.completion_text) AS completion_chars
FROM page AS p
JOIN v1.samples AS s
  ON s.run_id = $run_id AND s.step = p.step AND s.rank = p.rank AND s.sample_id = p.sample_id
ORDER BY p.sort_key
