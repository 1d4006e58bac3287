"""Read-side commands over the SQL views: ls, query, sql, shell, schema."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import tempfile
from pathlib import Path

import click

from rlprobe.cli import cli
from rlprobe.cli.options import emit_rows, emit_table, output_options, run_argument
from rlprobe.errors import QueryError, ToolMissing

_MIN_DUCKDB_CLI = (2, 0)


def _write_parquet(store: object, sql: str, out: str) -> None:
    import pyarrow.parquet as pq

    store.refuse_output_inside(out)  # type: ignore[attr-defined]  # before the query: nothing written
    table = store.table(sql)  # type: ignore[attr-defined]
    try:
        pq.write_table(table, out)
    except OSError as exc:
        raise QueryError(f"cannot write {out}: {exc.strerror or exc}") from exc
    click.echo(f"wrote {table.num_rows} rows to {out}", err=True)


def _relative(path: str | None, base: str) -> str:
    """path below base for the table; as it is when it is not below base (or not a path)."""
    if not path or path == base:
        return "." if path == base else str(path)
    try:
        return os.path.relpath(path, base)
    except ValueError:
        return path


@cli.command("ls")
@run_argument("root")
@output_options
def ls_command(root: str, fmt: str, out: str | None) -> None:
    """List the runs below ROOT (any depth) with their name, tags, status and progress.

    status is live (still recording, or killed without a trace), closed or crashed. name is
    the one given to the Recorder (or rlprobe import --name), else the run_id.
    Reads manifests and events; step counts come from the step files. --out is refused
    inside any recording below ROOT.

    Example:

    \b
        rlprobe ls runs/
    """
    from rlprobe.importers import as_recording
    from rlprobe.store import open_store
    from rlprobe.store.engine import is_url

    if is_url(root):  # object storage holds recordings only: nothing there to import
        _ls(open_store(root), fmt, out)
        return
    # A source rlprobe did not record (a tracker's folder, a log) is listed as it imports.
    with as_recording(root) as rec:
        _ls(open_store(str(rec.path)), fmt, out)


def _ls(store: object, fmt: str, out: str | None) -> None:
    for warning in store.warnings:  # type: ignore[attr-defined]
        click.echo(f"rlprobe: warning: {warning}", err=True)
    sql = (
        "SELECT run_id, name, status, steps_recorded AS steps, last_step, algorithm, model_name, "
        "tags, created_at, run_dir FROM runs ORDER BY created_at NULLS LAST, run_dir"
    )
    if out:
        _write_parquet(store, sql, out)
        return
    columns, types, rows = store.rows(sql)  # type: ignore[attr-defined]
    if fmt == "table":
        base = str(store.target.path)  # type: ignore[attr-defined]
        tags = columns.index("tags")  # one cell: tag1,tag2 (a table has no lists)
        rows = [row[:tags] + (",".join(row[tags] or []),) + row[tags + 1:-1] + (_relative(row[-1], base),) for row in rows]
        columns = columns[:-1] + ["path"]
    emit_rows(columns, types, rows, fmt)


@cli.command("query")
@run_argument()
@click.argument("sql")
@output_options
def query_command(run: str, sql: str, fmt: str, out: str | None) -> None:
    """Run SQL over a run or a runs root and print the rows.

    Views: steps, samples, events, runs, manifest (also as v1.steps, ...). Every view has a
    run_id column, so one query serves a run and a whole root. Reward components and extra
    metrics are columns named "reward_component.<name>" and "extra.<name>" (quote them).
    --out is refused inside any recording below RUN_OR_ROOT: nothing is written there.

    Example:

    \b
        rlprobe query runs/my-run "SELECT step, reward_mean, kl_mean FROM steps WHERE step % 50 = 0"
        rlprobe query runs/ "SELECT run_id, max(kl_mean) FROM steps GROUP BY run_id" --csv
    """
    from rlprobe.store import open_store

    if not sql.strip():
        raise click.UsageError("SQL is empty")
    store = open_store(run)
    for warning in store.warnings:
        click.echo(f"rlprobe: warning: {warning}", err=True)
    if out:
        _write_parquet(store, sql, out)
        return
    result = store.typed_table(sql)
    if result is None:
        return
    emit_table(*result, fmt)


@cli.command("sql")
@run_argument()
@click.option("--dialect", type=click.Choice(["duckdb", "spark"]), default="duckdb", show_default=True,
              help="spark: the portable views transpiled to Spark SQL (sources: rlprobe.spark.register_views).")
def sql_command(run: str, dialect: str) -> None:
    """Print a self-contained DuckDB script that creates rlprobe's views over RUN_OR_ROOT.

    Paths in it are absolute, so it works from any folder, in any DuckDB >= 2.0 session:
    the duckdb CLI (.read views.sql), Python (con.execute(open('views.sql').read())), or a
    notebook. With --dialect spark it prints the views and doctor features as Spark SQL temp
    views over the columns of RUN_OR_ROOT instead (see docs/spark.md).

    Example:

    \b
        rlprobe sql runs/my-run > views.sql && duckdb -init views.sql
        rlprobe sql runs/ --dialect spark > views_spark.sql
    """
    if dialect == "spark":
        from rlprobe.spark import spark_views

        click.echo(spark_views(run), nl=False)
        return
    from rlprobe.store import init_script, resolve

    click.echo(init_script(resolve(run)), nl=False)


def _duckdb_cli_version(exe: str) -> tuple[int, ...] | None:
    try:
        out = subprocess.run([exe, "--version"], capture_output=True, text=True, timeout=10).stdout
    except (OSError, subprocess.SubprocessError):
        return None
    match = re.search(r"v?(\d+)\.(\d+)", out)
    return (int(match.group(1)), int(match.group(2))) if match else None


@cli.command("shell")
@run_argument()
def shell_command(run: str) -> None:
    """Open the duckdb CLI with rlprobe's views over RUN_OR_ROOT ready.

    Needs the duckdb command-line program, version 2.0 or newer, on PATH.

    Example:

    \b
        rlprobe shell runs/my-run
    """
    from rlprobe.store import init_script, resolve

    target = resolve(run)
    exe = shutil.which("duckdb")
    hint = f"or use `rlprobe query {run} \"SELECT ...\"`, or `rlprobe sql {run} > views.sql` in any DuckDB >= 2.0"
    if exe is None:
        raise ToolMissing(
            "the duckdb CLI is not installed: get DuckDB >= 2.0's command-line client from "
            f"https://duckdb.org/docs/installation, {hint}"
        )
    version = _duckdb_cli_version(exe)
    if version is not None and version < _MIN_DUCKDB_CLI:
        raise ToolMissing(
            f"{exe} is DuckDB {'.'.join(map(str, version))}; rlprobe's views need DuckDB >= 2.0: "
            f"upgrade it from https://duckdb.org/docs/installation, {hint}"
        )
    with tempfile.NamedTemporaryFile("w", suffix=".sql", prefix="rlprobe-", delete=False) as fh:
        fh.write(init_script(target))
    try:
        raise SystemExit(subprocess.call([exe, "-init", fh.name]))
    finally:
        Path(fh.name).unlink(missing_ok=True)


@cli.command("schema")
@click.argument("run", metavar="[RUN_OR_ROOT]", required=False, type=click.Path(path_type=str))
def schema_command(run: str | None) -> None:
    """List the views users query and their columns.

    With RUN_OR_ROOT, columns are those of that recording (its reward components and extra
    metrics included); without it, the fixed columns of the contract.

    Example:

    \b
        rlprobe schema
        rlprobe schema runs/my-run
    """
    from rlprobe.store import open_store, sqlfiles
    from rlprobe.store.engine import empty_store

    store = open_store(run) if run else empty_store()
    version = max(sqlfiles.versions())
    for f in sqlfiles.public_views(version):
        click.echo(f"{f.name}  (also v{version}.{f.name})")
        click.echo(f"  {f.doc}")
        _, _, rows = store.rows(f"SELECT column_name, column_type FROM (DESCRIBE v{version}.{f.name})")
        for name, type_ in rows:
            click.echo(f"    {name:<34} {type_}")
        click.echo("")
