"""Read-side commands over the SQL views: ls, query, sql, shell, schema."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import tempfile
from pathlib import Path
from typing import Any

import click

from rlprobe.cli import cli
from rlprobe.cli.options import Output, display_options, emit, output_options, read_sql, run_argument, show
from rlprobe.errors import QueryError, ToolMissing

_MIN_DUCKDB_CLI = (2, 0)
_UNKNOWN_TABLE = re.compile(r"Table with name (\S+?) does not exist", re.I)


def view_names() -> list[str]:
    """The views a user can query, newest contract (steps, samples, events, runs, manifest, ...)."""
    from rlprobe.store import sqlfiles

    names = [f.name for f in sqlfiles.public_views(max(sqlfiles.versions()))]
    first = [n for n in ("steps", "samples", "events", "runs", "manifest") if n in names]  # as the docs list them
    return first + sorted(n for n in names if n not in first)


def explain_unknown_table(exc: QueryError) -> QueryError:
    """A QueryError for a missing table that names the views that exist (others as they are)."""
    import difflib  # here, not at the top: --help should not pay for it

    match = _UNKNOWN_TABLE.search(str(exc))
    if match is None:
        return exc
    name = match.group(1).strip('"')
    views = view_names()
    close = difflib.get_close_matches(name.split(".")[-1].lower(), views, n=1)
    hint = f" (did you mean {close[0]}?)" if close else ""
    return QueryError(f"no table or view named {name}{hint}; the views are {', '.join(views)} "
                      f"(also as v1.<view>; `rlprobe schema` lists their columns)")


def run_query(store: Any, sql: str, names: Any = None) -> Any:
    """store.typed_table(sql, names=names), with a missing table's error naming the views."""
    try:
        return store.typed_table(sql, names=names)
    except QueryError as exc:
        raise explain_unknown_table(exc) from exc


def emit_query(store: Any, sql: str, output: Output, table_cells: Any = None) -> None:
    """Run sql over store and print or write the rows (an --out file is refused inside a recording)."""
    if output.out is not None:
        store.refuse_output_inside(output.out)  # before the query: nothing written
    result = run_query(store, sql)
    if result is not None:
        emit(*result, output, table_cells=table_cells)


def _relative(path: str | None, base: str) -> str | None:
    """path below base, for the table; as it is when it is not below base (or not a path)."""
    if not path or path == base:
        return "." if path == base else path
    try:
        rel = os.path.relpath(path, base)
    except ValueError:
        return path
    return path if rel.startswith("..") else rel


def _strict_option(func: Any) -> Any:
    return click.option("--strict", is_flag=True, help="Fail on a broken run below a root instead of leaving it out with a warning.")(func)


@cli.command("ls")
@run_argument("root")
@output_options
@_strict_option
def ls_command(root: str, output: Output, strict: bool) -> None:
    """List the runs below ROOT (any depth) with their name, tags, status and progress.

    status is live (still recording, or killed without a trace), closed, crashed or interrupted
    (Ctrl-C); a run whose files cannot be read is listed as broken (a warning names the file and
    the reason) and the others are listed as usual. name is the one given to the Recorder (or
    rlprobe import --name), else the run_id. Columns are the same in every format; in the table,
    run_dir is shown relative to ROOT and tags joined with commas. Reads manifests and events;
    step counts come from the step files. --out is refused inside any recording below ROOT.

    Example:

    \b
        rlprobe ls runs/
        rlprobe ls runs/ --out runs.csv
    """
    from rlprobe.sources import as_recording
    from rlprobe.store import open_store
    from rlprobe.store.engine import is_url

    if is_url(root):  # object storage holds recordings only: nothing there to import
        _ls(open_store(root, strict=strict), output)
        return
    # A source rlprobe did not record (a tracker's folder, a log) is listed as it imports.
    with as_recording(root) as rec:
        for line in rec.torn_lines():
            click.echo(line, err=True)
        _ls(open_store(str(rec.path), strict=strict), output)


