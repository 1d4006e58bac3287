"""Console logs: the stdout/stderr of a training job, holding the dicts the Trainer printed.

The HF Trainer prints one Python dict per logging step (`{'loss': 0.01, 'reward': 0.9, ...}`,
values sometimes strings), in between tqdm bars (carriage returns), warnings and the user's own
logging. A dict can follow a prefix on its line. verl prints `step:N - key:value - ...` lines
instead; OpenRLHF sets its `Episode [e/E]` progress bar's postfix to each step's status
(`policy_loss=..., reward=..., kl=...`). All three are read (the postfixes only when the log has
neither dicts nor verl lines: OpenRLHF prints neither).

Trainer dicts carry no step number: entry i (0-based) is step `logging_steps * (i + 1)`, which
is when the Trainer logs. logging_steps is, in order:

1. --step-every;
2. a `logging_steps=N` the log printed (TrainingArguments);
3. inferred from the run's last step T and the entry count k, as the one N with floor(T/N) = k,
   when the run completed (the final totals dict is there) and T is printed: the Trainer's
   "Total optimization steps = T", a final `global_step` (W&B's run summary
   `train/global_step T`, `TrainOutput(global_step=T, ...)`), or the total of the training
   progress bar (tqdm's `n/T`, the bar without a description) once it reached T;
4. for a run cut short (no totals dict), from the last count C its training progress bar
   printed: the largest N with N * k <= C (a log cut short loses its last few entries to
   buffering, it never gains any);
5. else 1.

tqdm's counters are not read per entry: stdout (the dicts) and stderr (the bar) are buffered
apart, so the count printed next to a dict can be dozens of steps ahead of it. The report says
which rule was used.
"""

from __future__ import annotations

import ast
import math
import re
from pathlib import Path
from typing import Any

from rlprobe.importers._common import Entry, Parsed, classify, has_known_metric, is_summary, model_from_text, read_text
from rlprobe.keymap import FIELD_KEYS, map_metrics

_DICT_START = re.compile(r"\{\s*['\"]")
# Python prints nan/inf bare, which literal_eval refuses; they are values worth keeping.
_BARE_SPECIAL = re.compile(r"(?<=[\s:\[,(])(-?)(nan|inf)(?=\s*[,}\])])")
# Older Trainers sometimes printed tensors: tensor(0.5, device='cuda:0') -> 0.5
_TENSOR = re.compile(r"tensor\(\s*([-+0-9.eE]+|nan|inf|-inf)\s*(?:,[^()]*(?:\([^()]*\))?[^()]*)?\)")
_QUOTED_KEY = re.compile(r"['\"]([^'\"]+)['\"]\s*:")
_LOGGING_STEPS = re.compile(r"\blogging_steps\s*[=:]\s*(\d+)")
_TOTAL_STEPS = re.compile(r"Total optimization steps\s*=\s*([\d,]+)")
# The last step a finished run prints: W&B's run summary line, or the Trainer's TrainOutput.
_FINAL_GLOBAL_STEP = re.compile(r"(?:^|\n)wandb:\s+train/global_step\s+(\d+)\s*$|TrainOutput\(global_step=(\d+)", re.M)
# tqdm's bar: "  5%|▌         | 12/250 [00:31<10:04,  2.54s/it]"
_TQDM = re.compile(r"\d{1,3}%\|[^|\r\n]{0,80}\|\s*(\d+)/(\d+)\s*\[")
_VERL_LINE = re.compile(r"(?:^|\s)step:(\d+)\s+-\s+(.+)$")
# OpenRLHF: "Episode [1/1]:  12%|█▏        | 5/40 [01:23<09:43, 16.66s/it, policy_loss=0.0123, reward=0.5]"
_EPISODE_BAR = re.compile(r"Episode \[\d+/\d+\]:\s*\d{1,3}%\|[^|]*\|\s*\d+/\d+\s*\[[^\],]*,[^\],]*,\s*([^\]]*=[^\]]*)\]")
_NUMBER_WRAPPER = re.compile(r"^[\w.]+\((.*)\)$")  # np.float64(0.5) -> 0.5
_METRIC_KEYS = frozenset(FIELD_KEYS) | {"epoch"}


