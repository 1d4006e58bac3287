"""RunWriter: the synchronous writer of one run directory. The Recorder wraps it in a thread.

Every file a reader can match by name is complete: data goes to a hidden temp name first and is
renamed into place (rename is atomic on POSIX), so a crash or a full disk mid-write never leaves
a torn file where a reader would find it. Recordings are only ever added to.
"""

from __future__ import annotations

import itertools
import json
import os
import re
import threading
import time
import uuid
from pathlib import Path
from typing import Any, Sequence

import pyarrow as pa
import pyarrow.parquet as pq

from rlprobe.jsonsafe import json_safe
from rlprobe.layout import delta_name, newest_shards, parse_shard, parse_shard_file, shard_name
from rlprobe.schemas import SAMPLE_COLUMN_TYPES, STEP_COLUMN_TYPES, Event, RunManifest

SAMPLES_PER_SHARD = 4096
ARROW_CHUNK_ROWS = 512  # rows converted to Arrow per call (each call holds the GIL; see _build_table)
DELTAS_PER_MERGE = 4  # a live shard is read from at most this many deltas and one open version
_SUPERSEDED_GRACE_S = 10.0  # how long the deltas a seal replaced stay for readers that listed them
PARQUET_COMPRESSION = "zstd"
# A step table's step column is near-consecutive integers: DELTA_BINARY_PACKED stores them in a
# few bits each and decodes them without a lookup, where a dictionary holds every step once more
# (each is distinct) and costs every reader a lookup per row: reading the step column of ten
# 100k-step runs, which every chart and doctor pass does, took ~3x as long as reading wall_time.
# Readers do not depend on it: a recording written before reads as it did (DuckDB, pyarrow and
# Spark >= 3.3 read both).
STEP_DELTA_COLUMNS = ("step",)

_ARROW_TYPES = {
    "BIGINT": pa.int64(),
    "DOUBLE": pa.float64(),
    "VARCHAR": pa.string(),
    "BOOLEAN": pa.bool_(),
    "BIGINT[]": pa.list_(pa.int64()),
    "DOUBLE[]": pa.list_(pa.float64()),
}
class PartialWrite(OSError):
    """A write failed after `written` of the given rows were safely on disk."""

    def __init__(self, written: int, cause: BaseException) -> None:
        super().__init__(f"{type(cause).__name__}: {cause}")
        self.written = written


_PART_RE = re.compile(r"^part-(\d+)\.parquet$")
_TEMP_RE = re.compile(r"^\..+\.[0-9a-f]{8}\.tmp$")  # atomic_write_*'s hidden temp names


# What building a table from rows raises for a value Arrow cannot hold (an int past int64, text
# with a lone surrogate, ...). Never an OSError: those are the disk's, and are retried.
_DATA_ERRORS = (pa.ArrowException, OverflowError, UnicodeError, TypeError, ValueError)


def _table(rows: list[dict[str, Any]], fixed_types: dict[str, str], rejected: list[tuple[Any, str]] | None = None) -> pa.Table:
    """Arrow table of the columns present in rows; known columns get their contract type.

    With rejected, a row Arrow cannot hold is left out and appended there as (row's step,
    reason) instead of failing the whole table: one bad row costs that row, never its batch.
    The recorder coerces every value first, so this is the last line, not the usual path.
    """
    try:
        return _build_table(rows, fixed_types)
    except _DATA_ERRORS:
        if rejected is None:
            raise
    good = []
    for row in rows:
        try:
            _build_table([row], fixed_types)
        except _DATA_ERRORS as exc:
            rejected.append((row.get("step"), f"{type(exc).__name__}: {str(exc)[:200]}"))
            continue
        good.append(row)
    return _build_table(good, fixed_types)


