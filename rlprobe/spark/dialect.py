"""A small sqlglot dialect for Spark SQL: sqlglot's own Spark dialect, plus the differences it
gets wrong (silently) when it transpiles rlprobe's DuckDB views.

Each fix is an entry in a table, as sqlglot's dialects do it. What each one is for:

- ``median(x)`` and sliding medians: Spark refuses ``median`` with a window frame, and
  ``percentile_approx`` would be approximate. ``percentile(x, 0.5)`` is exact (the same
  interpolated median as DuckDB) and accepts frames. ``quantile_cont(x, q)`` likewise becomes
  ``percentile(x, q)``: Spark's ``percentile_cont`` takes only the WITHIN GROUP form, no frames.
- ``list_median(list)``, ``list_sum(list)``: DuckDB list functions sqlglot passes through
  unchanged; Spark has no such functions. Both skip NULLs, as DuckDB's do.
- ``max(x, n)`` (DuckDB: the n largest values as a list): sqlglot drops ``n`` with a warning
  and Spark would return a scalar; here it is the first n of the sorted, NULL-free values.
- ``isinf``/``isfinite``: no such Spark functions; ``isnan``: Spark returns false for NULL
  where DuckDB returns NULL (``NOT isnan(x)`` would keep NULL rows).
- Result types DuckDB gives and Spark does not: ``row_number()`` and the other ranking windows
  are BIGINT (Spark: INT), ``range(n)`` lists BIGINT (Spark's ``sequence(0, n)``: INT), and
  ``avg`` of a DECIMAL (``avg(CASE WHEN ... THEN 1.0 ELSE 0.0 END)``) a DOUBLE where Spark keeps a
  DECIMAL rounded to a few digits; every ``avg`` argument is cast to DOUBLE, which changes
  nothing for the other types.
- ``hash(...)``: Spark's ``hash`` is 32-bit; ``xxhash64`` keeps collisions as rare as DuckDB's
  64-bit hash. The views only compare hashes for equality, never their values.
- Several ``unnest(...)`` in one select list, or one nested in an expression: Spark allows one
  generator per select list and none inside expressions. They become one
  ``LATERAL VIEW INLINE(ARRAYS_ZIP(...))``, which pairs the lists by position exactly as
  DuckDB's parallel unnests do (the shorter padded with NULLs).

``len(list)`` (``ARRAY_SIZE``, NULL for NULL where Spark's ``SIZE`` gives -1 outside ANSI mode)
is fixed before generation, in ``rlprobe.spark.transpile``, because it needs the
argument's type: sqlglot reads DuckDB's ``len`` as string ``LENGTH``, which Spark would apply to
the list cast to a string.
"""

from __future__ import annotations

from sqlglot import exp, transforms
from sqlglot.dialects.dialect import sequence_sql
from sqlglot.dialects.spark import Spark
from sqlglot.generators.spark import SparkGenerator

_INF = "CAST('Infinity' AS DOUBLE)"


def _unnests_to_lateral_view(expression: exp.Expression) -> exp.Expression:
    """Move the unnests of a select list into one LATERAL VIEW INLINE(ARRAYS_ZIP(...))."""
    if not isinstance(expression, exp.Select):
        return expression
    explodes = [e for p in expression.expressions for e in p.find_all(exp.Explode)]
    if not explodes:
        return expression
    if len(explodes) == 1 and isinstance(expression.expressions[0], exp.Explode | exp.Alias):
        only = explodes[0]
        if only.parent is expression or (isinstance(only.parent, exp.Alias) and only.parent.parent is expression):
            return expression  # one top-level generator: Spark takes it as it is
    args: list[exp.Expression] = []
    for e in explodes:
        if not any(a == e.this for a in args):
            args.append(e.this.copy())
    names = [f"_u{i}" for i in range(len(args))]
    for e in explodes:
        i = next(i for i, a in enumerate(args) if a == e.this)
        e.replace(exp.column(names[i], table="_unnested"))
    lateral = exp.Lateral(
        this=exp.Inline(this=exp.ArraysZip(expressions=args)),
        view=True,
        alias=exp.TableAlias(this=exp.to_identifier("_unnested"), columns=[exp.to_identifier(n) for n in names]),
    )
    expression.append("laterals", lateral)
    return expression


