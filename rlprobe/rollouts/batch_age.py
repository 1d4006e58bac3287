"""Batch age from a rollout trace: which policy version made each trained token.

Pure Python and the standard library only: the recorder side (RolloutTrace) and the read side
(the CLI, the SQL cross-checks) both use it, and neither pulls in the other's dependencies.

The rules, shared with the SQL view ``batch_age`` (sql/v1/views/batch_age.sql), which must give
the same numbers for the same file:

- A trace file is one stream, in line order; its lines carry the ``run_id`` of the process that
  wrote them, and attempt and group ids are only unique within one ``run_id``.
- A call (``rollout_dispatch``) began on ``version``. vLLM keeps running calls across a refit,
  so a ``refit`` lists each running call with the tokens it had (``calls: [[attempt_id,
  tokens_so_far]]``): from there on its tokens count under ``new_version``. Cut positions are
  made non-decreasing and clamped to ``[0, tokens]``.
- A call counts once it is sealed (``rollout_seal``, its ``tokens``), unless it was abandoned or
  refused before its group published. The last seal before the publish gives its tokens.
- ``rollout_resume`` brings back an attempt restored from a checkpoint: it takes the version,
  tokens and refit cuts of the latest earlier sealed call of another run with the same
  ``prompt_id`` and ``generation_index``; failing that, its own ``version`` and ``tokens``
  fields (all under that version); failing both, it counts nothing. Like a dispatch, it
  (re)defines the attempt; seals and refits of a resumed attempt are ignored (it is not
  generating).
- ``group_publish`` counts its ``tokens_by_version`` if present; otherwise the sealed calls of
  the group (same run) are split at their cuts and summed.
- ``train_step`` (step, trained_version) takes every group its run published for that step
  since that run's last ``train_step`` of the step: batch age = trained_version - the
  token-weighted mean version. A step with no tokens gets no value. A step trained again
  (a resumed run) keeps the later value.
"""

from __future__ import annotations

import json
import operator
from collections import defaultdict
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Optional

ROLLOUT_TRACE_FILENAME = "rollout_trace.jsonl"
BATCH_AGE_TOKENS_METRIC = "batch_age/trained_tokens"
BATCH_AGE_VERSION_SUM_METRIC = "batch_age/token_version_sum"

EVENTS = frozenset({
    "rollout_dispatch", "rollout_seal", "rollout_refusal", "rollout_abandon", "rollout_resume",
    "group_reserve", "group_admit", "group_seal", "group_discard", "group_publish",
    "refit", "train_step", "weight_sync", "checkpoint_publish", "checkpoint_restore",
})
"""Every event name a trace line may carry (RolloutTrace.emit refuses others)."""


def read_events(path: str | Path) -> Iterator[dict[str, Any]]:
    """Yield the events of a trace file in the order they were written.

    A line that is not a JSON object with a string ``event`` (the torn last line of a killed
    writer, a stray blank line) is skipped, as the SQL source skips it.
    """
    with open(path, "rb") as fh:
        for raw in fh:
            event = parse_line(raw)
            if event is not None:
                yield event


def parse_line(raw: bytes | str) -> dict[str, Any] | None:
    """One trace line as a dict, or None if it is not a JSON object with a string event."""
    try:
        doc = json.loads(raw)  # NaN/Infinity accepted, as DuckDB accepts them
    except ValueError:  # also UnicodeDecodeError
        return None
    if not isinstance(doc, dict) or not isinstance(doc.get("event"), str):
        return None
    return doc


def key(value: Any) -> str | None:
    """An id as text, the way the SQL source reads it (json_extract_string): 17 -> '17'."""
    if value is None or isinstance(value, str):
        return value
    if type(value) is int:
        return str(value)  # what json.dumps writes, without its overhead
    try:
        return json.dumps(value)
    except (TypeError, ValueError):  # numpy integers, objects: as RolloutTrace writes them
        try:
            return str(operator.index(value))
        except TypeError:
            return str(value)


def as_int(value: Any) -> int | None:
    """A JSON number or numeric text as an int (None if it is neither or not whole)."""
    if isinstance(value, bool) or value is None:
        return None
    if isinstance(value, int):
        return value
    try:
        number = float(value)
    except (TypeError, ValueError):
        return None
    return int(number) if number.is_integer() else None


