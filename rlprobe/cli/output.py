"""How rows and text reach a terminal, a pipe or a file: tables that fit, formats, colour, pager.

One table format everywhere (a header, a rule, aligned rows, a row count), fitted to the width
of the terminal: long text is cut with an ellipsis, and when even cut columns do not fit, the
middle ones are left out and the count line says how many. In a pipe rows stay one line each
at their natural width (unless $COLUMNS sets one), so `| grep` and `| head` work. Cell widths
are display widths (rich.cells: CJK and emoji take two columns), measured only for cells that
are not plain ASCII, so printing a table imports nothing for the common case.

Colour (severity: critical red, warn yellow, info cyan) is added only when wanted: never with
NO_COLOR set or --no-color, and click strips it whenever the output is not a terminal. Text
longer than the screen goes through a pager ($PAGER, else less) when stdout is a terminal.

A table of more than HEAD_ROWS + TAIL_ROWS rows shows its first and last rows around a "…"
line, and the count line says how many there are; only the rows shown are formatted.

Rows go out as the table, CSV, TSV, JSON (an array), newline-delimited JSON or Parquet, to
stdout or to a file whose format follows its extension (sqlite-utils' conventions). CSV and TSV
are written by DuckDB, JSON a batch of rows at a time: no format holds every row as Python
objects at once.
"""

from __future__ import annotations

import json
import math
import os
import shutil
import sys
from pathlib import Path
from typing import Any, Callable, Mapping, NamedTuple, Sequence

import click

from rlprobe.errors import QueryError
from rlprobe.jsonsafe import json_safe

MAX_CELL = 60
"""Characters of a text cell in a table before it is cut (--json / --csv keep whole values)."""

MIN_CUT = 10
"""A text column is never cut narrower than this (or its header) to fit the width."""

SEP = "  "

HEAD_ROWS = 20
TAIL_ROWS = 20
"""A result with more rows than HEAD_ROWS + TAIL_ROWS shows only its first and last rows in a
table (as the DuckDB CLI does): formatting 100k rows for a terminal took seconds and a gigabyte,
for rows no one reads there. The count line says how many were left out; --csv, --json and
--out write them all."""

BATCH_ROWS = 4096
"""Rows converted to Python values at a time when JSON is written: memory stays that of a batch."""

FORMATS_BY_SUFFIX: dict[str, str] = {
    ".parquet": "parquet", ".csv": "csv", ".tsv": "tsv", ".json": "json", ".jsonl": "nl", ".ndjson": "nl",
}
"""--out FILE's format from its extension when no --csv, --json, ... flag says otherwise."""

FORMAT_NAMES: dict[str, str] = {"table": "a table", "csv": "CSV", "tsv": "TSV", "json": "JSON", "nl": "JSON lines",
                                "parquet": "Parquet"}

SEVERITY_COLOURS: dict[str, dict[str, Any]] = {
    "critical": {"fg": "red", "bold": True},
    "warn": {"fg": "yellow", "bold": True},
    "info": {"fg": "cyan"},
    "ok": {"fg": "green"},
}
STATUS_COLOURS: dict[str, dict[str, Any]] = {"crashed": {"fg": "red", "bold": True}, "live": {"fg": "cyan"}}

COLOURED_COLUMNS: dict[str, dict[str, dict[str, Any]]] = {
    "severity": SEVERITY_COLOURS, "worst": SEVERITY_COLOURS, "status": STATUS_COLOURS,
}
"""Columns whose values are coloured in any table (a query's own `severity` column too)."""


# -- what the user asked for: colour, pager ---------------------------------------------------

def colour_wanted() -> bool:
    """False with NO_COLOR set (https://no-color.org) or --no-color; click strips colour in pipes anyway."""
    if os.environ.get("NO_COLOR"):
        return False
    ctx = click.get_current_context(silent=True)
    return not (ctx is not None and ctx.find_root().meta.get("rlprobe.no_color"))


