"""Record a TRL trainer (GRPO, RLOO, PPO, ...) with one call, and optionally stop it when the doctor says so.

    from rlprobe.integrations.trl import attach
    callback = attach(trainer, "runs/my-run", halt=True)
    trainer.train()

Scalars come from `on_log` (the dict TRL hands every callback), mapped through
`rlprobe.keymap`. Per-sample rollouts come from the trainer's private completion buffer
(`trainer._logs`, `_textual_logs` before TRL 0.2x), read at `on_step_end`: TRL has already gathered
it from every rank and keeps only the latest generation batch, which is exactly one step's
rollouts. That buffer is not a public API, so reading it is a "shim": when it is missing the
callback writes one `shim_unavailable` event and keeps recording scalars. Only the samples the
recorder keeps become dicts, and their completion_len (TRL keeps text, not token ids) is counted
on the recorder's writer thread, off the training loop.

transformers is imported at module import when it is installed, so the callback can subclass
`TrainerCallback`; without it this module still imports and `attach` raises `ToolMissing`.
`import rlprobe` never imports this module.
"""

from __future__ import annotations

import collections
import functools
import math
import os
import random
import threading
from collections import abc
from pathlib import Path
from typing import Any, Callable, Iterable, Mapping, Optional, Sequence

from rlprobe.errors import ToolMissing
from rlprobe.keymap import map_metrics, to_float
from rlprobe.record.sampling import select as select_samples

try:
    from transformers import TrainerCallback
except ImportError:  # attach() says what to install
    TrainerCallback = object  # type: ignore[assignment,misc]

INSTALL_HINT = 'TRL is not installed: pip install "rlprobe[trl]" (with the torch build you need installed first)'

ALGORITHMS: dict[str, str] = {
    "GRPOTrainer": "grpo",
    "RLOOTrainer": "rloo",
    "PPOTrainer": "ppo",
    "OnlineDPOTrainer": "online_dpo",
}

# Trainer.train() ends with one log of run totals; they describe the run, not a step.
SUMMARY_KEYS = frozenset(
    {"train_runtime", "train_samples_per_second", "train_steps_per_second", "train_tokens_per_second", "total_flos", "train_loss"}
)
_SUMMARY_MARKERS = ("train_loss", "total_flos")
# Keys every HF log carries; a dict holding only these has no step metrics.
_BOOKKEEPING_KEYS = frozenset({"epoch", "num_input_tokens_seen"})
_NAN_WATCHED = ("loss", "grad_norm")
_MISSING = object()


def attach(
    trainer: Any,
    run_dir: str | os.PathLike[str],
    halt: Any = None,
    on_finding: Optional[Callable[[Any], Any]] = None,
    diagnose_every: int = 25,
    doctor_config: Optional[Mapping[str, Any]] = None,
    records: Any = None,
    name: Optional[str] = None,
    tags: Iterable[str] | str = (),
    **recorder_kwargs: Any,
) -> "RlprobeCallback":
    """Record `trainer` into run_dir: build an RlprobeCallback, add it to the trainer, return it.

    name and tags go to the manifest (Recorder(name=, tags=)): `rlprobe ls`, the report and
    `rlprobe ui` show them. Other keyword arguments are the Recorder's.
    """
    try:
        import trl  # noqa: F401  (the callback reads TRL's buffers; fail here, not mid-training)
        import transformers  # noqa: F401
    except ImportError:
        raise ToolMissing(INSTALL_HINT) from None
    callback = RlprobeCallback(
        trainer,
        run_dir,
        halt=halt,
        on_finding=on_finding,
        diagnose_every=diagnose_every,
        doctor_config=doctor_config,
        records=records,
        name=name,
        tags=tags,
        **recorder_kwargs,
    )
    trainer.add_callback(callback)
    return callback


