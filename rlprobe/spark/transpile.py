"""Turn rlprobe's portable views (sql/v<N>/views, sql/v<N>/detectors) into Spark SQL.

Only `kind: view` and `kind: feature` files are transpiled, never the sources: those read files
with DuckDB's readers and are rebuilt for Spark with spark.read (rlprobe.spark.sources).

Names: Spark temp views cannot live in a schema, so `v1.steps` becomes the temp view
`v1_steps` (every view, source and feature of contract v1), and the public views also get
their plain name (`steps` is `SELECT * FROM v1_steps`), as `main.steps` points at `v1.steps`
in DuckDB. References are rewritten on sqlglot's syntax tree, never on the SQL text.

Stars are expanded against the columns of the views they read (`s.* EXCLUDE (...)` has no
open-source Spark spelling), so the SQL is transpiled for one root's columns: a root where
somebody logged `reward_component.format` gets that column.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Mapping

import sqlglot
from sqlglot import exp
from sqlglot.optimizer.annotate_types import annotate_types
from sqlglot.optimizer.qualify import qualify

from rlprobe.spark.dialect import RlprobeSpark
from rlprobe.store import sqlfiles

# The sources rlprobe.spark.sources builds; a view that needs another one is not transpiled.
SPARK_SOURCES = ("src_manifest", "src_steps", "src_step_files", "src_samples", "src_events", "src_rollout_trace")
# Views whose SQL transpiles but which Spark cannot run at a useful speed, with the reason.
SPARK_TOO_SLOW: dict[str, str] = {}
# Views run as a chain of temp views, one per CTE, each cached: Spark inlines every reference to
# a CTE (DuckDB computes it once), and batch_age reads its CTEs many times each (ev 7 times,
# calls_ok 5, consumed 4, through correlated subqueries too), so as one query its plan holds about
# 1,400 scans of the trace source and takes minutes on a handful of lines.
SPLIT_CTES = ("batch_age",)
# DuckDB-only things a portable view must never use: they read files or session state.
_NOT_PORTABLE = re.compile(r"\b(getvariable|read_\w+|glob|parquet_scan|read_text)\s*\(", re.I)
_PLAIN = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")

Schema = Mapping[str, Mapping[str, str]]  # temp view name -> column -> DuckDB type text


class NotTranspilable(ValueError):
    """A portable view uses something that has no Spark equivalent here."""


@dataclass(frozen=True)
class SparkView:
    """One transpiled view: the temp view it creates, where it came from, and its SELECT.

    A view of SPLIT_CTES has parts: (temp view, SELECT) of each of its CTEs, in order, which
    select reads instead of the CTEs; each part is cached, so Spark computes it once."""

    name: str  # the Spark temp view, v1_<view>
    view: str  # the view it stands for, as DuckDB names it in schema v1
    source: sqlfiles.SqlFile
    select: str
    parts: tuple[tuple[str, str], ...] = ()

    @property
    def statements(self) -> list[str]:
        """The statements to run, in order, without their final semicolons: the parts first."""
        out: list[str] = []
        for name, select in self.parts:
            out += [f"CREATE OR REPLACE TEMPORARY VIEW {name} AS\n{select}", f"CACHE LAZY TABLE {name}"]
        return out + [f"CREATE OR REPLACE TEMPORARY VIEW {self.name} AS\n{self.select}"]

    @property
    def statement(self) -> str:
        """The statements, as `rlprobe sql --dialect spark` prints them."""
        return "\n\n".join(f"{s};" for s in self.statements)


def spark_name(name: str, version: int) -> str:
    """The temp view that stands for v<version>.<name> in Spark."""
    return f"v{version}_{name}"


def portable_files(version: int) -> tuple[list[sqlfiles.SqlFile], list[tuple[sqlfiles.SqlFile, str]]]:
    """The view and feature files to transpile, in order, and those left out with the reason."""
    by_name = {f.name: f for f in sqlfiles.load(version)}
    kept: dict[str, sqlfiles.SqlFile] = {}
    skipped: list[tuple[sqlfiles.SqlFile, str]] = []
    for f in sqlfiles.load(version):
        if f.kind not in ("view", "feature"):
            continue
        if f.name in SPARK_TOO_SLOW:
            skipped.append((f, SPARK_TOO_SLOW[f.name]))
            continue
        missing = [d for d in f.depends if d not in SPARK_SOURCES and d not in kept]
        if missing:
            why = ", ".join(
                d if by_name[d].kind == "source" else f"{d} (not transpiled)" for d in missing
            )
            skipped.append((f, f"needs {why}, which has no Spark source"))
            continue
        kept[f.name] = f
    return list(kept.values()), skipped


def _view_name(create: exp.Expression, f: sqlfiles.SqlFile) -> str:
    if not isinstance(create, exp.Create) or not isinstance(create.expression, exp.Query):
        raise NotTranspilable(f"{f.path}: expected one CREATE VIEW ... AS SELECT")
    return create.this.name


def _rename_tables(select: exp.Expression, version: int) -> None:
    prefix = f"v{version}"
    for table in list(select.find_all(exp.Table)):
        if table.db == prefix:
            table.set("this", exp.to_identifier(spark_name(table.name, version)))
            table.set("db", None)


def _arrays_get_size(select: exp.Expression) -> None:
    """DuckDB's len() of a list becomes SIZE(); sqlglot reads it as string LENGTH()."""
    for length in list(select.find_all(exp.Length)):
        if _is_list(length.this, select):
            length.replace(exp.ArraySize(this=length.this))


_INTEGERS = (exp.DType.TINYINT, exp.DType.SMALLINT, exp.DType.INT, exp.DType.BIGINT)


