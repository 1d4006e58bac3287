"""What every source reader returns, and the rules they share (which dicts are metrics).

A reader only parses: it opens its source read-only and returns a `Parsed`. Writing the
recording is one place (`rlprobe.importers.write`), so every source becomes the same kind of
recording and the same import report.
"""

from __future__ import annotations

import gc
import os
import re
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterator, Mapping

from rlprobe.keymap import EVAL_PREFIXES, MappedMetrics, derive_degenerate_groups, derive_run, infer_algorithm, map_metrics
from rlprobe.schemas import EXTRA_PREFIX, REWARD_COMPONENT_PREFIX

# The dict the HF Trainer logs once, after the last step: totals, not a step's metrics. Its
# train_loss (the run's mean loss) is no mark of it: loops log a step's own train_loss.
SUMMARY_KEYS = frozenset({"train_runtime", "train_samples_per_second", "train_steps_per_second", "total_flos"})

# Keys every HF Trainer log carries whatever it is about; they say nothing about training.
_BOOKKEEPING = frozenset({"epoch", "step", "global_step", "training/global_step", "train/global_step", "train/epoch",
                          "wall_time", "_step", "update", "iteration", "iter"})

# HF hub cache folders name the model: .../models--Qwen--Qwen2.5-7B-Instruct/snapshots/...
_HF_CACHE_MODEL = re.compile(r"models--([A-Za-z0-9][\w.-]*)--([\w.-]+?)(?=/|\\|$|\s)")


@dataclass
class Entry:
    """One metrics dict of the source, mapped, at the step it was logged."""

    step: int
    mapped: MappedMetrics
    line: int | None = None  # 1-based line of the source it came from, where lines exist


@dataclass
class Parsed:
    """Everything a reader found in a source; written by rlprobe.importers.write."""

    kind: str
    files: list[str] = field(default_factory=list)
    entries: list[Entry] = field(default_factory=list)
    samples: list[dict[str, Any]] = field(default_factory=list)
    algorithm: str | None = None
    model_name: str | None = None
    trainer_config: dict[str, Any] = field(default_factory=dict)
    step_rule: str = ""
    algorithm_rule: str = ""
    bad_lines: list[int] = field(default_factory=list)
    skipped: dict[str, int] = field(default_factory=dict)  # reason -> entries left out
    notes: list[str] = field(default_factory=list)
    torn: list[dict[str, Any]] = field(default_factory=list)  # files read up to a tail that is not a whole record
    group_size: int | None = None  # rollouts per prompt, when the user gave it (keymap.derive_degenerate_groups)
    binary_rewards: bool = False  # every reward is 0 or 1, when the user says so

    def skip(self, reason: str, n: int = 1) -> None:
        """Count an entry left out of the import, by reason."""
        self.skipped[reason] = self.skipped.get(reason, 0) + n

    def extend(self, other: "Parsed") -> None:
        """Take another reader's samples, files and counts (a directory = metrics + completions)."""
        self.files += other.files
        self.samples += other.samples
        self.bad_lines += other.bad_lines
        self.notes += other.notes
        self.torn += other.torn
        for reason, n in other.skipped.items():
            self.skip(reason, n)


def is_summary(metrics: Mapping[str, Any]) -> bool:
    """True for the Trainer's end-of-training totals dict (train_runtime, ...)."""
    return any(k in SUMMARY_KEYS for k in metrics)


def is_eval_only(metrics: Mapping[str, Any]) -> bool:
    """True for an evaluation log: every key but the bookkeeping ones is an evaluation metric
    (eval_, eval/, test_, test/, val-core/, val-aux/: keymap.EVAL_PREFIXES)."""
    keys = [k for k in metrics if k not in _BOOKKEEPING]
    return bool(keys) and all(str(k).startswith(EVAL_PREFIXES) for k in keys)


def has_known_metric(mapped: MappedMetrics) -> bool:
    """True when a dict names at least one StepRecord field or reward component.

    Console logs print other dicts too (tokenizer settings, configs); a dict that maps to no
    known metric is not a training log line.
    """
    return bool(mapped.fields or mapped.components)


def own_names(metrics: Mapping[str, Any]) -> Mapping[str, Any]:
    """rlprobe's flattened columns (reward_component.<c>, extra.<k>) as names the keymap reads."""
    if not any(str(k).startswith((REWARD_COMPONENT_PREFIX, EXTRA_PREFIX)) for k in metrics):
        return metrics
    out: dict[str, Any] = {}
    for key, value in metrics.items():
        key = str(key)
        if key.startswith(REWARD_COMPONENT_PREFIX):
            out["rewards/" + key[len(REWARD_COMPONENT_PREFIX):]] = value
        elif key.startswith(EXTRA_PREFIX):
            out[key[len(EXTRA_PREFIX):]] = value
        else:
            out[key] = value
    return out


