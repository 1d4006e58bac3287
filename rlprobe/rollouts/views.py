"""Read rollout traces through the SQL views ``rollout_events`` and ``batch_age``.

A trace is found in a run directory (``rollout_trace.jsonl``, rank folders included), in every
run below a runs root, or given as a bare file anywhere (a controller's log directory, a copy).
Bare files are bound to the views with the DuckDB variable ``rlprobe_rollout_traces``, a MAP
from a file's absolute path to the run directory it belongs to (NULL: a run of its own).
"""

from __future__ import annotations

import codecs
import os
from pathlib import Path
from typing import Any, Sequence

from rlprobe.errors import NotARecording, RecordingNotFound, RlprobeError
from rlprobe.rollouts.batch_age import ROLLOUT_TRACE_FILENAME, parse_line
from rlprobe.store import engine, sqlfiles

TRACES_VARIABLE = "rlprobe_rollout_traces"
BATCH_AGE_COLUMNS = "run_id, step, batch_age, tokens, trained_version, groups, derived_groups"


class TraceUnreadable(RlprobeError):
    """A rollout trace is missing, or a file given as one holds no trace events."""


def check_trace_file(path: Path) -> None:
    """Refuse a file no line of which is a trace event (an empty file is a trace not yet written)."""
    try:
        with open(path, "rb") as fh:
            head = fh.read(1)
            if not head:
                return
            fh.seek(0)
            for raw in fh:
                if parse_line(raw) is not None:
                    break
            else:
                raise TraceUnreadable(
                    f"{path} is not a rollout trace: no line is a JSON object with an \"event\" "
                    "(expected one JSON object per line, as rlprobe.rollouts.RolloutTrace writes)")
            fh.seek(0)
            decoder, offset = codecs.getincrementaldecoder("utf-8")(), 0
            # the SQL source reads the file as UTF-8 text, whole: one bad byte fails the query
            try:
                while chunk := fh.read(1 << 20):
                    decoder.decode(chunk)
                    offset += len(chunk)
                decoder.decode(b"", final=True)
            except UnicodeDecodeError as exc:
                raise TraceUnreadable(f"{path} is not UTF-8 text (near byte {offset + exc.start}): not a rollout trace") from exc
    except IsADirectoryError as exc:
        raise TraceUnreadable(f"{path} is a directory, not a trace file") from exc
    except OSError as exc:
        raise TraceUnreadable(f"cannot read {path}: {exc.strerror or exc}") from exc


def _bind(store: engine.Store, files: dict[str, str | None]) -> None:
    store.con.execute(
        f"SET VARIABLE {TRACES_VARIABLE} = MAP(?::VARCHAR[], ?::VARCHAR[])",
        [list(files), list(files.values())])


def open_traces(path: str | os.PathLike[str], traces: Sequence[str | os.PathLike[str]] = ()) -> engine.Store:
    """A Store whose rollout_events and batch_age views read the trace(s) at path.

    path: a run directory or runs root (their rollout_trace.jsonl files), or a trace file.
    traces: more trace files; they belong to path's run when path is one run, else each is
    a run of its own.
    """
    p = Path(path).expanduser()
    if not p.exists():
        raise RecordingNotFound(f"{path}: no such file or directory")
    p = p.resolve()
    extra: dict[str, str | None] = {}
    for t in traces:
        tp = Path(t).expanduser()
        if not tp.is_file():
            raise RecordingNotFound(f"{t}: no such trace file")
        check_trace_file(tp)
        extra[str(tp.resolve())] = None
    if p.is_file():
        check_trace_file(p)
        if p.name == ROLLOUT_TRACE_FILENAME and (p.parent / "manifest.json").exists():
            p = p.parent  # a run's own trace: read it with its run's id
        else:
            # the views' root is a folder that does not exist: only the bound files are read
            con = engine.new_connection()
            con.execute(engine.init_script(engine.Target(sqlfiles.sql_root() / "_bind_without_files", "root"), features=False))
            store = engine.Store(con, engine.Target(p, "run"))
            _bind(store, {str(p): None, **extra})
            return store
    found = [p / ROLLOUT_TRACE_FILENAME] if (p / ROLLOUT_TRACE_FILENAME).is_file() else []
    found += [f for f in p.rglob(ROLLOUT_TRACE_FILENAME) if f != p / ROLLOUT_TRACE_FILENAME and not f.name.startswith(".")]
    if not found and not extra:
        raise TraceUnreadable(
            f"{path} holds no {ROLLOUT_TRACE_FILENAME}: record one with rlprobe.rollouts.RolloutTrace "
            "or pass a trace file")
    for f in found:
        check_trace_file(f)
    try:
        store = engine.open_store(p)
    except NotARecording:
        # a controller's log folder: traces but no rlprobe recording
        target = engine.Target(p, "run" if (p / ROLLOUT_TRACE_FILENAME).is_file() else "root")
        con = engine.new_connection()
        con.execute(engine.init_script(target, features=False))
        store = engine.Store(con, target)
    if extra:
        owner = str(store.target.path) if store.target.kind == "run" else None
        _bind(store, {f: owner for f in extra})
    return store


def batch_age_table(path: str | os.PathLike[str], traces: Sequence[str | os.PathLike[str]] = ()) -> tuple[list[str], list[str], list[tuple[Any, ...]]]:
    """The batch_age view over path as (columns, SQL types, rows), ordered by run and step."""
    store = open_traces(path, traces)
    return store.rows(f"SELECT {BATCH_AGE_COLUMNS} FROM batch_age ORDER BY run_id, step")


def sql_batch_age_by_step(path: str | os.PathLike[str], traces: Sequence[str | os.PathLike[str]] = ()) -> dict[int, float]:
    """batch_age_by_step computed by the SQL view instead of Python (one run expected)."""
    _, _, rows = batch_age_table(path, traces)
    return {row[1]: row[2] for row in rows}


__all__ = ["TraceUnreadable", "open_traces", "batch_age_table", "sql_batch_age_by_step", "check_trace_file"]
