-- name: ui_series_json
-- kind: query
-- depends: (a relation named series with ui_series' columns: ui_series or ui_series_files as a CTE)
-- doc: ui_series' rows as the dashboard sends them: one JSON object of columns per run and metric,
-- doc: each a list in bin order, and the bins holding NaN/inf as a short list of {step, n}. Written
-- doc: by DuckDB, since encoding a 10-run chart's numbers one by one in Python costs more than
-- doc: computing them. Each series' bins are gathered once, as one list of structs in bin order,
-- doc: and split into columns from it: one ordered aggregate per series instead of one per column.
-- doc: No parameters.
-- columns: run_id VARCHAR, metric VARCHAR, columns VARCHAR (JSON)

SELECT
    run_id,
    metric,
    CAST(to_json({
        'bin': [b.bin FOR b IN bins],
        'n': [b.n FOR b IN bins],
        'x_min': [b.x_min FOR b IN bins],
        'step_min': [b.step_min FOR b IN bins],
        'v_min': [b.v_min FOR b IN bins],
        'x_max': [b.x_max FOR b IN bins],
        'step_max': [b.step_max FOR b IN bins],
        'v_max': [b.v_max FOR b IN bins],
        'x_mean': [b.x_mean FOR b IN bins],
        'v_mean': [b.v_mean FOR b IN bins],
        'nonfinite': nonfinite
    }) AS VARCHAR) AS columns
FROM (
    SELECT
        run_id,
        metric,
        list({'bin': bin, 'n': n, 'x_min': x_min, 'step_min': step_min, 'v_min': v_min, 'x_max': x_max,
              'step_max': step_max, 'v_max': v_max, 'x_mean': x_mean, 'v_mean': v_mean} ORDER BY bin) AS bins,
        coalesce(list({'step': nonfinite_step, 'n': n_nonfinite} ORDER BY bin) FILTER (WHERE n_nonfinite > 0), []) AS nonfinite
    FROM series
    GROUP BY run_id, metric
)
ORDER BY run_id, metric
