-- name: doctor_metric_floors
-- kind: feature
-- depends: (none)
-- doc: The smallest change in each metric that counts as a change at all. A robust z divides by
-- doc: the baseline's spread; a series that sat perfectly flat early (a fraction pinned at 0, no
-- doc: NaNs yet) would otherwise turn the first wiggle into an enormous z. Fractions move in
-- doc: hundredths, counts in units; metrics whose scale depends on the model have no floor here
-- doc: and use 5% of their own baseline level instead.
-- columns: metric VARCHAR, abs_floor DOUBLE

CREATE OR REPLACE VIEW v1.doctor_metric_floors AS
SELECT metric, CAST(abs_floor AS DOUBLE) AS abs_floor  -- the literals are DECIMAL(4,3)
FROM (VALUES
    ('clip_fraction', 0.02),
    ('value_clip_fraction', 0.02),
    ('adv_zero_frac', 0.02),
    ('zero_variance_group_frac', 0.05),
    ('max_len_hit_frac', 0.02),
    ('truncation_rate', 0.02),
    ('eos_rate', 0.02),
    ('repetition_rate', 0.02),
    ('value_explained_variance', 0.05),
    ('nan_count', 0.5),
    ('inf_count', 0.5),
    ('ratio_mean', 0.01),
    ('ratio_p95', 0.01),
    ('batch_age', 0.25),
    ('logprob_mismatch', 0.002)
) AS floors(metric, abs_floor);
