"""Importers: turn runs rlprobe never recorded into recordings the doctor and views can read.

Sources: a Hugging Face `trainer_state.json` (or an output/checkpoint dir holding one, plus
TRL's `completions/*.parquet`), a JSONL / JSON / CSV dump of metric dicts (TRL, HF or verl
names), or a console log holding the dicts the Trainer printed. Metric names go through
`rlprobe.keymap`; names it does not know are kept under `extra` and listed in the report.

The source is only ever opened for reading, and an import never writes into it or over an
existing recording: the result is a new run directory.

    report = import_source("out/checkpoint-200", "runs/imported")
    with as_recording("train.log") as rec:      # a temporary recording, removed afterwards
        diagnose_path(rec.path)
"""

from __future__ import annotations

import json
import os
import shutil
import tempfile
import uuid
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Callable, Iterator

from rlprobe.errors import ImportRefused, RlprobeError, SourceUnreadable
from rlprobe.importers import console_log, metrics_file, trainer_state, trl_completions, xtuner_log
from rlprobe.importers._common import Parsed, finish, many_objects
from rlprobe.importers.trackers import TRACKERS, is_single_run, open_runs, tracker_kind
from rlprobe.importers.write import ImportReport, RootReport, write_recording
from rlprobe.sources import Recording, is_recording_dir  # light: the read commands use it without this package

__all__ = ["FORMATS", "ImportReport", "Recording", "RootReport", "as_recording", "detect", "import_source", "is_importable"]

FORMATS: tuple[str, ...] = ("auto", "trainer_state", "jsonl", "json", "csv", "console", "xtuner", "trl_completions",
                            "tensorboard", "wandb", "mlflow")
"""Values of `kind` (and of `rlprobe import --format`)."""

_SNIFF_BYTES = 1 << 20


def _first_line(text: str) -> str:
    for line in text.split("\n"):
        if line.strip():
            return line.strip()
    return ""


def _read_all(path: Path) -> str:
    from rlprobe.importers._common import read_text

    return read_text(path)


def detect(source: str | os.PathLike[str]) -> str:
    """The kind of a source (one of FORMATS but 'auto'), or SourceUnreadable saying why none fits."""
    path = Path(source).expanduser()
    if not path.exists():
        raise SourceUnreadable(f"{source}: no such file or directory")
    if path.is_dir():
        if is_recording_dir(path):
            raise SourceUnreadable(f"{source} is already an rlprobe recording: read it directly, no import needed")
        if trainer_state.find_in_dir(path) is not None:
            return "trainer_state"
        if trl_completions.find_files(path):
            return "trl_completions"
        tracker = tracker_kind(path)
        if tracker is not None:
            return tracker
        raise SourceUnreadable(f"{source}: a folder with no trainer_state.json (nor checkpoint-*/trainer_state.json), "
                               "no completions/*.parquet, no TensorBoard event files, W&B runs or MLflow store: point "
                               "at a metrics file, a log, an output dir or a tracker's folder")
    name, suffix = path.name, path.suffix.lower()
    in_recording = path.parent.name in ("steps", "samples") and is_recording_dir(path.parent.parent)
    if name in ("manifest.json", "steps.parquet", "events.jsonl") or in_recording:
        raise SourceUnreadable(f"{source} is part of an rlprobe recording: read the run directory directly")
    tracker = tracker_kind(path)
    if tracker is not None:
        return tracker
    if suffix == ".parquet":
        return "trl_completions"
    if suffix == ".json":
        return "trainer_state" if name == "trainer_state.json" or trainer_state.looks_like(path) else "json"
    if suffix in (".jsonl", ".ndjson"):
        return "jsonl"
    if suffix in (".csv", ".tsv"):
        return "csv"
    with open(path, "rb") as fh:
        head = fh.read(_SNIFF_BYTES).decode("utf-8", errors="replace")
    first = _first_line(head)
    if first.startswith("{"):
        try:
            if isinstance(json.loads(first), dict):
                return "jsonl"
        except ValueError:
            pass
    if xtuner_log.looks_like(head) or ("[XTuner]" in head and xtuner_log.looks_like(_read_all(path))):
        return "xtuner"
    if console_log.looks_like(head):
        return "console"
    header = {c.strip().strip('"') for c in first.replace("\t", ",").split(",")}
    from rlprobe.keymap import FIELD_KEYS, STEP_KEYS

    if len(header) > 1 and header & (set(FIELD_KEYS) | set(STEP_KEYS)):
        return "csv"
    raise SourceUnreadable(f"{source}: unknown format (no metric dicts, JSON lines or CSV header with known "
                           "metric names found); pass --format if it is one of " + ", ".join(FORMATS[1:]))


