"""XTuner's RL trainer log (`xtuner.v1.train.rl_trainer.RLTrainer` and its TrainingWorker).

XTuner prints no metrics dict per step. Each rollout N (one policy update; the step number
here) leaves, in this order:

- `[RLTrainer] Rollout N data statistics:` and `  - key : value` lines: batch_size,
  rewards/mean|min|max, advantages/mean|min|max (token mean), response_len/mean|min|max|std,
  prompt_len/* (the keymap maps rewards/*, advantages/mean and response_len/mean|max);
- `[TrainingWorker] Rollout N: avg entropy: X, avg rollout entropy: Y` (entropy of the
  training logprobs, and of the rollout engine's; read as `entropy` and `rollout_entropy`), and
  with a reference model `Rollout N: avg KL divergence: X` (read as `kl`);
- ` rollout mismatch metrics:` and ` rollout importance sampling metrics:` followed by a JSON
  object (mismatch/mismatch_logprob_abs_diff is the keymap's logprob_mismatch; the rest extras);
- one `[Rank0 ]Rollout N Step M: key=value, ...` line per optimizer step (total_loss, loss,
  max_ratio, grad_norm, ...), and a `Gradient norm X exceeds the threshold T, skipping
  optimizer step.` warning for each step the optimizer skipped. A rollout's steps become the
  mean of each key (so `grad_norm` and `loss` are means over the rollout's optimizer steps),
  `grad_norm/max` and `max_ratio/max`, `optimizer_steps` and `skipped_optimizer_steps`;
- `Rollout N training finished and timing listed:` and `  - name : Xs` lines: Total,
  generation and training become step_time_s, generation_time_s and optimization_time_s, the
  others `timing/<name>`;
- every few rollouts `Evaluate idx N scores {...}`: kept as `eval/<name>` extras of rollout N.

A rollout without its data statistics block (the log was cut while it ran) is left out and
counted. Text between the blocks (model printouts, worker stats, warnings) is ignored.
"""

from __future__ import annotations

import ast
import json
import re
from pathlib import Path
from typing import Any

from rlprobe.importers._common import Entry, Parsed, classify, model_from_text, read_text, torn_line, unended_line

_PREFIX = r"(?:Rank\d+\s+)?"
_STATS = re.compile(r"\]\s*Rollout (\d+) data statistics:\s*$")
_KV_LINE = re.compile(r"^\s+-\s+(.+?)\s*:\s*(\S+?)s?\s*$")
_ENTROPY = re.compile(_PREFIX + r"Rollout (\d+): avg entropy: ([-+0-9.eEnaif]+)(?:, avg rollout entropy: ([-+0-9.eEnaif]+))?")
_KL = re.compile(_PREFIX + r"Rollout (\d+): avg KL divergence: ([-+0-9.eEnaif]+)")
_STEP = re.compile(_PREFIX + r"Rollout (\d+) Step (\d+): (.+)$")
_SKIPPED = re.compile(r"Gradient norm \S+ exceeds the threshold \S+, skipping optimizer step")
_TIMING = re.compile(r"\]\s*Rollout (\d+) training finished and timing listed:")
_EVAL = re.compile(r"Evaluate idx (\d+) scores (\{.*\})\s*$")
_JSON_HEAD = re.compile(r"^\s*rollout (mismatch|importance sampling) metrics:\s*$")
_MARKER = re.compile(r"\]\s*Rollout \d+ data statistics:")

_TIMING_FIELDS = {"Total": "step_time_s", "generation": "generation_time_s", "training": "optimization_time_s"}
_STEP_MAX_KEYS = ("grad_norm", "max_ratio")


def looks_like(text: str) -> bool:
    """True when text holds an XTuner RLTrainer 'Rollout N data statistics' block."""
    return _MARKER.search(text) is not None


def _number(text: str) -> float | None:
    try:
        return float(text)
    except ValueError:
        return None


class _Rollout:
    """What the log said about one rollout, in the order it said it."""

    def __init__(self) -> None:
        self.line: int | None = None
        self.metrics: dict[str, Any] = {}
        self.steps: list[dict[str, float]] = []
        self.skipped = 0
        self.has_stats = False

    def merged(self) -> dict[str, Any]:
        out = dict(self.metrics)
        if self.steps:
            keys = {k for s in self.steps for k in s}
            for key in sorted(keys):
                values = [s[key] for s in self.steps if key in s]
                out[key] = sum(values) / len(values)
                if key in _STEP_MAX_KEYS:
                    out[f"{key}/max"] = max(values)
            out["optimizer_steps"] = len(self.steps)
            out["skipped_optimizer_steps"] = self.skipped
        return out


