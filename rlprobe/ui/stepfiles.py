"""The step files a chart reads, and what each holds, kept per file while its size and mtime stay.

A chart of ten 100k-step runs through the steps view costs about six times what reading its
columns costs: the view reads every column of every file into one materialized scan and groups
every step of every file to find repeats, before the chart bins a single row (the views cannot
know that nothing repeats). Whether a file repeats a step, and which steps and wall_times it
spans, is a property of the file; a part never changes once written, and a replaced file
(compaction, a resume) is a new file with a new inode or mtime. So the dashboard learns it once
per file (ui_step_file_meta from the footers, ui_step_file_facts from the step and wall_time
columns) and a chart of runs whose files need no merging reads only the step, wall_time and
charted columns of exactly the files the steps view would read for them (ui_series_files).

Which files those are follows sql/v1/sources (src_steps) exactly: rank 0's own files (a
rank-NNN sub-recording is never drawn), the compacted steps.parquet when it holds rows, else the
parts; a recording whose files repeat a step or overlap one another is merged by the view, so a
chart of it goes through the view (rlprobe.ui.catalog falls back to ui_series). Every path comes
from a run directory the catalog listed below the root, and every file is read by the catalog's
DuckDB database, which cannot open a file outside the root.
"""

from __future__ import annotations

import fnmatch
import os
import threading
from collections import OrderedDict
from dataclasses import dataclass
from typing import Any, Callable, Iterable, Optional, Sequence

# (path, size, mtime_ns, inode): a file as it is now; any write or replacement changes it
FileKey = tuple[str, int, int, int]

PART_PATTERN = "part-*.parquet"  # the globs of sql/v1/sources/00_paths.sql (v1.run_globs)
RANK_PATTERN = "rank-[0-9]*"
MAX_FACTS = 200_000  # files whose facts are kept (a part's are a few hundred bytes)
# A file's distinct steps are counted with one bit per possible step (ui_step_file_facts); a
# file whose statistics span more steps than this, or that has none, is charted through the
# views. One query's bitmaps stay under FACTS_BATCH_BITS bits in all.
MAX_SPAN_BITS = 1 << 24
FACTS_BATCH_BITS = 1 << 28


@dataclass(frozen=True)
class FileFacts:
    """What a chart needs to know of one step file before reading it (None: not known)."""

    rows: int
    first_step: Optional[int]
    last_step: Optional[int]
    steps: int  # non-NULL steps
    distinct_steps: Optional[int]  # None when it could not be counted cheaply
    first_wall_time: Optional[float]
    last_wall_time: Optional[float]
    columns: frozenset[str]
    row_groups: tuple[int, ...] = ()  # rows of each row group, in order (from the footer)
    values: Optional[tuple[tuple[str, int], ...]] = None  # non-NULL values per column (footer); None: unknown

    @property
    def repeats(self) -> Optional[bool]:
        """True when a step occurs twice in this file; None when that is not known."""
        return None if self.distinct_steps is None else self.steps != self.distinct_steps


@dataclass(frozen=True)
class RunFiles:
    """The step files of one run directory as listed now: rank 0's, and every one the view reads."""

    run_dir: str
    compacted: Optional[FileKey]
    parts: tuple[FileKey, ...]
    everything: tuple[FileKey, ...]  # rank sub-recordings' too: what the view's columns depend on


def stat_key(path: str) -> Optional[FileKey]:
    """The key of the file at path now, or None when it is not a file."""
    try:
        st = os.stat(path)
    except OSError:
        return None
    if not os.path.isfile(path):
        return None
    return (path, st.st_size, st.st_mtime_ns, st.st_ino)


def _recording(rec_dir: str) -> tuple[Optional[FileKey], list[FileKey]]:
    """One recording directory's compacted file and parts (sorted by name, as the writer names them)."""
    compacted = stat_key(os.path.join(rec_dir, "steps.parquet"))
    parts: list[FileKey] = []
    try:
        names = sorted(os.listdir(os.path.join(rec_dir, "steps")))
    except OSError:
        names = []
    for name in names:
        if fnmatch.fnmatchcase(name, PART_PATTERN):
            key = stat_key(os.path.join(rec_dir, "steps", name))
            if key is not None:
                parts.append(key)
    return compacted, parts