class RlprobeCallback(TrainerCallback):  # type: ignore[misc,valid-type]
    """A TrainerCallback that records steps, samples and events, and runs the live doctor."""

    def __init__(
        self,
        trainer: Any,
        run_dir: str | os.PathLike[str],
        halt: Any = None,
        on_finding: Optional[Callable[[Any], Any]] = None,
        diagnose_every: int = 25,
        doctor_config: Optional[Mapping[str, Any]] = None,
        records: Any = None,
        **recorder_kwargs: Any,
    ) -> None:
        if TrainerCallback is object:
            raise ToolMissing(INSTALL_HINT)
        from rlprobe.record import Recorder

        # Callbacks are handed args, state and control, never the trainer: keep it for the buffers.
        self.trainer = trainer
        self.run_dir = Path(run_dir)
        self.halt_policy = _halt_policy(halt)
        self.on_finding = on_finding
        self.diagnose_every = int(diagnose_every)
        self.doctor_config = doctor_config
        # an rlprobe.records.RecordsWriter: every GRPO group of each new generation batch becomes
        # a group row (consumed at once, staleness 0: TRL trains on every group it generated)
        self.records = records
        self._records_failed = False
        self.halted_by: Any = None
        self.findings: list[Any] = []  # every finding the live doctor reported, in order
        args = trainer.args
        self.world_size = int(getattr(args, "world_size", 1) or 1)
        defaults = {
            "algorithm": algorithm_of(trainer),
            "model_name": model_name_of(trainer),
            "trainer_config": _trainer_config(args),
            "rank": int(getattr(args, "process_index", 0)),
            "world_size": self.world_size,
        }
        self._recorder_kwargs = {**defaults, **recorder_kwargs}
        self.recorder = Recorder(run_dir, **self._recorder_kwargs)
        self._closed = False
        self._watcher: Any = None
        self._rng = random.Random(self.recorder.sampling.seed)
        self._shim_reported = False
        self._shim_failed = False
        self._diagnosis_failures = 0
        self._last_batch: Optional[tuple[int, int]] = None
        self._batch_stats: dict[str, float] = {}
        self._last_logged_step = -1
        self._non_finite: set[str] = set()
        self._summary: dict[str, float] = {}
        self._args_seen: Any = None
        self._args_process_index = 0
        self._counter = _TokenCounter(None)
        self._count_queue = _CountQueue(self._counter)

    # -- what the live doctor needs ------------------------------------------------------------
    @property
    def diagnosing(self) -> bool:
        """True when this rank runs the live doctor: rank 0, recording, and someone uses the findings."""
        return (
            self.recorder.active
            and self.recorder.rank == 0
            and self.diagnose_every > 0
            and (self.halt_policy is not None or self.on_finding is not None)
        )

    # -- TrainerCallback hooks -----------------------------------------------------------------
    def on_train_begin(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
        """Write a train_begin event with what the manifest cannot say (reward functions, versions)."""
        if self._closed:
            # A second train() on the same trainer: on_train_end closed the recording, so open
            # it again, which resumes it (a Recorder never overwrites a recording).
            from rlprobe.record import Recorder

            self.recorder = Recorder(self.run_dir, **self._recorder_kwargs)
            self._closed = False
            self._last_batch = None
            self._batch_stats = {}
            self._non_finite = set()
            self._last_logged_step = -1
            self._summary = {}
            self.halted_by = None
        if not self.recorder.active:
            return
        trainer = self.trainer
        self.recorder.log_event(
            "train_begin",
            step=int(state.global_step),
            trainer=type(trainer).__name__,
            trl_version=_version("trl"),
            transformers_version=_version("transformers"),
            max_steps=int(state.max_steps),
            num_generations=getattr(trainer, "num_generations", None),
            num_iterations=getattr(trainer, "num_iterations", None),
            beta=getattr(trainer, "beta", None),
            reward_funcs=list(getattr(trainer, "reward_func_names", []) or []),
            reward_weights=_floats(getattr(trainer, "reward_weights", None)),
            live_diagnosis=self.diagnosing,
            diagnose_every=self.diagnose_every,
            halt_policy=repr(self.halt_policy) if self.halt_policy is not None else None,
        )

    def on_step_end(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
        """Capture the step's rollouts; every diagnose_every steps, diagnose and maybe halt."""
        step = int(state.global_step)
        if self.recorder.active and self._process_index(args) == 0:  # the buffer is gathered: one rank logs it
            self._capture_samples(step)
        due = self.diagnose_every > 0 and step % self.diagnose_every == 0
        if due and self.diagnosing and self.halted_by is None:
            self._diagnose(step, control, may_halt=True)
        if due and self.halt_policy is not None and self.world_size > 1:
            # Only rank 0 diagnoses; a rank that stopped alone would leave the others waiting in
            # a collective forever. Every rank reaches this line at the same step.
            if self._rank0_halted():
                control.should_training_stop = True

    def _process_index(self, args: Any) -> int:
        # TrainingArguments.process_index asks accelerate every time (~15 us); it is fixed once
        # the arguments exist, so ask once per arguments object.
        if args is not self._args_seen:
            self._args_seen = args
            self._args_process_index = int(getattr(args, "process_index", 0))
        return self._args_process_index

    def on_log(self, args: Any, state: Any, control: Any, logs: Optional[Mapping[str, Any]] = None, **kwargs: Any) -> None:
        """Record TRL's scalars as a step (run totals and eval metrics become events)."""
        if not self.recorder.active or not logs:
            return
        step = int(state.global_step)
        if any(key.startswith("eval_") for key in logs):
            self.recorder.log_event("evaluate", step=step, metrics=_numbers(logs))
            return
        metrics = dict(logs)
        if any(key in metrics for key in _SUMMARY_MARKERS):
            self._summary = {k: v for k, v in _numbers(metrics).items() if k in SUMMARY_KEYS or "_mem_" in k}
            metrics = {k: v for k, v in metrics.items() if k not in SUMMARY_KEYS and "_mem_" not in k}
            if step <= self._last_logged_step:
                return  # the totals' dict carries no metric of a step not yet logged
        mapped = map_metrics(metrics)
        if not (mapped.fields or mapped.components or set(mapped.extra) - _BOOKKEEPING_KEYS):
            return
        if mapped.step is not None:
            step = mapped.step
        values = mapped.step_kwargs()
        for name, value in self._batch_stats.items():
            values.setdefault(name, value)  # TRL's own figure wins where both exist
        self._batch_stats = {}
        self.recorder.log_step(step, **values)
        self._last_logged_step = max(self._last_logged_step, step)
        self._check_finite(step, mapped.fields)

    def on_save(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
        """Write a checkpoint event with the folder the Trainer saved to."""
        if self.recorder.active:
            step = int(state.global_step)
            path = os.path.join(str(args.output_dir), f"checkpoint-{step}")
            self.recorder.log_event("checkpoint", step=step, path=path)

    def on_train_end(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
        """Diagnose once more (reporting, never halting), write train_end and close the recorder."""
        if not self.recorder.active:
            return
        step = int(state.global_step)
        if self.diagnosing:
            # The last stretch of steps may hold a finding the periodic ticks have not seen yet;
            # on_finding should hear about it even though there is nothing left to halt.
            self._diagnose(step, control, may_halt=False)
        close = getattr(self._watcher, "close", None)  # releases the watcher's DuckDB connection
        if callable(close):
            try:
                close()
            except Exception:
                pass  # nothing left to diagnose; the recording matters more
        self._watcher = None
        records: Optional[dict[str, int]] = None
        if self.records is not None:
            try:
                self.records.flush()  # the writer is the caller's: flushed here, closed by them
                records = dict(self.records.counters())
            except Exception:
                records = None
        self.recorder.log_event(
            "train_end",
            step=step,
            halted=self.halted_by is not None,
            halted_by=self.halted_by.signature_id if self.halted_by is not None else None,
            summary=self._summary,
            records=records,
        )
        self.recorder.close()
        self._closed = True

    # -- samples -------------------------------------------------------------------------------
    def _capture_samples(self, step: int) -> None:
        trainer = self.trainer
        logs = getattr(trainer, "_logs", None)
        if not _looks_like_buffer(logs):
            logs = getattr(trainer, "_textual_logs", None)
        if not _looks_like_buffer(logs):
            if not self._shim_reported:
                self._shim_reported = True
                self.recorder.log_event(
                    "shim_unavailable",
                    step=step,
                    message=f"{type(trainer).__name__} has no completion buffer (_logs); recording scalars only",
                    trainer=type(trainer).__name__,
                    trl_version=_version("trl"),
                )
            return
        # With num_iterations > 1 (or steps_per_generation > gradient accumulation) one generation
        # batch feeds several optimizer steps: its rollouts belong to the step that generated them.
        # Identity by id(), not by a held reference, which would keep the batch's tensors alive.
        buffered = getattr(trainer, "_buffered_inputs", _MISSING)
        if buffered is not _MISSING:
            if buffered is None:
                return  # nothing generated yet
            key = (id(buffered), id(buffered[0]) if len(buffered) else 0)
            if key == self._last_batch:
                return
            self._last_batch = key
        try:
            batch = _Batch(
                logs,
                num_generations=getattr(trainer, "num_generations", None),
                reward_names=list(getattr(trainer, "reward_func_names", []) or []),
                reward_weights=_floats(getattr(trainer, "reward_weights", None)),
            )
            stats = batch.stats()
            # Choose the samples the recorder will keep before building them: only those become
            # dicts and only those are re-tokenized for completion_len (a whole batch of 512
            # completions of 1k tokens cost about a second per step). Selecting again from the
            # chosen few (log_samples' select=True) keeps every one with the same capture_reason:
            # the extremes stay the extremes.
            keep = select_samples(batch.rewards_only(), self.recorder.sampling, self._rng)
            chosen = [batch.sample(step, i) for i, _ in keep]
            processing_class = getattr(trainer, "processing_class", None)
            if processing_class is not self._counter.owner:
                self._counter = _TokenCounter(processing_class, private_copy=True)
                self._count_queue = _CountQueue(self._counter)
            if self._counter.private:
                kept: Any = _CountedSamples(chosen, self._count_queue)  # counted on the writer thread
            else:
                _add_lengths(chosen, self._counter)
                kept = chosen
        except Exception as exc:  # a changed buffer layout must never stop training
            if not self._shim_failed:
                self._shim_failed = True
                self.recorder.log_event("shim_unavailable", step=step, message=f"reading the completion buffer failed: {type(exc).__name__}: {exc}")
            return
        self._batch_stats = stats
        if self.records is not None and self.recorder.active:
            self._write_records(step, [batch.sample(step, i) for i in range(batch.n)])
        if chosen:
            self.recorder.log_samples(step, kept)

    def _write_records(self, step: int, samples: list[dict[str, Any]]) -> None:
        """The batch's groups as inference records (rlprobe.records), on the recording rank."""
        from rlprobe.records import groups_from_batch

        try:
            group = getattr(self.trainer, "num_generations", None)
            names = sorted({name for s in samples for name in s.get("reward_components") or {}})
            manifest = getattr(self.records, "manifest", {}) or {}
            rows = groups_from_batch(
                [s.get("prompt_text") or "" for s in samples],
                [s.get("completion_text") or "" for s in samples],
                [s.get("reward_total") for s in samples],
                num_generations=int(group) if group else len(samples),
                components={name: [(s.get("reward_components") or {}).get(name) for s in samples] for name in names},
                weights=_weights_by_name(
                    list(getattr(self.trainer, "reward_func_names", []) or []),
                    _floats(getattr(self.trainer, "reward_weights", None)),
                ),
                protocol_digest=manifest.get("protocol_digest", ""),
                verifiers=names,
                policy_versions=step,
                fresh=bool((manifest.get("run") or {}).get("fresh", True)),
            )
            for row in rows:
                oid = self.records.record_group(row)
                if oid is not None:
                    self.records.record_disposition(oid, "consumed", staleness=0)
        except Exception as exc:  # a records problem must never stop training or the recording
            if not self._records_failed:
                self._records_failed = True
                self.recorder.log_event("records_failed", step=step, message=f"{type(exc).__name__}: {exc}")

    # -- live doctor ---------------------------------------------------------------------------
    def _diagnose(self, step: int, control: Any, may_halt: bool) -> None:
        try:
            if self._watcher is None:
                from rlprobe.doctor.live import RunWatcher

                self._watcher = RunWatcher(self.recorder.run_dir, config=self.doctor_config)
            self.recorder.flush()
            new = list(self._watcher.tick())
        except Exception as exc:  # the doctor is a guest in the training loop: it never ends it
            self._diagnosis_failures += 1
            if self._diagnosis_failures == 1:
                self.recorder.log_event("live_diagnosis_failed", step=step, message=f"{type(exc).__name__}: {exc}")
            return
        halting = None
        for finding in new:
            self.findings.append(finding)
            self.recorder.log_event(
                "live_finding",
                step=step,
                message=finding.explanation,
                signature=finding.signature_id,
                severity=finding.severity,
                confidence=finding.confidence,
                first_step=finding.first_step,
            )
            if self.on_finding is not None:
                try:
                    self.on_finding(finding)
                except Exception as exc:  # the user's callback must not kill training either
                    self.recorder.log_event(
                        "on_finding_failed", step=step, message=f"{type(exc).__name__}: {exc}", signature=finding.signature_id
                    )
            if may_halt and halting is None and self.halt_policy is not None and self.halt_policy.should_halt(finding):
                halting = finding  # tick() returns findings ranked: the first is the worst
        if may_halt and halting is None and self.halt_policy is not None:
            # a finding reported on an earlier tick may meet the policy now (its confidence grew)
            halting = self._watcher.halting(self.halt_policy) if self._watcher is not None else None
        if halting is not None:
            self.halted_by = halting
            control.should_training_stop = True
            self.recorder.log_event(
                "auto_halt",
                step=step,
                message=f"training stopped by rlprobe: {halting.signature_id} ({halting.severity}, confidence {halting.confidence:.2f})",
                signature=halting.signature_id,
                severity=halting.severity,
                confidence=halting.confidence,
                first_step=halting.first_step,
            )

    def _rank0_halted(self) -> bool:
        from accelerate.utils import broadcast_object_list

        flag = [self.halted_by is not None]
        broadcast_object_list(flag, from_process=0)
        return bool(flag[0])

    def _check_finite(self, step: int, fields: Mapping[str, float]) -> None:
        for name in _NAN_WATCHED:
            value = fields.get(name)
            if value is None:
                continue
            if math.isfinite(value):
                self._non_finite.discard(name)
            elif name not in self._non_finite:  # once per stretch, not once per step of it
                self._non_finite.add(name)
                self.recorder.log_event("nan_detected", step=step, message=f"{name} is {value}", metric=name, value=str(value))


# -- turning TRL's buffer into SampleRecords ---------------------------------------------------
def build_samples(
    step: int,
    logs: Mapping[str, Any],
    num_generations: Optional[int] = None,
    reward_names: Sequence[str] = (),
    reward_weights: Optional[Sequence[float]] = None,
    tokenizer: Any = None,
) -> tuple[list[dict[str, Any]], dict[str, float]]:
    """SampleRecord dicts from a TRL completion buffer, and per-step stats of the whole batch."""
    batch = _Batch(logs, num_generations=num_generations, reward_names=reward_names, reward_weights=reward_weights)
    lengths = _TokenCounter(tokenizer).lengths([render(c) for c in batch.completions]) or [None] * batch.n
    return [batch.sample(step, i, length) for i, length in enumerate(lengths)], batch.stats()


class _Batch:
    """A TRL completion buffer read column by column; sample(i) builds one SampleRecord dict.

    The columns every sample needs for the batch's stats and the selection (reward totals,
    advantages) are read up front; texts and the rest are read only for the samples built.
    """

    def __init__(
        self,
        logs: Mapping[str, Any],
        num_generations: Optional[int] = None,
        reward_names: Sequence[str] = (),
        reward_weights: Optional[Sequence[float]] = None,
    ) -> None:
        self.completions = list(logs.get("completion") or ())
        self.n = n = len(self.completions)
        self.prompts = list(logs.get("prompt") or ()) if n else []
        rewards: Mapping[str, Any] = (logs.get("rewards") or {}) if n else {}
        weights = _weights_by_name(reward_names, reward_weights)
        # One column per reward function, None where it did not score the sample (None or NaN).
        self.reward_columns: list[tuple[str, list[Optional[float]]]] = []
        totals: list[Optional[float]] = [None] * n
        for name in rewards:
            raw = list(rewards[name])
            column = [v if type(v) is float else _number(v) for v in raw[:n]] + [None] * (n - len(raw))
            column = [None if v is None or v != v else v for v in column]  # v != v: NaN
            self.reward_columns.append((name, column))
            weight = weights.get(name, 1.0)
            for i, value in enumerate(column):
                if value is not None:
                    total = totals[i]
                    # summed in reward-function order, from 0.0, as one sample at a time would be
                    totals[i] = (0.0 if total is None else total) + weight * value
        self.totals = totals
        self.advantages = [a if type(a) is float else _number(a) for a in (logs.get("advantages") or ())] if n else []
        self.extra_columns = [(name, list(values)) for name, values in (logs.get("extra") or {}).items()] if n else []
        self.group = num_generations if isinstance(num_generations, int) and num_generations > 0 and n and n % num_generations == 0 else None

    def rewards_only(self) -> list[dict[str, Optional[float]]]:
        """What the sample selection reads of each sample: its reward_total."""
        return [{"reward_total": total} for total in self.totals]

    def sample(self, step: int, i: int, completion_len: Optional[int] = None) -> dict[str, Any]:
        """The SampleRecord dict of sample i (a new dict each call: the recorder takes ownership)."""
        sample: dict[str, Any] = {
            "prompt_text": render(self.prompts[i]) if i < len(self.prompts) else None,
            "completion_text": render(self.completions[i]),
            "reward_total": self.totals[i],
            "reward_components": {name: column[i] for name, column in self.reward_columns if column[i] is not None},
        }
        if i < len(self.advantages):
            sample["advantage"] = self.advantages[i]
        if self.group is not None:
            sample["group_id"] = f"{step}-{i // self.group}"
        if completion_len is not None:
            sample["completion_len"] = completion_len
        extra = {}
        for name, values in self.extra_columns:
            value = _number(values[i]) if i < len(values) else None
            if value is not None:
                extra[name] = value
        if extra:
            sample["extra"] = extra
        return sample

    def stats(self) -> dict[str, float]:
        """Per-step stats of the whole batch (see _batch_stats)."""
        return _batch_stats(self.totals, self.advantages, self.group) if self.n else {}


def render(value: Any) -> str:
    """A prompt or completion as text: a string as is, chat messages as 'role: content' lines."""
    if isinstance(value, str):
        return value
    if isinstance(value, Mapping):
        value = [value]
    if isinstance(value, (list, tuple)):
        messages = [m for m in value if isinstance(m, Mapping)]
        if messages and len(messages) == len(value):
            if len(messages) == 1 and messages[0].get("role") == "assistant":
                return _content(messages[0])  # a completion: the text the model wrote
            return "\n".join(f"{m.get('role', '?')}: {_content(m)}" for m in messages)
    return "" if value is None else str(value)


def _content(message: Mapping[str, Any]) -> str:
    content = message.get("content")
    if isinstance(content, list):  # multimodal parts: keep the text, name the rest
        parts = []
        for part in content:
            if isinstance(part, Mapping):
                parts.append(str(part["text"]) if "text" in part else f"<{part.get('type', 'part')}>")
            else:
                parts.append(str(part))
        text = " ".join(parts)
    else:
        text = "" if content is None else str(content)
    calls = message.get("tool_calls")
    if calls:
        text += (" " if text else "") + f"<tool_calls {calls}>"
    return text


class _TokenCounter:
    """Completion lengths in tokens, by re-tokenizing the text TRL kept (it keeps no token ids).

    Special tokens such as EOS were stripped by the decode, so a finished completion counts one
    token less than it generated. The tokenizer is looked up once per tokenizer object: going
    through a transformers tokenizer's attributes costs more than counting eight short texts.
    With private_copy, a fast tokenizer is counted with a copy of its own (see _CountedSamples).
    """

    def __init__(self, tokenizer: Any, private_copy: bool = False) -> None:
        self.owner = tokenizer
        self.private = False
        tok = getattr(tokenizer, "tokenizer", tokenizer)  # a multimodal processor wraps its tokenizer
        backend = getattr(tok, "backend_tokenizer", None) if tok is not None else None
        if private_copy and backend is not None:
            try:
                backend = _private_copy(backend)
                self.private = True
            except Exception:
                pass  # e.g. a custom Python pre-tokenizer, which does not serialize: share it
        # A fast tokenizer's Rust backend skips transformers' per-call Python overhead, and
        # encode_batch_fast (tokenizers >= 0.20) skips the character offsets we do not read:
        # the same ids either way.
        self._encode = getattr(backend, "encode_batch_fast", None) or getattr(backend, "encode_batch", None)
        self._call = tok if backend is None and tok is not None and callable(tok) else None

    def lengths(self, texts: list[str]) -> Optional[list[int]]:
        """Token count of each text (no special tokens added), or None when it cannot tell."""
        if not texts or (self._encode is None and self._call is None):
            return None
        # A collapsed group repeats the same completion: count each distinct text once.
        distinct = list(dict.fromkeys(texts))
        try:
            if self._encode is not None:
                counts = [len(encoding) for encoding in self._encode(distinct, add_special_tokens=False)]
            else:
                ids = self._call(distinct, add_special_tokens=False, return_attention_mask=False)["input_ids"]
                counts = [len(x) for x in ids]
        except Exception:
            return None
        if len(distinct) == len(texts):
            return counts
        by_text = dict(zip(distinct, counts))
        return [by_text[text] for text in texts]


def _private_copy(backend: Any) -> Any:
    """A tokenizers.Tokenizer equal to backend and shared with nobody, without truncation or padding."""
    from tokenizers import Tokenizer

    copy = Tokenizer.from_str(backend.to_str())
    # transformers sets these on the shared backend for each call it makes and resets them
    # afterwards; a completion's length is its whole length
    copy.no_truncation()
    copy.no_padding()
    return copy


def _add_lengths(samples: list[dict[str, Any]], counter: _TokenCounter) -> None:
    lengths = counter.lengths([s["completion_text"] for s in samples])
    for sample, length in zip(samples, lengths or ()):
        sample["completion_len"] = length


class _CountedSamples:
    """A step's kept samples that add completion_len to each one when first iterated.

    Recorder.log_samples takes any iterable and reads it on its writer thread: re-tokenizing
    there takes it off the training loop's thread. The writer uses a private copy of the
    tokenizer, because a Rust tokenizer used by two threads at once can fail ('Already
    borrowed') in the training loop. Iterated on any thread, the samples come out the same; a
    crash still drains them to disk, as the recorder drains every queued record.
    """

    __slots__ = ("samples", "counted", "_queue")

    def __init__(self, samples: list[dict[str, Any]], queue: "_CountQueue") -> None:
        self.samples = samples
        self.counted = False
        self._queue = queue
        queue.waiting.append(self)

    def __iter__(self) -> Any:
        if not self.counted:
            self._queue.count(self)
        return iter(self.samples)


class _CountQueue:
    """The _CountedSamples not counted yet, so that one tokenizer call counts them all.

    The writer thread wakes every few steps and reads the steps queued since; a tokenizer call
    has a fixed cost (a cold one costs more than eight short completions), so the first step
    read counts the later ones too.
    """

    def __init__(self, counter: _TokenCounter) -> None:
        self.counter = counter
        # bounded, for steps the recorder dropped and never reads: one pushed out counts itself
        self.waiting: collections.deque[_CountedSamples] = collections.deque(maxlen=64)
        self._lock = threading.Lock()

    def count(self, first: _CountedSamples) -> None:
        """Add completion_len to first's samples and to those of every step waiting."""
        with self._lock:
            if first.counted:
                return  # another thread counted it while this one waited for the lock
            batches = [first]
            while self.waiting:
                batch = self.waiting.popleft()
                if not batch.counted and batch is not first:
                    batches.append(batch)
            for batch in batches:
                batch.counted = True
            _add_lengths([sample for batch in batches for sample in batch.samples], self.counter)


def _batch_stats(totals: list[Optional[float]], advantages: list[Optional[float]], group: Optional[int]) -> dict[str, float]:
    """Step fields TRL does not log but the doctor reads: reward range, advantage spread, group std."""
    # (list comprehensions inside sum(): the same additions in the same order as generators, faster)
    out: dict[str, float] = {}
    rewards = [r for r in totals if r is not None and math.isfinite(r)]
    if rewards:
        out["reward_min"] = min(rewards)
        out["reward_max"] = max(rewards)
    adv = [a for a in advantages if a is not None and math.isfinite(a)]
    if adv:
        mean = sum(adv) / len(adv)
        out["adv_mean"] = mean
        out["adv_std"] = math.sqrt(sum([(a - mean) ** 2 for a in adv]) / len(adv))
        out["adv_zero_frac"] = len([a for a in adv if abs(a) < 1e-8]) / len(adv)
    if group is not None and group > 1:
        stds = []
        for start in range(0, len(totals), group):
            values = [r for r in totals[start : start + group] if r is not None and math.isfinite(r)]
            if len(values) > 1:
                mean = sum(values) / len(values)
                stds.append(math.sqrt(sum([(v - mean) ** 2 for v in values]) / (len(values) - 1)))
        if stds:
            out["group_reward_std_mean"] = sum(stds) / len(stds)
    return out


# -- small helpers -----------------------------------------------------------------------------
def algorithm_of(trainer: Any) -> str:
    """'grpo', 'rloo', 'ppo', ... from the trainer's class (or a TRL base class), else the class name."""
    for cls in type(trainer).__mro__:
        if cls.__name__ in ALGORITHMS:
            return ALGORITHMS[cls.__name__]
    return type(trainer).__name__.lower()


def model_name_of(trainer: Any) -> Optional[str]:
    """The model's hub id or local path, as its config remembers it."""
    model = getattr(trainer, "model", None)
    config = getattr(model, "config", None)
    for attr in ("_name_or_path", "name_or_path"):
        name = getattr(config, attr, None) or getattr(model, attr, None)
        if isinstance(name, str) and name:
            return name
    return type(model).__name__ if model is not None else None


def _trainer_config(args: Any) -> dict[str, Any]:
    to_dict = getattr(args, "to_dict", None)
    if callable(to_dict):
        try:
            return dict(to_dict())  # the Recorder makes the values JSON-safe
        except Exception:
            pass
    return {k: v for k, v in vars(args).items() if not k.startswith("_")} if hasattr(args, "__dict__") else {}


def _halt_policy(halt: Any) -> Any:
    if halt is None or halt is False:
        return None
    from rlprobe.doctor.live import HaltPolicy

    if halt is True:
        return HaltPolicy()
    if callable(getattr(halt, "should_halt", None)):
        return halt
    raise TypeError(f"halt must be None, True, False or a HaltPolicy, not {type(halt).__name__}")


def _looks_like_buffer(logs: Any) -> bool:
    # collections.abc, not typing.Mapping: isinstance through the typing alias costs ~60 us a call
    return isinstance(logs, abc.Mapping) and "prompt" in logs and "completion" in logs


def _number(value: Any) -> Optional[float]:
    return None if value is None or isinstance(value, str) else to_float(value)


def _numbers(metrics: Mapping[str, Any]) -> dict[str, float]:
    out = {}
    for key, value in metrics.items():
        number = _number(value)
        if number is not None:
            out[key] = number
    return out


def _floats(value: Any) -> Optional[list[float]]:
    if value is None:
        return None
    tolist = getattr(value, "tolist", None)
    try:
        items = tolist() if callable(tolist) else list(value)
        return [float(v) for v in items]
    except (TypeError, ValueError):
        return None


def _weights_by_name(reward_names: Sequence[str], weights: Optional[Sequence[float]]) -> dict[str, float]:
    if weights is None or len(weights) != len(reward_names):
        return {}
    return dict(zip(reward_names, weights))


@functools.lru_cache(maxsize=None)
def _version(package: str) -> Optional[str]:
    # importlib.metadata scans sys.path (~0.6 ms a package); an installed version does not
    # change under a running process
    from importlib import metadata

    try:
        return metadata.version(package)
    except metadata.PackageNotFoundError:
        return None
