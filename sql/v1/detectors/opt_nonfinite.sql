-- name: feat_opt_nonfinite
-- kind: feature
-- depends: steps
-- doc: The steps at which the numerics broke: the trainer counted NaN or Inf values (nan_count,
-- doc: inf_count), or the loss or a gradient norm itself was logged as NaN or Inf. One row per
-- doc: such step; a healthy run has none. loss_nonfinite and grad_nonfinite are NULL when the
-- doc: run did not log that field.
-- columns: run_id VARCHAR, step BIGINT, nan_count DOUBLE, inf_count DOUBLE,
-- columns: loss_nonfinite BOOLEAN, grad_nonfinite BOOLEAN

CREATE OR REPLACE VIEW v1.feat_opt_nonfinite AS
SELECT
    run_id,
    step,
    CAST(nan_count AS DOUBLE) AS nan_count,
    CAST(inf_count AS DOUBLE) AS inf_count,
    NOT isfinite(loss) AS loss_nonfinite,
    NOT (isfinite(grad_norm) AND isfinite(coalesce(grad_norm_post_clip, 0))) AS grad_nonfinite
FROM v1.steps
WHERE coalesce(nan_count, 0) > 0
   OR coalesce(inf_count, 0) > 0
   OR NOT coalesce(isfinite(loss), true)
   OR NOT coalesce(isfinite(grad_norm), true)
   OR NOT coalesce(isfinite(grad_norm_post_clip), true);