# What a dict is depends only on its keys, and a source repeats the same keys every step: decide
# once per key tuple ("summary", "eval", "own" for rlprobe's flattened names, or "metrics").
_KIND_OF_KEYS: dict[tuple[Any, ...], str] = {}


def _kind_of(metrics: Mapping[str, Any]) -> str:
    keys = tuple(metrics)
    kind = _KIND_OF_KEYS.get(keys)
    if kind is None:
        if is_summary(metrics):
            kind = "summary"
        elif is_eval_only(metrics):
            kind = "eval"
        elif any(str(k).startswith((REWARD_COMPONENT_PREFIX, EXTRA_PREFIX)) for k in keys):
            kind = "own"
        else:
            kind = "metrics"
        if len(_KIND_OF_KEYS) >= 4096:
            _KIND_OF_KEYS.clear()
        _KIND_OF_KEYS[keys] = kind
    return kind


def classify(metrics: Mapping[str, Any], parsed: Parsed) -> MappedMetrics | None:
    """Map a training-log dict, or count why it is left out (summary, eval, no metrics) and return None."""
    kind = _kind_of(metrics)
    if kind == "summary":
        parsed.skip("summary")
        return None
    if kind == "eval":
        parsed.skip("eval")
        return None
    if kind == "own":
        metrics = own_names(metrics)
    mapped = map_metrics(metrics)
    if not (mapped.components or not _BOOKKEEPING.issuperset(mapped.fields) or not _BOOKKEEPING.issuperset(mapped.extra)):
        parsed.skip("no numeric metrics")
        return None
    return mapped


def model_from_text(text: str) -> str | None:
    """The model a log names through its HF hub cache path, e.g. 'Qwen/Qwen2.5-7B-Instruct'."""
    match = _HF_CACHE_MODEL.search(text)
    return f"{match.group(1)}/{match.group(2)}" if match else None


def read_text(path: Path) -> str:
    """A text file's contents, opened read-only; undecodable bytes become U+FFFD, never an error."""
    with open(path, "r", encoding="utf-8", errors="replace", newline="") as fh:
        return fh.read()


# -- torn tails ------------------------------------------------------------------------------------
# An append-only source (a log, JSONL, CSV, an event file) whose writer was killed, or that is
# still being written, or was copied mid-write, ends in a record cut short. What comes before it
# is whole and imports; the cut record is not read (its values may be cut mid-number) and the
# import says so, as a `torn` entry: {file, tail_bytes, records, cut, unit} (a W&B log's reader
# counts records, not bytes: tail_bytes None, unit "wandb").


def unended_line(text: str) -> str:
    """What follows text's last newline: a line its writer has not ended (yet), or ''."""
    return text[text.rfind("\n") + 1:]


def _bytes_after_last_newline(path: Path, block: int = 1 << 16) -> int:
    """The file's bytes after its last newline (the whole file when it has none), read from its end."""
    with open(path, "rb") as fh:
        end = fh.seek(0, os.SEEK_END)
        at = end
        while at > 0:
            start = max(0, at - block)
            fh.seek(start)
            found = fh.read(at - start).rfind(b"\n")
            if found >= 0:
                return end - (start + found + 1)
            at = start
    return end


def torn_line(path: Path, text: str) -> dict[str, Any]:
    """The `torn` entry for a text file whose last line, with no newline, is a record cut short."""
    return {"file": str(path), "tail_bytes": _bytes_after_last_newline(path), "records": text.count("\n"),
            "cut": True, "unit": "line"}


def torn_note(torn: Mapping[str, Any]) -> str:
    """One line on a file whose tail was not read: a text file's unended last line, an event
    file's last bytes that are not a whole record (tensorboard.EventReader.torn), or a W&B log's
    last record (wandb_run.parse)."""
    if torn.get("unit") == "wandb":  # wandb-core's reader says where it stopped in records, not bytes
        return (f"{torn['file']}: its last record is incomplete, not imported (W&B's reader: {torn.get('reader')}); "
                f"the {torn['records']} records before it are: the run crashed mid-write, or the file was cut")
    if torn.get("unit") == "line":
        return (f"{torn['file']}: last line incomplete ({torn['tail_bytes']} bytes after the last newline, not "
                f"imported; the {torn['records']} lines before it are): the file may still be being written, or was cut")
    why = ("cut mid-record: a live writer's last record, or a truncated copy" if torn["cut"] else
           "a record that fails its checksum, and everything after it")
    return (f"{torn['file']}: its last {torn['tail_bytes']} bytes are not a whole record ({why}); "
            f"the {torn['records']} records before them are imported")