def list_run_files(run_dir: str) -> RunFiles:
    """The step files of run_dir (see RunFiles), from the directory listing alone."""
    run_dir = run_dir.rstrip("/") or "/"
    compacted, parts = _recording(run_dir)
    everything = ([compacted] if compacted else []) + parts
    try:
        names = sorted(os.listdir(run_dir))
    except OSError:
        names = []
    for name in names:
        if fnmatch.fnmatchcase(name, RANK_PATTERN) and os.path.isdir(os.path.join(run_dir, name)):
            rank_compacted, rank_parts = _recording(os.path.join(run_dir, name))
            everything += ([rank_compacted] if rank_compacted else []) + rank_parts
    return RunFiles(run_dir, compacted, tuple(parts), tuple(everything))


def top_level_columns(fields: Sequence[dict[str, Any]]) -> frozenset[str]:
    """The top-level column names of a parquet schema given as its fields in file order (the root
    first, each field followed by its children, depth first), as ui_step_file_meta returns them."""
    names: list[str] = []
    items = iter(fields[1:])  # fields[0] is the root

    def skip(children: int) -> None:
        for _ in range(children):
            child = next(items, None)
            if child is None:
                return
            skip(int(child.get("children") or 0))

    for _ in range(int(fields[0].get("children") or 0) if fields else 0):
        field = next(items, None)
        if field is None:
            break
        names.append(str(field["name"]))
        skip(int(field.get("children") or 0))
    return frozenset(names)


def column_values(fields: Sequence[dict[str, Any]], leaf_values: Sequence[Optional[int]]) -> Optional[tuple[tuple[str, int], ...]]:
    """Each top-level column's non-NULL values, from a footer's fields (as top_level_columns takes
    them) and its leaves' counts in leaf order; None unless every field is a leaf (a flat schema,
    as step files are: then leaf i is field i) and every count is known."""
    if not fields:
        return None
    top = fields[1:]
    if any(int(f.get("children") or 0) for f in top) or len(top) != len(leaf_values) or any(v is None for v in leaf_values):
        return None
    return tuple((str(f["name"]), int(v)) for f, v in zip(top, leaf_values))  # type: ignore[arg-type]


def chosen_files(run: RunFiles, facts: dict[FileKey, FileFacts]) -> list[FileKey]:
    """The files the steps view reads for rank 0 of run: the compacted file when it holds rows
    (src_steps decides from the files its scan read, and a file without rows is not among
    them), else the parts that hold rows."""
    if run.compacted is not None and facts[run.compacted].rows > 0:
        return [run.compacted]
    return [p for p in run.parts if facts[p].rows > 0]


def needs_merge(files: Sequence[FileKey], facts: dict[FileKey, FileFacts]) -> Optional[bool]:
    """True when the view merges these files' steps (one repeats a step, or two files' step
    ranges overlap: src_steps' `checked`), False when it reads them as they are, None when
    that is not known (a file whose repeats could not be counted)."""
    hi_before: Optional[int] = None
    for key in sorted((k for k in files if facts[k].first_step is not None), key=lambda k: (facts[k].first_step, k[0])):
        f = facts[key]
        if f.repeats is None:
            return None
        if f.repeats or (hi_before is not None and f.first_step is not None and f.first_step <= hi_before):
            return True
        if f.last_step is not None:
            hi_before = f.last_step if hi_before is None else max(hi_before, f.last_step)
    for key in files:  # a file with no step at all cannot repeat or overlap, but must be readable
        if facts[key].first_step is None and facts[key].repeats is None:
            return None
    return False