def style(text: str, severity: str | None) -> str:
    """text in its severity's colour (or as it is, when colour is not wanted)."""
    spec = SEVERITY_COLOURS.get(severity or "")
    return click.style(text, **spec) if spec and colour_wanted() else text


def _pager_wanted() -> bool:
    ctx = click.get_current_context(silent=True)
    return not (ctx is not None and ctx.find_root().meta.get("rlprobe.no_pager"))


def stdout_is_terminal() -> bool:
    """True when stdout is a terminal (not a pipe, a file, or a test's capture)."""
    try:
        return sys.stdout.isatty()
    except (AttributeError, ValueError):
        return False


def table_width() -> int | None:
    """Columns a table may use: the terminal's, or $COLUMNS; None (no limit) in a pipe without $COLUMNS."""
    if stdout_is_terminal():
        return shutil.get_terminal_size().columns
    columns = os.environ.get("COLUMNS", "")
    return int(columns) if columns.isdigit() and int(columns) > 0 else None


def show(text: str) -> None:
    """Print text; through the pager when stdout is a terminal and text is longer than the screen."""
    if stdout_is_terminal() and _pager_wanted():
        lines = text.count("\n") + 1
        if lines > shutil.get_terminal_size().lines - 1:
            click.echo_via_pager(text if text.endswith("\n") else text + "\n")
            return
    click.echo(text)


# -- tables -----------------------------------------------------------------------------------

def cell_text(value: Any, limit: int | None = MAX_CELL) -> str:
    """A value as one table cell: NULL, 6 significant digits, JSON for lists, one line, cut at limit."""
    if value is None:
        return "NULL"
    if isinstance(value, bool):
        return str(value).lower()
    if isinstance(value, float):
        if math.isnan(value) or math.isinf(value):
            return str(value)
        return f"{value:.6g}"
    text = value if isinstance(value, str) else json.dumps(json_safe(value), ensure_ascii=False)
    text = text.replace("\r", "\\r").replace("\n", "\\n").replace("\t", "\\t")
    return text if limit is None else cut(text, limit)


def width_of(text: str) -> int:
    """Display width of text in terminal columns (wide characters count two)."""
    if text.isascii():
        return len(text)
    from rich.cells import cell_len

    return cell_len(text)


def cut(text: str, width: int) -> str:
    """text cut to at most width display columns, ending in an ellipsis when it was cut."""
    if width_of(text) <= width:
        return text
    if width <= 1:
        return "…"[:width]
    if text.isascii():
        return text[: width - 1] + "…"
    from rich.cells import get_character_cell_size

    out, used = [], 0
    for ch in text:
        size = get_character_cell_size(ch)
        if used + size > width - 1:
            break
        out.append(ch)
        used += size
    return "".join(out) + "…"


def _pad(text: str, width: int, right: bool) -> str:
    gap = " " * max(0, width - width_of(text))
    return gap + text if right else text + gap


