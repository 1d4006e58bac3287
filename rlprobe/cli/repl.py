"""`rlprobe shell --with python`: a plain SQL prompt over the Python duckdb, for when neither the
duckdb CLI (>= 2.0, not on PyPI) nor harlequin is installed.

It is deliberately small: statements end with a semicolon, results print as rlprobe's tables
(fitted to the terminal, paged when long), errors are one line and the prompt goes on, and a
few dot commands list what is there. Line editing and history come from readline when stdin
is a terminal.
"""

from __future__ import annotations

import sys
from typing import Any, Callable

import click

from rlprobe.cli.output import emit, Output
from rlprobe.errors import RlprobeError

PROMPT = "rlprobe> "
CONTINUE = "    ...> "
HELP = """\
SQL statements end with ; and may span lines. The views: {views}.
.tables            list the views
.schema VIEW       the columns of a view
.mode table|csv|tsv|json|nl   how results print (now: {mode})
.help              this text
.quit              leave (also .exit or Ctrl-D)"""


def repl(store: Any, read: Callable[[str], str] = input) -> int:
    """Read statements until EOF or .quit and print each result; returns the exit code (0)."""
    from rlprobe.cli.query import run_query, view_names

    if read is input and sys.stdin.isatty():
        try:
            import readline  # noqa: F401  (line editing and history for input())
        except ImportError:
            pass
    mode = "table"
    buffer: list[str] = []
    while True:
        try:
            line = read(CONTINUE if buffer else PROMPT)
        except EOFError:
            if buffer:  # a last statement without its semicolon still runs
                _run(store, "\n".join(buffer), mode, run_query)
            click.echo("")
            return 0
        except KeyboardInterrupt:
            click.echo("")
            buffer = []  # Ctrl-C drops the statement being typed, as in other shells
            continue
        stripped = line.strip()
        if not buffer and stripped.startswith("."):
            command, _, arg = stripped.partition(" ")
            if command in (".quit", ".exit", ".q"):
                return 0
            if command == ".help":
                click.echo(HELP.format(views=", ".join(view_names()), mode=mode))
            elif command == ".tables":
                click.echo("  ".join(view_names()))
            elif command == ".schema":
                name = arg.strip() or "steps"
                _run(store, f"SELECT column_name, column_type FROM (DESCRIBE {name})", "table", run_query)
            elif command == ".mode":
                if arg.strip() in ("table", "csv", "tsv", "json", "nl"):
                    mode = arg.strip()
                else:
                    click.echo("Error: .mode takes one of table, csv, tsv, json, nl")
            else:
                click.echo(f"Error: unknown command {command} (.help lists them)")
            continue
        if not stripped and not buffer:
            continue
        buffer.append(line)
        if stripped.endswith(";"):
            _run(store, "\n".join(buffer), mode, run_query)
            buffer = []


def _run(store: Any, sql: str, mode: str, run_query: Callable[[Any, str], Any]) -> None:
    try:
        result = run_query(store, sql)
    except RlprobeError as exc:
        click.echo(f"Error: {exc}")
        return
    if result is not None:
        emit(*result, Output(mode))