def _literal(text: str) -> Any:
    text = _TENSOR.sub(r"\1", text)
    text = _BARE_SPECIAL.sub(r"'\1\2'", text)
    return ast.literal_eval(text)


def _looks_like_metrics(text: str) -> bool:
    """A dict we could not parse counts as a malformed line only if it names a metric."""
    return any(key in _METRIC_KEYS or key.startswith("rewards/") for key in _QUOTED_KEY.findall(text))


def _verl_pairs(body: str) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for part in body.split(" - "):
        key, sep, value = part.partition(":")
        if not sep:
            continue
        value = value.strip()
        wrapped = _NUMBER_WRAPPER.match(value)
        out[key.strip()] = wrapped.group(1) if wrapped else value
    return out


def episode_postfixes(text: str, last: str | None = None) -> tuple[list[tuple[int, dict[str, Any]]], str | None]:
    """OpenRLHF's per-step status: the postfix of its `Episode [e/E]` progress bar, once per change.

    OpenRLHF's PPO trainer sets the bar's postfix to the step's status dict (policy_loss, reward,
    kl, response_length, ...) after each update, and tqdm redraws it until the next update: each
    distinct postfix is one global step. tqdm prints numbers to 3 significant digits. `last` is
    the postfix seen last (to continue across reads of a growing log); returns (line, dict) pairs
    and the last postfix.
    """
    out: list[tuple[int, dict[str, Any]]] = []
    for number, line in enumerate(text.split("\n"), start=1):
        if "Episode [" not in line:
            continue
        for segment in line.split("\r"):
            match = _EPISODE_BAR.search(segment)
            if match is None or match.group(1) == last:
                continue
            last = match.group(1)
            pairs = {}
            for part in last.split(", "):
                key, sep, value = part.partition("=")
                if sep:
                    pairs[key.strip()] = value.strip()
            if pairs:
                out.append((number, pairs))
    return out, last


def scan(text: str) -> tuple[list[tuple[int, dict[str, Any]]], list[tuple[int, int, dict[str, Any]]], list[int]]:
    """Trainer dicts (line, dict), verl lines (line, step, dict) and malformed line numbers."""
    dicts: list[tuple[int, dict[str, Any]]] = []
    verl: list[tuple[int, int, dict[str, Any]]] = []
    bad: list[int] = []
    for number, line in enumerate(text.split("\n"), start=1):
        for segment in line.split("\r"):  # tqdm redraws its bar with \r; a dict may follow one
            start = _DICT_START.search(segment)
            if start is None:
                match = _VERL_LINE.search(segment)
                if match:
                    verl.append((number, int(match.group(1)), _verl_pairs(match.group(2))))
                continue
            end = segment.rfind("}")
            candidate = segment[start.start(): end + 1] if end > start.start() else segment[start.start():]
            try:
                value = _literal(candidate)
            except (ValueError, SyntaxError, MemoryError, RecursionError, TypeError):
                if _looks_like_metrics(candidate):
                    bad.append(number)
                continue
            if isinstance(value, dict):
                dicts.append((number, value))
    return dicts, verl, bad


def _last_step_printed(text: str) -> tuple[int, str] | None:
    """The run's last step as the log prints it at the end, and where it was read."""
    total = _TOTAL_STEPS.search(text)
    if total:
        return int(total.group(1).replace(",", "")), "Total optimization steps"
    finals = _FINAL_GLOBAL_STEP.findall(text)
    if finals:
        return int(finals[-1][0] or finals[-1][1]), "the final global_step"
    return None


def training_bar(text: str) -> tuple[int, int] | None:
    """(last count, total) of the training progress bar: tqdm's bar without a description.

    A bar with a description ("Loading checkpoint shards: 100%|...") is something else; of the
    bars without one (the Trainer's, evaluation's), the one that counted the most distinct
    steps.
    """
    counts: dict[int, set[int]] = {}
    for match in _TQDM.finditer(text):
        before = text[max(0, match.start() - 8): match.start()].rstrip()
        if before.endswith(":"):
            continue
        counts.setdefault(int(match.group(2)), set()).add(int(match.group(1)))
    if not counts:
        return None
    total = max(counts, key=lambda t: (len(counts[t]), t))
    return max(counts[total]), total


