-- name: feat_gen_text_repetition
-- kind: feature
-- depends: samples
-- doc: How repetitive the captured completions are, per run and sampled step. For at most 120
-- doc: evenly spaced steps with captured samples per run, the last 800 characters of each
-- doc: completion (a repetition loop takes over the end of a completion first) are split into
-- doc: lowercase words and cut into overlapping word 4-grams; a sample's ngram_rep is the share
-- doc: of its 4-grams that repeat an earlier one (1 - distinct / total; NULL under 8 words).
-- doc: Per step: the median and mean over the samples, looping_frac (share of samples with
-- doc: ngram_rep >= 0.5), truncated_frac (share flagged truncated) and the mean completion_len.
-- doc: Bounded work: at most 120 steps x the samples captured at them x ~150 words.
-- columns: run_id VARCHAR, step BIGINT, samples BIGINT, rep_samples BIGINT, ngram_rep_median DOUBLE,
-- columns: ngram_rep_mean DOUBLE, looping_frac DOUBLE, truncated_frac DOUBLE, completion_len_mean DOUBLE

CREATE OR REPLACE VIEW v1.feat_gen_text_repetition AS
WITH stepped AS (
    SELECT run_id, step, dense_rank() OVER (PARTITION BY run_id ORDER BY step) AS k
    FROM (SELECT DISTINCT run_id, step FROM v1.samples WHERE completion_text IS NOT NULL AND step IS NOT NULL)
), sized AS (
    SELECT run_id, step, k, max(k) OVER (PARTITION BY run_id) AS n_steps
    FROM stepped
), kept AS (
    SELECT run_id, step
    FROM sized
    WHERE (k - 1) % greatest(1, CAST(ceil(n_steps / 120.0) AS BIGINT)) = 0
), texts AS (
    SELECT
        s.run_id,
        s.step,
        row_number() OVER (PARTITION BY s.run_id, s.step ORDER BY s.sample_id) AS sample_no,
        s.truncated,
        s.completion_len,
        string_split(lower(right(s.completion_text, 800)), ' ') AS words
    FROM v1.samples AS s
    JOIN kept AS k ON k.run_id = s.run_id AND k.step = s.step
    WHERE s.completion_text IS NOT NULL
), words AS (
    SELECT run_id, step, sample_no, hash(unnest(words)) AS w, unnest(range(len(words))) AS pos
    FROM texts
    WHERE len(words) >= 8
), grams AS (
    SELECT
        run_id, step, sample_no,
        hash(w, lead(w, 1) OVER win, lead(w, 2) OVER win, lead(w, 3) OVER win) AS g,
        lead(w, 3) OVER win IS NOT NULL AS whole
    FROM words
    WINDOW win AS (PARTITION BY run_id, step, sample_no ORDER BY pos)
), distinct_grams AS (
    SELECT run_id, step, sample_no, g, count(*) AS times
    FROM grams
    WHERE whole
    GROUP BY run_id, step, sample_no, g
), per_sample AS (
    SELECT run_id, step, sample_no, 1.0 - count(*) / sum(times) AS rep
    FROM distinct_grams
    GROUP BY run_id, step, sample_no
)
SELECT
    t.run_id,
    t.step,
    count(*) AS samples,
    count(p.rep) AS rep_samples,
    median(p.rep) AS ngram_rep_median,
    avg(p.rep) AS ngram_rep_mean,
    avg(CASE WHEN p.rep >= 0.5 THEN 1.0 WHEN p.rep IS NOT NULL THEN 0.0 END) AS looping_frac,
    avg(CASE WHEN t.truncated THEN 1.0 WHEN t.truncated IS NOT NULL THEN 0.0 END) AS truncated_frac,
    avg(t.completion_len) AS completion_len_mean
FROM texts AS t
LEFT JOIN per_sample AS p ON p.run_id = t.run_id AND p.step = t.step AND p.sample_no = t.sample_no
GROUP BY t.run_id, t.step;