def split_tokens(began_version: int, cuts: Sequence[tuple[int, int]], tokens: int) -> dict[int, int]:
    """A call's tokens by version: under began_version until the first cut, then under each
    cut's new version. cuts are (new_version, tokens_so_far) in the order the refits happened."""
    out: dict[int, int] = defaultdict(int)
    version, start, reach = began_version, 0, 0
    for new_version, so_far in cuts:
        reach = max(reach, so_far)
        pos = min(max(reach, 0), tokens)
        if pos > start:
            out[version] += pos - start
        start = max(start, pos)
        version = new_version
    if tokens > start:
        out[version] += tokens - start
    return {v: n for v, n in out.items() if n}


class RefitCuts:
    """Where each running captured call switched weights, until its group publishes.

    vLLM keeps running calls across a refit, so a call's tokens after the refit come from the
    new weights. Keyed by attempt id: use one RefitCuts per process (per trace run_id).
    """

    def __init__(self) -> None:
        self._cuts: dict[str, list[tuple[int, int]]] = {}
        self._first_replaced: dict[str, int] = {}

    def __len__(self) -> int:
        return len(self._cuts)

    def record(self, replaced_version: int, new_version: int, calls: Iterable[Sequence[Any]]) -> None:
        """Record how many tokens each call had when a refit paused it."""
        for call in calls:
            if len(call) < 2:
                continue
            call_id, so_far = key(call[0]), as_int(call[1])
            if call_id is None or so_far is None:
                continue
            self._cuts.setdefault(call_id, []).append((int(new_version), so_far))
            self._first_replaced.setdefault(call_id, int(replaced_version))

    def cuts(self, call_id: Any) -> list[tuple[int, int]]:
        """The (new_version, tokens_so_far) cuts recorded for a call, oldest first."""
        return list(self._cuts.get(key(call_id), ()))  # type: ignore[arg-type]

    def forget(self, call_ids: Iterable[Any]) -> None:
        """Drop the cuts of calls that will never be trained (abandoned, refused, discarded)."""
        for call_id in call_ids:
            k = key(call_id)
            self._cuts.pop(k, None)  # type: ignore[arg-type]
            self._first_replaced.pop(k, None)  # type: ignore[arg-type]

    def forget_before(self, oldest_trainable_version: int) -> None:
        """Drop calls whose group cannot be trained any more.

        A call began on or before the version its first refit replaced, and its group no later
        than the call, so the group is too old to train when that version is.
        """
        stale = [c for c, v in self._first_replaced.items() if v < oldest_trainable_version]
        self.forget(stale)

    def tokens_by_version(self, call_versions: Iterable[tuple[Any, int, int]]) -> dict[int, int]:
        """A published group's trained tokens by the weight version that made them.

        call_versions: each trained call's id, the version it began on and the tokens it
        generated. A call's tokens count under the version it began on until a refit paused
        it, and under the version that refit installed from there on. The calls' cuts are
        forgotten: their group has published.
        """
        out: dict[int, int] = defaultdict(int)
        for call_id, began, tokens in call_versions:
            k = key(call_id)
            for version, n in split_tokens(int(began), self._cuts.get(k, ()), int(tokens)).items():  # type: ignore[arg-type]
                out[version] += n
            self.forget([k])
        return {v: n for v, n in sorted(out.items()) if n}


def batch_age_group_metrics(counts: dict[int, int]) -> dict[str, int]:
    """A published group's share of its step's batch age, as two sums."""
    return {
        BATCH_AGE_TOKENS_METRIC: sum(counts.values()),
        BATCH_AGE_VERSION_SUM_METRIC: sum(int(v) * n for v, n in counts.items()),
    }


def pop_batch_age(per_group_metrics: dict[str, list[Any]], trained_version: int) -> Optional[float]:
    """Remove the step's batch-age sums and return its batch age, if it has tokens.

    per_group_metrics: the step's rollout metrics, one value per group.
    trained_version: the policy version the step updates.
    """
    tokens = sum(per_group_metrics.pop(BATCH_AGE_TOKENS_METRIC, ()) or ())
    version_sum = sum(per_group_metrics.pop(BATCH_AGE_VERSION_SUM_METRIC, ()) or ())
    if tokens <= 0:
        return None
    return trained_version - version_sum / tokens


