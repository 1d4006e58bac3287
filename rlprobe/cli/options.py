"""Shared click arguments and options, so every command reads and prints the same way.

output_options follows sqlite-utils: --table (the default), --csv, --tsv, --json, --nl, and
--out FILE whose extension picks the format unless a flag says otherwise. display_options gives
every command that prints to a terminal --no-color and --no-pager. Rendering is in
rlprobe.cli.output.
"""

from __future__ import annotations

import functools
import sys
from typing import Any, Callable

import click

from rlprobe.cli.output import Output, resolve_format

# Re-exported: commands import their printing helpers from here.
from rlprobe.cli.output import emit, format_table, indented, json_text, show, style  # noqa: F401


def run_argument(name: str = "run") -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """A RUN_OR_ROOT path argument (checked by the library, so errors read the same everywhere)."""
    return click.argument(name, metavar="RUN_OR_ROOT", type=click.Path(path_type=str))


def _set_meta(key: str) -> Callable[[click.Context, click.Parameter, Any], None]:
    def callback(ctx: click.Context, param: click.Parameter, value: Any) -> None:
        if value:
            ctx.find_root().meta[key] = True

    return callback


def display_options(func: Callable[..., Any]) -> Callable[..., Any]:
    """--no-color and --no-pager (no parameters reach the command; rlprobe.cli.output reads them)."""
    func = click.option("--no-pager", is_flag=True, expose_value=False, is_eager=True, callback=_set_meta("rlprobe.no_pager"),
                        help="Never page long output (by default it goes through $PAGER or less on a terminal).")(func)
    func = click.option("--no-color", "--no-colour", is_flag=True, expose_value=False, is_eager=True,
                        callback=_set_meta("rlprobe.no_color"), help="Print without colour (as with NO_COLOR set).")(func)
    return func


def output_options(func: Callable[..., Any]) -> Callable[..., Any]:
    """--table/--csv/--tsv/--json/--nl/--parquet, --no-headers, --out FILE: the command gets output=Output."""

    @functools.wraps(func)
    def wrapper(*args: Any, fmt: str | None, out: str | None, no_headers: bool, **kwargs: Any) -> Any:
        return func(*args, output=Output(resolve_format(fmt, out), out, not no_headers), **kwargs)

    wrapper = display_options(wrapper)
    wrapper = click.option("--out", "out", type=click.Path(dir_okay=False, path_type=str), metavar="FILE",
                           help="Write the rows to FILE instead of printing them; its extension picks the format "
                                "(.parquet, .csv, .tsv, .json, .jsonl/.ndjson) unless a flag says otherwise.")(wrapper)
    wrapper = click.option("--no-headers", is_flag=True, help="Leave out the header row (CSV, TSV, table).")(wrapper)
    wrapper = click.option("--parquet", "fmt", flag_value="parquet", help="Write Parquet (needs --out FILE).")(wrapper)
    wrapper = click.option("--nl", "fmt", flag_value="nl", help="Print newline-delimited JSON: one object a line.")(wrapper)
    wrapper = click.option("--json", "fmt", flag_value="json", help="Print a JSON array of objects (NaN/inf as strings).")(wrapper)
    wrapper = click.option("--tsv", "fmt", flag_value="tsv", help="Print tab-separated values with a header row.")(wrapper)
    wrapper = click.option("--csv", "fmt", flag_value="csv", help="Print CSV with a header row.")(wrapper)
    wrapper = click.option("--table", "fmt", flag_value="table", help="Print an aligned table (the default on a terminal "
                           "and in pipes), fitted to the terminal's width; of more than 40 rows, the first and last 20.")(wrapper)
    return wrapper


def read_sql(text: str) -> str:
    """The SQL a user gave: as it is, @FILE for a file's text, or - for standard input."""
    if text == "-":
        sql = sys.stdin.read()
        source = "standard input"
    elif text.startswith("@") and len(text) > 1:
        path = text[1:]
        try:
            with open(path, encoding="utf-8") as fh:
                sql = fh.read()
        except OSError as exc:
            raise click.UsageError(f"cannot read SQL from {path}: {exc.strerror or exc}") from exc
        except UnicodeDecodeError as exc:
            raise click.UsageError(f"cannot read SQL from {path}: not UTF-8 text") from exc
        source = path
    else:
        return text
    if not sql.strip():
        raise click.UsageError(f"SQL is empty (read from {source})")
    return sql
