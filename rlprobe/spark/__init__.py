"""rlprobe's views on Spark: sources read with spark.read, the portable views transpiled.

    from rlprobe.spark import register_views
    register_views(spark, "/data/runs")
    spark.sql("SELECT run_id, max(kl_mean) FROM steps GROUP BY run_id").show()

Temp views are named `v1_<name>` (every source, view and doctor feature of contract v1); the
public views also get their plain names (steps, samples, events, runs, manifest). pyspark is
imported only by these functions' callers, never by `import rlprobe`.
"""

from __future__ import annotations

import os
from typing import Any

from rlprobe.spark.transpile import SparkView, portable_files, public_aliases, spark_name, transpile_file

__all__ = ["SparkView", "column_types", "register_views", "spark_views"]


def _root(root: str | os.PathLike[str]) -> str:
    text = os.fspath(root)
    if "://" in text:
        return text.rstrip("/")
    from rlprobe.store import resolve

    return str(resolve(text).path)


def _duckdb_type(spark_type: Any) -> str:
    """A Spark column type as the DuckDB type text the transpiler's schema uses."""
    from sqlglot import exp

    return exp.DataType.build(spark_type.simpleString(), dialect="spark").sql("duckdb")


def column_types(df: Any) -> dict[str, str]:
    """Column name -> DuckDB type text of a Spark DataFrame (what the transpiler and tests compare)."""
    return {f.name: _duckdb_type(f.dataType) for f in df.schema.fields}


def register_views(spark: Any, root: str | os.PathLike[str], version: int | None = None) -> list[str]:
    """Register rlprobe's sources and views over root as temp views of spark; return their names."""
    from rlprobe.spark import sources
    from rlprobe.store import sqlfiles

    version = version or max(sqlfiles.versions())
    path = _root(root)
    schema: dict[str, dict[str, str]] = {}
    names: list[str] = []
    for source, build in sources.BUILDERS.items():
        name = spark_name(source, version)
        df = build(spark, path)
        df.createOrReplaceTempView(name)
        schema[name] = column_types(df)
        names.append(name)
    files, _skipped = portable_files(version)
    for f in files:
        view = transpile_file(f, schema)
        for part, select in view.parts:
            # a split view's CTEs: each computed once, when first read, and kept; checkpointed,
            # so that the parts after it plan over its rows, not over its whole plan again
            spark.sql(select).localCheckpoint(eager=False).createOrReplaceTempView(part)
        spark.sql(view.statements[-1])
        schema[view.name] = column_types(spark.table(view.name))
        names += [part for part, _select in view.parts] + [view.name]
    for alias in public_aliases(version):
        if spark_name(alias, version) in schema:
            spark.sql(f"CREATE OR REPLACE TEMPORARY VIEW {alias} AS SELECT * FROM {spark_name(alias, version)}")
            names.append(alias)
    return names


def spark_views(root: str | os.PathLike[str], version: int | None = None) -> str:
    """The transpiled views over root as a Spark SQL script (what `rlprobe sql --dialect spark` prints).

    The columns of root's sources come from DuckDB's views over it, so no Spark is needed; the
    sources themselves are not SQL on Spark: register them with rlprobe.spark.register_views.
    """
    from rlprobe.store import open_store, sqlfiles

    version = version or max(sqlfiles.versions())
    store = open_store(root)
    feature_sql = "\n".join(f.text for f in sqlfiles.load(version) if f.kind == "feature")
    store.con.execute(feature_sql)

    def describe(name: str) -> dict[str, str]:
        return {r[0]: r[1] for r in store.con.sql(f"DESCRIBE v{version}.{name}").fetchall()}

    from rlprobe.spark.sources import BUILDERS

    schema = {spark_name(s, version): describe(s) for s in BUILDERS}
    files, skipped = portable_files(version)
    lines = [
        f"-- rlprobe: views of contract v{version} over {store.target.path}, transpiled for Spark SQL.",
        f"-- Needs the temp views {', '.join(spark_name(s, version) for s in BUILDERS)} first:",
        "-- rlprobe.spark.register_views(spark, root) creates them with spark.read, then runs this.",
    ]
    for f, why in skipped:
        lines.append(f"-- left out: {f.name} ({why})")
    for f in files:
        view = transpile_file(f, schema)
        schema[view.name] = describe(view.view)
        lines += ["", f"-- {view.view}: {f.doc.split('. ')[0].rstrip('.')}.", view.statement]
    lines.append("")
    for alias in public_aliases(version):
        if spark_name(alias, version) in schema:
            lines.append(f"CREATE OR REPLACE TEMPORARY VIEW {alias} AS SELECT * FROM {spark_name(alias, version)};")
    return "\n".join(lines) + "\n"
