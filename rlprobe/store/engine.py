"""The DuckDB engine: open a run or a runs root, create the versioned views, run queries.

The views are the SQL files under sql/ run in dependency order, after one line that binds the
root path. The same text is what `rlprobe sql` prints, so a plain DuckDB session gets exactly
the views rlprobe itself queries.
"""

from __future__ import annotations

import os
import re
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Iterable, Mapping, Sequence, TypeVar

import duckdb

from rlprobe import __version__
from rlprobe.errors import (
    UPGRADE_HINT, CorruptRecording, NotARecording, OutputRefused, QueryError, RecordingNotFound, SchemaTooNew,
)
from rlprobe.schemas import SCHEMA_VERSION
from rlprobe.store import sample_files, scope, sqlfiles, versions

if TYPE_CHECKING:
    from rlprobe.store.remote import RemotePath

T = TypeVar("T")
_RECORDING_FILES = ("manifest.json", "steps.parquet", "steps", "events.jsonl", "samples")
# file names the views read (sql/v1/sources): an output so named below a root would join the data
_READ_AS_RECORDING = re.compile(r"^(manifest\.json|steps\.parquet|events\.jsonl|rollout_trace\.jsonl|part-.*\.parquet|shard-.*\.parquet)$")
_URL = re.compile(r"^[A-Za-z][A-Za-z0-9+.\-]*://")  # a scheme: object storage through fsspec
_TRANSIENT_RETRIES = 5  # a compaction may delete a part, a flush replace a shard, between DuckDB's glob and its read


@dataclass
class Target:
    """What a user pointed at: one run directory or a runs root (a local path, or a URL)."""

    path: Path | RemotePath
    kind: str  # "run" or "root"

    @property
    def remote(self) -> bool:
        """True when the target is in object storage (read through fsspec)."""
        return is_url(str(self.path))


