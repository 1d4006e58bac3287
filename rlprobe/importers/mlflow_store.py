"""MLflow tracking stores: a file store (`mlruns/`) or a sqlite database, read with `mlflow`.

Each MLflow run becomes a recording: every metric's history by step (MLflow keeps each
metric's own (step, value, timestamp) list; the steps of one run are joined on step, the last
value of a step winning), its params and tags as trainer_config, its run name as the run's
name. A store holds many runs (experiments of runs): it is a root of runs. The deleted
experiment and runs (lifecycle_stage 'deleted') are left out.

MLflow's stores write when opened (the file store creates its `.trash` folder, the sqlite
store creates or upgrades tables), so the store itself is never opened: a copy of its
metadata (the file store without artifacts; the sqlite file) in a temporary folder is, and
removed afterwards.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from contextlib import closing, contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterator

from rlprobe.errors import SourceUnreadable
from rlprobe.importers._common import Entry, Parsed, classify

_SQLITE_MAGIC = b"SQLite format 3\x00"


@dataclass(frozen=True)
class MlflowRun:
    """One run of a store: where the store is, the run's id, and a name for its recording."""

    store: Path
    run_id: str
    name: str


def is_mlflow_db(path: Path) -> bool:
    """True for a sqlite database holding MLflow's tables (experiments, runs, metrics)."""
    try:
        with open(path, "rb") as fh:
            if fh.read(16) != _SQLITE_MAGIC:
                return False
    except OSError:
        return False
    import sqlite3

    try:  # immutable: sqlite reads the file as it is and writes nothing, not even a lock or journal
        with closing(sqlite3.connect(f"{path.resolve().as_uri()}?mode=ro&immutable=1", uri=True)) as db:
            tables = {row[0] for row in db.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
    except sqlite3.Error:
        return False
    return {"experiments", "runs", "metrics"} <= tables


def is_file_store(folder: Path) -> bool:
    """True for an MLflow file store root: experiment folders holding a meta.yaml."""
    if not folder.is_dir():
        return False
    try:
        return any((child / "meta.yaml").is_file() and child.name != ".trash" for child in folder.iterdir() if child.is_dir())
    except OSError:
        return False


def store_of(path: Path) -> tuple[Path, str | None] | None:
    """(store root, run id or None) for a store, an experiment folder or a run folder of a file store; a sqlite file."""
    if path.is_file():
        return (path, None) if is_mlflow_db(path) else None
    if is_file_store(path):
        return path, None
    if (path / "meta.yaml").is_file() and (path / "metrics").is_dir() and is_file_store(path.parent.parent):
        return path.parent.parent, path.name  # mlruns/<experiment>/<run>
    if (path / "mlruns").is_dir() and is_file_store(path / "mlruns"):
        return path / "mlruns", None
    return None


def _mlflow() -> Any:
    os.environ.setdefault("MLFLOW_ALLOW_FILE_STORE", "true")  # reading an existing file store, never creating one
    try:
        from mlflow.tracking import MlflowClient
    except ImportError:
        raise SourceUnreadable("reading MLflow stores needs the mlflow package: pip install 'rlprobe[mlflow]'") from None
    return MlflowClient


@contextmanager
def _copy(store: Path) -> Iterator[str]:
    """A tracking URI for a private copy of the store (its metadata), removed on exit."""
    with tempfile.TemporaryDirectory(prefix="rlprobe-mlflow-") as tmp:
        if store.is_file():
            target = Path(tmp) / "mlflow.db"
            shutil.copyfile(store, target)
            wal = store.with_name(store.name + "-wal")
            if wal.exists():  # committed rows not yet checkpointed into the main file
                shutil.copyfile(wal, target.with_name(target.name + "-wal"))
            yield f"sqlite:///{target}"
        else:
            target = Path(tmp) / "mlruns"
            # A run's artifacts folder is kept, empty: the store looks for it, its contents are not metrics.
            shutil.copytree(store, target, symlinks=True,
                            ignore=lambda folder, names: names if Path(folder).name == "artifacts" else [])
            yield target.as_uri()


def _client(uri: str) -> Any:
    import logging

    logging.getLogger("mlflow").setLevel(logging.WARNING)  # its INFO lines about migrations are noise here
    try:
        return _mlflow()(tracking_uri=uri)
    except SourceUnreadable:
        raise
    except Exception as exc:
        raise SourceUnreadable(f"not a readable MLflow store ({type(exc).__name__}: {str(exc).splitlines()[0][:120]})") from None


@contextmanager
def open_runs(path: Path) -> Iterator[list[tuple[str, Any]]]:
    """(name, read) for every live run of the store at path (or the one run a run folder is).

    One copy of the store serves every run; read() returns the run's Parsed. Raises
    SourceUnreadable when the store itself cannot be read.
    """
    found = store_of(path)
    if found is None:
        raise SourceUnreadable(f"{path}: not an MLflow store (no experiment folder with a meta.yaml, not a sqlite file)")
    store, only = found
    with _copy(store) as uri:
        client = _client(uri)
        try:
            experiments = [e for e in client.search_experiments() if e.lifecycle_stage != "deleted"]
            runs = client.search_runs([e.experiment_id for e in experiments], max_results=50000) if experiments else []
        except Exception as exc:
            raise SourceUnreadable(f"{path}: not a readable MLflow store ({type(exc).__name__}: "
                                   f"{str(exc).splitlines()[0][:120]})") from None
        names = {e.experiment_id: e.name for e in experiments}
        out = []
        for run in runs:
            if only is not None and run.info.run_id != only:
                continue
            label = f"{names.get(run.info.experiment_id, run.info.experiment_id)}/{run.info.run_name or run.info.run_id}"
            out.append((label, lambda r=MlflowRun(store, run.info.run_id, label): parse(client, r)))
        yield out


def parse(client: Any, run: MlflowRun) -> Parsed:
    """Read one MLflow run's metric histories, params and tags through an open client."""
    parsed = Parsed(kind="mlflow", files=[str(run.store)])
    try:
        info = client.get_run(run.run_id)
        rows: dict[int, dict[str, Any]] = {}
        for key in sorted(info.data.metrics):
            for m in client.get_metric_history(run.run_id, key):
                row = rows.setdefault(int(m.step), {})
                row[key] = m.value
                row["wall_time"] = max(row.get("wall_time", 0.0), m.timestamp / 1000.0)
    except Exception as exc:
        raise SourceUnreadable(f"{run.store}: MLflow run {run.run_id} is not readable ({type(exc).__name__})") from None
    for step in sorted(rows):
        mapped = classify(rows[step], parsed)
        if mapped is not None:
            parsed.entries.append(Entry(step=step, mapped=mapped))
    params = dict(info.data.params)
    tags = {k: v for k, v in info.data.tags.items() if not k.startswith("mlflow.")}
    parsed.trainer_config = {**params, "mlflow": {"run_id": run.run_id, "run_name": info.info.run_name,
                                                  "experiment_id": info.info.experiment_id, "status": info.info.status,
                                                  **({"tags": tags} if tags else {})}}
    parsed.model_name = next((v for k, v in params.items() if k in ("model_name_or_path", "model_name", "model")
                              and isinstance(v, str) and not v.startswith(("/", ".", "~"))), None)
    if info.info.status != "FINISHED":
        parsed.notes.append(f"the MLflow run's status is {info.info.status}")
    parsed.step_rule = "the step MLflow stores with each metric value"
    return parsed
