"""Metric dumps: JSONL (one dict per line), a JSON array of dicts, or CSV/TSV with a header.

Nested dicts are flattened with '/' (`{"step": 3, "data": {"actor/entropy": 0.5}}`, what verl's
file logger writes, reads as `actor/entropy`).

What verl's file logger, W&B/MLflow exports and home-grown loops write. A row's step is its
`step`, `global_step` or `training/global_step` column when the file has one; otherwise row i
(0-based, counting metric rows only) is step `step_every * (i + 1)`, as the HF Trainer numbers
its logs.
"""

from __future__ import annotations

import csv
import io
import json
from pathlib import Path
from typing import Any, Iterable

from rlprobe.errors import SourceUnreadable
from rlprobe.importers._common import Entry, Parsed, classify, json_cut_short, read_text, torn_line, unended_line


# Wrappers that hold a step's metrics (verl's file logger writes {"step": N, "data": {...}}).
_WRAPPERS = frozenset({"data", "metrics", "scalars", "logs"})


def flatten(row: dict[str, Any]) -> dict[str, Any]:
    """Nested dicts as '/'-joined keys; a wrapper such as "data" adds no prefix."""
    if dict not in set(map(type, row.values())):  # the common case, decided in C
        return row
    out: dict[str, Any] = {}
    for key, value in row.items():
        if isinstance(value, dict):
            prefix = "" if key in _WRAPPERS else f"{key}/"
            out.update({prefix + str(k): v for k, v in flatten(value).items()})
        else:
            out[key] = value
    return out


def number_entries(rows: Iterable[tuple[int | None, dict[str, Any]]], parsed: Parsed, step_every: int | None,
                   default_rule: str = "") -> None:
    """Map rows into parsed.entries, numbering steps by the rows' own step key, else by position."""
    kept = []
    for line, row in rows:
        mapped = classify(row, parsed)
        if mapped is not None:
            kept.append((line, mapped))
    if any(m.step is not None for _, m in kept):
        for line, mapped in kept:
            if mapped.step is None:
                parsed.skip("no step")
                continue
            parsed.entries.append(Entry(step=mapped.step, mapped=mapped, line=line))
        parsed.step_rule = "the step column of each row"
        if step_every is not None:
            parsed.notes.append("--step-every is ignored: the rows carry their step")
        return
    every = step_every or 1
    for i, (line, mapped) in enumerate(kept):
        parsed.entries.append(Entry(step=every * (i + 1), mapped=mapped, line=line))
    parsed.step_rule = default_rule or (
        f"no step column: entry i is step {every}*(i+1)"
        + (" (--step-every)" if step_every else " (default 1; pass --step-every N for logging_steps=N)")
    )


def parse_jsonl(path: Path, step_every: int | None = None) -> Parsed:
    """Read a JSONL file of metric dicts; malformed lines are skipped and their numbers kept.

    A last line with no newline that is not a JSON object is a record cut mid-write (a writer
    killed, or still writing): it goes to parsed.torn, not to the malformed lines. One that
    parses is whole (a JSON object ends with its closing brace) and is read.
    """
    parsed = Parsed(kind="jsonl", files=[str(path)])
    rows: list[tuple[int | None, dict[str, Any]]] = []
    whole = read_text(path)
    lines = whole.split("\n")
    for number, line in enumerate(lines, start=1):
        text = line.strip()
        if not text:
            continue
        try:
            row = json.loads(text)
        except ValueError:
            row = None
        if not isinstance(row, dict):
            if number == len(lines):  # no newline after it: cut, not malformed
                parsed.torn.append(torn_line(path, whole))
            else:
                parsed.bad_lines.append(number)
            continue
        rows.append((number, flatten(row)))
    number_entries(rows, parsed, step_every)
    return parsed


def parse_json_array(path: Path, step_every: int | None = None) -> Parsed:
    """Read a .json file holding a list of metric dicts (or {"log_history": [...]} without the rest)."""
    parsed = Parsed(kind="json", files=[str(path)])
    text = read_text(path)
    try:
        data = json.loads(text)
    except ValueError as exc:
        if json_cut_short(text):  # one document: a prefix of it is not a run's first steps
            raise SourceUnreadable(f"{path}: not valid JSON: it ends mid-document (cut while being written, or a "
                                   "truncated copy); nothing imported") from None
        raise SourceUnreadable(f"{path}: not valid JSON ({str(exc)[:80]})") from None
    if not isinstance(data, list):
        raise SourceUnreadable(f"{path}: a JSON file must hold a list of metric dicts or a trainer_state.json")
    rows = []
    for row in data:
        if isinstance(row, dict):
            rows.append((None, flatten(row)))
        else:
            parsed.skip("not a dict")
    number_entries(rows, parsed, step_every)
    return parsed


def parse_csv(path: Path, step_every: int | None = None) -> Parsed:
    """Read a CSV/TSV of metrics with a header row; empty cells are 'not logged'."""
    parsed = Parsed(kind="csv", files=[str(path)])
    text = read_text(path)
    if path.suffix.lower() == ".tsv":
        dialect: Any = csv.excel_tab
    else:
        try:
            dialect = csv.Sniffer().sniff(text[:8192], delimiters=",\t;")
        except csv.Error:
            dialect = csv.excel
    reader = csv.DictReader(io.StringIO(text, newline=""), dialect=dialect)
    if not reader.fieldnames:
        raise SourceUnreadable(f"{path}: empty CSV (no header row)")
    rows: list[tuple[int | None, dict[str, Any]]] = []
    # A CSV row does not say where it ends: cut mid-write, its last cell may be a number cut short
    # (0.1234 read as 0.12) or missing. Only a newline says a row is whole, so a last row without
    # one is left out and reported as torn (every CSV writer ends its rows with a newline).
    unended = bool(unended_line(text).strip())
    try:
        for row in reader:
            last = unended and reader.line_num == text.count("\n") + 1
            if last:
                parsed.torn.append(torn_line(path, text))
                continue
            if None in row:  # more cells than header names: a torn or misaligned line
                parsed.bad_lines.append(reader.line_num)
                continue
            cells = {k: v for k, v in row.items() if k and v not in (None, "")}
            if cells:
                rows.append((reader.line_num, cells))
    except csv.Error:
        parsed.bad_lines.append(reader.line_num)
    number_entries(rows, parsed, step_every)
    return parsed
