"""Console logs: the stdout/stderr of a training job, holding the dicts the Trainer printed.

The HF Trainer prints one Python dict per logging step (`{'loss': 0.01, 'reward': 0.9, ...}`,
values sometimes strings), in between tqdm bars (carriage returns), warnings and the user's own
logging. A dict can follow a prefix on its line. Metric lines carry their step instead: verl's
`step:N - key:value - ...`, and the lines home-grown loops print (`step:0 | loss=0.1 | kl=0.02`,
`Step 3: reward: 0.5, kl: 0.01`, `iter 12 loss=... reward=...`): a step counter, then
`key=value` or `key: value` pairs (`metric_line`). OpenRLHF sets its `Episode [e/E]` progress
bar's postfix to each step's status (`policy_loss=..., reward=..., kl=...`). All three are read
(the postfixes only when the log has neither dicts nor metric lines: OpenRLHF prints neither).

Trainer dicts carry no step number: entry i (0-based) is step `logging_steps * (i + 1)`, which
is when the Trainer logs. logging_steps is, in order:

1. --step-every;
2. a `logging_steps=N` the log printed (TrainingArguments);
3. inferred from the run's last step T and the entry count k, as the one N with floor(T/N) = k,
   when the run completed (the final totals dict is there) and T is printed: the Trainer's
   "Total optimization steps = T", a final `global_step` (W&B's run summary
   `train/global_step T`, `TrainOutput(global_step=T, ...)`), or the total of the training
   progress bar (tqdm's `n/T`, the bar without a description) once it reached T;
4. for a run cut short or still running (no totals dict), from its training progress bar: entry j
   (1-based) was logged at step N*j, after the bar (stderr, unbuffered) had counted to N*j, and
   reached the file when stdout was flushed, later; so N*j <= B_j, the bar's highest count printed
   before entry j in the file. N is the largest N that fits every entry, min_j floor(B_j / j);
5. else 1.

tqdm's counters are not read as an entry's step: stdout (the dicts) and stderr (the bar) are
buffered apart, so the count printed next to a dict can be dozens of steps ahead of it; they
only bound it from above (rule 4). Rule 4 on a prefix of the log is what a follower of a live
log can use (`StepEvidence`, fed chunk by chunk, decides as `parse` does on the same text): each
new entry can only lower N, and the totals at the end can settle it once more. The report says
which rule was used.
"""

from __future__ import annotations

import ast
import math
import re
from pathlib import Path
from typing import Any

from rlprobe.importers._common import (Entry, Parsed, classify, has_known_metric, is_summary, model_from_text, read_text,
                                       torn_line, unended_line)
from rlprobe.keymap import FIELD_KEYS, map_metrics, to_float

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
# A metric line's step counter, spelled `step:0`, `step=0`, `Step 0`, `[Step 3/100]`, `iter 12`,
# `global_step=40` (case aside); a count out of a total (`3/100`) is the count.
_COUNTER = re.compile(r"(?<![\w.-])(global_step|step|update|iteration|iter)(?:\s*[:=]\s*|\s+)(\d+)(?:\s*/\s*\d+)?(?![\w.])",
                      re.IGNORECASE)
_COUNTER_NAMES = ("step", "global_step", "update", "iteration", "iter")  # preferred first, as keymap.STEP_KEYS
# One `key=value` or `key: value` pair, between separators (spaces, |, comma, semicolon, verl's -).
_PAIR = re.compile(r"(?:^|(?<=[\s|,;(\[]))([A-Za-z_][\w./@-]*)(?:=|:)\s*([^\s|,;=]+)")
_BAR = re.compile(r"\d{1,3}%\|")  # a tqdm bar: its postfix is OpenRLHF's reading, not a metric line
_MIN_PAIRS = 2  # numeric pairs after the counter that make a line a metrics line
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


def metric_line(segment: str) -> tuple[int, dict[str, Any]] | None:
    """(step, pairs) of a line that prints one step's metrics, else None.

    The line holds a step counter (`step`, `global_step`, `update`, `iteration`, `iter`, spelled
    `step:N`, `step=N` or `step N`) followed by at least two `key=value` or `key: value` pairs
    with numeric values, separated by spaces, `|`, commas, semicolons or verl's ` - `. What comes
    before the counter is the line's prefix (a timestamp, a logger name, ray's `(pid=...)`), not
    metrics. Values keep their text (`np.float64(0.5)` is 0.5); a value that is no number stays
    a string, which the import lists as not a number.
    """
    if _BAR.search(segment):
        return None
    counters = list(_COUNTER.finditer(segment))
    if not counters:
        return None
    first = counters[0]
    chosen = min(counters, key=lambda m: _COUNTER_NAMES.index(m.group(1).lower()))
    pairs: dict[str, Any] = {}
    numbers = 0
    for match in _PAIR.finditer(segment, first.end()):
        key, value = match.group(1), match.group(2)
        if key.lower() in _COUNTER_NAMES:
            continue
        wrapped = _NUMBER_WRAPPER.match(value)
        value = wrapped.group(1) if wrapped else value.rstrip(")]}")
        pairs[key] = value
        numbers += to_float(value) is not None
    if numbers < _MIN_PAIRS:
        return None
    return int(chosen.group(2)), pairs


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