def _build_table(rows: list[dict[str, Any]], fixed_types: dict[str, str]) -> pa.Table:
    """The table of rows, each column converted in chunks of ARROW_CHUNK_ROWS rows.

    Converting Python objects to Arrow holds the GIL for the whole call, and the training
    thread waits that long for its next log_* call: one call over a flush of 64 samples x 2.4 KB
    x 200 steps held it for tens of milliseconds. Chunks bound each hold to about a millisecond,
    and the GIL is offered back between them (yield_gil).
    """
    names: set[str] = set().union(*rows)
    ordered = [c for c in fixed_types if c in names] + sorted(c for c in names if c not in fixed_types)
    # dict.get mapped over the rows is the same lookup as row.get(name), without a Python frame
    # per row; a row of any other mapping type takes the plain comprehension.
    get = dict.get if set(map(type, rows)) == {dict} else None
    arrays = []
    step = ARROW_CHUNK_ROWS
    for name in ordered:
        arrow_type = _ARROW_TYPES[fixed_types.get(name, "DOUBLE")]
        if len(rows) <= step:
            arrays.append(pa.array(_column(rows, name, get), type=arrow_type))
            continue
        chunks = []
        for start in range(0, len(rows), step):
            chunks.append(pa.array(_column(rows[start : start + step], name, get), type=arrow_type))
            yield_gil()
        arrays.append(pa.chunked_array(chunks, type=arrow_type))
    return pa.Table.from_arrays(arrays, names=ordered)


def _column(rows: list[dict[str, Any]], name: str, get: Any) -> list[Any]:
    """The values of column name, one per row (None where a row lacks it)."""
    if get is None:
        return [row.get(name) for row in rows]
    return list(map(get, rows, itertools.repeat(name, len(rows))))


def yield_gil() -> None:
    """Let a thread that waits for the GIL (the training loop) have it now, not at the next
    switch interval (5 ms): the writer thread calls this between pieces of its own work."""
    time.sleep(0)


def _fsync_dir(path: Path) -> None:
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


def atomic_write_bytes(path: Path, data: bytes) -> None:
    """Write data to path via a hidden temp file and a rename."""
    tmp = path.with_name(f".{path.name}.{uuid.uuid4().hex[:8]}.tmp")
    try:
        with open(tmp, "wb") as fh:
            fh.write(data)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise


def _float_columns(table: pa.Table) -> list[str]:
    return [f.name for f in table.schema if pa.types.is_floating(f.type)]


def atomic_write_table(path: Path, table: pa.Table, delta: Sequence[str] = ()) -> None:
    """Write a parquet file via a hidden temp file and a rename; never leaves a torn file.

    The integer columns named in delta are stored DELTA_BINARY_PACKED instead of with a
    dictionary (see write_steps_table)."""
    tmp = path.with_name(f".{path.name}.{uuid.uuid4().hex[:8]}.tmp")
    floats = _float_columns(table)
    delta = [f.name for f in table.schema if f.name in delta and pa.types.is_integer(f.type)]
    # Metric series are high-entropy doubles: dictionaries never pay off for them, and byte-
    # stream-split lets zstd find the shared exponents (about a third smaller on real series).
    dictionary = [f.name for f in table.schema if f.name not in floats and f.name not in delta]
    try:
        with open(tmp, "wb") as fh:
            pq.write_table(
                table, fh, compression=PARQUET_COMPRESSION,
                use_dictionary=dictionary or False, use_byte_stream_split=floats or False,
                column_encoding=dict.fromkeys(delta, "DELTA_BINARY_PACKED") or None,
            )
            fh.flush()
            os.fsync(fh.fileno())  # the rename must never publish a file the OS has not kept
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise


def prewarm_parquet() -> None:
    """Write one tiny parquet file to memory so codec initialisation is paid before it matters."""
    sink = pa.BufferOutputStream()
    pq.write_table(pa.table({"step": pa.array([0], pa.int64())}), sink, compression=PARQUET_COMPRESSION)


def _stamp(path: Path) -> tuple[int, int, int]:
    st = path.stat()
    return st.st_ino, st.st_size, st.st_mtime_ns