@dataclass
class Store:
    """An open DuckDB connection with the views over one target, and what it noticed.

    Over a root, a run whose files cannot be read is left out (broken, with the file and the
    reason; a BrokenRunWarning is issued) and the query runs over the others; strict=True
    raises instead. See rlprobe.store.health.
    """

    con: duckdb.DuckDBPyConnection
    target: Target
    warnings: list[str] = field(default_factory=list)
    strict: bool = False
    broken: dict[str, Any] = field(default_factory=dict)  # run_dir -> health.Broken
    _run_dirs: list[str] | None = field(default=None, repr=False)

    def readable_runs(self) -> list[str]:
        """The run directories below the root that are read (all of them but the broken ones)."""
        if self._run_dirs is None:
            from rlprobe.store import health

            self._run_dirs = health.all_run_dirs(self)
        return [d for d in self._run_dirs if d not in self.broken]

    def excluding(self) -> list[str] | None:
        """What rlprobe_runs holds: the readable runs once one was left out, else None (all)."""
        return self.readable_runs() if self.broken else None

    def leave_out(self, broken: Any) -> None:
        """Stop reading one run of the root (a health.Broken), and say so once."""
        import warnings as _warnings

        from rlprobe.errors import BrokenRunWarning

        self.broken[broken.run_dir] = broken
        _warnings.warn(f"left out the broken run {broken.run_dir}: {broken} (--strict fails instead)",
                       BrokenRunWarning, stacklevel=3)
        run(self.con, "SET VARIABLE rlprobe_runs = ?::VARCHAR[]", [self.readable_runs()], "none")

    def table(self, sql: str, params: Sequence[Any] | None = None) -> Any:
        """Run sql over the views and return a pyarrow Table (one-line errors, retries)."""
        return self._scoped(sql, params, "arrow")

    def typed_table(self, sql: str, params: Sequence[Any] | None = None,
                    names: Iterable[str] | None = None) -> tuple[list[str], list[str], Any] | None:
        """Run sql and return (column names, SQL type names, pyarrow Table); None if no result.

        names: every name sql mentions, from a caller whose sql never changes (rlprobe ls), with
        a test that they are what scope.columns_read(sql) proves: the columns are narrowed to
        them without parsing sql (sqlglot's import, ~140 ms, at every start of the command).
        """
        return self._scoped(sql, params, "typed", names)

    def rows(self, sql: str, params: Sequence[Any] | None = None) -> tuple[list[str], list[str], list[tuple[Any, ...]]]:
        """Run sql over the views and return (column names, SQL type names, rows)."""
        return self._scoped(sql, params, "rows")

    def scope_for(self, sql: str, params: Sequence[Any] | Mapping[str, Any] | None = None) -> list[str] | None:
        """The run directories sql (with params) can read below a root; None for all of them."""
        if self.target.kind != "root" or not scope.mentions(sql, ("where",)) or not scope.mentions(sql, ("run_id",)) \
                or not scope.mentions_a_view(sql):
            return None  # a run, or a query with no WHERE, run_id or view: nothing to prove, no parse
        run_ids = scope.run_ids_read(sql, params)
        if not run_ids:
            return None  # unproved, or no view read at all: nothing to narrow
        found = run(self.con, sqlfiles.query("scope_run_dirs"), {"run_ids": sorted(run_ids)}, "rows")[2]
        dirs: dict[str, list[str]] = {}
        for run_dir, run_id in found:
            dirs.setdefault(run_id, []).append(run_dir)
        return scope.scope_dirs(dirs, run_ids)

    def refuse_output_inside(self, out: str | os.PathLike[str]) -> None:
        """Raise OutputRefused when out lies inside a recording of the target, or would be read
        as a file of one (a steps.parquet anywhere below a root would be a new run)."""
        if self.target.remote:
            return  # outputs are local files; a bucket's recordings are not on this disk
        path = Path(out).expanduser()
        path = path.resolve() if path.exists() else path.parent.resolve() / path.name
        root = Path(str(self.target.path))
        if self.target.kind == "run":
            recordings = [root]
        else:
            recordings = [Path(d) for (d,) in run(self.con, "SELECT DISTINCT run_dir FROM v1.runs", fetch="rows")[2] if d]
        for recording in recordings:
            if path == recording or recording in path.parents:
                raise OutputRefused(f"{out} is inside the recording {recording}: nothing is ever written into a "
                                    "recording; give an --out path outside it")
        if root in path.parents and _READ_AS_RECORDING.match(path.name):
            raise OutputRefused(f"{out} is below {root} and named like a recording file, so readers would take it "
                                "for (part of) a run; give another --out name, or a path outside the root")

    def tolerate(self, work: Callable[[], T]) -> T:
        """work() (anything that reads this store's views), with broken runs of a root left out
        one by one until it succeeds (rlprobe.store.health.tolerate)."""
        from rlprobe.store import health

        return health.tolerate(self, work)

    def _scoped(self, sql: str, params: Sequence[Any] | None, fetch: str, names: Iterable[str] | None = None) -> Any:
        """run(), with the views narrowed to the runs sql provably reads (rlprobe.store.scope),
        and broken runs of a root left out (rlprobe.store.health)."""
        from rlprobe.store import health

        return health.tolerate(self, lambda: self._scoped_once(sql, params, fetch, names))

    def _scoped_once(self, sql: str, params: Sequence[Any] | None, fetch: str, names: Iterable[str] | None) -> Any:
        dirs = self.scope_for(sql, params)
        columns = self.columns_for(sql, names)
        if dirs is None and columns is None:
            return run(self.con, sql, params, fetch)
        if dirs is not None:
            run(self.con, "SET VARIABLE rlprobe_scope = ?::VARCHAR[]", [dirs], "none")
        if columns is not None:
            run(self.con, "SET VARIABLE rlprobe_columns = ?", [columns], "none")
        try:
            return run(self.con, sql, params, fetch)
        finally:
            run(self.con, "RESET VARIABLE rlprobe_scope", None, "none")
            run(self.con, "RESET VARIABLE rlprobe_columns", None, "none")

    def columns_for(self, sql: str, names: Iterable[str] | None = None) -> str | None:
        """The pattern of step and sample columns sql needs (rlprobe.store.scope.columns_read,
        or the names a caller gives for its fixed sql); None for all of them."""
        from rlprobe.schemas import SAMPLE_COLUMN_TYPES, STEP_COLUMN_TYPES

        names = scope.columns_read(sql) if names is None else frozenset(names)
        if names is None:
            return None
        return scope.columns_pattern(names, [*STEP_COLUMN_TYPES, *SAMPLE_COLUMN_TYPES])


