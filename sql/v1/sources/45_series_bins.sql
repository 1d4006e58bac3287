-- name: series_bins
-- kind: source
-- depends: (the calling query's relations named by rows and extent)
-- doc: A table macro: the dashboard's min/max-per-bin downsampling, the one definition that
-- doc: ui_series (over the views) and ui_series_files (over the step files) both call, so the two
-- doc: ways of reading a chart cannot bin differently. DuckDB-only (COLUMNS, UNPIVOT, query_table)
-- doc: and reads no file: a source because sources are the DuckDB-only macros, never transpiled.
-- doc: rows names a relation (a CTE of the calling query) with run_key, step BIGINT, x DOUBLE and
-- doc: one DOUBLE column per name in metrics; extent names a one-row relation with lo and hi.
-- doc: [lo, hi] is cut into bins bins of equal x width; per run_key, metric and bin: the smallest
-- doc: and the largest finite value with the x and step where each occurs (a one-step spike
-- doc: survives any zoom), the mean of the finite values at their mean x, and the count of
-- doc: non-finite values (NaN/inf) with the first step holding one. Bins without a value are left
-- doc: out. Every metric is aggregated side by side (one struct per metric column) and unpivoted
-- doc: only then: one pass over the rows whatever the number of metrics.
-- columns: (macro) v1.series_bins(rows, extent, metrics, bins) -> run_key, metric VARCHAR,
-- columns: bin BIGINT, n BIGINT, x_min DOUBLE, step_min BIGINT, v_min DOUBLE, x_max DOUBLE,
-- columns: step_max BIGINT, v_max DOUBLE, x_mean DOUBLE, v_mean DOUBLE, n_nonfinite BIGINT,
-- columns: nonfinite_step BIGINT

CREATE OR REPLACE MACRO v1.series_bins(rows, extent, metrics, bins) AS TABLE
WITH per_bin AS (
    -- one struct of figures per metric column, named after it; lo and hi carry where the
    -- smallest and the largest finite value occur
    SELECT
        r.run_key,
        CASE WHEN e.hi > e.lo THEN least(floor((r.x - e.lo) * bins / (e.hi - e.lo)), bins - 1) ELSE 0 END::BIGINT AS bin,
        {
            'n': count(COLUMNS(metrics)),
            'lo': arg_min({'x': r.x, 'step': r.step, 'v': COLUMNS(metrics)}, CASE WHEN isfinite(COLUMNS(metrics)) THEN COLUMNS(metrics) END),
            'hi': arg_max({'x': r.x, 'step': r.step, 'v': COLUMNS(metrics)}, CASE WHEN isfinite(COLUMNS(metrics)) THEN COLUMNS(metrics) END),
            'x_mean': avg(CASE WHEN isfinite(COLUMNS(metrics)) THEN r.x END),
            'v_mean': avg(CASE WHEN isfinite(COLUMNS(metrics)) THEN COLUMNS(metrics) END),
            'n_nonfinite': count(CASE WHEN NOT isfinite(COLUMNS(metrics)) THEN 1 END),
            'nonfinite_step': min(CASE WHEN NOT isfinite(COLUMNS(metrics)) THEN r.step END)
        }
    FROM query_table(rows) AS r, query_table(extent) AS e
    WHERE r.x BETWEEN e.lo AND e.hi
    GROUP BY ALL
)
SELECT
    l.run_key, l.metric, l.bin, l.s.n,
    l.s.lo.x AS x_min, l.s.lo.step AS step_min, l.s.lo.v AS v_min,
    l.s.hi.x AS x_max, l.s.hi.step AS step_max, l.s.hi.v AS v_max,
    l.s.x_mean, l.s.v_mean, l.s.n_nonfinite, l.s.nonfinite_step
FROM (UNPIVOT per_bin ON COLUMNS(* EXCLUDE (run_key, bin)) INTO NAME metric VALUE s) AS l
WHERE l.s.n > 0;