def scan(text: str, offsets: list[int] | None = None
         ) -> tuple[list[tuple[int, dict[str, Any]]], list[tuple[int, int, dict[str, Any]]], list[int]]:
    """Trainer dicts (line, dict), metric lines (line, step, dict) and malformed line numbers.

    With `offsets`, the character offset in text where each dict starts is appended to it (the
    progress bar's counts printed before a dict bound its step: StepEvidence).
    """
    dicts: list[tuple[int, dict[str, Any]]] = []
    lines: list[tuple[int, int, dict[str, Any]]] = []
    bad: list[int] = []
    at = 0
    for number, line in enumerate(text.split("\n"), start=1):
        segment_at = at
        at += len(line) + 1
        for segment in line.split("\r"):  # tqdm redraws its bar with \r; a dict may follow one
            segment_start, segment_at = segment_at, segment_at + len(segment) + 1
            start = _DICT_START.search(segment)
            if start is None:
                found = metric_line(segment)
                if found is not None:
                    lines.append((number, found[0], found[1]))
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
                if offsets is not None:
                    offsets.append(segment_start + start.start())
    return dicts, lines, bad


class StepEvidence:
    """What a console log prints that fixes logging_steps (module doc, rules 2-5), read in order.

    `feed` takes the text whole (an import) or in whole-line chunks as a live log grows (a
    follower), with the offsets of the Trainer dicts kept as entries in that text; `rule` then
    gives what `parse` gives on all the text fed so far. Reading in chunks gives the same
    answer as reading at once.
    """

    def __init__(self) -> None:
        self.logging_steps: int | None = None  # the first logging_steps=N printed
        self.total_steps: int | None = None  # the first "Total optimization steps = T"
        self.final_global_step: int | None = None  # the last one printed
        self.entries = 0
        self.completed = False  # the Trainer's totals dict was printed
        self._counts: dict[int, set[int]] = {}  # a bar's total -> the counts it printed (bars without a description)
        self._highest: dict[int, int] = {}  # a bar's total -> its highest count printed so far
        # a bar's total -> (floor(B_j / j), j, B_j) for the entry j where that is smallest (rule 4)
        self._bound: dict[int, tuple[int, int, int]] = {}

    def feed(self, text: str, entry_offsets: list[int] = (), completed: bool = False) -> None:  # type: ignore[assignment]
        """Read the next chunk: text (whole lines), where its kept entries start, whether a totals dict is in it."""
        if self.logging_steps is None:
            match = _LOGGING_STEPS.search(text)
            if match and int(match.group(1)) > 0:
                self.logging_steps = int(match.group(1))
        if self.total_steps is None:
            match = _TOTAL_STEPS.search(text)
            if match:
                self.total_steps = int(match.group(1).replace(",", ""))
        finals = _FINAL_GLOBAL_STEP.findall(text)
        if finals:
            self.final_global_step = int(finals[-1][0] or finals[-1][1])
        self.completed = self.completed or completed
        offsets = iter(entry_offsets)
        following = next(offsets, None)
        for match in _TQDM.finditer(text):
            while following is not None and following < match.start():
                self._entry()
                following = next(offsets, None)
            # The bar's own description, on its own line (a chunk read alone starts at a line)
            before = re.split(r"[\r\n]", text[max(0, match.start() - 8): match.start()])[-1].rstrip()
            if before.endswith(":"):  # "Loading checkpoint shards: 100%|...": some other bar
                continue
            count, total = int(match.group(1)), int(match.group(2))
            self._counts.setdefault(total, set()).add(count)
            self._highest[total] = max(count, self._highest.get(total, 0))
        while following is not None:
            self._entry()
            following = next(offsets, None)

    def _entry(self) -> None:
        self.entries += 1
        j = self.entries
        for total, highest in self._highest.items():
            if highest > 0 and (total not in self._bound or highest // j < self._bound[total][0]):
                self._bound[total] = (highest // j, j, highest)

    def training_bar(self) -> tuple[int, int] | None:
        """(highest count, total) of the training progress bar: of the bars without a description
        (the Trainer's, evaluation's), the one that printed the most distinct counts."""
        if not self._counts:
            return None
        total = max(self._counts, key=lambda t: (len(self._counts[t]), t))
        return self._highest[total], total

    def _last_step(self) -> tuple[int, str] | None:
        if self.total_steps is not None:
            return self.total_steps, "Total optimization steps"
        if self.final_global_step is not None:
            return self.final_global_step, "the final global_step"
        return None

    def rule(self, entries: int | None = None) -> tuple[int, str]:
        """(logging_steps, the rule in words) for the entries fed so far (or `entries` of them)."""
        k = self.entries if entries is None else entries
        if self.logging_steps is not None:
            n = self.logging_steps
            return n, f"entry i is step {n}*(i+1) (logging_steps={n} printed in the log)"
        bar = self.training_bar()
        if self.completed and k:
            last = self._last_step()
            if last is None and bar is not None and bar[0] == bar[1]:
                last = bar[1], "the training progress bar's total"
            if last is not None:
                t, where = last
                candidates = _floor_match(t, k)
                if len(candidates) == 1:
                    n = candidates[0]
                    return n, (f"entry i is step {n}*(i+1) (logging_steps={n} inferred: {k} logged entries in a "
                               f"completed run of {t} optimization steps, read from {where}; --step-every overrides)")
        if not self.completed and k and bar is not None and bar[1] in self._bound and self._bound[bar[1]][0] >= 1:
            n, j, b = self._bound[bar[1]]
            return n, (f"entry i is step {n}*(i+1) (logging_steps={n} inferred: the run stopped at step {bar[0]} of "
                       f"{bar[1]} by its progress bar (or is still running), with {k} logged entries; entry j was "
                       f"printed after the bar counted to N*j, and entry {j}, printed when it showed {b}, allows "
                       f"N <= {n}; --step-every overrides)")
        return 1, "entry i is step i+1 (logging_steps not found in the log; pass --step-every N for logging_steps=N)"


def _floor_match(t: int, entries: int) -> list[int]:
    """Every N with floor(t / N) == entries."""
    # floor(t / n) == entries  <=>  t / (entries + 1) < n <= t / entries
    return [n for n in range(max(1, math.floor(t / (entries + 1))), t // entries + 1) if t // n == entries]


LINE_STEP_RULE = "the step counter of each metric line (verl's step:N - key:value, a loop's step=N | key=value)"


def _drop_unended(path: Path, text: str, lines: list[tuple[int, int, dict[str, Any]]],
                  parsed: Parsed) -> list[tuple[int, int, dict[str, Any]]]:
    """The metric lines but one on a last line with no newline, which is torn (parsed.torn).

    Such a line is where the writer stopped (killed, still running, or a copy cut mid-write). A
    metric line does not show where it ends, so one there may hold a number cut short and is not
    read; a printed dict there that failed to parse is torn, not malformed. A dict that parsed
    is whole (it ends with its brace), and so is a progress bar's postfix (its bracket); a bar or
    a message there is no record and is not worth a word.
    """
    if not unended_line(text).strip():
        return lines
    last = text.count("\n") + 1
    kept = [entry for entry in lines if entry[0] != last]
    if len(kept) < len(lines) or last in parsed.bad_lines:
        parsed.bad_lines = [n for n in parsed.bad_lines if n != last]
        parsed.torn.append(torn_line(path, text))
    return kept


def parse(path: Path, step_every: int | None = None) -> Parsed:
    """Read a console log (read-only) into mapped entries; see the module doc for step numbers."""
    text = read_text(path)
    parsed = Parsed(kind="console", files=[str(path)])
    parsed.model_name = model_from_text(text)
    offsets: list[int] = []
    dicts, lines, parsed.bad_lines = scan(text, offsets)
    lines = _drop_unended(path, text, lines, parsed)
    kept = []
    kept_at = []
    completed = False
    for (number, item), at in zip(dicts, offsets):
        if is_summary(item):
            completed = True
        mapped = classify(item, parsed)
        if mapped is None:
            continue
        if not has_known_metric(mapped):
            parsed.skip("other dicts")  # tokenizer settings, configs: printed, but not metrics
            continue
        kept.append((number, mapped))
        kept_at.append(at)
    if kept:
        if step_every is not None:
            every, rule = step_every, f"entry i is step {step_every}*(i+1) (--step-every)"
        else:
            evidence = StepEvidence()
            evidence.feed(text, kept_at, completed)
            every, rule = evidence.rule()
        parsed.entries = [Entry(step=every * (i + 1), mapped=m, line=n) for i, (n, m) in enumerate(kept)]
        parsed.step_rule = rule
    for number, step, item in lines:
        mapped = classify(item, parsed)
        if mapped is not None and has_known_metric(mapped):
            parsed.entries.append(Entry(step=step, mapped=mapped, line=number))
            parsed.step_rule = parsed.step_rule or LINE_STEP_RULE
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
    """True when text holds a printed metrics dict or a metric line naming a known metric."""
    dicts, lines, _ = scan(text)
    if any(has_known_metric(map_metrics(d)) for _, _, d in lines):
        return True
    if any(has_known_metric(map_metrics(d)) for _, d in dicts):
        return True
    return any(has_known_metric(map_metrics(d)) for _, d in episode_postfixes(text)[0])