def resolve(path: str | os.PathLike[str]) -> Target:
    """Say whether path is a run or a runs root, or raise the error a user can act on."""
    if is_url(path):
        from rlprobe.store import remote  # fsspec and its clients load only for URLs

        url, kind = remote.classify(str(path))
        return Target(url, kind)
    p = Path(path).expanduser()
    if not p.exists():
        raise RecordingNotFound(f"{path}: no such file or directory")
    p = p.resolve()
    if os.sep == "/" and "\\" in str(p):
        # DuckDB's file listing does not list a name with a backslash on POSIX: every file below
        # would be silently missing, so refuse rather than answer with nothing
        raise NotARecording(f"{path}: rlprobe cannot read a path with a backslash in it (DuckDB does not list such "
                            "files); rename the folder")
    if p.is_file():
        if p.name in ("manifest.json", "steps.parquet", "events.jsonl"):
            return Target(p.parent, "run")
        raise NotARecording(f"{path} is a file, not a recording: point at a run directory or a folder of runs")
    if any((p / name).exists() for name in _RECORDING_FILES):
        return Target(p, "run")
    if not any(p.iterdir()):
        raise NotARecording(f"{path} is empty: no rlprobe recording here (yet)")
    return Target(p, "root")


def is_url(path: object) -> bool:
    """True when path is a URL (s3://bucket/prefix, gs://..., memory://...), not a local path."""
    return isinstance(path, str) and _URL.match(path) is not None and not path.startswith("file://")


def sql_literal(text: str) -> str:
    """text as a DuckDB string literal, whatever it holds (quotes, newlines, control characters).

    Control characters are spelled chr(N) outside the quotes, so the script stays one clean
    line per statement for any tool that reads it line by line (the duckdb CLI's .read).
    Paths reach SQL only this way or as bound parameters; never inside a comment.
    """
    parts: list[str] = []
    literal: list[str] = []
    for ch in text:
        if ch == "'":
            literal.append("''")
        elif ord(ch) < 32 or ord(ch) == 127:
            parts.append("'" + "".join(literal) + "'")
            parts.append(f"chr({ord(ch)})")
            literal = []
        else:
            literal.append(ch)
    parts.append("'" + "".join(literal) + "'")
    return " || ".join(p for p in parts if p != "''") or "''"


def init_script(target: Target, version: int | None = None, features: bool = True, bind_root: str | None = None) -> str:
    """The SQL that creates every view over target: absolute paths, runnable by any DuckDB.

    features=False leaves out the doctor's feature views. bind_root makes the views bind
    against another (empty) folder while they are created: DuckDB binds a view when creating
    it, which lists and opens every file below the root for each view, and binds it again at
    query time anyway (new files and columns show up), so the real root is set only at the end.
    """
    version = version or max(sqlfiles.versions())
    lines = [
        # the path is never written into a comment: a newline in a folder name would end it
        f"-- rlprobe {__version__}: views over the folder set in rlprobe_root (recording format v{SCHEMA_VERSION})",
        "-- Run in any DuckDB session (.read this file in the duckdb CLI); query steps, samples,",
        "-- events, runs, manifest. Regenerate with: rlprobe sql PATH",
        f"SET VARIABLE rlprobe_root = {sql_literal(bind_root or str(target.path))};",
    ]
    for v in sqlfiles.versions():
        if v > version:
            continue
        lines.append(f"CREATE SCHEMA IF NOT EXISTS v{v};")
        for f in sqlfiles.load(v):
            if f.kind == "query":
                continue  # parametrized SELECTs that Python runs, not objects of the session
            if features or f.kind != "feature":
                lines += ["", f.text.rstrip()]
    lines += ["", f"-- unqualified names point at the newest contract, v{version}"]
    for f in sqlfiles.public_views(version):
        lines.append(f"CREATE OR REPLACE VIEW main.{f.name} AS SELECT * FROM v{version}.{f.name};")
    if bind_root:
        lines.append(f"SET VARIABLE rlprobe_root = {sql_literal(str(target.path))};")
    return "\n".join(lines) + "\n"