class StepFileFacts:
    """FileFacts per FileKey, learned by querying the files' footers and step columns once.

    query(name, params) runs one of the SQL files under sql/v1/ui/queries/ on the catalog's
    database and returns its rows as dicts; a file that cannot be read makes that call raise
    (the caller charts those runs through the views, which say which run is broken).
    """

    def __init__(self, query: Callable[[str, dict[str, Any]], list[dict[str, Any]]], max_files: int = MAX_FACTS) -> None:
        self._query = query
        self._max_files = max_files
        self._lock = threading.Lock()
        self._facts: OrderedDict[FileKey, FileFacts] = OrderedDict()

    def clear(self) -> None:
        """Forget every file's facts (the next chart learns them again)."""
        with self._lock:
            self._facts.clear()

    def __len__(self) -> int:
        return len(self._facts)

    def get(self, keys: Iterable[FileKey]) -> dict[FileKey, FileFacts]:
        """The facts of every key, learning the ones not known yet."""
        keys = list(dict.fromkeys(keys))
        with self._lock:
            known = {k: self._facts[k] for k in keys if k in self._facts}
            for k in known:
                self._facts.move_to_end(k)
        missing = [k for k in keys if k not in known]
        if missing:
            learned = self._learn(missing)
            with self._lock:
                self._facts.update(learned)
                while len(self._facts) > self._max_files:
                    self._facts.popitem(last=False)
            known.update(learned)
        return known

    def _learn(self, keys: list[FileKey]) -> dict[FileKey, FileFacts]:
        by_path = {k[0]: k for k in keys}
        meta = {r["filename"]: r for r in self._query("ui_step_file_meta", {"files": list(by_path)})}
        out: dict[FileKey, FileFacts] = {}
        countable: list[tuple[str, int, int]] = []  # path, offset, span in bits
        for path, key in by_path.items():
            m = meta.get(path)
            if m is None:  # the reader did not see it (it vanished): not known, charted through the views
                out[key] = FileFacts(0, None, None, 0, None, None, None, frozenset())
                continue
            columns = top_level_columns(m["fields"] or [])
            groups = tuple(int(n) for n in m["row_groups"] or ())
            values = column_values(m["fields"] or [], m["leaf_values"] or [])
            lo, hi = m["step_lo"], m["step_hi"]
            if not m["rows"] or "step" not in columns:
                out[key] = FileFacts(int(m["rows"] or 0), None, None, 0, 0 if not m["rows"] else None, None, None, columns, groups, values)
            elif lo is None or hi is None or hi - lo + 1 > MAX_SPAN_BITS:
                out[key] = FileFacts(int(m["rows"]), None, None, 0, None, None, None, columns, groups, values)
            else:
                countable.append((path, lo, hi - lo + 1))
                out[key] = FileFacts(int(m["rows"]), None, None, 0, None, None, None, columns, groups, values)
        for batch in _batches(countable):
            params = {"files": [p for p, _, _ in batch], "offsets": [o for _, o, _ in batch],
                      "bits": max(span for _, _, span in batch) - 1}
            for r in self._query("ui_step_file_facts", params):
                key = by_path[r["filename"]]
                out[key] = FileFacts(int(r["rows"]), r["first_step"], r["last_step"], int(r["steps"]), int(r["distinct_steps"]),
                                     r["first_wall_time"], r["last_wall_time"], out[key].columns, out[key].row_groups, out[key].values)
        return out


def _batches(files: list[tuple[str, int, int]]) -> list[list[tuple[str, int, int]]]:
    """files (path, offset, span) in groups whose bitmaps (files x the widest span) stay under
    FACTS_BATCH_BITS: files of like span together, so a long compacted run does not give each of
    a live run's small parts a bitmap as wide as its own."""
    out: list[list[tuple[str, int, int]]] = []
    for item in sorted(files, key=lambda f: f[2]):
        if out and (len(out[-1]) + 1) * item[2] <= FACTS_BATCH_BITS:
            out[-1].append(item)
        else:
            out.append([item])
    return out