def parse(path: Path, step_every: int | None = None) -> Parsed:
    """Read an XTuner RL trainer log (read-only): one entry per rollout, the rollout index its step."""
    text = read_text(path)
    parsed = Parsed(kind="xtuner", files=[str(path)])
    parsed.model_name = model_from_text(text)
    tail = unended_line(text)
    if tail.strip():
        # XTuner's logger writes whole lines: one without its newline was cut mid-write (a value
        # in it may be cut mid-number), so it is not read and the import says so.
        parsed.torn.append(torn_line(path, text))
        text = text[: len(text) - len(tail)]
    if step_every is not None:
        parsed.notes.append("--step-every is ignored: each rollout prints its index")
    rollouts: dict[int, _Rollout] = {}
    lines = text.split("\n")
    current: int | None = None  # the rollout whose worker lines come now
    i = 0
    while i < len(lines):
        line = lines[i]
        i += 1
        if (m := _STATS.search(line)) is not None:
            n = int(m.group(1))
            r = rollouts.setdefault(n, _Rollout())
            r.has_stats, r.line, current = True, i, n
            while i < len(lines) and (kv := _KV_LINE.match(lines[i])) is not None:
                r.metrics[kv.group(1).strip()] = _number(kv.group(2))
                i += 1
            continue
        if (m := _TIMING.search(line)) is not None:
            r = rollouts.setdefault(int(m.group(1)), _Rollout())
            while i < len(lines) and (kv := _KV_LINE.match(lines[i])) is not None:
                name, value = kv.group(1).strip(), _number(kv.group(2))
                r.metrics[_TIMING_FIELDS.get(name, f"timing/{name}")] = value
                i += 1
            continue
        if (m := _ENTROPY.search(line)) is not None:
            current = int(m.group(1))
            r = rollouts.setdefault(current, _Rollout())
            r.metrics["entropy"] = _number(m.group(2))
            if m.group(3) is not None:
                r.metrics["rollout_entropy"] = _number(m.group(3))
            continue
        if (m := _KL.search(line)) is not None:
            current = int(m.group(1))
            rollouts.setdefault(current, _Rollout()).metrics["kl"] = _number(m.group(2))
            continue
        if _JSON_HEAD.match(line) and i < len(lines) and lines[i].strip() == "{":
            end = i
            while end < len(lines) and lines[end].strip() != "}":
                end += 1
            block = "\n".join(lines[i: end + 1])
            i = end + 1
            try:
                values = json.loads(block)
            except ValueError:
                parsed.bad_lines.append(i)
                continue
            if current is not None and isinstance(values, dict):
                rollouts.setdefault(current, _Rollout()).metrics.update(values)
            continue
        if (m := _STEP.search(line)) is not None:
            current = int(m.group(1))
            step: dict[str, float] = {}
            for part in m.group(3).split(","):
                key, sep, value = part.partition("=")
                number = _number(value.strip()) if sep else None
                if number is not None:
                    step[key.strip()] = number
            if step:
                rollouts.setdefault(current, _Rollout()).steps.append(step)
            else:
                parsed.bad_lines.append(i)
            continue
        if _SKIPPED.search(line) and current is not None:
            rollouts.setdefault(current, _Rollout()).skipped += 1
            continue
        if (m := _EVAL.search(line)) is not None:
            try:
                scores = ast.literal_eval(m.group(2))
            except (ValueError, SyntaxError):
                parsed.bad_lines.append(i)
                continue
            if isinstance(scores, dict):
                target = rollouts.get(int(m.group(1)))
                if target is not None:
                    target.metrics.update({f"eval/{k}": v for k, v in scores.items()})
    for n in sorted(rollouts):
        r = rollouts[n]
        if not r.has_stats:
            parsed.skip("rollouts without their data statistics block")
            continue
        mapped = classify(r.merged(), parsed)
        if mapped is not None:
            parsed.entries.append(Entry(step=n, mapped=mapped, line=r.line))
    parsed.step_rule = "the N of each 'Rollout N data statistics' block (one rollout, one policy update)"
    return parsed