def _check_versions(store: Store) -> int:
    """Refuse newer recordings up front (every manifest, rank sub-recordings' too), or leave
    them out of a root; warn about unreadable manifests. Returns how many manifests there are."""
    from rlprobe.store import health

    def read() -> list[tuple[Any, ...]]:
        return run(store.con, "SELECT run_dir, rec_dir, ok, schema_version, version_text FROM v1.manifest_files "
                              "ORDER BY run_dir, rec_dir", fetch="rows")[2]

    rows = health.tolerate(store, read)  # a manifest that is not UTF-8 fails the whole read
    for run_dir, rec_dir, ok, schema_version, version_text in rows:
        if not ok:
            if rec_dir == run_dir:
                store.warnings.append(f"{rec_dir}/manifest.json is not valid JSON; its data files are read without it")
            continue
        try:
            if schema_version is None and version_text is not None:
                raise SchemaTooNew(f"{rec_dir}/manifest.json declares schema_version {version_text[:40]}, not an "
                                   f"integer: no rlprobe can tell which recording format it is: {UPGRADE_HINT} or fix the manifest")
            versions.check(schema_version, rec_dir)
        except (SchemaTooNew, CorruptRecording) as exc:
            if store.target.kind != "root" or store.strict:
                raise
            if run_dir not in store.broken:
                store.leave_out(health.Broken(run_dir, f"{rec_dir}/manifest.json", str(exc)))
    return len(rows)


def new_connection() -> duckdb.DuckDBPyConnection:
    """An in-memory DuckDB connection for library use: no progress bar (it would draw on a
    user's stderr in the middle of a command's output)."""
    con = duckdb.connect(":memory:")
    con.execute("SET enable_progress_bar = false")  # a session-only option in DuckDB 2.0
    return con


def open_store(path: str | os.PathLike[str], threads: int | None = None, strict: bool = False) -> Store:
    """Open a run or a runs root with every view ready.

    Over a root, a run that cannot be read is left out with a BrokenRunWarning (Store.broken
    says which file, and why); strict=True raises instead, as for a single run.
    """
    target = resolve(path)
    con = new_connection()
    if target.remote:
        from rlprobe.store import remote

        remote.register(con, str(target.path))
    if threads:
        con.execute(f"SET threads = {int(threads)}")
    script = init_script(target, features=False, bind_root=str(sqlfiles.sql_root() / "_bind_without_files"))
    for attempt in range(_TRANSIENT_RETRIES + 1):
        try:
            con.execute(script)  # binding the views globs and opens files, so it can race too
            break
        except duckdb.IOException as exc:
            if attempt < _TRANSIENT_RETRIES and _is_vanished_file(exc):
                time.sleep(0.05 * (attempt + 1))
                continue
            raise QueryError(f"cannot read {target.path}: {_first_line(exc)}") from exc
        except duckdb.Error as exc:  # a broken sql/ is our bug; say so plainly
            raise CorruptRecording(f"could not create rlprobe's views: {_first_line(exc)}") from exc
    store = Store(con, target, strict=strict)
    manifests = _check_versions(store)
    if target.kind == "root" and not manifests:
        found = store.rows("SELECT count(*) FROM runs")[2][0][0]  # runs without manifests
        if not found:
            raise NotARecording(
                f"{target.path} holds no rlprobe recording: expected run directories with a "
                "manifest.json (written by rlprobe.Recorder) at any depth below it"
            )
    return store


