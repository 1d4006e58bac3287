"""Shared click arguments and output options, so every command prints rows the same way."""

from __future__ import annotations

import csv
import json
import math
import sys
from typing import Any, Callable, Sequence

import click

from rlprobe.jsonsafe import json_safe

_MAX_CELL = 60


def run_argument(name: str = "run") -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """A RUN_OR_ROOT path argument (checked by the library, so errors read the same everywhere)."""
    return click.argument(name, metavar="RUN_OR_ROOT", type=click.Path(path_type=str))


def output_options(func: Callable[..., Any]) -> Callable[..., Any]:
    """--csv / --json / --out FILE.parquet; the default is an aligned table."""
    func = click.option("--out", "out", type=click.Path(dir_okay=False, path_type=str), help="Write the rows to FILE.parquet instead of printing them.")(func)
    func = click.option("--json", "fmt", flag_value="json", help="Print a JSON array of objects (NaN/inf as strings).")(func)
    func = click.option("--csv", "fmt", flag_value="csv", help="Print CSV with a header row.")(func)
    func = click.option("--table", "fmt", flag_value="table", default=True, help="Print an aligned table (the default).")(func)
    return func


def _cell(value: Any) -> str:
    if value is None:
        return "NULL"
    if isinstance(value, float):
        if math.isnan(value) or math.isinf(value):
            return str(value)
        return f"{value:.6g}"
    text = value if isinstance(value, str) else json.dumps(json_safe(value), ensure_ascii=False)
    text = text.replace("\n", "\\n")
    return text if len(text) <= _MAX_CELL else text[: _MAX_CELL - 1] + "…"


def format_table(columns: Sequence[str], rows: Sequence[Sequence[Any]]) -> str:
    """Columns aligned under their headers; numbers right-aligned, long text cut at 60 chars."""
    cells = [[_cell(v) for v in row] for row in rows]
    widths = [max([len(c)] + [len(r[i]) for r in cells]) for i, c in enumerate(columns)]
    numeric = [all(isinstance(row[i], (int, float)) and not isinstance(row[i], bool) for row in rows if row[i] is not None) for i in range(len(columns))]

    def line(values: Sequence[str]) -> str:
        return "  ".join(v.rjust(w) if num else v.ljust(w) for v, w, num in zip(values, widths, numeric)).rstrip()

    out = [line(columns), "  ".join("-" * w for w in widths)]
    out += [line(r) for r in cells]
    out.append(f"({len(rows)} row{'s' if len(rows) != 1 else ''})")
    return "\n".join(out)


def emit_table(columns: Sequence[str], types: Sequence[str], table: Any, fmt: str) -> None:
    """Print an Arrow result: CSV through DuckDB's writer (fast, quotes only where needed),
    other formats through Python rows."""
    if fmt != "csv":
        emit_rows(columns, types, [tuple(r.values()) for r in table.to_pylist()], fmt)
        return
    import os
    import shutil
    import tempfile

    from rlprobe.store.engine import new_connection

    fd, path = tempfile.mkstemp(suffix=".csv", prefix="rlprobe-")
    os.close(fd)
    try:
        con = new_connection()
        con.from_arrow(table).write_csv(path, header=True)
        sys.stdout.flush()
        with open(path, "rb") as fh:
            shutil.copyfileobj(fh, sys.stdout.buffer)
        sys.stdout.buffer.flush()
    finally:
        os.unlink(path)


def emit_rows(columns: Sequence[str], types: Sequence[str], rows: Sequence[Sequence[Any]], fmt: str) -> None:
    """Print rows as an aligned table, CSV or JSON (JSON-typed columns stay structured)."""
    if fmt == "json":
        is_json = [t == "JSON" for t in types]
        records = [{c: _json_value(v, j) for c, v, j in zip(columns, row, is_json)} for row in rows]
        click.echo(json.dumps(records, indent=2, ensure_ascii=False, default=str))
    elif fmt == "csv":
        writer = csv.writer(sys.stdout, lineterminator="\n")
        writer.writerow(columns)
        writer.writerows([[("" if v is None else _csv_value(v)) for v in row] for row in rows])
    else:
        click.echo(format_table(columns, rows))


def _json_value(value: Any, is_json: bool) -> Any:
    if is_json and isinstance(value, str):
        try:
            return json.loads(value)  # JSON columns (data, trainer_config) stay structured
        except ValueError:
            return value
    return json_safe(value)


def _csv_value(value: Any) -> Any:
    if isinstance(value, (list, dict)):
        return json.dumps(json_safe(value), ensure_ascii=False)
    return value
