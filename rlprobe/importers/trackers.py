"""Trackers' own folders (TensorBoard logdirs, W&B folders, MLflow stores): which runs a path holds.

A tracker path is either one run (a folder of event files, a .wandb file or its run folder, an
MLflow run folder) or a root of runs (a logdir with runs in subfolders, a `wandb/` folder, an
MLflow store). `open_runs` names each run (its path below the root, or the MLflow experiment and
run name) and gives a function that reads it, so one broken run is one failure, not the root's.
Nothing here imports a tracker's library; the readers do, when a run is read.
"""

from __future__ import annotations

import os
from contextlib import contextmanager
from pathlib import Path
from typing import Callable, Iterator

from rlprobe.errors import SourceUnreadable
from rlprobe.importers import mlflow_store, tensorboard, wandb_run
from rlprobe.importers._common import Parsed

TRACKERS: tuple[str, ...] = ("tensorboard", "wandb", "mlflow")
Reader = Callable[[], Parsed]

_TB_MAX_DEPTH = 6  # how deep below a folder event files are looked for (logdir/group/run/...)


def _has_event_files(folder: Path, depth: int = _TB_MAX_DEPTH) -> bool:
    base = len(folder.parts)
    for current, dirs, files in os.walk(folder):
        if any(tensorboard.is_event_file(Path(f)) for f in files):
            return True
        if len(Path(current).parts) - base >= depth:
            dirs[:] = []
        elif "manifest.json" in files:  # an rlprobe recording: nothing of TensorBoard's below
            dirs[:] = []
    return False


def _holds_recordings(folder: Path, look: int = 64) -> bool:
    """True when one of the first subfolders is an rlprobe recording (it has a manifest.json)."""
    try:
        with os.scandir(folder) as entries:
            for i, entry in enumerate(entries):
                if i >= look:
                    break
                if entry.is_dir() and os.path.isfile(os.path.join(entry.path, "manifest.json")):
                    return True
    except OSError:
        return False
    return False


def tracker_kind(path: Path) -> str | None:
    """'tensorboard', 'wandb' or 'mlflow' when path is (or holds) that tracker's runs, else None."""
    if path.is_file():
        if tensorboard.is_event_file(path):
            return "tensorboard"
        if wandb_run.is_run_file(path):
            return "wandb"
        if mlflow_store.is_mlflow_db(path):
            return "mlflow"
        return None
    if not path.is_dir():
        return None
    if _holds_recordings(path):  # an rlprobe runs root: answer before walking its runs
        return None
    if wandb_run.find_runs(path):
        return "wandb"
    if mlflow_store.store_of(path) is not None:
        return "mlflow"
    if tensorboard.event_files(path) or _has_event_files(path):
        return "tensorboard"
    return None


def is_single_run(path: Path, kind: str) -> bool:
    """True when path is one run rather than a root of runs."""
    if kind == "tensorboard":
        return path.is_file() or bool(tensorboard.event_files(path))
    if kind == "wandb":
        return path.is_file() or wandb_run.run_file(path) is not None
    found = mlflow_store.store_of(path)
    return found is not None and found[1] is not None


@contextmanager
def open_runs(path: Path, kind: str, progress: Callable[[int, int], None] | None = None) -> Iterator[list[tuple[str, Reader]]]:
    """(name, read) for each run of a tracker path, in a stable order; empty roots are refused."""
    if kind == "tensorboard":
        runs = tensorboard.find_runs(path)
        out = [(_name(path, run), lambda run=run: tensorboard.parse(run, progress=progress)) for run in runs]
        if not out:
            raise SourceUnreadable(f"{path}: no TensorBoard event file (events.out.tfevents.*) in this folder or below")
        yield out
    elif kind == "wandb":
        files = wandb_run.find_runs(path)
        if not files:
            raise SourceUnreadable(f"{path}: no W&B run here (no run-*.wandb file, nor offline-run-*/ or run-*/ folders)")
        yield [(_name(path, f.parent) if f.parent != path else ".", lambda f=f: wandb_run.parse(f)) for f in files]
    elif kind == "mlflow":
        with mlflow_store.open_runs(path) as runs:
            if not runs:
                raise SourceUnreadable(f"{path}: an MLflow store with no run in it")
            yield runs
    else:
        raise ValueError(kind)


def _name(root: Path, run: Path) -> str:
    if run == root or root.is_file():
        return "."
    try:
        return run.relative_to(root).as_posix()
    except ValueError:
        return run.name