def _is_number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def _fit(natural: list[int], minimum: list[int], width: int, drop_first: Sequence[int] = ()) -> tuple[list[int], list[int]]:
    """(column widths, kept column indexes) so the kept columns plus separators fit width.

    Columns shrink toward their minimum in proportion to how much they can give; when even the
    minimums do not fit, columns are left out: those of drop_first in that order, then from the
    middle (the first and last stay longest).
    """
    n = len(natural)
    keep = list(range(n))
    order = [i for i in drop_first if 0 <= i < n]

    def needed(cols: list[int], widths: list[int]) -> int:
        hidden = len(cols) < n
        return sum(widths[i] for i in cols) + len(SEP) * (len(cols) - 1) + (len(SEP) + 1 if hidden else 0)

    while len(keep) > 1 and needed(keep, minimum) > width:
        keep.remove(order.pop(0)) if order and order[0] in keep else keep.pop(len(keep) // 2)
    widths = list(natural)
    spare = width - needed(keep, minimum)
    give = sum(natural[i] - minimum[i] for i in keep)
    if needed(keep, natural) > width and give > 0:
        for i in keep:
            widths[i] = minimum[i] + (natural[i] - minimum[i]) * max(0, spare) // give
    return widths, keep


def render_table(columns: Sequence[str], rows: Sequence[Sequence[Any]], width: int | None = None,
                 headers: bool = True, count: bool = True, drop_first: Sequence[str] = (),
                 gap: tuple[int, int] | None = None) -> str:
    """Rows as an aligned table: numbers right-aligned, text cut to fit width (None: no limit).

    Columns that do not fit are left out, those named in drop_first first, and an "…" column
    marks where. Values in the columns of COLOURED_COLUMNS get their colour when colour is wanted.
    gap (position, rows left out) says rows holds the first and last rows of a longer result:
    a "…" line stands at that position and the count line gives the whole count.
    """
    cells = [[cell_text(v) for v in row] for row in rows]
    numeric = [all(_is_number(row[i]) for row in rows if row[i] is not None) and any(row[i] is not None for row in rows)
               for i in range(len(columns))]
    value_widths = [max((width_of(r[i]) for r in cells), default=0) for i in range(len(columns))]
    natural = [max(width_of(c) if headers else 0, v) for c, v in zip(columns, value_widths)]
    if width is not None and columns:
        # A header is never cut (it names the column: two cut "reward_co…" would be ambiguous), nor
        # is a number; text shrinks to MIN_CUT. Columns that still do not fit are left out.
        heads = [width_of(c) if headers else 0 for c in columns]
        minimum = [max(h, v if numeric[i] else min(v, MIN_CUT)) for i, (h, v) in enumerate(zip(heads, value_widths))]
        widths, keep = _fit(natural, minimum, width, [list(columns).index(c) for c in drop_first if c in columns])
        if len(keep) == 1 and widths[keep[0]] > width:  # one column wider than the screen: cut it
            widths[keep[0]] = max(1, width)
    else:
        widths, keep = natural, list(range(len(columns)))
    hidden = len(columns) - len(keep)
    # the "…" column stands where the first left-out column was
    middle = next((pos for pos, i in enumerate(keep) if i > pos), len(keep)) if hidden else None
    colours = [COLOURED_COLUMNS.get(c.lower()) if colour_wanted() else None for c in columns]

    def line(values: Sequence[str], raw: Sequence[Any] | None = None) -> str:
        parts = []
        for pos, i in enumerate(keep):
            if pos == middle:
                parts.append("…")
            text = cut(values[i], widths[i])
            padded = _pad(text, widths[i], numeric[i])
            spec = colours[i].get(raw[i]) if colours[i] and raw is not None and isinstance(raw[i], str) else None
            if spec:
                padded = padded.replace(text, click.style(text, **spec), 1)
            parts.append(padded)
        return SEP.join(parts).rstrip()

    out = []
    if headers:
        out.append(line(list(columns)))
        rule = ["-" * widths[i] for i in keep]
        if middle is not None:
            rule.insert(middle, "-")
        out.append(SEP.join(rule))
    body = [line(r, raw=row) for r, row in zip(cells, rows)]
    if gap is not None:
        body.insert(gap[0], line(["…"] * len(columns)))
    out += body
    if count:
        out.append(_count_note(len(rows), gap, hidden, len(columns)))
    return "\n".join(out)


def _count_note(shown: int, gap: tuple[int, int] | None, hidden: int, n_columns: int) -> str:
    total = shown + (gap[1] if gap else 0)
    note = f"({total} row{'s' if total != 1 else ''}"
    if gap is not None:
        note += f", {shown} shown: the first {gap[0]} and the last {shown - gap[0]}"
    if hidden:
        note += f"; {hidden} of {n_columns} columns not shown"
    if gap is not None:
        note += f"; {'select fewer, or ' if hidden else ''}use --csv, --json or --out FILE for all of them"
    elif hidden:
        note += ": select fewer, or use --json or --csv"
    return note + ")"


def format_table(columns: Sequence[str], rows: Sequence[Sequence[Any]], headers: bool = True, margin: int = 0,
                 drop_first: Sequence[str] = (), gap: tuple[int, int] | None = None) -> str:
    """render_table at the width of this output (the terminal's, $COLUMNS, or none in a pipe),
    less margin columns (a table printed indented)."""
    width = table_width()
    return render_table(columns, rows, width=None if width is None else max(20, width - margin), headers=headers,
                        drop_first=drop_first, gap=gap)


def indented(text: str, by: str = "  ") -> str:
    """text with every line indented."""
    return "\n".join(by + line for line in text.splitlines())


# -- formats and files ------------------------------------------------------------------------

class Output(NamedTuple):  # a NamedTuple, not a dataclass: `rlprobe --help` need not import dataclasses
    """Where and how a command prints its rows (from output_options): fmt, --out FILE, --no-headers."""

    fmt: str = "table"
    out: str | None = None
    headers: bool = True

    @property
    def to_terminal(self) -> bool:
        """True when rows are printed as the table (not written to a file, not CSV/JSON)."""
        return self.fmt == "table" and self.out is None


def resolve_format(fmt: str | None, out: str | None) -> str:
    """The format to write: an explicit flag wins, else --out FILE's extension, else the table."""
    if fmt is not None:
        if fmt == "parquet" and out is None:
            raise click.UsageError("--parquet writes a binary file: give --out FILE.parquet")
        return fmt
    if out is None:
        return "table"
    found = FORMATS_BY_SUFFIX.get(Path(out).suffix.lower())
    if found is None:
        raise click.UsageError(
            f"cannot tell the format of {out} from its extension: name it .parquet, .csv, .tsv, .json, .jsonl or "
            ".ndjson, or say it with --parquet, --csv, --tsv, --json, --nl or --table")
    return found


def emit(columns: Sequence[str], types: Sequence[str], table: Any, output: Output,
         table_cells: Mapping[str, Callable[[Any], Any]] | None = None) -> None:
    """Print or write an Arrow result as output says; table_cells shape values for the table only.

    A table shows the first HEAD_ROWS and last TAIL_ROWS rows of a longer result (only those
    are converted and formatted); every other format writes every row.
    """
    if output.out is not None:
        _write_file(columns, types, table, output)
        return
    if output.fmt in ("csv", "tsv"):
        sys.stdout.flush()
        _csv_to(columns, table, output, sys.stdout.buffer)
        return
    if output.fmt in ("json", "nl"):
        write_json(columns, types, table, lambda text: click.echo(text, nl=False), lines=output.fmt == "nl")
        return
    shown, gap = table_slice(table)
    rows = python_rows(columns, shown)
    if table_cells:
        shape = [table_cells.get(c) for c in columns]
        rows = [tuple(f(v) if f else v for f, v in zip(shape, row)) for row in rows]
    show(format_table(columns, rows, headers=output.headers, gap=gap))


def table_slice(table: Any) -> tuple[Any, tuple[int, int] | None]:
    """(the rows a terminal table shows, gap for render_table): all of them, or the first
    HEAD_ROWS and the last TAIL_ROWS when there are more."""
    n = table.num_rows
    if n <= HEAD_ROWS + TAIL_ROWS:
        return table, None
    import pyarrow as pa

    return pa.concat_tables([table.slice(0, HEAD_ROWS), table.slice(n - TAIL_ROWS, TAIL_ROWS)]), (HEAD_ROWS, n - HEAD_ROWS - TAIL_ROWS)


def python_rows(columns: Sequence[str], table: Any) -> list[tuple[Any, ...]]:
    """An Arrow table's rows as tuples of Python values (columns may repeat a name)."""
    if len(set(columns)) == len(columns):
        return [tuple(r.values()) for r in table.to_pylist()]
    return [tuple(row) for row in zip(*[table.column(i).to_pylist() for i in range(table.num_columns)])]


def json_text(columns: Sequence[str], types: Sequence[str], rows: Sequence[Sequence[Any]], lines: bool = False) -> str:
    """Rows as a JSON array of objects (or one object a line): strict JSON, JSON columns structured."""
    is_json = [t == "JSON" for t in types]
    records = [{c: _json_value(v, j) for c, v, j in zip(columns, row, is_json)} for row in rows]
    if lines:
        return "\n".join(json.dumps(r, ensure_ascii=False, default=str) for r in records)
    return json.dumps(records, indent=2, ensure_ascii=False, default=str)


def write_json(columns: Sequence[str], types: Sequence[str], table: Any, write: Callable[[str], Any],
               lines: bool = False) -> None:
    """An Arrow table as json_text writes it, followed by a newline when it holds rows (or is an
    array), passed to write a batch of BATCH_ROWS rows at a time: the same bytes, without every
    row as Python objects at once.

    json.dumps(list, indent=2) writes each element as json.dumps(element, indent=2) with every
    line indented two more; the text of an element holds no raw newline but those (JSON escapes
    a newline inside a string), which is what makes the pieces add up to the same text.
    """
    is_json = [t == "JSON" for t in types]
    encode = json.JSONEncoder(ensure_ascii=False, default=str, indent=None if lines else 2).encode
    first = True
    for batch in table.to_batches(max_chunksize=BATCH_ROWS):
        if batch.num_rows == 0:
            continue
        rows = python_rows(columns, batch)
        texts = [encode({c: _json_value(v, j) for c, v, j in zip(columns, row, is_json)}) for row in rows]
        if lines:
            write("\n".join(texts) + "\n")
        else:
            write(("[\n  " if first else ",\n  ") + ",\n  ".join(t.replace("\n", "\n  ") for t in texts))
        first = False
    if not lines:
        write("[]\n" if first else "\n]\n")


def _json_value(value: Any, is_json: bool) -> Any:
    if is_json and isinstance(value, str):
        try:
            return json.loads(value)  # JSON columns (data, trainer_config) stay structured
        except ValueError:
            return value
    return json_safe(value)


def _csv_to(columns: Sequence[str], table: Any, output: Output, sink: Any) -> None:
    """CSV or TSV through DuckDB's writer (fast; quotes only where needed; lists as [a, b])."""
    import tempfile

    from rlprobe.store.engine import new_connection

    fd, path = tempfile.mkstemp(suffix=".csv", prefix="rlprobe-")
    os.close(fd)
    try:
        con = new_connection()
        con.from_arrow(table).write_csv(path, header=output.headers, sep="\t" if output.fmt == "tsv" else ",")
        with open(path, "rb") as fh:
            shutil.copyfileobj(fh, sink)
        sink.flush()
    finally:
        os.unlink(path)


def _write_file(columns: Sequence[str], types: Sequence[str], table: Any, output: Output) -> None:
    out = str(output.out)
    try:
        if output.fmt == "parquet":
            import pyarrow.parquet as pq

            pq.write_table(table, out)
        elif output.fmt in ("csv", "tsv"):
            with open(out, "wb") as fh:
                _csv_to(columns, table, output, fh)
        elif output.fmt in ("json", "nl"):
            with open(out, "w", encoding="utf-8") as fh:
                write_json(columns, types, table, fh.write, lines=output.fmt == "nl")
        else:  # a table in a file: every row, since the file is where they are read
            text = render_table(columns, python_rows(columns, table), width=None, headers=output.headers)
            Path(out).write_text(text + ("\n" if text else ""), encoding="utf-8")
    except OSError as exc:
        raise QueryError(f"cannot write {out}: {exc.strerror or exc}") from exc
    click.echo(f"wrote {table.num_rows} row{'s' if table.num_rows != 1 else ''} to {out} ({FORMAT_NAMES[output.fmt]})",
               err=True)
