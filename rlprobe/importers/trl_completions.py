"""TRL's completion tables: `completions/completions_NNNNN.parquet` under a trainer's output dir.

GRPOTrainer (and the trainers built on it) write one file per logging step when
`log_completions=True`: columns `step` (an int, or a string in some TRL versions), `prompt`,
`completion`, one column per reward function (named after it), `advantage`, and in newer
versions `mode` ("train"/"eval", with files under completions/train/ and completions/eval/) and
extra columns a reward function returned. They become samples: reward function columns become
reward components and their sum the sample's `reward_total` (TRL's reward_weights are not in
the file, so the sum is unweighted), every prompt's completions in a step share a `group_id`.
Evaluation rows are left out.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any, Iterable

from rlprobe.errors import SourceUnreadable
from rlprobe.importers._common import Parsed
from rlprobe.keymap import to_float

_FIXED = frozenset({"step", "prompt", "completion", "advantage", "mode", "image", "images"})


def find_files(folder: Path) -> list[Path]:
    """The training completion parquet files of an output dir (or of a completions/ dir itself)."""
    base = folder if folder.name == "completions" else folder / "completions"
    if not base.is_dir():
        return []
    files = sorted(base.glob("*.parquet")) + sorted((base / "train").glob("*.parquet"))
    return [f for f in files if f.is_file()]


def _content(content: Any) -> str:
    if isinstance(content, list):  # multimodal parts: [{"type": "text", "text": ...}, {"type": "image"}]
        return " ".join(str(p.get("text", "")) if isinstance(p, dict) else str(p) for p in content).strip()
    return str(content)


def _text(value: Any) -> str | None:
    if value is None or isinstance(value, str):
        return value
    if isinstance(value, list) and value and all(isinstance(m, dict) and "content" in m for m in value):
        # Conversational: [{"role": ..., "content": ...}, ...]; keep who said what.
        return "\n".join(f"{m['role']}: {_content(m['content'])}" if m.get("role") else _content(m["content"])
                         for m in value)
    import json

    return json.dumps(value, default=str, ensure_ascii=False)


def _is_numeric(field: Any) -> bool:
    import pyarrow as pa

    return pa.types.is_integer(field.type) or pa.types.is_floating(field.type) or pa.types.is_boolean(field.type)


def add_samples(parsed: Parsed, rows: list[dict[str, Any]], numeric: set[str], reward_names: set[str] | None = None) -> None:
    """TRL completion rows (dicts by column) as samples of parsed; numeric names the number columns.

    Shared by the parquet files and the same table logged to W&B (a `completions` table).
    """
    components = {c for c in numeric - _FIXED if reward_names is None or c in reward_names}
    extras = numeric - _FIXED - components
    serial = len(parsed.samples)
    groups: dict[tuple[int, str], str] = {}
    per_step: dict[int, int] = {}
    for row in rows:
        if row.get("mode") not in (None, "train"):
            parsed.skip("eval samples")
            continue
        step_value = to_float(row.get("step"))
        if step_value is None or not math.isfinite(step_value):
            parsed.skip("samples without a step")
            continue
        step = int(step_value)
        prompt = _text(row.get("prompt"))
        key = (step, prompt or "")
        if key not in groups:
            groups[key] = f"{step}/{per_step.get(step, 0)}"
            per_step[step] = per_step.get(step, 0) + 1
        comps = {c: v for c in sorted(components) if (v := to_float(row.get(c))) is not None}
        finite = [v for v in comps.values() if math.isfinite(v)]
        parsed.samples.append({
            "step": step,
            "sample_id": f"{step}-0-{serial}",
            "prompt_text": prompt,
            "completion_text": _text(row.get("completion")),
            "reward_total": math.fsum(finite) if finite else None,
            "reward_components": comps,
            "advantage": to_float(row.get("advantage")),
            "group_id": groups[key],
            "capture_reason": "all",
            "extra": {c: v for c in sorted(extras) if (v := to_float(row.get(c))) is not None},
        })
        serial += 1


def parse(files: Iterable[Path], reward_names: set[str] | None = None) -> Parsed:
    """Read completion parquet files (read-only) into samples; reward_names picks component columns."""
    import pyarrow.parquet as pq

    parsed = Parsed(kind="trl_completions")
    ignored: dict[str, None] = {}
    for path in files:
        try:
            table = pq.read_table(path)
        except Exception as exc:  # pyarrow raises several types for a file that is not parquet
            raise SourceUnreadable(f"{path}: not a readable parquet file ({type(exc).__name__})") from None
        if "completion" not in table.column_names or "step" not in table.column_names:
            raise SourceUnreadable(f"{path}: not a TRL completions table (needs step and completion columns)")
        parsed.files.append(str(path))
        numeric = {f.name for f in table.schema if _is_numeric(f)}
        ignored.update(dict.fromkeys(f.name for f in table.schema if f.name not in _FIXED and f.name not in numeric))
        add_samples(parsed, table.to_pylist(), numeric, reward_names)
    if ignored:
        parsed.notes.append(f"completion columns not imported (not numbers): {', '.join(ignored)}")
    return parsed