def _read(path: Path, kind: str, step_every: int | None) -> Parsed:
    if path.is_dir() and kind not in TRACKERS:
        if kind not in ("trainer_state", "trl_completions"):
            raise SourceUnreadable(f"{path} is a folder; --format {kind} needs a file")
        state = trainer_state.find_in_dir(path) if kind == "trainer_state" else None
        completions = trl_completions.find_files(path)
        if kind == "trainer_state" and state is None:
            raise SourceUnreadable(f"{path}: no trainer_state.json here or in a checkpoint-* folder")
        if state is None:
            if not completions:
                raise SourceUnreadable(f"{path}: no completions/*.parquet here")
            return trl_completions.parse(completions)
        parsed = trainer_state.parse(state, step_every)
        if completions:
            reward_names = {c for e in parsed.entries for c in e.mapped.components} or None
            parsed.extend(trl_completions.parse(completions, reward_names))
        return parsed
    readers = {
        "trainer_state": lambda: trainer_state.parse(path, step_every),
        "jsonl": lambda: metrics_file.parse_jsonl(path, step_every),
        "json": lambda: metrics_file.parse_json_array(path, step_every),
        "csv": lambda: metrics_file.parse_csv(path, step_every),
        "console": lambda: console_log.parse(path, step_every),
        "xtuner": lambda: xtuner_log.parse(path, step_every),
        "trl_completions": lambda: trl_completions.parse([path]),
    }
    return readers[kind]()


def _inside(child: Path, parent: Path) -> bool:
    return child == parent or parent in child.parents


def _check_target(source: Path, run_dir: Path) -> None:
    src, dest = source.resolve(), run_dir.resolve()
    if src == dest:
        raise ImportRefused(f"{run_dir}: SOURCE and RUN_DIR are the same path; import into a new directory")
    if _inside(src, dest):
        raise ImportRefused(f"{source} is inside RUN_DIR {run_dir}; import into a new directory")
    if source.is_dir() and _inside(dest, src):
        raise ImportRefused(f"RUN_DIR {run_dir} is inside SOURCE {source}; an import never writes into its source")
    if dest.exists() and (not dest.is_dir() or any(dest.iterdir())):
        raise ImportRefused(f"{run_dir} already exists and is not empty; an import never overwrites: choose a new RUN_DIR")


Progress = Callable[[str, int, int], None]
"""progress(what, done, total): a run's bytes read, or a root's runs imported."""


def import_source(source: str | os.PathLike[str], run_dir: str | os.PathLike[str], *, kind: str = "auto",
                  step_every: int | None = None, algorithm: str | None = None, model_name: str | None = None,
                  run_id: str | None = None, progress: Progress | None = None, group_size: int | None = None,
                  binary_rewards: bool = False) -> ImportReport | RootReport:
    """Build a new, closed recording at run_dir from a source (read-only); see the module doc.

    A tracker's root of runs (a TensorBoard logdir, a wandb/ folder, an MLflow store) becomes a
    runs root at run_dir, one recording per run, and a RootReport. group_size (rollouts per
    prompt) and binary_rewards (every reward is 0 or 1) are facts a log cannot show; given both,
    the share of degenerate groups is derived where that is exact (keymap.derive_degenerate_groups).
    """
    src, dest = Path(source).expanduser(), Path(run_dir).expanduser()
    if kind not in FORMATS:
        raise SourceUnreadable(f"unknown format {kind!r}; one of {', '.join(FORMATS)}")
    if step_every is not None and step_every < 1:
        raise SourceUnreadable(f"--step-every must be at least 1, got {step_every}")
    if group_size is not None and group_size < 2:
        raise SourceUnreadable(f"--group-size must be at least 2, got {group_size}")
    facts = {"group_size": group_size, "binary_rewards": binary_rewards}
    if not src.exists():
        raise SourceUnreadable(f"{source}: no such file or directory")
    _check_target(src, dest)
    found = detect(src) if kind == "auto" else kind
    if found in TRACKERS:
        return _import_tracker(src, dest, found, step_every=step_every, algorithm=algorithm, model_name=model_name,
                               run_id=run_id, progress=progress, facts=facts)
    with many_objects():  # a run's steps are objects until it is written: freed before the collector is back
        parsed = finish(_told(_read(src, found, step_every), facts))
        report = _write(parsed, src, dest, found, algorithm=algorithm, model_name=model_name, run_id=run_id)
        del parsed
    return report


def _told(parsed: Parsed, facts: dict[str, Any]) -> Parsed:
    """parsed, with what the user said about the run that its source cannot show."""
    parsed.group_size, parsed.binary_rewards = facts["group_size"], facts["binary_rewards"]
    return parsed


