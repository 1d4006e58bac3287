"""Hugging Face `trainer_state.json`: the Trainer's `log_history`, one dict per logging step.

Every TRL trainer (GRPO, RLOO, PPO, DPO, ...) inherits it from transformers.Trainer, and it is
saved with every checkpoint, so it is the one record most finished or crashed runs still have.
Entries carry their own `step`. Evaluation entries (only eval_* keys) and the final totals
(train_runtime, ...) are not training steps and are left out, counted in the report.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

from rlprobe.errors import SourceUnreadable
from rlprobe.importers._common import Entry, Parsed, classify, json_cut_short
from rlprobe.keymap import to_float

_CHECKPOINT = re.compile(r"^checkpoint-(\d+)$")


def find_in_dir(folder: Path) -> Path | None:
    """The trainer_state.json of an output dir: its own, else the newest checkpoint's (longest history)."""
    own = folder / "trainer_state.json"
    if own.is_file():
        return own
    found = []
    for child in folder.iterdir():
        match = _CHECKPOINT.match(child.name)
        if match and (child / "trainer_state.json").is_file():
            found.append((int(match.group(1)), child / "trainer_state.json"))
    return max(found)[1] if found else None


def looks_like(path: Path) -> bool:
    """True when a .json file is a trainer state (an object with a log_history list)."""
    try:
        data = _load(path)
    except SourceUnreadable:
        return False
    return isinstance(data, dict) and isinstance(data.get("log_history"), list)


def _load(path: Path) -> Any:
    try:
        with open(path, "r", encoding="utf-8") as fh:
            text = fh.read()
        return json.loads(text)
    except (OSError, ValueError) as exc:
        if isinstance(exc, ValueError) and not isinstance(exc, UnicodeDecodeError) and json_cut_short(text):
            # The Trainer writes it in place at each checkpoint: a prefix is a copy taken mid-write.
            raise SourceUnreadable(f"{path}: not readable as JSON: it ends mid-document (cut while being written, "
                                   "or a truncated copy); read it once written, or an earlier checkpoint's") from None
        raise SourceUnreadable(f"{path}: not readable as JSON ({type(exc).__name__}: {str(exc).splitlines()[0][:80]})") from None


def _model_near(path: Path) -> str | None:
    """The model an output or checkpoint dir was trained from, read from its saved configs."""
    for folder in (path.parent, path.parent.parent):
        for name, key in (("adapter_config.json", "base_model_name_or_path"), ("config.json", "_name_or_path")):
            try:
                with open(folder / name, "r", encoding="utf-8") as fh:
                    value = json.load(fh).get(key)
            except (OSError, ValueError, AttributeError):
                continue
            # A local path is where the model was, not which model it is; keep hub names only.
            if isinstance(value, str) and value and not value.startswith(("/", ".", "~")):
                return value
    return None


def parse(path: Path, step_every: int | None = None) -> Parsed:
    """Read a trainer_state.json (read-only) into mapped entries keyed by their logged step."""
    data = _load(path)
    if not isinstance(data, dict) or not isinstance(data.get("log_history"), list):
        raise SourceUnreadable(f"{path}: not a trainer_state.json (no log_history list)")
    parsed = Parsed(kind="trainer_state", files=[str(path)])
    parsed.trainer_config = {k: v for k, v in data.items() if k != "log_history"}
    parsed.model_name = _model_near(path)
    for item in data["log_history"]:
        if not isinstance(item, dict):
            parsed.skip("not a dict")
            continue
        mapped = classify(item, parsed)
        if mapped is None:
            continue
        step = to_float(item.get("step"))
        if step is None or step != step:
            parsed.skip("no step")
            continue
        parsed.entries.append(Entry(step=int(step), mapped=mapped, line=None))
    logging_steps = data.get("logging_steps")
    parsed.step_rule = "the step each log_history entry carries"
    if isinstance(logging_steps, (int, float)) and logging_steps:
        parsed.step_rule += f" (logging_steps={int(logging_steps)})"
    if step_every is not None:
        parsed.notes.append("--step-every is ignored: trainer_state.json entries carry their step")
    return parsed
