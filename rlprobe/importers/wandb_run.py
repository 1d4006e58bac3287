"""Weights & Biases runs on disk (`wandb/offline-run-*/run-*.wandb`, synced `wandb/run-*`), no network.

A run's `.wandb` file is W&B's transaction log. It is read by the `wandb` package's own
reader: wandb-core's `leet inspect --json` (what `wandb leet inspect --json` runs), which prints
one JSON object per record and stops cleanly at a record still being written. Started with
`--no-observability`, it sends nothing anywhere; no login is needed.

- history records become steps: the step is a trainer step key the row carries
  (`train/global_step`, which HF's WandbCallback and OpenRLHF log, or another keymap step
  key), else W&B's own `_step`; `_timestamp` becomes wall_time, W&B's other `_` keys are
  dropped; media values (a table's `<name>._type`, `<name>.path`, ...) are not metrics.
- a table whose columns include `completion` (TRL's `completions` table) becomes samples, read
  from the run's `files/<path>` like TRL's completions parquet;
- the run record's config becomes the manifest's trainer_config (with the W&B run id, project
  and name under `wandb`), the last summary its `wandb_summary`.

A run with no exit record either crashed or is still being written: the first is imported with
a note, the second (its file changed in the last LIVE_WINDOW_S seconds) is refused.
"""

from __future__ import annotations

import json
import os
import subprocess
import time
from pathlib import Path
from typing import Any, Iterator

from rlprobe.errors import SourceUnreadable
from rlprobe.importers import trl_completions
from rlprobe.importers._common import Entry, Parsed, classify
from rlprobe.keymap import STEP_KEYS

LIVE_WINDOW_S = 30.0
# What wandb-core's reader says on stderr when the file ends inside a record (a crash mid-write,
# or a truncated copy): "reached the end of an incomplete .wandb file (...)".
_INCOMPLETE = "incomplete .wandb file"
_WANDB_KEYS = ("_step", "_runtime", "_timestamp")


def is_run_file(path: Path) -> bool:
    """True for a W&B transaction log name (run-<id>.wandb)."""
    return path.suffix == ".wandb" and path.name.startswith("run-")


def run_file(folder: Path) -> Path | None:
    """The .wandb file of a run folder (offline-run-*/ or run-*/), if it holds one."""
    try:
        files = sorted(p for p in folder.glob("run-*.wandb") if p.is_file())
    except OSError:
        return None
    return files[0] if files else None


def find_runs(root: Path) -> list[Path]:
    """The .wandb files of root: itself, its run folder's, or every run under a wandb/ folder."""
    if root.is_file():
        return [root] if is_run_file(root) else []
    own = run_file(root)
    if own is not None:
        return [own]
    found: dict[Path, None] = {}
    for base in (root, root / "wandb"):
        if not base.is_dir():
            continue
        for child in sorted(base.iterdir()):
            if child.is_symlink():  # latest-run points at one of the others
                continue
            if child.is_dir() and (child.name.startswith(("offline-run-", "run-"))):
                f = run_file(child)
                if f is not None:
                    found[f.resolve()] = None
    return list(found)


def _core() -> str:
    try:
        from wandb.util import get_core_path
    except ImportError:
        raise SourceUnreadable("reading W&B runs needs the wandb package: pip install 'rlprobe[wandb]'") from None
    try:
        return get_core_path()
    except Exception as exc:
        raise SourceUnreadable(f"the wandb package's reader (wandb-core) is not available: {exc}") from None


def records(path: Path, said: list[str] | None = None) -> Iterator[dict[str, Any]]:
    """Every record of a .wandb file as a dict, read by wandb-core (`leet inspect --json`).

    said, when given, receives what the reader printed on stderr: it ends a file cut mid-record
    with a line saying it "reached the end of an incomplete .wandb file" (exit code 0).
    """
    env = {**os.environ, "WANDB_MODE": "offline", "WANDB_ERROR_REPORTING": "false", "WANDB_SILENT": "true"}
    # wandb-core takes the wandb dir and the run file; it only reads them.
    args = [_core(), "leet", "inspect", "--no-observability", "--json", "--run-file", str(path), str(path.parent.parent)]
    proc = subprocess.Popen(args, stdout=subprocess.PIPE, stderr=subprocess.PIPE, stdin=subprocess.DEVNULL,
                            env=env, text=True, encoding="utf-8", errors="replace")
    assert proc.stdout is not None and proc.stderr is not None
    try:
        for line in proc.stdout:
            line = line.strip()
            if not line:
                continue
            try:
                yield json.loads(line)
            except ValueError:
                continue
    finally:
        proc.stdout.close()
        err = proc.stderr.read()
        proc.stderr.close()
        code = proc.wait()
    if said is not None:
        said += [line.strip() for line in err.splitlines() if line.strip()]
    if code != 0:
        why = next((l for l in reversed(err.strip().splitlines()) if l.strip()), f"exit code {code}")
        raise SourceUnreadable(f"{path}: not a readable W&B run ({why.strip()[:160]})")


def _media_names(item: dict[str, Any]) -> set[str]:
    return {k[: -len("._type")] for k, v in item.items() if k.endswith("._type") and isinstance(v, str)}