def _floor_match(t: int, entries: int) -> list[int]:
    """Every N with floor(t / N) == entries."""
    # floor(t / n) == entries  <=>  t / (entries + 1) < n <= t / entries
    return [n for n in range(max(1, math.floor(t / (entries + 1))), t // entries + 1) if t // n == entries]


def _logging_steps(text: str, entries: int, completed: bool) -> tuple[int, str]:
    match = _LOGGING_STEPS.search(text)
    if match and int(match.group(1)) > 0:
        n = int(match.group(1))
        return n, f"entry i is step {n}*(i+1) (logging_steps={n} printed in the log)"
    bar = training_bar(text)
    if completed and entries:
        last = _last_step_printed(text)
        if last is None and bar is not None and bar[0] == bar[1]:
            last = bar[1], "the training progress bar's total"
        if last is not None:
            t, where = last
            candidates = _floor_match(t, entries)
            if len(candidates) == 1:
                n = candidates[0]
                return n, (f"entry i is step {n}*(i+1) (logging_steps={n} inferred: {entries} logged entries in a "
                           f"completed run of {t} optimization steps, read from {where}; --step-every overrides)")
    if not completed and entries and bar is not None and bar[0] >= entries:
        c = bar[0]
        n = c // entries
        return n, (f"entry i is step {n}*(i+1) (logging_steps={n} inferred: the run stopped at step {c} of {bar[1]} "
                   f"by its progress bar, with {entries} logged entries, and N*{entries} <= {c} holds for N <= {n}; "
                   "--step-every overrides)")
    return 1, "entry i is step i+1 (logging_steps not found in the log; pass --step-every N for logging_steps=N)"


def parse(path: Path, step_every: int | None = None) -> Parsed:
    """Read a console log (read-only) into mapped entries; see the module doc for step numbers."""
    text = read_text(path)
    parsed = Parsed(kind="console", files=[str(path)])
    parsed.model_name = model_from_text(text)
    dicts, verl, parsed.bad_lines = scan(text)
    kept = []
    completed = False
    for number, item in dicts:
        if is_summary(item):
            completed = True
        mapped = classify(item, parsed)
        if mapped is None:
            continue
        if not has_known_metric(mapped):
            parsed.skip("other dicts")  # tokenizer settings, configs: printed, but not metrics
            continue
        kept.append((number, mapped))
    if kept:
        if step_every is not None:
            every, rule = step_every, f"entry i is step {step_every}*(i+1) (--step-every)"
        else:
            every, rule = _logging_steps(text, len(kept), completed)
        parsed.entries = [Entry(step=every * (i + 1), mapped=m, line=n) for i, (n, m) in enumerate(kept)]
        parsed.step_rule = rule
    for number, step, item in verl:
        mapped = map_metrics(item)
        if has_known_metric(mapped):
            parsed.entries.append(Entry(step=step, mapped=mapped, line=number))
            parsed.step_rule = parsed.step_rule or "the step:N of each verl line"
    if not parsed.entries:
        postfixes, _ = episode_postfixes(text)
        for k, (number, item) in enumerate(postfixes, start=1):
            mapped = classify(item, parsed)
            if mapped is not None and has_known_metric(mapped):
                parsed.entries.append(Entry(step=k, mapped=mapped, line=number))
        if parsed.entries:
            parsed.step_rule = ("the k-th distinct postfix of OpenRLHF's Episode progress bar is global step k "
                                "(tqdm prints 3 significant digits)")
    return parsed


def looks_like(text: str) -> bool:
    """True when text holds a printed metrics dict or a verl step line."""
    dicts, verl, _ = scan(text)
    if verl:
        return True
    if any(has_known_metric(map_metrics(d)) for _, d in dicts):
        return True
    return any(has_known_metric(map_metrics(d)) for _, d in episode_postfixes(text)[0])