def _ls(store: Any, output: Output) -> None:
    from rlprobe.store.reader import LS_NAMES, LS_SQL, with_broken_runs

    for warning in store.warnings:
        click.echo(f"rlprobe: warning: {warning}", err=True)
    if output.out is not None:
        store.refuse_output_inside(output.out)  # before the query: nothing written
    columns, types, table = run_query(store, LS_SQL, LS_NAMES)
    base = str(store.target.path)
    emit(columns, types, with_broken_runs(store, table), output, table_cells={
        "tags": lambda tags: ",".join(tags or []),  # one cell: tag1,tag2 (a table has no lists)
        "run_dir": lambda path: _relative(path, base),
    })


@cli.command("query")
@run_argument()
@click.argument("sql")
@output_options
@_strict_option
def query_command(run: str, sql: str, output: Output, strict: bool) -> None:
    """Run SQL over a run or a runs root and print the rows.

    SQL is the query itself, @FILE to read it from a file, or - to read it from standard
    input. Views: steps, samples, events, runs, manifest (also as v1.steps, ...). Every view
    has a run_id column, so one query serves a run and a whole root. Reward components and
    extra metrics are columns named "reward_component.<name>" and "extra.<name>" (quote
    them). Over a root, a run whose files cannot be read is left out with a warning that names
    the file (--strict fails instead). --out FILE writes the format its extension names; --out
    is refused inside any recording below RUN_OR_ROOT: nothing is written there.

    Example:

    \b
        rlprobe query runs/my-run "SELECT step, reward_mean, kl_mean FROM steps WHERE step % 50 = 0"
        rlprobe query runs/ "SELECT run_id, max(kl_mean) FROM steps GROUP BY run_id" --csv
        rlprobe query runs/ @kl.sql --out kl.parquet
        echo "SELECT count(*) FROM samples" | rlprobe query runs/my-run -
    """
    from rlprobe.store import open_store

    sql = read_sql(sql)
    if not sql.strip():
        raise click.UsageError("SQL is empty")
    store = open_store(run, strict=strict)
    for warning in store.warnings:
        click.echo(f"rlprobe: warning: {warning}", err=True)
    emit_query(store, sql, output)


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


def _duckdb_cli() -> tuple[str | None, str]:
    """(path of a duckdb CLI >= 2.0, or None; why not, when None)."""
    exe = shutil.which("duckdb")
    if exe is None:
        return None, "no duckdb CLI on PATH"
    version = _duckdb_cli_version(exe)
    if version is not None and version < _MIN_DUCKDB_CLI:
        return None, f"{exe} is DuckDB {'.'.join(map(str, version))} (the views need >= 2.0)"
    return exe, ""


def _harlequin_installed() -> bool:
    import importlib.util

    try:
        return importlib.util.find_spec("harlequin") is not None
    except (ImportError, ValueError):  # a broken install counts as none
        return False


_SHELLS = ("auto", "duckdb", "harlequin", "python")


@cli.command("shell")
@run_argument()
@click.option("--with", "tool", type=click.Choice(_SHELLS), default="auto", show_default=True,
              help="duckdb: the duckdb CLI (>= 2.0, not on PyPI); harlequin: the terminal SQL IDE "
                   "(the shell extra, or pip install harlequin); python: rlprobe's plain SQL prompt over the Python duckdb; "
                   "auto: the first of these that is installed.")