def _list_median(self: SparkGenerator, arg: exp.Expression) -> str:
    values = self.sql(arg)
    middle = "s[SIZE(s) DIV 2]"
    return (
        f"ELEMENT_AT(TRANSFORM(ARRAY(ARRAY_SORT(FILTER({values}, v -> v IS NOT NULL))), s -> "
        f"CASE WHEN SIZE(s) = 0 THEN NULL WHEN SIZE(s) % 2 = 1 THEN {middle} "
        f"ELSE (s[SIZE(s) DIV 2 - 1] + {middle}) / 2 END), 1)"
    )


def _list_sum(self: SparkGenerator, arg: exp.Expression) -> str:
    return (
        f"AGGREGATE(FILTER({self.sql(arg)}, v -> v IS NOT NULL), CAST(NULL AS DOUBLE), "
        "(acc, v) -> COALESCE(acc, 0) + v)"
    )


def _max(self: SparkGenerator, expression: exp.Max) -> str:
    count = expression.args.get("count")
    if count is None:
        return self.func("MAX", expression.this, *expression.expressions)
    return f"SLICE(SORT_ARRAY(COLLECT_LIST({self.sql(expression.this)}), FALSE), 1, {self.sql(count)})"


def _bigint(e: exp.Expression | None) -> exp.Expression | None:
    return e if e is None else exp.cast(e.copy(), exp.DType.BIGINT)


def _range(self: SparkGenerator, expression: exp.GenerateSeries) -> str:
    bounds = expression.copy()
    bounds.set("start", _bigint(expression.args.get("start")))
    bounds.set("end", _bigint(expression.args.get("end")))
    return sequence_sql(self, bounds)


_RANKING = (exp.RowNumber, exp.Rank, exp.DenseRank, exp.Ntile)

_ANONYMOUS = {
    "LIST_MEDIAN": lambda self, e: _list_median(self, e.expressions[0]),
    "LIST_SUM": lambda self, e: _list_sum(self, e.expressions[0]),
    "ISFINITE": lambda self, e: f"ABS({self.sql(e.expressions[0])}) < {_INF}",
    "HASH": lambda self, e: self.func("XXHASH64", *e.expressions),
}


class RlprobeSpark(Spark):
    """Spark SQL as rlprobe's portable views need it (Spark >= 3.5)."""

    class Generator(SparkGenerator):
        TRANSFORMS = {
            **SparkGenerator.TRANSFORMS,
            exp.Median: lambda self, e: self.func("PERCENTILE", e.this, exp.Literal.number(0.5)),
            exp.PercentileCont: lambda self, e: self.func("PERCENTILE", e.this, e.expression),
            # SIZE(NULL) is -1 unless ANSI mode is on; ARRAY_SIZE(NULL) is NULL, as DuckDB's len()
            # and both lengths BIGINT, DuckDB's type (Spark's are INT)
            exp.ArraySize: lambda self, e: f"CAST({self.func('ARRAY_SIZE', e.this)} AS BIGINT)",
            exp.Length: lambda self, e: f"CAST({self.func('LENGTH', e.this)} AS BIGINT)",
            exp.Max: _max,
            exp.Avg: lambda self, e: self.func("AVG", exp.cast(e.this.copy(), exp.DType.DOUBLE)),
            exp.GenerateSeries: _range,
            exp.IsInf: lambda self, e: f"ABS({self.sql(e.this)}) = {_INF}",
            exp.IsNan: lambda self, e: f"IF({self.sql(e.this)} IS NULL, NULL, ISNAN({self.sql(e.this)}))",
            exp.Select: transforms.preprocess(
                [
                    _unnests_to_lateral_view,
                    transforms.eliminate_qualify,
                    transforms.eliminate_distinct_on,
                    transforms.unnest_to_explode,
                    transforms.any_to_exists,
                ]
            ),
        }

        def window_sql(self, expression: exp.Window) -> str:
            """Ranking windows as BIGINT, DuckDB's type (Spark's row_number() is an INT)."""
            sql = super().window_sql(expression)
            if isinstance(expression.this, _RANKING) and not isinstance(expression.parent, exp.Cast):
                return f"CAST({sql} AS BIGINT)"
            return sql

        def anonymous_sql(self, expression: exp.Anonymous) -> str:
            """Spark spellings of the DuckDB functions sqlglot passes through by name."""
            fix = _ANONYMOUS.get(expression.name.upper())
            return fix(self, expression) if fix else super().anonymous_sql(expression)
