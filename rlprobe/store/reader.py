"""Typed access to recordings, all of it read through the SQL views.

RunReader gives pydantic records; RunView gives numpy series for the doctor. Neither knows how
files are laid out: that is the views' job, so live, crashed and compacted runs read the same.
"""

from __future__ import annotations

import json
import os
from functools import cached_property
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import pyarrow as pa

from rlprobe.arrow_numpy import to_numpy
from rlprobe.errors import NoStepsYet, NotARecording
from rlprobe.schemas import EXTRA_PREFIX, REWARD_COMPONENT_PREFIX, STEP_COLUMN_TYPES, unflatten_dicts
from rlprobe.store.engine import Store, open_store

if TYPE_CHECKING:  # the pydantic models load where records are built, not with every query
    from rlprobe.models import Event, RunManifest, SampleRecord, StepRecord


def _single_run(store: Store) -> Store:
    if store.target.kind != "run":
        raise NotARecording(f"{store.target.path} is a folder of runs; point at one run directory")
    return store


def _manifest_from_row(row: dict[str, Any]) -> RunManifest | None:
    from rlprobe.models import RunManifest

    if row.get("schema_version") is None and row.get("created_at") is None:
        return None
    data = {k: v for k, v in row.items() if v is not None and k not in ("run_dir",)}
    for key in ("trainer_config", "environment"):
        if isinstance(data.get(key), str):
            data[key] = json.loads(data[key])
    return RunManifest.model_validate(data)


def _records(table: pa.Table, model: type[Any]) -> list[Any]:
    """Rows as pydantic records; columns this version does not know (additive fields a newer
    recorder wrote) are left out rather than refused, as the versioning policy promises."""
    fields = set(model.model_fields)
    keep = [c for c in table.column_names if c in fields or c.startswith((REWARD_COMPONENT_PREFIX, EXTRA_PREFIX))]
    return [model.model_validate(unflatten_dicts(row)) for row in table.select(keep).to_pylist()]


class RunReader:
    """Typed access to one recording: manifest, steps, samples (all ranks) and events."""

    def __init__(self, run_dir: str | os.PathLike[str]) -> None:
        self.store = _single_run(open_store(run_dir))
        self.run_dir = self.store.target.path

    @property
    def connection(self) -> Any:
        """The DuckDB connection with the views, for queries of your own."""
        return self.store.con

    def query(self, sql: str, params: list[Any] | None = None) -> pa.Table:
        """Run SQL over the views; returns an Arrow table."""
        return self.store.table(sql, params)

    @cached_property
    def manifest(self) -> RunManifest | None:
        """The run's manifest (None when it is missing or unreadable)."""
        rows = self.query("SELECT * FROM manifest").to_pylist()
        return _manifest_from_row(rows[0]) if rows else None

    def steps(self) -> list[StepRecord]:
        """Every step of rank 0, ordered by step, with reward_components and extra rebuilt."""
        from rlprobe.models import StepRecord

        return _records(self.steps_table(), StepRecord)

    def steps_table(self) -> pa.Table:
        """The steps view as Arrow, ordered by step (only columns the run logged)."""
        table = self.query("SELECT * FROM steps ORDER BY step")
        keep = [c for c in table.column_names if c in ("run_id", "step") or table.column(c).null_count < len(table)]
        return table.select(keep)

    def samples(self, step_from: int | None = None, step_to: int | None = None) -> list[SampleRecord]:
        """Captured samples of every rank, optionally within [step_from, step_to]."""
        from rlprobe.models import SampleRecord

        return _records(self.samples_table(step_from, step_to), SampleRecord)

    def samples_table(self, step_from: int | None = None, step_to: int | None = None) -> pa.Table:
        """The samples view as Arrow, ordered by step, rank and sample_id."""
        lo = -(2**62) if step_from is None else int(step_from)
        hi = 2**62 if step_to is None else int(step_to)
        return self.query(
            "SELECT * FROM samples WHERE step BETWEEN ? AND ? ORDER BY step, rank, sample_id", [lo, hi]
        )

    def events(self, kind: str | None = None) -> list[Event]:
        """Events of every rank in time order, optionally of one kind."""
        from rlprobe.models import Event

        table = self.query(
            "SELECT timestamp, kind, step, rank, message, data FROM events "
            "WHERE ? IS NULL OR kind = ? ORDER BY timestamp",
            [kind, kind],
        )
        out = []
        for row in table.to_pylist():
            row["data"] = json.loads(row["data"]) if row["data"] else {}
            out.append(Event.model_validate(row))
        return out

    def view(self) -> "RunView":
        """The run as numpy series."""
        return RunView.from_store(self.store)


