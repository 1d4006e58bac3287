-- name: feat_policy_kl_positional
-- kind: feature
-- depends: steps, doctor_bin_width
-- doc: Where along the completion the KL to the reference sits, per run and bin (the bins of
-- doc: doctor_binned, from doctor_bin_width: at most 1,000 per run). Each logged kl_positional
-- doc: list (KL per position bucket) is turned into shares of its total (negative bucket values
-- doc: count as 0; lists with a non-finite entry or no positive total are left out): top1_share
-- doc: and top2_share (the largest and the two largest buckets' share), eff_buckets (1 / sum of
-- doc: squared shares: 8 for KL spread evenly over 8 buckets, 1 for all of it in one) and
-- doc: top_bucket (0-based index of the largest bucket), averaged over the bin (top_bucket: its
-- doc: most frequent value). kl_total is the mean bucket sum.
-- columns: run_id VARCHAR, bin BIGINT, step BIGINT, step_hi BIGINT, n BIGINT, n_buckets BIGINT,
-- columns: kl_total DOUBLE, top1_share DOUBLE, top2_share DOUBLE, eff_buckets DOUBLE, top_bucket BIGINT

CREATE OR REPLACE VIEW v1.feat_policy_kl_positional AS
WITH elems AS (
    SELECT run_id, step, unnest(kl_positional) AS x, unnest(range(len(kl_positional))) AS pos
    FROM v1.steps
    WHERE kl_positional IS NOT NULL AND len(kl_positional) >= 2
), per_list AS (
    SELECT
        run_id, step,
        count(*) AS n_buckets,
        sum(greatest(x, 0.0)) AS total,
        max(greatest(x, 0.0)) AS top1,
        list_sum(max(greatest(x, 0.0), 2)) AS top2,
        sum(greatest(x, 0.0) * greatest(x, 0.0)) AS sq,
        -- the lowest position among equal maxima: a tie gives the same answer on every engine
        arg_max(pos, struct_pack(kl := x, earlier := -pos)) AS top_bucket,
        sum(CASE WHEN x IS NULL OR isnan(x) OR isinf(x) THEN 1 ELSE 0 END) AS bad
    FROM elems
    GROUP BY run_id, step
    HAVING sum(CASE WHEN x IS NULL OR isnan(x) OR isinf(x) THEN 1 ELSE 0 END) = 0 AND sum(greatest(x, 0.0)) > 0
), per_step AS (
    SELECT
        l.run_id,
        l.step,
        CAST(floor((l.step - z.step_min) / z.width) AS BIGINT) AS bin,
        l.n_buckets,
        l.total,
        l.top1 / l.total AS top1,
        l.top2 / l.total AS top2,
        l.total * l.total / l.sq AS eff,
        l.top_bucket
    FROM per_list AS l
    JOIN v1.doctor_bin_width AS z ON z.run_id = l.run_id
)
SELECT
    run_id,
    bin,
    min(step) AS step,
    max(step) AS step_hi,
    count(*) AS n,
    max(n_buckets) AS n_buckets,
    avg(total) AS kl_total,
    avg(top1) AS top1_share,
    avg(top2) AS top2_share,
    avg(eff) AS eff_buckets,
    mode(top_bucket) AS top_bucket
FROM per_step
GROUP BY run_id, bin;