_JSON_STRING = re.compile(r'"(?:[^"\\]|\\.)*"')


def json_cut_short(text: str) -> bool:
    """True when a JSON text that does not parse ends inside a string, object or array.

    That is a document cut mid-write (the HF Trainer rewrites trainer_state.json in place at each
    checkpoint: a copy taken meanwhile is a prefix), not a malformed one, and the user's remedy
    differs: read it again once written, or take an earlier checkpoint's.
    """
    closed = _JSON_STRING.sub("", text)
    if '"' in closed:  # a string opened and never closed
        return True
    return closed.count("{") + closed.count("[") > closed.count("}") + closed.count("]")


# Measurements a trainer may write as 0 when it does not compute them (the doctor would read a
# flat 0 entropy as a collapsed policy); a constant 0 reward_min or lr is ordinary.
_PLACEHOLDER_PRONE = frozenset({"entropy_mean", "kl_mean", "grad_norm", "loss", "clip_fraction", "reward_std",
                                "logprob_mismatch", "value_loss", "ratio_mean", "adv_std"})


# Why rows before training are left out (the report's "left out" line).
EVALUATION_FIRST = "rows before training with no training field (an evaluation before training)"


def before_training(entries: list[Entry]) -> int | None:
    """The first step that maps a StepRecord field, when some later-or-equal entry does; else None.

    Entries at lower steps that map no field are no training step: an evaluation before training
    (verl's val_before_train, a loop's baseline evaluation at step 0), whose keys name no loss,
    reward, KL or other field of a step; its `accuracy` is the evaluation's, not a reward
    component. Only rows before the first training row are judged so: later rows that map no
    field (a tag logged at its own steps) stay, as extras.
    """
    steps = [e.step for e in entries if e.mapped.fields]
    return min(steps) if steps else None


def drop_evaluation_first(parsed: Parsed) -> None:
    """Leave out the entries before the first training step that map no field (before_training)."""
    first = before_training(parsed.entries)
    if first is None:
        return
    kept = [e for e in parsed.entries if e.step >= first or e.mapped.fields]
    if len(kept) < len(parsed.entries):
        parsed.skip(EVALUATION_FIRST, len(parsed.entries) - len(kept))
        parsed.entries = kept


def finish(parsed: Parsed) -> Parsed:
    """What needs the whole run: rows before training, run-level derivations, the algorithm,
    constant placeholders.

    Every reader's result goes through this once, before it is written (rlprobe.keymap says
    which derivations are exact and why they need every step).
    """
    drop_evaluation_first(parsed)
    mapped = [e.mapped for e in parsed.entries]
    parsed.notes += derive_degenerate_groups(mapped, parsed.group_size, parsed.binary_rewards)
    parsed.notes += derive_run(mapped)
    if parsed.algorithm is None:
        keys = {k for keyset in {id(m.keys): m.keys for m in mapped}.values() for k in keyset}
        parsed.algorithm, parsed.algorithm_rule = infer_algorithm({f for m in mapped for f in m.fields}, keys)
    parsed.notes += constant_notes(mapped)
    return parsed


def constant_notes(mapped: list[MappedMetrics], min_steps: int = 20) -> list[str]:
    """Fields exactly 0 at every one of many steps: said, since trainers write 0 for 'not measured'.

    The values are kept as logged (0 may be true: loss and clip fraction are 0 by construction
    with one update per batch); the note tells the reader of the report to look.
    """
    if len(mapped) < min_steps:
        return []
    fields = sorted(({f for m in mapped for f in m.fields} & _PLACEHOLDER_PRONE) - {f for m in mapped for f in m.derived})
    out = []
    for name in fields:
        if any(m.fields.get(name, 0.0) != 0.0 for m in mapped):  # stops at the first step it is not 0 (or is NaN)
            continue
        logged = sum(name in m.fields for m in mapped)
        if logged >= min_steps:
            out.append(f"{name} is exactly 0 at all {logged} steps that log it (a placeholder for "
                       "'not measured', or 0 by construction?)")
    return out


@contextmanager
def many_objects() -> Iterator[None]:
    """Import one run (read, finish, write) without cyclic GC passes.

    A run's steps become objects (a dict, a MappedMetrics and an Entry per step) that live until
    the run is written and hold no reference cycle; every full collection in between walks all
    of them (a fifth of a 100k-step TensorBoard import's time; benchmarks/import_trackers.py).
    Reference counting frees them as usual on leaving, where the collector runs again if it was on.
    """
    was_on = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_on:
            gc.enable()
