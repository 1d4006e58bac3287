"""Which runs below a root can be read, and which file of a broken one stops the others.

One corrupt part, one manifest that is not UTF-8 or one recording of a newer format below a
root used to fail every query over the root. A query that fails on a file is traced back to its
run (from the file DuckDB names, else by reading every source run by run, halving the set each
time); that run is left out, with the file and the reason, and the query runs again over the
others. Leaving a run out is setting the variable rlprobe_runs to the run directories that are
still read (sql/v1/sources/00_paths.sql), so every view lists only their files.

This costs nothing until something fails: a healthy root is read with one glob, as before.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Callable, Optional, Sequence

import duckdb

from rlprobe.errors import RlprobeError, SchemaTooNew

if TYPE_CHECKING:
    from rlprobe.store.engine import Store

# What a recording's files are called (as v1.rec_dir and v1.run_dir parse them), to go from a
# file DuckDB names back to the run it belongs to.
_FILE_OF_RECORDING = re.compile(
    r"(?s)^(.*)/(manifest\.json|steps\.parquet|steps/part-[^/]*\.parquet|samples/shard-[^/]*\.parquet"
    r"|events\.jsonl|rollout_trace\.jsonl)$"
)
_RANK_DIR = re.compile(r"/rank-[0-9]+$")
_ELSEWHERE = re.compile(r"""["'](/|[A-Za-z][A-Za-z0-9+.-]*://)[^"']*["']""")  # a quoted path: the message names a file
# The sources that read files, each with the query that reads every column of it.
_SOURCES = ("manifest_files", "src_steps", "src_samples", "src_events", "src_rollout_trace")
# Files of one run, each read on its own to name the one that fails (reader, glob suffix). A
# reader takes a name as a glob: each is escaped, so 'a*/steps.parquet' reads no sibling's file.
_FILE_READERS = (
    ("read_text(v1.glob_escape(?))", "manifest.json"),
    ("read_parquet(v1.glob_escape(?), hive_partitioning = false)", "steps.parquet"),
    ("read_parquet(v1.glob_escape(?), hive_partitioning = false)", "steps/part-*.parquet"),
    ("read_parquet(v1.glob_escape(?), hive_partitioning = false)", "samples/shard-*.parquet"),
    ("read_json(v1.glob_escape(?), format = 'newline_delimited', ignore_errors = true, hive_partitioning = false)", "events.jsonl"),
    ("read_text(v1.glob_escape(?))", "rollout_trace.jsonl"),
)


@dataclass
class Broken:
    """A run left out of a root: its directory, the file that fails and why."""

    run_dir: str
    file: Optional[str]
    reason: str

    def __str__(self) -> str:
        where = self.file or self.run_dir
        return self.reason if where in self.reason else f"{where}: {self.reason}"


def is_file_error(exc: BaseException) -> bool:
    """True for an error reading a recording's files (as opposed to an error in the SQL itself)."""
    cause = exc.__cause__ if isinstance(exc, RlprobeError) else exc
    if isinstance(exc, SchemaTooNew):
        return True
    if isinstance(cause, (duckdb.IOException, duckdb.InvalidInputException, duckdb.SerializationException)):
        return True
    # DuckDB's parquet reader raises the bare duckdb.Error for a footer it cannot decode
    # ("TProtocolException: Invalid data"), and names no file
    return type(cause) is duckdb.Error


def run_dir_of(path: str) -> str:
    """The run directory a recording file belongs to (rank sub-recordings belong to their run)."""
    m = _FILE_OF_RECORDING.match(path)
    rec_dir = m.group(1) if m else path.rsplit("/", 1)[0]
    return _RANK_DIR.sub("", rec_dir)


def files_named(message: str, root: str) -> list[str]:
    """The paths below root that an error message quotes ('...' or "..."), in order."""
    out = []
    for quote in ("'", '"'):
        start = 0
        while (i := message.find(quote + root, start)) >= 0:
            j = message.find(quote, i + 1)
            if j < 0:
                break
            out.append(message[i + 1 : j])
            start = j + 1
    return sorted(set(out), key=message.find)


def all_run_dirs(store: "Store") -> list[str]:
    """Every run directory below the root, from a listing of its recording files (nothing read)."""
    from rlprobe.store.engine import run

    found: set[str] = set()
    for suffix in ("manifest.json", "steps.parquet", "steps/part-*.parquet", "samples/shard-*.parquet", "events.jsonl"):
        rows = run(store.con, f"SELECT file FROM glob(v1.root_glob() || '/**/{suffix}')", fetch="rows")[2]
        found.update(run_dir_of(f) for (f,) in rows)
    return sorted(found)


