-- name: samples
-- kind: view
-- depends: src_samples, src_manifest
-- doc: Captured samples of every rank (rank sub-recordings merged in), one row per sample,
-- doc: with why it was kept (capture_reason: top_k, bottom_k, random or all).
-- columns: run_id VARCHAR, rank BIGINT, step BIGINT, sample_id VARCHAR, prompt_text VARCHAR,
-- columns: completion_text VARCHAR, completion_token_ids BIGINT[], reward_total DOUBLE,
-- columns: advantage DOUBLE, logprob_mean DOUBLE, kl_contribution DOUBLE, completion_len BIGINT,
-- columns: truncated BOOLEAN, group_id VARCHAR, capture_reason VARCHAR,
-- columns: "reward_component.<name>" DOUBLE, "extra.<name>" DOUBLE

CREATE OR REPLACE VIEW v1.samples AS
SELECT
    coalesce(m.run_id, regexp_extract(s.run_dir, '[^/]*$', 0)) AS run_id,
    s.rank,
    s.* EXCLUDE (rec_dir, run_dir, rank, filename)
FROM v1.src_samples AS s
LEFT JOIN v1.src_manifest AS m ON m.run_dir = s.run_dir;
