-- name: series_bins
-- kind: source
-- depends: (the calling query's relation named by rows)
-- doc: Table macros: the dashboard's min/max-per-bin downsampling, the one definition that
-- doc: ui_series (over the views) and ui_series_files (over the step files) both call, so the two
-- doc: ways of reading a chart cannot bin differently. DuckDB-only (COLUMNS, UNPIVOT, query_table)
-- doc: and reads no file: a source because sources are the DuckDB-only macros, never transpiled.
-- doc: rows names a relation (a CTE of the calling query) with run_key, step BIGINT, x DOUBLE and
-- doc: one DOUBLE column per name in metrics; lo and hi are the x range (DOUBLE expressions: a
-- doc: constant, or a scalar subquery; constants let DuckDB drop the range filter where the
-- doc: files' statistics show every row inside, where a one-row relation joined to every row cost
-- doc: ~6% of a chart); axis is the x axis ('step': x is the step as a DOUBLE, or a time axis).
-- doc: [lo, hi] is cut into bins bins of equal x width; per run_key, metric and bin: the
-- doc: smallest and the largest finite value with the x and step where each occurs (a one-step
-- doc: spike survives any zoom), the mean of the finite values at their mean x, and the count of
-- doc: non-finite values (NaN/inf) with the first step holding one. Bins without a value are
-- doc: left out. Every metric is aggregated side by side (one struct per metric column) and
-- doc: unpivoted only then: one pass over the rows whatever the number of metrics.
-- doc: v1.bin_figures is one metric's aggregates.
-- columns: (macros) v1.series_bins(rows, lo, hi, metrics, bins, axis) -> run_key, metric VARCHAR,
-- columns: bin BIGINT, n BIGINT, x_min DOUBLE, step_min BIGINT, v_min DOUBLE, x_max DOUBLE,
-- columns: step_max BIGINT, v_max DOUBLE, x_mean DOUBLE, v_mean DOUBLE, n_nonfinite BIGINT,
-- columns: nonfinite_step BIGINT; v1.bin_figures(v, x, step, loc) -> STRUCT (aggregates)

-- One metric's figures in a bin, as aggregates of its rows; loc is what a row's value is located
-- by (its step, or its x and step). The aggregates are the cheap ones: each is computed for every
-- row of every charted metric, so it is most of a chart's time. min and max give the values and
-- arg_min_null/arg_max_null only where they are (a struct carrying the value too costs more);
-- sums and counts give the means (avg is slower and its result the same); count(v) with the
-- count of finite values gives the non-finite count.
CREATE OR REPLACE MACRO v1.bin_figures(v, x, step, loc) AS {
    'n': count(v),
    'n_finite': count(CASE WHEN isfinite(v) THEN v END),
    'v_min': min(CASE WHEN isfinite(v) THEN v END),
    'loc_min': arg_min_null(loc, CASE WHEN isfinite(v) THEN v END),
    'v_max': max(CASE WHEN isfinite(v) THEN v END),
    'loc_max': arg_max_null(loc, CASE WHEN isfinite(v) THEN v END),
    'v_sum': sum(CASE WHEN isfinite(v) THEN v END),
    'x_sum': sum(CASE WHEN isfinite(v) THEN x END),
    'nonfinite_step': min(CASE WHEN NOT isfinite(v) THEN step END)
};

CREATE OR REPLACE MACRO v1.series_bins(rows, lo, hi, metrics, bins, axis) AS TABLE
WITH placed AS (
    SELECT r.*, CASE WHEN hi > lo THEN least(floor((r.x - lo) * bins / (hi - lo)), bins - 1) ELSE 0 END::BIGINT AS bin
    FROM query_table(rows) AS r
    WHERE r.x BETWEEN lo AND hi
),
-- Two ways to say where a value occurs, one per kind of axis. On the step axis x is the step,
-- so the step alone locates a value (a BIGINT argument: a quarter cheaper than the struct the
-- time axes need).
by_step AS (
    SELECT run_key, bin, v1.bin_figures(COLUMNS(metrics), x, step, step)
    FROM placed
    GROUP BY ALL
),
by_time AS (
    SELECT run_key, bin, v1.bin_figures(COLUMNS(metrics), x, step, {'x': x, 'step': step})
    FROM placed
    GROUP BY ALL
),
step_rows AS (
    SELECT
        l.run_key, l.metric, l.bin, l.s.n,
        l.s.loc_min::DOUBLE AS x_min, l.s.loc_min AS step_min, l.s.v_min,
        l.s.loc_max::DOUBLE AS x_max, l.s.loc_max AS step_max, l.s.v_max,
        l.s.x_sum / l.s.n_finite AS x_mean, l.s.v_sum / l.s.n_finite AS v_mean,
        l.s.n - l.s.n_finite AS n_nonfinite, l.s.nonfinite_step
    FROM (UNPIVOT by_step ON COLUMNS(* EXCLUDE (run_key, bin)) INTO NAME metric VALUE s) AS l
    WHERE l.s.n > 0
),
time_rows AS (
    SELECT
        l.run_key, l.metric, l.bin, l.s.n,
        l.s.loc_min.x AS x_min, l.s.loc_min.step AS step_min, l.s.v_min,
        l.s.loc_max.x AS x_max, l.s.loc_max.step AS step_max, l.s.v_max,
        l.s.x_sum / l.s.n_finite AS x_mean, l.s.v_sum / l.s.n_finite AS v_mean,
        l.s.n - l.s.n_finite AS n_nonfinite, l.s.nonfinite_step
    FROM (UNPIVOT by_time ON COLUMNS(* EXCLUDE (run_key, bin)) INTO NAME metric VALUE s) AS l
    WHERE l.s.n > 0
)
-- axis is a constant (a parameter or a literal), so the branch is picked by name while the query
-- is bound and the other is never bound at all: with every metric's aggregates expanded, binding
-- both was ~15 ms of a request for 8 metrics, even though only one ran
SELECT * FROM query_table(CASE WHEN axis = 'step' THEN 'step_rows' ELSE 'time_rows' END);