def _write(parsed: Parsed, src: Path, dest: Path, found: str, **manifest: Any) -> ImportReport:
    if not parsed.entries and not parsed.samples:
        why = f" ({len(parsed.bad_lines)} malformed lines, first at line {parsed.bad_lines[0]})" if parsed.bad_lines else ""
        left = ", ".join(f"{n} {r}" for r, n in sorted(parsed.skipped.items()))
        raise SourceUnreadable(f"{src}: no metric dicts found as {found}{why}" + (f"; left out: {left}" if left else ""))
    return write_recording(parsed, src.resolve(), dest, **manifest)


def _safe_name(name: str) -> str:
    """A run's name as a folder below the runs root (no '..', no absolute path, no empty part)."""
    parts = [p for p in name.replace("\\", "/").split("/") if p not in ("", ".", "..")]
    return "/".join(p.replace(os.sep, "_") for p in parts) or "run"


def _import_tracker(src: Path, dest: Path, kind: str, *, step_every: int | None, algorithm: str | None,
                    model_name: str | None, run_id: str | None, progress: Progress | None,
                    facts: dict[str, Any]) -> ImportReport | RootReport:
    def bytes_progress(done: int, total: int) -> None:
        if progress is not None:
            progress(f"reading {src.name}", done, total)

    with open_runs(src, kind, bytes_progress) as runs:
        if is_single_run(src, kind) and len(runs) == 1:
            with many_objects():
                parsed = runs[0][1]()
                if step_every is not None:
                    parsed.notes.append(f"--step-every is ignored: {kind} values carry their step")
                report = _write(finish(_told(parsed, facts)), src, dest, kind, algorithm=algorithm, model_name=model_name,
                                run_id=run_id)
                del parsed
            return report
        # A root of runs: built under a hidden name next to dest, renamed into place at the end.
        dest.parent.mkdir(parents=True, exist_ok=True)
        tmp = dest.parent / f".{dest.name}.import-{uuid.uuid4().hex[:8]}.tmp"
        tmp.mkdir()
        root = RootReport(source=str(src.resolve()), kind=kind, run_dir=str(dest))
        try:
            used: set[str] = set()
            for i, (name, read) in enumerate(runs):
                if progress is not None:
                    progress(f"run {i + 1}/{len(runs)} {name}", i, len(runs))
                folder = _safe_name(name)
                while folder in used:
                    folder += "_"
                used.add(folder)
                try:
                    with many_objects():
                        report = _write(finish(_told(read(), facts)), src, tmp / folder, kind, algorithm=algorithm,
                                        model_name=model_name, run_id=f"{run_id}/{folder}" if run_id else None)
                except RlprobeError as exc:  # one broken run never takes the root down
                    root.failed.append((name, str(exc)))
                    continue
                report.run_dir = str(dest / folder)
                report.source = f"{src.resolve()} :: {name}"
                root.runs.append(report)
            if progress is not None:
                progress("runs", len(runs), len(runs))
            if not root.runs:
                first = root.failed[0][1] if root.failed else "no run"
                raise SourceUnreadable(f"{src}: none of its {len(runs)} {kind} runs could be imported (first: {first})")
            if dest.exists():
                dest.rmdir()  # _check_target made sure it is empty
            os.replace(tmp, dest)
        except BaseException:
            shutil.rmtree(tmp, ignore_errors=True)
            raise
    return root


def is_importable(path: str | os.PathLike[str]) -> bool:
    """True when path exists and is a source to import rather than a recording or a runs root.

    A file is a source unless it is one of a recording's own files; a folder is one when it is
    not a recording and holds a trainer_state.json (or checkpoints with one) or TRL completions.
    """
    p = Path(path).expanduser()
    if p.is_file():
        return p.name not in ("manifest.json", "steps.parquet", "events.jsonl")
    if p.is_dir() and not is_recording_dir(p):
        return (trainer_state.find_in_dir(p) is not None or bool(trl_completions.find_files(p))
                or tracker_kind(p) is not None)
    return False


@contextmanager
def as_recording(path: str | os.PathLike[str], *, kind: str = "auto", step_every: int | None = None,
                 algorithm: str | None = None, progress: Progress | None = None) -> Iterator[Recording]:
    """A recording for path: path itself when it is one (or a root), else a temporary import removed on exit."""
    if not is_importable(path) and kind == "auto":
        yield Recording(Path(path))
        return
    with tempfile.TemporaryDirectory(prefix="rlprobe-import-") as tmp:
        name = Path(path).resolve().name
        # The source's name as run_id: what the doctor prints is then the file the user gave.
        report = import_source(path, Path(tmp) / "run", kind=kind, step_every=step_every,
                               algorithm=algorithm, run_id=name, progress=progress)
        yield Recording(Path(report.run_dir), report)