class _WrittenShard:
    """The rows a writer wrote into one filling shard, kept until the shard is sealed."""

    def __init__(self) -> None:
        self.tables: list[pa.Table] = []
        self.stamps: dict[str, tuple[int, int, int]] = {}

    def add(self, table: pa.Table, delta: Path) -> None:
        """table was just written as delta (the next one)."""
        self.tables.append(table)
        self.stamp(delta)

    def stamp(self, path: Path) -> None:
        """Remember what path, just written by this writer, looks like on disk."""
        try:
            self.stamps[path.name] = _stamp(path)
        except OSError:
            self.stamps.pop(path.name, None)  # unknown: holds() will send the shard to its files

    def holds(self, files: list[Path]) -> bool:
        """True when files (what readers read of the shard) hold exactly self.tables: every
        one written by this writer and unchanged since, an open version and every delta after it
        up to the last one written. Anything else (a file replaced, truncated, deleted behind
        the writer's back) and the shard is read from its files."""
        versions = []
        for path in files:
            parsed = parse_shard_file(path.name)
            if parsed is None or parsed[1] == "sealed" or path.name not in self.stamps:
                return False
            try:
                if _stamp(path) != self.stamps[path.name]:
                    return False
            except OSError:
                return False
            versions.append((parsed[1], parsed[2]))
        if not versions:
            return False
        first = versions[0][1] if versions[0][0] == "open" else 0
        deltas = [v for kind, v in versions if kind == "delta"]
        return deltas == list(range(first + 1, len(self.tables) + 1)) and (first > 0 or bool(deltas))


