"""The step files' columns the dashboard's charts read, held in memory between requests.

A chart request of runs already drawn spends about a fifth of its time decoding the step,
wall_time and metric columns of the files again (byte-stream-split doubles, zstd), and another
fifth in the CASEs that keep NULL, NaN and inf out of its aggregates. Both are properties of a
file, which never changes once written (a part), or is replaced by a new one (compaction, a
resume: a new size, mtime or inode). So the columns a chart read are kept, decoded and cast as
the chart query casts them, keyed by the file's key and the column's name, with whether the
column holds a finite value in every row (then series_bins aggregates it without its CASEs:
the same values in the same order, so the same bits). A live run's new part is a new key, read
on the next chart; a replaced file is never looked up again and ages out.

The figures come from the same SQL as when the files are read (ui_series_held and
ui_series_files both call the table macro v1.file_series), only the rows' source differs: the held columns are handed to DuckDB as one
Arrow table, a chunk per file row group, which DuckDB scans as it scans the files' row groups.
Held columns are bounded by bytes (least recently used go first); a chart whose columns do not
fit is read from the files, as before. Nothing is written anywhere.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from dataclasses import dataclass
from typing import Any, Callable, Optional, Sequence

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from rlprobe.ui.stepfiles import FileFacts, FileKey

COLUMN_CACHE_BYTES = 256 << 20  # an 8-metric chart of ten 100k-step runs holds ~80 MB
X_COLUMNS = ("step", "wall_time")  # read with every file: the chart's x and the steps


@dataclass(frozen=True)
class HeldColumn:
    """One column of one step file, as the chart query casts it (step BIGINT, the rest DOUBLE)."""

    values: pa.Array
    clean: bool  # every value non-NULL and finite: series_bins may skip its CASEs

    @property
    def nbytes(self) -> int:
        """Bytes the column holds (its buffers: it shares none with another)."""
        return int(self.values.get_total_buffer_size())


def _is_clean(values: pa.Array) -> bool:
    """True when every value is non-NULL and finite (a DOUBLE column; the step is never a metric)."""
    if values.null_count or not pa.types.is_floating(values.type):
        return False
    return len(values) == 0 or bool(pc.all(pc.is_finite(values)).as_py())


class ColumnCache:
    """HeldColumn per (FileKey, column), learned by reading the files and kept by bytes (LRU).

    read(files, metrics) runs ui_step_file_columns on the catalog's database and returns its
    Arrow table; it raises QueryError when a file cannot be read (the caller then charts through
    the views, which say which run is broken).
    """

    def __init__(self, read: Callable[[list[str], list[str]], pa.Table], max_bytes: int = COLUMN_CACHE_BYTES) -> None:
        self._read = read
        self.max_bytes = max_bytes
        self._lock = threading.Lock()
        self._held: OrderedDict[tuple[FileKey, str], HeldColumn] = OrderedDict()
        self._bytes = 0

    @property
    def nbytes(self) -> int:
        """Bytes held now."""
        return self._bytes

    def __len__(self) -> int:
        return len(self._held)

    def clear(self) -> None:
        """Let go of every column (the next chart reads the files again)."""
        with self._lock:
            self._held.clear()
            self._bytes = 0

    def fits(self, facts: Sequence[FileFacts], metrics: Sequence[str]) -> bool:
        """Whether the columns of a chart of these files (8 bytes a value) fit in the cache at all."""
        rows = sum(f.rows for f in facts)
        return rows * 8 * (len(X_COLUMNS) + len(metrics)) <= self.max_bytes

    def get(self, files: Sequence[tuple[FileKey, FileFacts]], metrics: Sequence[str]) -> dict[FileKey, dict[str, HeldColumn]]:
        """The step, wall_time and metrics columns of every file (a metric the file lacks is left
        out), reading the ones not held yet in one query. Raises ValueError when the rows read do
        not line up with the files' facts (a file changed under the read: the caller reads the
        files directly)."""
        out: dict[FileKey, dict[str, HeldColumn]] = {}
        missing: dict[FileKey, list[str]] = {}
        with self._lock:
            for key, facts in files:
                wanted = [c for c in (*X_COLUMNS, *metrics) if c in X_COLUMNS or c in facts.columns]
                have = out.setdefault(key, {})
                for column in wanted:
                    held = self._held.get((key, column))
                    if held is None:
                        missing.setdefault(key, []).append(column)
                    else:
                        self._held.move_to_end((key, column))
                        have[column] = held
        if missing:
            by_key = dict(files)
            read_metrics = sorted({c for cols in missing.values() for c in cols if c not in X_COLUMNS})
            learned = self._learn([(k, by_key[k]) for k in missing], read_metrics)
            with self._lock:
                for key, columns in learned.items():
                    for column, held in columns.items():
                        if column not in missing[key] and column not in X_COLUMNS:
                            continue  # read along with the others, but not asked for of this file
                        old = self._held.pop((key, column), None)
                        self._bytes += held.nbytes - (old.nbytes if old else 0)
                        self._held[(key, column)] = held
                        out[key][column] = held
                while self._bytes > self.max_bytes and self._held:
                    _, dropped = self._held.popitem(last=False)
                    self._bytes -= dropped.nbytes
        return out

    def _learn(self, files: list[tuple[FileKey, FileFacts]], metrics: list[str]) -> dict[FileKey, dict[str, HeldColumn]]:
        """Read metrics (and the x columns) of files in one query and cut the rows per file: they
        come in file order, each file's rows in order; the file_number of each row checks that."""
        table = self._read([k[0] for k, _ in files], metrics)
        out: dict[FileKey, dict[str, HeldColumn]] = {}
        at = 0
        for number, (key, facts) in enumerate(files, start=1):
            if facts.rows == 0:
                out[key] = {}
                continue
            part = table.slice(at, facts.rows)
            at += facts.rows
            numbers = part.column("file_number")
            if len(part) != facts.rows or not bool(pc.all(pc.equal(numbers, pa.scalar(number, numbers.type))).as_py()):
                raise ValueError(f"{key[0]}: the rows read do not line up with the file's facts")
            columns: dict[str, HeldColumn] = {}
            for name in part.column_names:
                if name == "file_number" or (name not in X_COLUMNS and name not in facts.columns):
                    continue  # a metric another file holds: NULL here, never kept
                values = pa.concat_arrays(part.column(name).chunks)  # a copy: its own buffers
                columns[name] = HeldColumn(values, _is_clean(values) if name not in X_COLUMNS else False)
            out[key] = columns
        if at != len(table):
            raise ValueError("more rows were read than the files' facts count")
        return out