def parse(path: Path, step_every: int | None = None) -> Parsed:
    """Read one W&B run (a .wandb file or the run folder holding it) into steps and samples."""
    source = path
    if path.is_dir():
        found = run_file(path)
        if found is None:
            raise SourceUnreadable(f"{path}: no run-*.wandb file in this folder")
        path = found
    parsed = Parsed(kind="wandb", files=[str(path)])
    if step_every is not None:
        parsed.notes.append("--step-every is ignored: W&B history rows carry their step")
    rows: list[tuple[int, dict[str, Any]]] = []
    tables: list[tuple[str, str]] = []  # (name, files/<path>)
    config: dict[str, Any] = {}
    summary: dict[str, Any] = {}
    run_info: dict[str, Any] = {}
    exited: dict[str, Any] | None = None
    said: list[str] = []
    read = 0
    for record in records(path, said):
        read += 1
        kind = record.get("type")
        body = record.get(kind) if isinstance(kind, str) else None
        if not isinstance(body, dict):
            continue
        if kind == "history":
            item = body.get("item") or {}
            if not isinstance(item, dict):
                continue
            media = _media_names(item)
            for name in media:
                if item.get(f"{name}._type") == "table-file" and isinstance(item.get(f"{name}.path"), str):
                    tables.append((name, item[f"{name}.path"]))
            row = {k: v for k, v in item.items()
                   if not any(k.startswith(m + ".") for m in media) and not k.startswith("_wandb")}
            wandb_step = row.pop("_step", (body.get("step") or {}).get("num"))
            if "_timestamp" in row:
                row["wall_time"] = row.pop("_timestamp")
            row.pop("_runtime", None)
            if not any(k in row for k in STEP_KEYS) and wandb_step is not None:
                row["_step"] = wandb_step
            rows.append((len(rows), row))
        elif kind == "run":
            run_info = {k: body.get(k) for k in ("run_id", "project", "display_name", "entity", "start_time") if body.get(k)}
            update = (body.get("config") or {}).get("update")
            if isinstance(update, dict):
                config.update({k: v for k, v in update.items() if k != "_wandb"})
        elif kind == "config":
            update = body.get("update")
            if isinstance(update, dict):
                config.update({k: v for k, v in update.items() if k != "_wandb"})
        elif kind == "summary":
            update = body.get("update")
            if isinstance(update, dict):
                summary.update({k: v for k, v in update.items() if not k.startswith("_") and not isinstance(v, (dict, list))})
        elif kind == "exit":
            exited = body
    cut = next((line for line in said if _INCOMPLETE in line.lower()), None)
    if exited is None:
        age = time.time() - path.stat().st_mtime
        if age < LIVE_WINDOW_S:
            raise SourceUnreadable(f"{source}: this W&B run is still being written (its log changed {age:.0f} s ago and "
                                   "has no exit record); import it when it ends")
        if cut is None:  # a cut tail says it on stderr (parsed.torn); this is a log that ends on a whole record
            parsed.notes.append("the W&B run has no exit record: it crashed or was killed; imported up to its last "
                                "complete record")
    if cut is not None:
        parsed.torn.append({"file": str(path), "tail_bytes": None, "records": read, "cut": True, "unit": "wandb",
                            "reader": cut})
    _steps(parsed, rows)
    for name, rel in tables:
        _table(parsed, path.parent / "files" / rel, name)
    parsed.trainer_config = {**config, "wandb": run_info, **({"wandb_summary": summary} if summary else {})}
    parsed.model_name = _model(config)
    return parsed


def _steps(parsed: Parsed, rows: list[tuple[int, dict[str, Any]]]) -> None:
    by_step: dict[int, tuple[int, Any]] = {}
    order: list[int] = []
    for line, row in rows:
        bare = {k: v for k, v in row.items() if k != "_step"}
        mapped = classify(bare, parsed) if bare else None
        if mapped is None:
            continue
        step = mapped.step if mapped.step is not None else row.get("_step")
        if step is None:
            parsed.skip("no step")
            continue
        if int(step) in by_step:  # two rows of one step (a trainer logging twice): merge, later wins
            prev = by_step[int(step)][1]
            prev.fields.update(mapped.fields)
            prev.components.update(mapped.components)
            prev.extra.update(mapped.extra)
            prev.unmapped += [k for k in mapped.unmapped if k not in prev.unmapped]
            continue
        by_step[int(step)] = (line, mapped)
        order.append(int(step))
    for step in sorted(order):
        line, mapped = by_step[step]
        parsed.entries.append(Entry(step=step, mapped=mapped, line=line))
    uses_trainer_step = any(any(k in row for k in STEP_KEYS) for _, row in rows)
    parsed.step_rule = ("the trainer's step key of each W&B history row (e.g. train/global_step)" if uses_trainer_step
                        else "W&B's _step of each history row (the row's index: one per wandb.log call)")


def _table(parsed: Parsed, file: Path, name: str) -> None:
    try:
        with open(file, "r", encoding="utf-8") as fh:
            table = json.load(fh)
    except (OSError, ValueError):
        parsed.notes.append(f"W&B table {name} at {file} is missing or unreadable: not imported")
        return
    columns = table.get("columns") if isinstance(table, dict) else None
    data = table.get("data") if isinstance(table, dict) else None
    if not isinstance(columns, list) or not isinstance(data, list) or "completion" not in columns or "step" not in columns:
        return
    rows = [dict(zip(columns, r)) for r in data if isinstance(r, list)]
    numeric = {c for c in columns if rows and all(isinstance(r.get(c), (int, float)) and not isinstance(r.get(c), bool)
                                                 for r in rows if r.get(c) is not None)}
    components = {c for e in parsed.entries for c in e.mapped.components} or None
    parsed.files.append(str(file))
    trl_completions.add_samples(parsed, rows, numeric, components)


def _model(config: dict[str, Any]) -> str | None:
    for key in ("model_name_or_path", "_name_or_path", "model_name", "model", "pretrain"):
        value = config.get(key)
        if isinstance(value, str) and value and not value.startswith(("/", ".", "~")):
            return value
    return None
