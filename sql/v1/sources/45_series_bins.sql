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
-- doc: v1.bin_figures is one metric's aggregates. clean names the metrics (a subset of metrics,
-- doc: possibly empty) that the caller knows to be non-NULL and finite in every row of rows: their
-- doc: figures come from v1.clean_figures, the same aggregates of the same values in the same order
-- doc: without the CASEs that leave NULL/NaN/inf out (a fifth of a chart's time), so the same bits.
-- columns: (macros) v1.series_bins(rows, lo, hi, metrics, clean, bins, axis) -> run_key, metric VARCHAR,
-- columns: bin BIGINT, n BIGINT, x_min DOUBLE, step_min BIGINT, v_min DOUBLE, x_max DOUBLE,
-- columns: step_max BIGINT, v_max DOUBLE, x_mean DOUBLE, v_mean DOUBLE, n_nonfinite BIGINT,
-- columns: nonfinite_step BIGINT; v1.bin_figures(v, x, step, loc) and v1.clean_figures(v, x, step,
-- columns: loc) -> STRUCT (aggregates)

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

-- The same figures of a metric known to hold a finite value in every row (the caller checked): each
-- aggregate sees exactly the values bin_figures' CASEs would let through, in the same order, so
-- the results are the same bits. count(*) and sum(x) are the same expression for every clean
-- metric, and DuckDB computes an aggregate that occurs twice once.
CREATE OR REPLACE MACRO v1.clean_figures(v, x, step, loc) AS {
    'n': count(*),
    'n_finite': count(*),
    'v_min': min(v),
    'loc_min': arg_min_null(loc, v),
    'v_max': max(v),
    'loc_max': arg_max_null(loc, v),
    'v_sum': sum(v),
    'x_sum': sum(x),
    'nonfinite_step': NULL::BIGINT
};

CREATE OR REPLACE MACRO v1.series_bins(rows, lo, hi, metrics, clean, bins, axis) AS TABLE
WITH placed AS (
    SELECT r.*, CASE WHEN hi > lo THEN least(floor((r.x - lo) * bins / (hi - lo)), bins - 1) ELSE 0 END::BIGINT AS bin
    FROM query_table(rows) AS r
    WHERE r.x BETWEEN lo AND hi
),
-- Two ways to say where a value occurs, one per kind of axis (*_step, *_time). On the step axis
-- x is the step, so the step alone locates a value (a BIGINT argument: a quarter cheaper than the
-- struct the time axes need). And three ways to aggregate (dirty_*, clean_*, mixed_*): every
-- metric with bin_figures, every one with clean_figures, or each with its own; picked by name
-- like the axis below, because COLUMNS that names no column is an error while binding, so a
-- branch that would name none must never be bound.
dirty_step AS (
    SELECT run_key, bin, v1.bin_figures(COLUMNS(lambda c: list_contains(metrics, c)), x, step, step)
    FROM placed
    GROUP BY ALL
),
clean_step AS (
    SELECT run_key, bin, v1.clean_figures(COLUMNS(lambda c: list_contains(metrics, c)), x, step, step)
    FROM placed
    GROUP BY ALL
),
mixed_step AS (
    SELECT
        run_key, bin,
        v1.bin_figures(COLUMNS(lambda c: list_contains(metrics, c) AND NOT list_contains(clean, c)), x, step, step),
        v1.clean_figures(COLUMNS(lambda c: list_contains(clean, c)), x, step, step)
    FROM placed
    GROUP BY ALL
),
dirty_time AS (
    SELECT run_key, bin, v1.bin_figures(COLUMNS(lambda c: list_contains(metrics, c)), x, step, {'x': x, 'step': step})
    FROM placed
    GROUP BY ALL
),
clean_time AS (
    SELECT run_key, bin, v1.clean_figures(COLUMNS(lambda c: list_contains(metrics, c)), x, step, {'x': x, 'step': step})
    FROM placed
    GROUP BY ALL
),
mixed_time AS (
    SELECT
        run_key, bin,
        v1.bin_figures(COLUMNS(lambda c: list_contains(metrics, c) AND NOT list_contains(clean, c)), x, step, {'x': x, 'step': step}),
        v1.clean_figures(COLUMNS(lambda c: list_contains(clean, c)), x, step, {'x': x, 'step': step})
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
    FROM (UNPIVOT (FROM query_table(CASE WHEN len(clean) = 0 THEN 'dirty' WHEN len(list_filter(metrics, lambda m: NOT list_contains(clean, m))) = 0 THEN 'clean' ELSE 'mixed' END || '_step')) ON COLUMNS(* EXCLUDE (run_key, bin)) INTO NAME metric VALUE s) AS l
    WHERE l.s.n > 0
),
time_rows AS (
    SELECT
        l.run_key, l.metric, l.bin, l.s.n,
        l.s.loc_min.x AS x_min, l.s.loc_min.step AS step_min, l.s.v_min,
        l.s.loc_max.x AS x_max, l.s.loc_max.step AS step_max, l.s.v_max,
        l.s.x_sum / l.s.n_finite AS x_mean, l.s.v_sum / l.s.n_finite AS v_mean,
        l.s.n - l.s.n_finite AS n_nonfinite, l.s.nonfinite_step
    FROM (UNPIVOT (FROM query_table(CASE WHEN len(clean) = 0 THEN 'dirty' WHEN len(list_filter(metrics, lambda m: NOT list_contains(clean, m))) = 0 THEN 'clean' ELSE 'mixed' END || '_time')) ON COLUMNS(* EXCLUDE (run_key, bin)) INTO NAME metric VALUE s) AS l
    WHERE l.s.n > 0
)
-- axis is a constant (a parameter or a literal), so the branch is picked by name while the query
-- is bound and the other is never bound at all: with every metric's aggregates expanded, binding
-- both was ~15 ms of a request for 8 metrics, even though only one ran
SELECT * FROM query_table(CASE WHEN axis = 'step' THEN 'step_rows' ELSE 'time_rows' END);