class RunWriter:
    """Writes one run directory: manifest, step parts, sample shards, events, compaction."""

    def __init__(self, run_dir: str | os.PathLike[str], manifest: RunManifest, rank: int = 0) -> None:
        self.run_dir = Path(run_dir)
        self.rank = rank
        self.steps_dir = self.run_dir / "steps"
        self.samples_dir = self.run_dir / "samples"
        self.events_path = self.run_dir / "events.jsonl"
        self.rejected: list[tuple[str, Any, str]] = []
        self._events_lock = threading.Lock()
        self._events_torn = False  # the last event write left a partial line it could not remove
        self.run_dir.mkdir(parents=True, exist_ok=True)
        self.resumed = (self.run_dir / "manifest.json").exists()
        if self.resumed:
            self.manifest = self._load_own_manifest(manifest)
            self._remove_orphan_temp_files()
            self._reopen_compacted()
            self._end_torn_event_line()
        else:
            self.manifest = manifest
            atomic_write_bytes(self.run_dir / "manifest.json", manifest.model_dump_json(indent=2).encode())
        self._next_part = self._next_index(self.steps_dir, _PART_RE)
        # The filling shard: rows in its deltas so far and its last delta version (rlprobe.layout);
        # full shards whose seal is still to be written; deltas a seal replaced, deleted later.
        self._shard_rows = 0
        self._delta_version = 0
        self._open_version = 0  # the deltas (1.._open_version) the newest open version holds
        self._full: list[int] = []
        self._superseded: list[tuple[float, list[Path]]] = []
        # Per shard index still to be sealed, the tables of the deltas this writer wrote (in
        # delta order) and what each file it wrote for the shard looked like on disk: a merge or
        # a seal writes the rows out again without reading them back, as long as the files are
        # still the ones it wrote. Dropped once a shard is sealed, and when a seal fails (a retry
        # reads the files).
        self._written: dict[int, _WrittenShard] = {}
        if self.resumed:
            try:
                self.seal_samples()  # what a killed writer left filling becomes the shard it ended as
            except OSError:
                pass  # a full disk: its deltas stay, readable; close() seals them
        self._shard_index = self._next_shard_index()

    # -- set-up -------------------------------------------------------------------------
    def _load_own_manifest(self, fallback: RunManifest) -> RunManifest:
        try:
            return RunManifest.model_validate_json((self.run_dir / "manifest.json").read_bytes())
        except (ValueError, OSError):
            # Keep the unreadable original untouched; record under the new manifest's identity.
            return fallback

    def _remove_orphan_temp_files(self) -> None:
        """Delete the hidden temp files a killed writer left (readers never match them).

        Only a resuming writer does this, and only this writer can be at work in the folder
        (the Recorder holds its lock), so no temp file here belongs to a write in progress.
        """
        for folder in (self.run_dir, self.steps_dir, self.samples_dir):
            try:
                names = [p for p in folder.iterdir() if _TEMP_RE.match(p.name)]
            except OSError:
                continue
            for path in names:
                path.unlink(missing_ok=True)

    def _reopen_compacted(self) -> None:
        """Resuming a closed recording: its steps.parquet becomes the first part again.

        The compacted file would otherwise hide every new part from readers. A rename keeps
        the bytes as they are; close() compacts everything once more. Parts found beside
        steps.parquet are what a compaction killed between its rename and its deletions left:
        each is already in steps.parquet (readers ignore them for that reason), so they are
        deleted first; renamed after them, the compacted copy would count every step twice.
        """
        compacted = self.run_dir / "steps.parquet"
        if compacted.exists():
            for part in self._parts():
                part.unlink(missing_ok=True)
            self.steps_dir.mkdir(exist_ok=True)
            index = self._next_index(self.steps_dir, _PART_RE)
            os.replace(compacted, self.steps_dir / f"part-{index:06d}.parquet")

    def _end_torn_event_line(self) -> None:
        """A killed writer may have left half a line; end it so the next event is not glued on.

        The torn fragment stays as it was (readers skip it); the next event starts with a newline.
        """
        try:
            with open(self.events_path, "rb") as fh:
                fh.seek(-1, os.SEEK_END)
                self._events_torn = fh.read(1) != b"\n"
        except OSError:
            return  # no events yet (or an empty file)

    def max_sample_serial(self) -> int:
        """The largest n of existing '<step>-<rank>-<n>' sample ids (-1 if none), for resumes."""
        best = -1
        if not self.samples_dir.is_dir():
            return best
        for name in newest_shards(p.name for p in self.samples_dir.iterdir()):
            path = self.samples_dir / name
            try:
                ids = pq.read_table(path, columns=["sample_id"]).column("sample_id").to_pylist()
            except (OSError, KeyError, pa.ArrowException):
                continue
            for sid in ids:
                tail = str(sid).rsplit("-", 1)[-1]
                if tail.isdigit():
                    best = max(best, int(tail))
        return best

    def _next_shard_index(self) -> int:
        if not self.samples_dir.is_dir():
            return 0
        found = [parsed[0] for p in self.samples_dir.iterdir() if (parsed := parse_shard(p.name))]
        return max(found, default=-1) + 1

    @staticmethod
    def _next_index(folder: Path, pattern: re.Pattern[str]) -> int:
        if not folder.is_dir():
            return 0
        found = [int(m.group(1)) for p in folder.iterdir() if (m := pattern.match(p.name))]
        return max(found, default=-1) + 1

    # -- writing ------------------------------------------------------------------------
    def take_rejected(self) -> list[tuple[str, Any, str]]:
        """Rows the last writes left out because Arrow cannot hold them: (what, step, reason)."""
        out, self.rejected = self.rejected, []
        return out

    def _rows_table(self, rows: list[dict[str, Any]], what: str, types: dict[str, str]) -> pa.Table:
        rejected: list[tuple[Any, str]] = []
        table = _table(rows, types, rejected)
        self.rejected += [(what, step, reason) for step, reason in rejected]
        return table

    def write_steps(self, rows: list[dict[str, Any]]) -> Path | None:
        """Write rows as the next immutable part file (None when no row could be encoded)."""
        return self.write_steps_table(self._rows_table(rows, "step", STEP_COLUMN_TYPES))

    def write_steps_table(self, table: pa.Table) -> Path | None:
        """Write step rows already in Arrow (columns named and typed as write_steps makes them) as the next part file."""
        if table.num_rows == 0:
            return None
        self.steps_dir.mkdir(exist_ok=True)
        path = self.steps_dir / f"part-{self._next_part:06d}.parquet"
        atomic_write_table(path, table, delta=STEP_DELTA_COLUMNS)
        self._next_part += 1
        return path

    def write_samples(self, rows: list[dict[str, Any]]) -> None:
        """Add rows to the sample shards: each flush's rows become the next delta of the filling
        shard; every few deltas they are merged into an open version, and a full shard is sealed
        (rlprobe.layout says why).

        Nothing already on disk is written again by a flush, so it needs room for its own rows
        only. If a write fails part-way, PartialWrite says how many of rows are already on disk,
        so a retry writes only the rest (never a duplicate). A merge or a seal that fails loses
        nothing (the deltas hold the rows): it is tried again at the next write; a failed seal
        is reported as a PartialWrite that has written every row.
        """
        written = 0
        try:
            self.samples_dir.mkdir(exist_ok=True)
            while written < len(rows):
                chunk = rows[written : written + SAMPLES_PER_SHARD - self._shard_rows]
                table = self._rows_table(chunk, "samples", SAMPLE_COLUMN_TYPES)
                if table.num_rows:
                    atomic_write_table(self.samples_dir / delta_name(self._shard_index, self._delta_version + 1), table)
                    self._delta_version += 1
                    self._shard_rows += table.num_rows
                    kept = self._written.setdefault(self._shard_index, _WrittenShard())
                    kept.add(table, self.samples_dir / delta_name(self._shard_index, self._delta_version))
                written += len(chunk)
                if self._shard_rows >= SAMPLES_PER_SHARD:
                    self._full.append(self._shard_index)
                    self._shard_index += 1
                    self._shard_rows = self._delta_version = self._open_version = 0
        except Exception as exc:
            raise PartialWrite(written, exc) from exc
        failed = self._seal_full()
        if self._delta_version - self._open_version >= DELTAS_PER_MERGE and self._room_to_merge(self._shard_index):
            try:
                self._merge(self._shard_index)
            except Exception:
                pass  # the deltas stay as they are and read; merged at a later flush
        self._drop_superseded(time.monotonic() - _SUPERSEDED_GRACE_S)
        if failed is not None:
            raise PartialWrite(len(rows), failed)

    def _shard_files(self, index: int) -> list[Path]:
        """The files a reader reads for shard index (rlprobe.layout.newest_shards)."""
        prefix = f"shard-{index:05d}."
        return [self.samples_dir / n for n in newest_shards(p.name for p in self.samples_dir.iterdir() if p.name.startswith(prefix))]

    def _read_shard(self, index: int) -> tuple[pa.Table | None, list[Path], int]:
        """Shard index as readers see it, merged: (rows, the files they came from, highest delta).

        The rows come from the tables this writer wrote when it wrote every delta of the shard
        (the files hold exactly those rows); otherwise from the files. A file that cannot be read
        is quarantined (its rows are lost, and said so); the others are kept.
        """
        written = self._written.get(index)
        if written is not None:
            files = self._shard_files(index)
            if written.holds(files):
                return pa.concat_tables(written.tables, promote_options="permissive"), files, len(written.tables)
            self._written.pop(index, None)  # the files are not what this writer left: read them
        table: pa.Table | None = None
        files, covered = [], 0
        for path in self._shard_files(index):
            parsed = parse_shard_file(path.name)
            try:
                part = pq.read_table(path)
                table = part if table is None else pa.concat_tables([table, part], promote_options="permissive")
            except Exception as exc:
                if isinstance(exc, OSError) and exc.errno is not None:
                    raise  # the disk's failure, not the file's: retried
                self.quarantine(path, exc)
                continue
            files.append(path)
            if parsed is not None and parsed[1] != "sealed":
                covered = max(covered, parsed[2])
        return table, files, covered

    def _room_to_merge(self, index: int) -> bool:
        """True when the disk has room for a merged copy of the shard several times over.

        A merge writes the shard again while the files it replaces stay for the grace period:
        on a disk that is nearly full that would make the next flush's own rows fail, so the
        deltas are left as they are (readers open more files, nothing fails).
        """
        try:
            st = os.statvfs(self.samples_dir)
        except (AttributeError, OSError):
            return True  # no statvfs (Windows): merge, as a failure costs nothing but the merge
        held = sum(p.stat().st_size for p in self._shard_files(index) if p.exists())
        return st.f_bavail * st.f_frsize > 4 * held + (1 << 20)

    def _merge(self, index: int) -> None:
        """Merge the filling shard's open version and deltas into the next open version.

        It bounds the files a reader opens for a live shard to DELTAS_PER_MERGE and one; the
        files it replaces are deleted after the grace period.
        """
        table, files, covered = self._read_shard(index)
        if table is None or covered <= self._open_version:
            return
        merged = self.samples_dir / shard_name(index, covered)
        atomic_write_table(merged, table)
        if index in self._written:
            self._written[index].stamp(merged)
        self._open_version = covered
        self._superseded.append((time.monotonic(), files))

    def _seal(self, index: int) -> None:
        """Write shard index, sealed, from what readers read of it; those files are superseded."""
        table, files, _ = self._read_shard(index)
        sealed = self.samples_dir / shard_name(index)
        self._written.pop(index, None)  # sealed now, or a retry reads the files
        if sealed in files:
            return
        if table is not None:
            atomic_write_table(sealed, table)
        self._superseded.append((time.monotonic(), files))

    def _seal_full(self) -> BaseException | None:
        """Seal the shards that filled up; the first failure (they stay as they are, retried)."""
        while self._full:
            try:
                self._seal(self._full[0])
            except Exception as exc:
                for index in self._full:  # a disk too full to seal: memory must not grow with it
                    self._written.pop(index, None)
                return exc
            self._full.pop(0)
        return None

    def _drop_superseded(self, before: float) -> None:
        """Delete the files merges and seals replaced before `before` (monotonic seconds).

        Not at once: a reader that listed them just before opens them a moment later, and finds
        them; the newer copy wins in any listing that has both.
        """
        keep = []
        for replaced_at, paths in self._superseded:
            if replaced_at > before:
                keep.append((replaced_at, paths))
                continue
            for path in paths:
                path.unlink(missing_ok=True)
        self._superseded = keep

    def _drop_copies(self, index: int) -> None:
        """Delete every delta and open version of shard index (once its sealed file exists)."""
        for path in self.samples_dir.iterdir():
            parsed = parse_shard_file(path.name)
            if parsed is not None and parsed[0] == index and parsed[1] != "sealed":
                path.unlink(missing_ok=True)  # a reader that listed it retries; the sealed copy is complete

    def seal_samples(self) -> None:
        """Seal every shard that is not (close, and a resume of a killed writer), then delete
        every copy a sealed file replaces. An open version with no delta after it is renamed
        (it is the whole shard already); otherwise the shard is merged from its files."""
        if not self.samples_dir.is_dir():
            return
        failure: BaseException | None = None
        indices = sorted({parsed[0] for p in self.samples_dir.iterdir() if (parsed := parse_shard_file(p.name))})
        for index in indices:
            try:
                files = self._shard_files(index)
                kinds = [parse_shard_file(p.name)[1] for p in files]  # type: ignore[index]
                if kinds == ["open"]:
                    os.replace(files[0], self.samples_dir / shard_name(index))
                elif kinds != ["sealed"]:
                    self._seal(index)
            except Exception as exc:  # a full disk: this shard stays as it is, readable; the rest goes on
                failure = failure or exc
        for name in {p.name for p in self.samples_dir.iterdir()}:
            parsed = parse_shard_file(name)
            if parsed is not None and parsed[1] == "sealed":
                self._drop_copies(parsed[0])
        self._superseded = []
        self._full = []
        self._written = {}
        self._shard_index = self._next_shard_index()
        self._shard_rows = self._delta_version = self._open_version = 0
        if failure is not None:
            raise failure

    def append_event(self, event: Event) -> None:
        """Append one event line and push it to the OS at once (events must survive crashes).

        A write that fails part-way (a full disk) is cut back to where the file ended, so no
        torn line can swallow the next event; if even that fails, the next event starts on a
        line of its own.
        """
        record = json_safe(event.model_dump())
        data = (json.dumps(record, ensure_ascii=False, allow_nan=False) + "\n").encode("utf-8")
        with self._events_lock:
            fd = os.open(self.events_path, os.O_WRONLY | os.O_APPEND | os.O_CREAT | getattr(os, "O_CLOEXEC", 0), 0o644)
            try:
                if self._events_torn:
                    data = b"\n" + data
                size = os.fstat(fd).st_size
                try:
                    view = memoryview(data)
                    while view:
                        view = view[os.write(fd, view):]
                except OSError:
                    try:
                        os.ftruncate(fd, size)
                    except OSError:
                        self._events_torn = True
                    raise
                self._events_torn = False
            finally:
                os.close(fd)

    def compact(self) -> Path | None:
        """Seal the open sample shard; merge all part files into steps.parquet (last write of a
        step wins), then drop them.

        Readable at every instant: before the rename readers see the parts, after it the
        compacted file wins over any part still present. Idempotent.
        """
        self.seal_samples()
        parts = self._parts()
        compacted = self.run_dir / "steps.parquet"
        if not parts:
            return compacted if compacted.exists() else None
        table: pa.Table | None = None
        kept = []
        for part in parts:
            try:
                part_table = pq.read_table(part)
                if not pa.types.is_integer(part_table.schema.field("step").type):
                    raise ValueError(f"its step column is {part_table.schema.field('step').type}, not an integer")
                table = part_table if table is None else pa.concat_tables([table, part_table], promote_options="permissive")
            except Exception as exc:
                if isinstance(exc, OSError) and exc.errno is not None:
                    raise  # the disk's failure (EIO, ...), not the file's: retried by a later close
                self.quarantine(part, exc)
                continue
            kept.append(part)
        if table is None:
            return compacted if compacted.exists() else None
        table = self._last_write_wins(table)
        atomic_write_table(compacted, table, delta=STEP_DELTA_COLUMNS)
        _fsync_dir(self.run_dir)
        for part in kept:
            part.unlink(missing_ok=True)
        try:
            self.steps_dir.rmdir()
        except OSError:
            pass
        return compacted

    def quarantine(self, path: Path, reason: BaseException | str) -> Path:
        """Rename a file that cannot be read out of the readers' way, keep it, and say so.

        The new name (<name>.quarantined-<8 hex>) matches no reader's pattern, so the rest of
        the recording reads and compacts; the bytes stay for whoever wants to look at them.
        """
        target = path.with_name(f"{path.name}.quarantined-{uuid.uuid4().hex[:8]}")
        os.replace(path, target)
        why = reason if isinstance(reason, str) else f"{type(reason).__name__}: {reason}"
        self.append_event(Event(
            kind="quarantined", rank=self.rank,
            message=f"{path.relative_to(self.run_dir)} cannot be read and was set aside as {target.name}: {why}"[:500],
            data={"file": str(path.relative_to(self.run_dir)), "quarantined_as": target.name, "reason": why[:500]},
        ))
        return target

    def _parts(self) -> list[Path]:
        if not self.steps_dir.is_dir():
            return []
        return sorted(p for p in self.steps_dir.iterdir() if _PART_RE.match(p.name))

    @staticmethod
    def _last_write_wins(table: pa.Table) -> pa.Table:
        """One row per step, ordered by step; a step logged more than once is merged.

        Each column keeps the last value written for it, so metrics of one step logged in
        several calls all survive, and a step re-logged after a resume takes the new values.
        """
        steps = table.column("step").to_pylist()
        rows_of: dict[int, list[int]] = {}
        for i, s in enumerate(steps):
            rows_of.setdefault(s, []).append(i)
        order = sorted(rows_of)
        if all(len(rows_of[s]) == 1 for s in order):
            return table.take(pa.array([rows_of[s][0] for s in order], pa.int64()))
        merged = []
        for s in order:
            row: dict[str, Any] = {}
            for record in table.take(pa.array(rows_of[s], pa.int64())).to_pylist():
                row.update({k: v for k, v in record.items() if v is not None})
            merged.append(row)
        return pa.Table.from_pylist(merged, schema=table.schema)