def held_rows(files: Sequence[tuple[FileKey, FileFacts]], held: dict[FileKey, dict[str, HeldColumn]],
              metrics: Sequence[str]) -> pa.Table:
    """ui_series_held's ui_held_rows: file_index, step, wall_time and the metrics of every file in
    order, NULL where a file lacks a column (as reading the files by name gives), one chunk per
    row group of each file (DuckDB splits work between its threads at chunks as it does at row
    groups, so each bin's sums add the same values in the same groupings)."""
    names = ["file_index", *X_COLUMNS, *metrics]
    types = [pa.int32(), pa.int64(), pa.float64(), *[pa.float64()] * len(metrics)]
    schema = pa.schema(list(zip(names, types)))
    batches: list[pa.RecordBatch] = []
    for index, (key, facts) in enumerate(files):
        if facts.rows == 0:
            continue
        columns = held[key]
        arrays: list[Any] = [pa.array(np.full(facts.rows, index, np.int32))]
        for name, kind in zip(names[1:], types[1:]):
            column: Optional[HeldColumn] = columns.get(name)
            arrays.append(column.values.cast(kind) if column is not None else pa.nulls(facts.rows, kind))
        batch = pa.RecordBatch.from_arrays(arrays, schema=schema)
        at = 0
        for size in facts.row_groups if sum(facts.row_groups) == facts.rows else (facts.rows,):
            batches.append(batch.slice(at, size))
            at += size
    return pa.Table.from_batches(batches, schema=schema)