@dataclass(frozen=True)
class StepAge:
    """One trained step's batch age and what it was computed from."""

    step: int
    batch_age: float
    tokens: int
    trained_version: int
    groups: int
    trace_run_id: str | None


@dataclass
class _Call:
    group_id: str | None
    prompt_id: str | None
    generation_index: int | None
    began: int
    cuts: list[tuple[int, int]] = field(default_factory=list)
    tokens: int | None = None
    resumed: bool = False


@dataclass
class _Run:
    calls: dict[str, _Call] = field(default_factory=dict)
    by_group: dict[str | None, set[str]] = field(default_factory=lambda: defaultdict(set))
    # per step: the group metrics published since the run's last train_step of that step
    pending: dict[int, dict[str, list[int]]] = field(default_factory=lambda: defaultdict(lambda: defaultdict(list)))
    groups: dict[int, int] = field(default_factory=lambda: defaultdict(int))

    def define(self, attempt: str, call: _Call) -> None:
        self.drop(attempt)
        self.calls[attempt] = call
        self.by_group[call.group_id].add(attempt)

    def drop(self, attempt: str | None) -> None:
        call = self.calls.pop(attempt, None)  # type: ignore[arg-type]
        if call is not None:
            members = self.by_group[call.group_id]
            members.discard(attempt)  # type: ignore[arg-type]
            if not members:
                del self.by_group[call.group_id]

    def members(self, group: str | None) -> list[str]:
        return sorted(self.by_group.get(group, ())) if group is not None else []