def empty_store() -> Store:
    """Views over a folder that does not exist: every view with its fixed columns, no rows."""
    target = Target(sqlfiles.sql_root() / "_bind_without_files", "root")
    con = new_connection()
    con.execute(init_script(target))
    return Store(con, target)


def connect(path: str | os.PathLike[str]) -> duckdb.DuckDBPyConnection:
    """A DuckDB connection over a run directory or a runs root, with rlprobe's views ready."""
    return open_store(path).con


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip()
    if text.startswith("Traceback (most recent call last):"):
        return text.splitlines()[-1]  # a Python filesystem (fsspec) failed inside DuckDB: its error is the last line
    return text.splitlines()[0] if text else type(exc).__name__


def run(con: duckdb.DuckDBPyConnection, sql: str, params: Sequence[Any] | None = None, fetch: str = "arrow") -> Any:
    """Run sql and fetch the result ("arrow" table, "rows" as (columns, types, tuples), "typed" as (columns, types, arrow table),
    "tuples" alone, or "none").

    "tuples" runs the statement as it is (execute): DuckDB plans it once. The others make a
    relation first, which binds the statement, then bind and plan it again to run it: for the
    dashboard's chart query (its macros expanded for every metric) the first binding alone was
    ~15 ms of CPU.

    Reads that raced a compaction (a part file deleted between DuckDB's glob and its read) are
    retried; every other error becomes one line. A query that reads samples gets the shard files
    listed just before it (rlprobe.store.sample_files).
    """
    for attempt in range(_TRANSIENT_RETRIES + 1):
        try:
            with sample_files.bound(con, sql):  # listed again at each attempt
                if fetch == "tuples":
                    return con.execute(sql, params).fetchall()
                rel = con.sql(sql, params=params)
                if rel is None or fetch == "none":
                    return None
                if fetch == "rows":
                    return rel.columns, [str(t) for t in rel.types], rel.fetchall()
                if fetch == "typed":
                    return rel.columns, [str(t) for t in rel.types], rel.to_arrow_table()
                return rel.to_arrow_table()
        except duckdb.IOException as exc:
            if attempt < _TRANSIENT_RETRIES and (_is_vanished_file(exc) or _is_replaced_file(exc)):
                time.sleep(0.05 * (attempt + 1))
                continue
            raise QueryError(_first_line(exc)) from exc
        except duckdb.Error as exc:
            if attempt < _TRANSIENT_RETRIES and _is_replaced_file(exc):
                time.sleep(0.05 * (attempt + 1))
                continue
            message = _first_line(exc)
            if "upgrade rlprobe" in message:
                raise SchemaTooNew(message.split("Error: ", 1)[-1]) from exc
            raise QueryError(message) from exc
    raise AssertionError("unreachable")


# What DuckDB 2.0's parquet reader says when a file was replaced (renamed over) between the two
# times a globbed scan opens it, once to bind and once to read: the open sample shard of a live
# run is rewritten that way at every flush. A file that is really corrupt still fails, after the
# retries.
_REPLACED_FILE_ERRORS = ("TProtocolException", "don't know what type", "invalid TType", "Variable-length int over",
                         "Could not read enough bytes", "Prefetch registered for bytes outside file")


def _is_replaced_file(exc: BaseException) -> bool:
    text = str(exc)
    return any(needle in text for needle in _REPLACED_FILE_ERRORS)


def _is_vanished_file(exc: BaseException) -> bool:
    text = str(exc)
    return "No such file" in text or "No files found" in text or "Cannot open file" in text or "could not open" in text.lower()
