-- name: ui_series_json
-- kind: query
-- depends: (the rows of ui_series registered as the relation series)
-- doc: ui_series' rows as the dashboard sends them: one JSON object of columns per run and metric,
-- doc: each a list in bin order, and the bins holding NaN/inf as a short list of {step, n}. Written
-- doc: by DuckDB, since encoding a 10-run chart's numbers one by one in Python costs more than
-- doc: computing them. No parameters.
-- columns: run_id VARCHAR, metric VARCHAR, columns VARCHAR (JSON)

SELECT
    run_id,
    metric,
    CAST(to_json({
        'bin': list(bin ORDER BY bin),
        'n': list(n ORDER BY bin),
        'x_min': list(x_min ORDER BY bin),
        'step_min': list(step_min ORDER BY bin),
        'v_min': list(v_min ORDER BY bin),
        'x_max': list(x_max ORDER BY bin),
        'step_max': list(step_max ORDER BY bin),
        'v_max': list(v_max ORDER BY bin),
        'x_mean': list(x_mean ORDER BY bin),
        'v_mean': list(v_mean ORDER BY bin),
        'nonfinite': coalesce(list({'step': nonfinite_step, 'n': n_nonfinite} ORDER BY bin) FILTER (WHERE n_nonfinite > 0), [])
    }) AS VARCHAR) AS columns
FROM series
GROUP BY run_id, metric
ORDER BY run_id, metric