@display_options
def shell_command(run: str, tool: str) -> None:
    """Open an interactive SQL shell with rlprobe's views over RUN_OR_ROOT ready.

    It opens the duckdb command-line program if version 2.0 or newer is on PATH, else
    harlequin (a SQL IDE for the terminal; the shell extra installs it) on a connection with
    the views, else a plain SQL prompt over the Python duckdb that rlprobe already uses
    (statements end with ;, .tables lists the views, .quit leaves). It says which one it
    opened, on stderr.

    Example:

    \b
        rlprobe shell runs/my-run
        rlprobe shell runs/ --with python
    """
    from rlprobe.store import resolve

    target = resolve(run)
    why = ""
    if tool == "auto":
        exe, why = _duckdb_cli()
        tool = "duckdb" if exe else ("harlequin" if _harlequin_installed() else "python")
        if tool == "python":
            why += " and harlequin is not installed (pip install harlequin)"
    if tool == "duckdb":
        raise SystemExit(_open_duckdb_cli(run, target))
    if tool == "harlequin":
        raise SystemExit(_open_harlequin(run, why))
    from rlprobe.cli.repl import repl
    from rlprobe.store import open_store

    store = open_store(run)
    click.echo(f"rlprobe shell: {why + ': ' if why else ''}opening rlprobe's SQL prompt over Python duckdb with the "
               f"views over {target.path} (statements end with ;  .help lists commands, .quit or Ctrl-D leaves)", err=True)
    raise SystemExit(repl(store))


def _open_duckdb_cli(run: str, target: Any) -> int:
    from rlprobe.store import init_script

    exe, why = _duckdb_cli()
    hint = (f"or use `rlprobe shell {run} --with python`, `rlprobe query {run} \"SELECT ...\"`, or "
            f"`rlprobe sql {run} > views.sql` in any DuckDB >= 2.0")
    if exe is None:
        raise ToolMissing(f"{why}: get DuckDB >= 2.0's command-line client from https://duckdb.org/docs/installation, {hint}")
    click.echo(f"rlprobe shell: opening the duckdb CLI ({exe}) with the views over {target.path}", err=True)
    with tempfile.NamedTemporaryFile("w", suffix=".sql", prefix="rlprobe-", delete=False) as fh:
        fh.write(init_script(target))
    try:
        return subprocess.call([exe, "-init", fh.name])
    finally:
        Path(fh.name).unlink(missing_ok=True)


def harlequin_adapter(store: Any, label: str) -> Any:
    """A harlequin DuckDB adapter whose connection is store's (the views are there already)."""
    from harlequin_duckdb.adapter import DuckDbAdapter, DuckDbConnection

    class RlprobeAdapter(DuckDbAdapter):  # type: ignore[misc]
        """harlequin's own DuckDB adapter, on a connection rlprobe opened (no init script to split)."""

        def connect(self) -> DuckDbConnection:
            return DuckDbConnection(conn=store.con, init_message=f"rlprobe views over {label}")

    return RlprobeAdapter(conn_str=(":memory:",), no_init=True)


def _open_harlequin(run: str, why: str = "") -> int:
    if not _harlequin_installed():
        raise ToolMissing(f"harlequin is not installed: pip install harlequin (or the shell extra), or use "
                          f"`rlprobe shell {run} --with python`")
    from harlequin import Harlequin

    from rlprobe.store import open_store

    store = open_store(run)
    label = str(store.target.path)
    click.echo(f"rlprobe shell: {why + ': ' if why else ''}opening harlequin with the views over {label}", err=True)
    app = Harlequin(adapter=harlequin_adapter(store, label), connection_hash=f"rlprobe:{label}", no_download_tzdata=True)
    app.run()
    return int(app.return_code or 0)


@cli.command("schema")
@click.argument("run", metavar="[RUN_OR_ROOT]", required=False, type=click.Path(path_type=str))
@display_options
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
    lines: list[str] = []
    for f in sqlfiles.public_views(version):
        lines.append(f"{f.name}  (also v{version}.{f.name})")
        lines.append(f"  {f.doc}")
        _, _, rows = store.rows(f"SELECT column_name, column_type FROM (DESCRIBE v{version}.{f.name})")
        width = max((len(name) for name, _ in rows), default=0)  # long extra.* names stay aligned
        lines += [f"    {name:<{width}}  {type_}" for name, type_ in rows]
        lines.append("")
    show("\n".join(lines))