def _casts_round(select: exp.Expression) -> None:
    """DuckDB casts a DOUBLE to an integer by rounding half to even (2.5 -> 2, 2.7 -> 3) and a
    DECIMAL by rounding half away from zero; Spark truncates both (2.7 -> 2)."""
    for cast in list(select.find_all(exp.Cast)):
        source = cast.this.type
        if not cast.to.is_type(*_INTEGERS) or source is None or isinstance(cast.this, exp.Floor | exp.Ceil | exp.Round):
            continue  # floor(), ceil() and round() are whole already
        if source.is_type(exp.DType.DOUBLE, exp.DType.FLOAT):
            cast.set("this", exp.func("BROUND", cast.this.copy()))
        elif source.is_type(exp.DType.DECIMAL):
            cast.set("this", exp.Round(this=cast.this.copy()))


def _ctes_not_materialized(select: exp.Expression) -> None:
    """DuckDB's `WITH x AS MATERIALIZED (...)` (compute once) has no Spark spelling; Spark
    plans every reference to a CTE on its own, with the same rows."""
    for cte in select.find_all(exp.CTE):
        cte.set("materialized", None)


def _row_numbers_ordered(select: exp.Expression) -> None:
    """row_number() OVER () numbers rows in no order, which DuckDB allows and Spark refuses.
    Ordered by the other columns of its SELECT, every scan of the CTE numbers the rows alike:
    rows that tie are equal in every column, so which of them gets which number cannot matter."""
    for window in list(select.find_all(exp.Window)):
        if not isinstance(window.this, exp.RowNumber) or window.args.get("order") or window.args.get("alias"):
            continue  # ordered, or a named window (OVER w) whose WINDOW clause says how
        query = window.find_ancestor(exp.Select)
        keys = [
            exp.Ordered(this=(p.this if isinstance(p, exp.Alias) else p).copy(), nulls_first=False)
            for p in query.expressions
            if not p.find(exp.Window, exp.AggFunc)
        ]
        window.set("order", exp.Order(expressions=keys))


def _is_list(node: exp.Expression, root: exp.Expression) -> bool:
    if node.type and not node.type.is_type(exp.DType.UNKNOWN):
        return node.type.is_type(exp.DType.ARRAY)
    if isinstance(node, exp.Split | exp.Array | exp.GenerateSeries):
        return True
    if isinstance(node, exp.Column):
        # a CTE column whose type the annotator did not infer: look at its definition
        for cte in root.find_all(exp.CTE):
            if cte.alias_or_name == node.table:
                for projection in cte.this.expressions:
                    if projection.alias_or_name == node.name:
                        inner = projection.this if isinstance(projection, exp.Alias) else projection
                        return _is_list(inner, root)
    raise NotTranspilable(f"cannot tell whether {node.sql('duckdb')} is a list or a string (len())")


def _split_ctes(select: exp.Query, name: str) -> list[tuple[str, exp.Query]]:
    """Take the CTEs out of select: each becomes the query of a temp view <name>__<cte>, and
    the references to it (in later CTEs, in select) read that view under the CTE's name."""
    with_ = select.args.get("with_")
    if with_ is None:
        return []
    if with_.args.get("recursive"):
        raise NotTranspilable(f"{name}: a recursive WITH cannot be split into views")
    views: dict[str, str] = {}
    parts: list[tuple[str, exp.Query]] = []
    for cte in with_.expressions:
        body = cte.this.copy()
        _read_views(body, views)
        views[cte.alias_or_name] = f"{name}__{cte.alias_or_name}"
        parts.append((views[cte.alias_or_name], body))
    select.set("with_", None)
    _read_views(select, views)
    return parts


def _read_views(query: exp.Expression, views: Mapping[str, str]) -> None:
    if any(w.expressions for w in query.find_all(exp.With)):
        raise NotTranspilable("a CTE inside a CTE cannot be split into views")
    for table in list(query.find_all(exp.Table)):
        if table.args.get("db") or table.name not in views:
            continue
        if not table.alias:  # keep the CTE's name for the columns that are qualified with it
            table.set("alias", exp.TableAlias(this=exp.to_identifier(table.name)))
        table.set("this", exp.to_identifier(views[table.name]))


def _quote_names(select: exp.Expression) -> None:
    for ident in select.find_all(exp.Identifier):
        if not _PLAIN.match(ident.name):
            ident.set("quoted", True)


def transpile_file(f: sqlfiles.SqlFile, schema: Schema) -> SparkView:
    """The Spark SQL of one view or feature file, given the columns of the views it reads."""
    if _NOT_PORTABLE.search(f.sql):
        raise NotTranspilable(f"{f.path}: uses {_NOT_PORTABLE.search(f.sql).group(1)}(), which is DuckDB-only")
    create = sqlglot.parse_one(f.sql, read="duckdb")
    name = _view_name(create, f)
    select = create.expression
    _rename_tables(select, f.version)
    mapping = {t: dict(cols) for t, cols in schema.items()}
    select = qualify(
        select, schema=mapping, dialect="duckdb", quote_identifiers=False, identify=False,
        validate_qualify_columns=False,
    )
    annotate_types(select, schema=mapping, dialect="duckdb")
    _arrays_get_size(select)
    _casts_round(select)
    _ctes_not_materialized(select)
    _row_numbers_ordered(select)
    _quote_names(select)
    target = spark_name(name, f.version)
    parts = _split_ctes(select, target) if name in SPLIT_CTES else []
    return SparkView(
        target, name, f, select.sql(dialect=RlprobeSpark, pretty=True),
        tuple((part, q.sql(dialect=RlprobeSpark, pretty=True)) for part, q in parts),
    )


def public_aliases(version: int) -> list[str]:
    """The plain names (steps, samples, ...) that point at the newest contract's views."""
    return [f.name for f in sqlfiles.public_views(version)]
