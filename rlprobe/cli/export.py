"""`rlprobe export`: a root's steps, samples and events as Parquet that other tools read as is.

A root's own files cannot be globbed as one table: each run has its own columns (reward
components, extra metrics) and live runs keep part files, so `pl.scan_parquet("runs/*/steps.parquet")`
fails or misses runs. The views already unify them; export writes what they return, with the
run's name and tags beside its run_id, one file per table or hive-partitioned by run_id
(OUT/steps/run_id=<id>/*.parquet), which polars, pandas (pyarrow) and Spark read as one table.
DuckDB writes the files (COPY streams, so a large root never has to fit in memory), into a
temporary name beside OUT that is renamed at the end: OUT is whole or absent.
"""

from __future__ import annotations

import os
import shutil
import uuid
from pathlib import Path
from typing import Any

import click

from rlprobe.cli import cli
from rlprobe.cli.progress import Progress
from rlprobe.errors import OutputRefused

TABLES = ("steps", "samples", "events")


@cli.command("export")
@click.argument("root", metavar="RUN_OR_ROOT", type=click.Path(path_type=str))
@click.argument("out", metavar="OUT", type=click.Path(path_type=str))
@click.option("--table", "tables", multiple=True, type=click.Choice(TABLES),
              help="A table to export (repeatable). Default: steps, samples and events into the folder OUT; "
                   "steps alone when OUT is a .parquet file.")
@click.option("--partition", is_flag=True,
              help="Hive-partition each table by run_id: OUT/<table>/run_id=<id>/data_0.parquet.")
def export_command(root: str, out: str, tables: tuple[str, ...], partition: bool) -> None:
    """Export every run's steps, samples and events as Parquet, one table per view.

    Columns: run_id, name and tags of the run, then the view's columns in one schema for all
    runs (a metric a run did not log is NULL in its rows). OUT is a new folder holding
    steps.parquet, samples.parquet and events.parquet, or with --partition a folder per table
    partitioned by run_id; OUT ending in .parquet is one file of one table. OUT must not exist
    (export never overwrites) and must lie outside RUN_OR_ROOT.

    Example:

    \b
        rlprobe export runs/ exported/                # exported/steps.parquet, samples.parquet, events.parquet
        rlprobe export runs/ all_steps.parquet        # one file: steps of every run
        rlprobe export runs/ exported/ --partition    # exported/steps/run_id=<id>/data_0.parquet, ...
        python -c "import polars as pl; print(pl.scan_parquet('exported/steps/**/*.parquet').collect())"
    """
    from rlprobe.store import open_store, sqlfiles
    from rlprobe.store.engine import is_url, run as run_sql, sql_literal

    one_file = out.lower().endswith(".parquet")
    if one_file:
        if partition:
            raise click.UsageError("--partition writes a folder per table: give OUT as a folder, not a .parquet file")
        if len(tables) > 1:
            raise click.UsageError(f"{out} is one file, so one --table (got {', '.join(tables)}); give a folder for several")
    chosen = list(dict.fromkeys(tables)) or (["steps"] if one_file else list(TABLES))
    dest = Path(out).expanduser()
    if dest.exists():
        raise OutputRefused(f"{out} already exists: export never overwrites; remove it or give a new path")
    store = open_store(root)
    store.refuse_output_inside(out)
    if not is_url(root):
        base = Path(str(store.target.path)).resolve()
        where = dest.parent.resolve() / dest.name
        if where == base or base in where.parents:
            raise OutputRefused(f"{out} is inside {root}: its Parquet files would be read as runs; export outside it")
    for warning in store.warnings:
        click.echo(f"rlprobe: warning: {warning}", err=True)
    tmp = dest.parent / f".{dest.name}.rlprobe-export-{uuid.uuid4().hex[:8]}"
    written: list[tuple[str, int, Any]] = []
    try:
        if not one_file:
            tmp.mkdir(parents=True)
        with Progress(label="exporting") as bar:
            for i, table in enumerate(chosen):
                bar.update(f"exporting {table}", i, len(chosen))
                select = sqlfiles.query(f"export_{table}").strip().rstrip(";")
                count = run_sql(store.con, f"SELECT count(*) FROM ({select})", fetch="rows")[2][0][0]
                target = tmp if one_file else tmp / (table if partition else f"{table}.parquet")
                options = "FORMAT parquet" + (", PARTITION_BY (run_id)" if partition else "")
                if count or not partition:  # an empty table is an empty file; partitions need rows
                    run_sql(store.con, f"COPY ({select}) TO {sql_literal(str(target))} ({options})", fetch="none")
                written.append((table, count, target))
        os.replace(tmp, dest)
    except BaseException:
        if tmp.is_dir():
            shutil.rmtree(tmp, ignore_errors=True)
        elif tmp.exists():
            tmp.unlink()
        raise
    runs = run_sql(store.con, "SELECT count(DISTINCT run_id) FROM runs", fetch="rows")[2][0][0]
    for table, count, target in written:
        shown = dest if one_file else dest / Path(target).name
        where = f"{shown}{os.sep}run_id=*" if partition and count else str(shown)
        click.echo(f"wrote {count} {table} row{'s' if count != 1 else ''} of {runs} run{'s' if runs != 1 else ''} "
                   f"to {where if count or not partition else f'{shown} (none: no folder)'}", err=True)
    click.echo(str(dest))