class BatchAgeTracker:
    """Feed trace events in order; read each trained step's batch age as soon as it trains.

    This is what batch_age_by_step runs over a file, and what RolloutTrace runs as events are
    emitted, so the number a training loop logs is the number the trace gives later.
    """

    def __init__(self, keep_group_tokens: bool = False) -> None:
        """keep_group_tokens: also keep every published group's counts (``group_tokens``),
        which grows with the run; the batch age itself needs only the open groups."""
        self._keep_group_tokens = keep_group_tokens
        self._runs: dict[str | None, _Run] = defaultdict(_Run)
        # latest sealed, dispatched call per (prompt_id, generation_index): (run, version, tokens, cuts)
        self._generated: dict[tuple[str | None, int | None], tuple[str | None, int, int, tuple[tuple[int, int], ...]]] = {}
        self.steps: dict[int, StepAge] = {}
        self.group_tokens: dict[str, dict[int, int]] = {}

    def observe(self, event: dict[str, Any]) -> StepAge | None:
        """Take one event; return the StepAge a train_step produced, else None."""
        name = event.get("event")
        run_key = key(event.get("run_id"))
        if name == "rollout_dispatch":
            version = as_int(event.get("version"))
            attempt = key(event.get("attempt_id"))
            if version is None or attempt is None:
                return None
            self._runs[run_key].define(attempt, _Call(
                key(event.get("group_id")), key(event.get("prompt_id")), as_int(event.get("generation_index")), version))
        elif name == "refit":
            calls = event.get("calls")
            new_version = as_int(event.get("new_version"))
            if not isinstance(calls, list) or new_version is None:
                return None
            run = self._runs[run_key]
            for item in calls:
                if isinstance(item, (list, tuple)) and len(item) >= 2:
                    call = run.calls.get(key(item[0]))  # type: ignore[arg-type]
                    so_far = as_int(item[1])
                    if call is not None and not call.resumed and so_far is not None:
                        call.cuts.append((new_version, so_far))
        elif name == "rollout_seal":
            call = self._runs[run_key].calls.get(key(event.get("attempt_id")))  # type: ignore[arg-type]
            tokens = as_int(event.get("tokens"))
            if call is None or call.resumed or tokens is None:
                return None
            call.tokens = tokens
            if call.prompt_id is not None and call.generation_index is not None:
                self._generated[(call.prompt_id, call.generation_index)] = (run_key, call.began, tokens, tuple(call.cuts))
        elif name in ("rollout_abandon", "rollout_refusal"):
            self._runs[run_key].drop(key(event.get("attempt_id")))
        elif name == "rollout_resume":
            self._resume(run_key, event)
        elif name == "group_discard":
            group = key(event.get("group_id"))
            run = self._runs[run_key]
            for attempt in run.members(group):
                run.drop(attempt)
        elif name == "group_publish":
            self._publish(run_key, event)
        elif name == "train_step":
            return self._train(run_key, event)
        return None

    def _resume(self, run_key: str | None, event: dict[str, Any]) -> None:
        attempt = key(event.get("attempt_id"))
        run = self._runs[run_key]
        if attempt is None:
            return
        run.drop(attempt)  # a resume (re)defines the attempt, as a dispatch does
        prompt, index = key(event.get("prompt_id")), as_int(event.get("generation_index"))
        earlier = self._generated.get((prompt, index)) if prompt is not None and index is not None else None
        if earlier is not None and earlier[0] != run_key:
            _, began, tokens, cuts = earlier
            run.define(attempt, _Call(key(event.get("group_id")), prompt, index, began, list(cuts), tokens, resumed=True))
            return
        version, tokens = as_int(event.get("version")), as_int(event.get("tokens"))
        if version is not None and tokens is not None:
            run.define(attempt, _Call(key(event.get("group_id")), prompt, index, version, [], tokens, resumed=True))

    def _publish(self, run_key: str | None, event: dict[str, Any]) -> None:
        step = as_int(event.get("step"))
        group = key(event.get("group_id"))
        run = self._runs[run_key]
        members = run.members(group)
        given = event.get("tokens_by_version")
        if isinstance(given, dict):
            counts: dict[int, int] = {}
            for v, n in given.items():
                version, tokens = as_int(v), as_int(n)
                if version is not None and tokens is not None:
                    counts[version] = counts.get(version, 0) + tokens
        else:
            counts = defaultdict(int)
            for attempt in members:
                call = run.calls[attempt]
                if call.tokens is None:
                    continue
                for version, n in split_tokens(call.began, call.cuts, call.tokens).items():
                    counts[version] += n
            counts = dict(counts)
        for attempt in members:  # the group has published: its calls are done
            if run.calls[attempt].tokens is not None:
                run.drop(attempt)
        if group is not None and self._keep_group_tokens:
            self.group_tokens[group] = {v: n for v, n in sorted(counts.items()) if n}
        if step is None:
            return
        for name, value in batch_age_group_metrics(counts).items():
            run.pending[step][name].append(value)
        run.groups[step] += 1

    def _train(self, run_key: str | None, event: dict[str, Any]) -> StepAge | None:
        step, trained = as_int(event.get("step")), as_int(event.get("trained_version"))
        if step is None or trained is None:
            return None
        run = self._runs[run_key]
        metrics = run.pending.pop(step, {})
        groups = run.groups.pop(step, 0)
        tokens = sum(metrics.get(BATCH_AGE_TOKENS_METRIC, ()))
        age = pop_batch_age(metrics, trained)
        if age is None:
            return None
        result = StepAge(step, age, tokens, trained, groups, run_key)
        self.steps[step] = result
        return result

    def batch_age(self, step: int) -> float | None:
        """The batch age of a trained step (the latest training of it), or None."""
        found = self.steps.get(step)
        return found.batch_age if found else None


def tokens_by_version(events: Iterable[dict[str, Any]]) -> dict[str, dict[int, int]]:
    """Each published group's trained tokens, by the weight version that made them."""
    tracker = BatchAgeTracker(keep_group_tokens=True)
    for event in events:
        tracker.observe(event)
    return tracker.group_tokens


def batch_age_rows(events: Iterable[dict[str, Any]]) -> list[StepAge]:
    """Each trained step's StepAge, sorted by step (a step trained again keeps the later one)."""
    tracker = BatchAgeTracker()
    for event in events:
        tracker.observe(event)
    return [tracker.steps[s] for s in sorted(tracker.steps)]


def batch_age_by_step(events: Iterable[dict[str, Any]]) -> dict[int, float]:
    """Each step's token-weighted age: policy updates from generating to training.

    A step a resumed run trained again keeps the later run's value.
    """
    return {row.step: row.batch_age for row in batch_age_rows(events)}


def batch_age_for_step(path: str | Path, step: int) -> float | None:
    """The batch age of one step from a trace file (reads the whole file; for one-off use)."""
    tracker = BatchAgeTracker()
    for event in read_events(path):
        tracker.observe(event)
    return tracker.batch_age(step)