class _Runs:
    """Set and restore rlprobe_runs (the run directories the views read) around probes."""

    def __init__(self, store: "Store") -> None:
        self.store = store

    def read(self, dirs: Optional[Sequence[str]]) -> None:
        from rlprobe.store.engine import run

        if dirs is None:
            run(self.store.con, "RESET VARIABLE rlprobe_runs", fetch="none")
        else:
            run(self.store.con, "SET VARIABLE rlprobe_runs = ?::VARCHAR[]", [list(dirs)], "none")


def _reads(store: "Store", source: str) -> Optional[BaseException]:
    """Read every column of every row of one source; the error it raises, or None."""
    return _drain(store, f"SELECT * FROM v1.{source}", None)


def _drain(store: "Store", sql: str, params: Optional[list[Any]]) -> Optional[BaseException]:
    """Run sql and read its whole result in batches (every column decoded, little held)."""
    try:
        for _ in store.con.sql(sql, params=params).to_arrow_reader(65536):
            pass
    except duckdb.Error as exc:
        return exc
    return None


def _failing(store: "Store", source: str, dirs: list[str], runs: _Runs) -> list[str]:
    """The run directories of dirs whose files make source fail (halving the set each time)."""
    if not dirs:
        return []
    runs.read(dirs)
    if _reads(store, source) is None:
        return []
    if len(dirs) == 1:
        return dirs
    half = len(dirs) // 2
    return _failing(store, source, dirs[:half], runs) + _failing(store, source, dirs[half:], runs)


def name_file(store: "Store", run_dir: str) -> tuple[Optional[str], Optional[str]]:
    """(file, reason) of the first file of run_dir that fails when read on its own, else (None, None)."""
    for reader, suffix in _FILE_READERS:
        try:
            ((patterns,),) = store.con.sql("SELECT v1.run_globs(?, ?)", params=[run_dir, suffix]).fetchall()
            files = [f for pattern in patterns for (f,) in store.con.sql("SELECT file FROM glob(?)", params=[pattern]).fetchall()]
        except duckdb.Error:
            continue
        for path in files:
            failure = _drain(store, f"SELECT * FROM {reader}", [path])
            if failure is not None:
                return path, _first_line(failure)
    return None, None


def locate(store: "Store", exc: BaseException) -> list[Broken]:
    """The runs of the root that exc comes from: by the file its message names, else by reading
    every source over halves of the runs still read. Empty when no run can be blamed."""
    root = str(store.target.path).rstrip("/")
    message = str(exc)
    if isinstance(exc, SchemaTooNew) or "upgrade rlprobe" in message:
        # "recording <dir> uses recording format v99 ...": the directory is named, not a file
        for run_dir in sorted(store.readable_runs(), key=len, reverse=True):
            if f"recording {run_dir} " in message or message.startswith(f"{run_dir} "):
                return [Broken(run_dir, f"{run_dir}/manifest.json", message.split("Error: ", 1)[-1])]
    named = [f for f in files_named(message, root) if f != root]
    if named:
        file = named[0]
        return [Broken(run_dir_of(file), file, message.split("Error: ", 1)[-1])]
    if _ELSEWHERE.search(message):
        return []  # a file outside the root (a read_csv of the query's own): no run to blame
    runs = _Runs(store)
    current = store.readable_runs()
    broken: list[Broken] = []
    try:
        for source in _SOURCES:
            for run_dir in _failing(store, source, current, runs):
                file, reason = name_file(store, run_dir)
                broken.append(Broken(run_dir, file, reason or message))
            if broken:
                break
    finally:
        runs.read(store.excluding())
    return broken


def tolerate(store: "Store", work: Callable[[], Any]) -> Any:
    """work(), with broken runs of a root left out one by one until it succeeds.

    A single run, a strict store, or an error no run can be blamed for raises as it is (a run
    that is broken on its own raises an error naming the file).
    """
    while True:
        try:
            return work()
        except RlprobeError as exc:
            if not is_file_error(exc):
                raise
            if store.target.kind != "root" or store.strict:
                raise _with_file(store, exc) from exc.__cause__
            found = [b for b in locate(store, exc) if b.run_dir not in store.broken]
            if not found:
                raise _with_file(store, exc) from exc.__cause__
            for b in found:
                store.leave_out(b)
            if not store.readable_runs():
                raise exc  # every run is broken: there is nothing to go on with


def _with_file(store: "Store", exc: RlprobeError) -> RlprobeError:
    """exc, with the file that fails named when its message names none."""
    root = str(store.target.path).rstrip("/")
    if files_named(str(exc), root) or _ELSEWHERE.search(str(exc)) or isinstance(exc, SchemaTooNew) or store.target.remote:
        return exc
    dirs = [root] if store.target.kind == "run" else store.readable_runs()
    for run_dir in dirs[:50]:  # a root that strict mode refuses: name the first file that fails
        file, reason = name_file(store, run_dir)
        if file is not None:
            return type(exc)(f"{file}: {reason}")
    return exc


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__