class RunView:
    """A recording as numpy arrays: one float64 series per metric, aligned on ``steps``."""

    def __init__(self, run_dir: Path, manifest: RunManifest | None, columns: dict[str, np.ndarray], store: Store | None = None) -> None:
        self.run_dir = run_dir
        self.manifest = manifest
        self._columns = columns
        self._store = store
        self.steps: np.ndarray = columns["step"]

    @classmethod
    def load(cls, run_dir: str | os.PathLike[str]) -> "RunView":
        """Load a recording's step series (raises NoStepsYet when it has none)."""
        return cls.from_store(_single_run(open_store(run_dir)))

    @classmethod
    def from_store(cls, store: Store) -> "RunView":
        """Build from an open store (lets RunReader and the watcher reuse a connection)."""
        table = store.table("SELECT * EXCLUDE (run_id) FROM steps ORDER BY step")
        if table.num_rows == 0:
            raise NoStepsYet(f"{store.target.path} has no steps recorded yet")
        columns: dict[str, np.ndarray] = {"step": to_numpy(table.column("step"))}
        for name in table.column_names:
            column = table.column(name)
            if name == "step" or column.null_count == len(column):
                continue
            if pa.types.is_floating(column.type) or pa.types.is_integer(column.type):
                columns[name] = to_numpy(column).astype(np.float64)
            else:
                columns[name] = np.array(column.to_pylist(), dtype=object)
        rows = store.table("SELECT * FROM manifest").to_pylist()
        return cls(store.target.path, _manifest_from_row(rows[0]) if rows else None, columns, store)

    def __len__(self) -> int:
        return len(self.steps)

    @property
    def names(self) -> list[str]:
        """Metrics this run logged (at least one non-null value), step excluded."""
        return [n for n in self._columns if n != "step"]

    def has(self, name: str) -> bool:
        """True if the run logged this metric at least once."""
        return name in self._columns

    def series(self, name: str) -> np.ndarray:
        """The metric's values aligned on steps; all-NaN for a known field the run never logged."""
        if name in self._columns:
            return self._columns[name]
        if name in STEP_COLUMN_TYPES or name.startswith((REWARD_COMPONENT_PREFIX, EXTRA_PREFIX)):
            return np.full(len(self.steps), np.nan)
        raise KeyError(f"unknown metric {name!r}: known fields are StepRecord's, plus extra.<name>")

    def component(self, name: str) -> np.ndarray:
        """One reward component's series."""
        return self.series(REWARD_COMPONENT_PREFIX + name)

    @property
    def components(self) -> list[str]:
        """Names of the reward components the run logged."""
        return [n[len(REWARD_COMPONENT_PREFIX):] for n in self._columns if n.startswith(REWARD_COMPONENT_PREFIX)]

    def extra(self, name: str) -> np.ndarray:
        """One extra metric's series."""
        return self.series(EXTRA_PREFIX + name)

    @cached_property
    def samples(self) -> pa.Table:
        """Captured samples (all ranks) as an Arrow table, loaded on first use."""
        if self._store is None:
            self._store = _single_run(open_store(self.run_dir))
        return self._store.table("SELECT * FROM samples ORDER BY step, rank, sample_id")


LS_SQL = (
    "SELECT run_id, name, status, steps_recorded AS steps, last_step, algorithm, model_name, "
    "tags, created_at, run_dir FROM runs ORDER BY created_at NULLS LAST, run_dir"
)
"""What `rlprobe ls` lists (its last column is run_dir)."""

LS_NAMES = frozenset({"run_id", "name", "status", "steps_recorded", "steps", "last_step", "algorithm", "model_name",
                      "tags", "created_at", "run_dir", "runs"})
"""Every name LS_SQL mentions, what scope.columns_read proves of it (tests/test_cli_startup.py
checks): ls reads only these columns without loading sqlglot to parse a query that never changes."""


def with_broken_runs(store: Store, table: Any) -> Any:
    """The runs-view rows of table (a pyarrow Table) plus one row per broken run the store left
    out: status 'broken', run_id its folder name, run_dir its folder, every other column NULL."""
    if not store.broken:
        return table
    import pyarrow as pa

    rows = []
    for run_dir in sorted(store.broken):
        row = {"run_id": os.path.basename(run_dir.rstrip("/")) or run_dir, "status": "broken", "run_dir": run_dir}
        rows.append({c: row.get(c) for c in table.column_names})
    return pa.concat_tables([table, pa.Table.from_pylist(rows, schema=table.schema)])


def list_runs(root: str | os.PathLike[str], strict: bool = False) -> list[dict[str, Any]]:
    """One dict per run below root (or the run itself): id, dir, status, steps, last step.

    A run whose files cannot be read is listed with status 'broken' and an 'error' naming the
    file and the reason (with a BrokenRunWarning); strict=True raises instead.
    """
    store = open_store(root, strict=strict)
    table = store.table("SELECT * FROM runs ORDER BY created_at NULLS LAST, run_dir")
    runs = table.to_pylist()
    for run_dir, broken in sorted(store.broken.items()):
        row: dict[str, Any] = {c: None for c in table.column_names}
        row.update(run_id=os.path.basename(run_dir.rstrip("/")) or run_dir, run_dir=run_dir, status="broken", error=str(broken))
        runs.append(row)
    return runs


def load_manifest(run_dir: str | os.PathLike[str]) -> RunManifest:
    """The manifest of one run (raises NotARecording when it has none)."""
    manifest = RunReader(run_dir).manifest
    if manifest is None:
        raise NotARecording(f"{run_dir} has no readable manifest.json")
    return manifest
