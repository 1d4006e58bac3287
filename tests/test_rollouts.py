"""The rollout trace (spec 003): RolloutTrace, RefitCuts, batch age in Python and in SQL.

Traces are built two ways: by hand, where every number is worked out in a comment, and by a
small async-controller simulator that knows which weight version produced every token, so the
batch age both implementations compute is checked against the truth, not only against each
other.
"""

from __future__ import annotations

import json
import os
import random
import signal
import subprocess
import sys
import textwrap
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from rlprobe.cli import cli
from rlprobe.record.writer import RunWriter
from rlprobe.rollouts import (
    BATCH_AGE_TOKENS_METRIC,
    BATCH_AGE_VERSION_SUM_METRIC,
    RefitCuts,
    RolloutTrace,
    batch_age_by_step,
    batch_age_for_step,
    batch_age_group_metrics,
    batch_age_rows,
    pop_batch_age,
    read_events,
    tokens_by_version,
)
from rlprobe.rollouts import trace as trace_module
from rlprobe.rollouts.views import open_traces
from rlprobe.schemas import RunManifest

T0 = 1_800_000_000.0


def line(event: str, run: str = "r1", t: float = T0, **fields: Any) -> dict[str, Any]:
    return {"t": t, "run_id": run, "event": event, **fields}


def write_trace(path: Path, events: list[dict[str, Any]], torn: str = "") -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "a", encoding="utf-8") as fh:
        for i, e in enumerate(events):
            fh.write(json.dumps({**e, "t": e.get("t", T0) + i * 1e-3}) + "\n")
        fh.write(torn)
    return path


def sql_rows(path: Path, traces: tuple[Path, ...] = ()) -> list[dict[str, Any]]:
    store = open_traces(path, traces)
    columns, _, rows = store.rows("SELECT * FROM batch_age ORDER BY run_id, step")
    return [dict(zip(columns, r)) for r in rows]


def assert_sql_matches_python(path: Path) -> dict[int, float]:
    """The batch_age view and batch_age_rows agree on every step and every column they share."""
    py = batch_age_rows(read_events(path))
    sql = sql_rows(path)
    assert [r["step"] for r in sql] == [r.step for r in py]
    for s, p in zip(sql, py):
        assert s["batch_age"] == pytest.approx(p.batch_age, rel=1e-12, abs=1e-12), s["step"]
        assert (s["tokens"], s["trained_version"], s["groups"], s["trace_run_id"]) == (
            p.tokens, p.trained_version, p.groups, p.trace_run_id), s["step"]
    return {p.step: p.batch_age for p in py}


# -- RefitCuts and the two sums --------------------------------------------------------------


def test_refit_cuts_split_a_running_call_at_each_refit() -> None:
    cuts = RefitCuts()
    cuts.record(3, 4, [["a", 30], ["b", 5]])
    cuts.record(4, 5, [["a", 70]])
    # a began on 3: tokens 0-29 on 3, 30-69 on 4 (installed by the first refit), 70-99 on 5
    assert cuts.tokens_by_version([("a", 3, 100)]) == {3: 30, 4: 40, 5: 30}
    # b finished with 5 tokens, all before the refit installed 4: nothing counts under 4
    assert cuts.tokens_by_version([("b", 3, 5)]) == {3: 5}
    # a call no refit touched, and a's cuts are gone once its group published
    assert cuts.tokens_by_version([("c", 4, 12), ("a", 5, 8)]) == {4: 12, 5: 8}
    assert len(cuts) == 0


def test_refit_cut_positions_are_clamped_and_never_go_back() -> None:
    cuts = RefitCuts()
    cuts.record(0, 1, [["a", 50]])
    cuts.record(1, 2, [["a", 20]])  # a report behind the previous one moves nothing back
    cuts.record(2, 3, [["a", 500]])  # past the call's end: no token on 3
    assert cuts.tokens_by_version([("a", 0, 80)]) == {0: 50, 2: 30}


def test_forget_before_drops_calls_whose_group_is_too_old_to_train() -> None:
    cuts = RefitCuts()
    cuts.record(2, 3, [["old", 10]])
    cuts.record(5, 6, [["new", 10], ["old", 20]])
    cuts.forget_before(4)  # old's first refit replaced 2 < 4: its group can no longer train
    assert cuts.cuts("old") == [] and cuts.cuts("new") == [(6, 10)]


def test_pop_batch_age_from_the_per_group_sums() -> None:
    g1 = batch_age_group_metrics({3: 30, 4: 70})  # 100 tokens, version sum 90 + 280 = 370
    g2 = batch_age_group_metrics({5: 100})  # 100 tokens, version sum 500
    assert g1 == {BATCH_AGE_TOKENS_METRIC: 100, BATCH_AGE_VERSION_SUM_METRIC: 370}
    metrics = {k: [g1[k], g2[k]] for k in g1} | {"reward": [1.0, 0.0]}
    # trained version 6: mean version 870 / 200 = 4.35, age 1.65
    assert pop_batch_age(metrics, 6) == pytest.approx(1.65)
    assert metrics == {"reward": [1.0, 0.0]}
    assert pop_batch_age(metrics, 6) is None  # no tokens: no age


# -- batch age from a trace --------------------------------------------------------------------

HAND_TRACE = [
    # step 1 trains version 1; group g1 has two calls, one cut by the refit 0 -> 1
    line("group_reserve", group_id="g1", prompt_id=7),
    line("rollout_dispatch", attempt_id="a1", group_id="g1", prompt_id=7, generation_index=0, version=0),
    line("rollout_dispatch", attempt_id="a2", group_id="g1", prompt_id=7, generation_index=1, version=0),
    line("rollout_seal", attempt_id="a2", tokens=40),
    line("refit", replaced_version=0, new_version=1, calls=[["a1", 25]]),
    line("rollout_seal", attempt_id="a1", tokens=100),
    line("group_publish", group_id="g1", step=1),  # {0: 65, 1: 75}
    # g2 is published with its counts given: they are used as they are
    line("rollout_dispatch", attempt_id="a3", group_id="g2", prompt_id=8, generation_index=0, version=1),
    line("rollout_seal", attempt_id="a3", tokens=60),
    line("group_publish", group_id="g2", step=1, tokens_by_version={"1": 60}),
    # an abandoned attempt and its retry: only the retry counts
    line("rollout_dispatch", attempt_id="a4", group_id="g3", prompt_id=9, generation_index=0, version=1),
    line("rollout_abandon", attempt_id="a4", reason="timeout"),
    line("rollout_dispatch", attempt_id="a5", group_id="g3", prompt_id=9, generation_index=0, version=1),
    line("rollout_seal", attempt_id="a5", tokens=20),
    line("group_publish", group_id="g3", step=1),  # {1: 20}
    line("train_step", step=1, trained_version=1),
    # tokens 65 on 0, 155 on 1: mean version 155/220, age 1 - 155/220 = 65/220
    line("weight_sync", version=2),
    line("group_discard", group_id="g4", prompt_id=10),
    line("train_step", step=2, trained_version=2),  # no tokens: no value
]


def test_batch_age_by_step_on_a_hand_computed_trace(tmp_path: Path) -> None:
    path = write_trace(tmp_path / "rollout_trace.jsonl", HAND_TRACE)
    assert batch_age_by_step(read_events(path)) == {1: pytest.approx(65 / 220)}
    assert tokens_by_version(read_events(path)) == {"g1": {0: 65, 1: 75}, "g2": {1: 60}, "g3": {1: 20}}
    assert batch_age_for_step(path, 1) == pytest.approx(65 / 220)
    assert batch_age_for_step(path, 2) is None
    assert assert_sql_matches_python(path) == {1: pytest.approx(65 / 220)}
    (row,) = sql_rows(path)
    assert (row["tokens"], row["groups"], row["derived_groups"]) == (220, 3, 2)


def test_a_step_trained_again_by_a_resumed_run_keeps_the_later_value(tmp_path: Path) -> None:
    first = [
        line("rollout_dispatch", "r1", attempt_id="a", group_id="g", prompt_id=1, generation_index=0, version=0),
        line("rollout_seal", "r1", attempt_id="a", tokens=10),
        line("group_publish", "r1", group_id="g", step=1),
        line("train_step", "r1", step=1, trained_version=2),  # age 2
        line("checkpoint_publish", "r1", step=1, path="/ckpt/1"),
        line("rollout_dispatch", "r1", attempt_id="b", group_id="h", prompt_id=2, generation_index=0, version=3),
        line("rollout_seal", "r1", attempt_id="b", tokens=10),
        line("group_publish", "r1", group_id="h", step=2),
        line("train_step", "r1", step=2, trained_version=3),  # age 0; then the process dies
    ]
    # the second process restores step 1 and trains step 2 again, from attempt and group ids of
    # its own (ids repeat across runs: they are only unique within one)
    second = [
        line("checkpoint_restore", "r2", step=1, path="/ckpt/1"),
        line("rollout_dispatch", "r2", attempt_id="b", group_id="h", prompt_id=2, generation_index=0, version=2),
        line("rollout_seal", "r2", attempt_id="b", tokens=10),
        line("group_publish", "r2", group_id="h", step=2),
        line("train_step", "r2", step=2, trained_version=3),  # age 1 wins over 0
    ]
    path = write_trace(tmp_path / "rollout_trace.jsonl", first)
    write_trace(path, second)
    assert assert_sql_matches_python(path) == {1: 2.0, 2: 1.0}
    assert [r["trace_run_id"] for r in sql_rows(path)] == ["r1", "r2"]


def test_a_resumed_attempt_keeps_the_versions_it_was_generated_with(tmp_path: Path) -> None:
    first = [
        line("rollout_dispatch", "r1", attempt_id="a", group_id="g", prompt_id=5, generation_index=0, version=0),
        line("rollout_dispatch", "r1", attempt_id="b", group_id="g", prompt_id=5, generation_index=1, version=0),
        line("refit", "r1", replaced_version=0, new_version=1, calls=[["a", 30], ["b", 10]]),
        line("rollout_seal", "r1", attempt_id="a", tokens=50),  # {0: 30, 1: 20}
        line("checkpoint_publish", "r1", step=0, path="/ckpt/0"),  # a is saved sealed; b is running
    ]
    second = [
        line("checkpoint_restore", "r2", step=0, path="/ckpt/0"),
        line("rollout_resume", "r2", attempt_id="x", group_id="G", prompt_id=5, generation_index=0),
        line("rollout_dispatch", "r2", attempt_id="y", group_id="G", prompt_id=5, generation_index=1, version=1),
        line("rollout_seal", "r2", attempt_id="y", tokens=40),
        # a resume with nothing earlier to match counts its own version and tokens
        line("rollout_resume", "r2", attempt_id="z", group_id="G", prompt_id=6, generation_index=0, version=0, tokens=10),
        line("group_publish", "r2", group_id="G", step=1),
        line("train_step", "r2", step=1, trained_version=1),
    ]
    path = write_trace(tmp_path / "rollout_trace.jsonl", first)
    write_trace(path, second)
    # tokens {0: 30 + 10, 1: 20 + 40}: mean version 60/100, age 0.4
    assert tokens_by_version(read_events(path))["G"] == {0: 40, 1: 60}
    assert assert_sql_matches_python(path) == {1: pytest.approx(0.4)}


# -- a simulated async controller, with the truth --------------------------------------------


@dataclass
class _SimCall:
    attempt: str
    group: str
    prompt: int
    index: int
    began: int
    length: int
    by_version: dict[int, int] = field(default_factory=dict)

    @property
    def done(self) -> int:
        return sum(self.by_version.values())


class Simulator:
    """An async GRPO controller: groups of calls generate tokens while the trainer steps; each
    weight update is a refit that cuts the running calls. Knows every token's version."""

    def __init__(self, seed: int, group_size: int = 3, groups_per_step: int = 2) -> None:
        self.rng = random.Random(seed)
        self.g = group_size
        self.per_step = groups_per_step
        self.events: list[dict[str, Any]] = []
        self.truth: dict[int, float] = {}
        self.next_prompt = 0
        self.saved: list[tuple[int, list[_SimCall]]] = []  # sealed calls kept by the last checkpoint
        self.saved_at = (0, 0)
        self.prompt_of: dict[str, int] = {}

    def run(self, run_id: str, version: int, first_step: int, steps: int, restored: list[tuple[int, list[_SimCall]]] | None = None) -> None:
        rng, n = self.rng, 0
        emit = lambda event, **f: self.events.append(line(event, run_id, T0 + len(self.events), **f))  # noqa: E731
        running: list[_SimCall] = []
        complete: list[list[_SimCall]] = []
        partial: dict[str, list[_SimCall]] = {}
        ids = iter(range(10**6))

        def dispatch(group: str, prompt: int, index: int) -> None:
            call = _SimCall(f"a{next(ids)}", group, prompt, index, version, rng.randint(1, 60))
            emit("rollout_dispatch", attempt_id=call.attempt, group_id=group, prompt_id=prompt, generation_index=index, version=version)
            running.append(call)

        for prompt, sealed in restored or []:
            # the checkpoint kept each unpublished group's sealed calls; the rest start again
            group = f"g{next(ids)}"
            emit("group_admit", group_id=group, prompt_id=prompt)
            partial[group] = []
            for c in sealed:
                attempt = f"a{next(ids)}"
                emit("rollout_resume", attempt_id=attempt, group_id=group, prompt_id=c.prompt, generation_index=c.index)
                partial[group].append(_SimCall(attempt, group, c.prompt, c.index, c.began, c.length, dict(c.by_version)))
            for i in sorted(set(range(self.g)) - {c.index for c in sealed}):
                dispatch(group, prompt, i)
            if len(partial[group]) == self.g:
                complete.append(partial.pop(group))
        step = first_step
        while step < first_step + steps:
            while len(partial) + len(complete) < self.per_step + 2:  # keep rollouts in flight
                group, prompt = f"g{next(ids)}", self.next_prompt
                self.next_prompt += 1
                emit("group_reserve", group_id=group, prompt_id=prompt)
                self.prompt_of[group] = prompt
                partial[group] = []
                for i in range(self.g):
                    dispatch(group, prompt, i)
            for call in list(running):  # one tick of generation
                if rng.random() < 0.04:
                    running.remove(call)
                    emit("rollout_abandon" if rng.random() < 0.5 else "rollout_refusal", attempt_id=call.attempt, reason="timeout")
                    dispatch(call.group, call.prompt, call.index)
                    continue
                k = min(rng.randint(1, 25), call.length - call.done)
                call.by_version[version] = call.by_version.get(version, 0) + k
                if call.done == call.length:
                    running.remove(call)
                    emit("rollout_seal", attempt_id=call.attempt, tokens=call.length)
                    partial[call.group].append(call)
                    if len(partial[call.group]) == self.g:
                        emit("group_seal", group_id=call.group, prompt_id=call.prompt)
                        complete.append(partial.pop(call.group))
            n += 1
            if len(complete) >= self.per_step and n % 2 == 0:
                trained: list[_SimCall] = []
                for group_calls in complete[: self.per_step]:
                    group = group_calls[0].group
                    if rng.random() < 0.1:
                        emit("group_discard", group_id=group, prompt_id=group_calls[0].prompt)
                        continue
                    given = None
                    if rng.random() < 0.3:
                        given = {}
                        for c in group_calls:
                            for v, t in c.by_version.items():
                                given[str(v)] = given.get(str(v), 0) + t
                    emit("group_publish", group_id=group, step=step, **({"tokens_by_version": given} if given else {}))
                    trained += group_calls
                del complete[: self.per_step]
                emit("train_step", step=step, trained_version=version)
                tokens = sum(c.done for c in trained)
                if tokens:
                    self.truth[step] = version - sum(v * t for c in trained for v, t in c.by_version.items()) / tokens
                version += 1
                cut = list(running)  # every running call, one still queued with 0 tokens too
                if cut:
                    emit("refit", replaced_version=version - 1, new_version=version, calls=[[c.attempt, c.done] for c in cut])
                else:
                    emit("weight_sync", version=version)
                if rng.random() < 0.5:
                    emit("checkpoint_publish", step=step, path=f"/ckpt/{step}")
                    self.saved = [(g[0].prompt, list(g)) for g in complete]
                    self.saved += [(self.prompt_of[k], list(g)) for k, g in partial.items() if g]
                    self.saved_at = (step, version)
                step += 1


@pytest.mark.parametrize("seed", range(6))
def test_sql_and_python_agree_with_the_truth_on_simulated_traces(tmp_path: Path, seed: int) -> None:
    sim = Simulator(seed, group_size=2 + seed % 3)
    sim.run("run-a", version=0, first_step=1, steps=8)
    if seed % 2:
        # the first process dies; a second one restores the last checkpoint, resumes its sealed
        # groups, and trains the steps after it again
        step, version = sim.saved_at
        restored = sim.saved
        assert restored, "the simulated checkpoint should hold rollouts to resume"
        sim.truth = {s: a for s, a in sim.truth.items() if s <= step}
        sim.run("run-b", version=version, first_step=step + 1, steps=5, restored=restored)
    path = write_trace(tmp_path / "rollout_trace.jsonl", sim.events, torn='{"t": 1, "run_id": "run-b", "ev')
    got = assert_sql_matches_python(path)
    assert got == pytest.approx(sim.truth, rel=1e-12, abs=1e-12)
    assert len(got) >= 4


# -- the writer ----------------------------------------------------------------------------------


def test_rollout_trace_writes_one_stamped_line_per_event(tmp_path: Path) -> None:
    path = tmp_path / "run" / "rollout_trace.jsonl"
    before = time.time()
    with RolloutTrace(path) as trace:
        assert trace.enabled
        for e in HAND_TRACE:
            trace.emit(e["event"], **{k: v for k, v in e.items() if k not in ("t", "run_id", "event")})
        assert trace.batch_age(1) == pytest.approx(65 / 220)
        trace.flush()
        assert len(path.read_text().splitlines()) == len(HAND_TRACE)
    assert not trace.enabled
    events = list(read_events(path))
    assert [e["event"] for e in events] == [e["event"] for e in HAND_TRACE]
    assert {e["run_id"] for e in events} == {trace_module.process_run_id()}
    assert before <= events[0]["t"] <= events[-1]["t"] <= time.time()
    assert batch_age_by_step(events) == {1: pytest.approx(65 / 220)}


def test_unknown_events_and_reserved_fields_are_refused(tmp_path: Path) -> None:
    for trace in (RolloutTrace(None), RolloutTrace(tmp_path / "t.jsonl")):
        with pytest.raises(ValueError, match="unknown rollout trace event 'rollout_sael'"):
            trace.emit("rollout_sael", attempt_id="a")
        with pytest.raises(ValueError, match="set by emit"):
            trace.emit("rollout_seal", attempt_id="a", t=3.0)
        trace.close()
    assert (tmp_path / "t.jsonl").read_text() == ""


def test_none_makes_every_call_a_no_op(tmp_path: Path) -> None:
    threads = threading.active_count()
    trace = RolloutTrace(None)
    assert not trace.enabled
    trace.emit("train_step", step=1, trained_version=0)
    assert trace.flush() is True
    assert trace.batch_age(1) is None and trace.dropped == 0
    trace.close()
    assert threading.active_count() == threads


def test_values_json_cannot_spell_do_not_lose_the_line(tmp_path: Path) -> None:
    import numpy as np

    path = tmp_path / "rollout_trace.jsonl"
    with RolloutTrace(path) as trace:
        trace.emit("rollout_seal", attempt_id=np.int64(3), tokens=np.int64(12), score=float("nan"), where=Path("/x"))
    (event,) = read_events(path)
    assert (event["attempt_id"], event["tokens"], event["score"], event["where"]) == (3, 12, "nan", "/x")


def test_emit_never_blocks_a_full_queue_drops_and_counts(tmp_path: Path) -> None:
    path = tmp_path / "rollout_trace.jsonl"
    trace = RolloutTrace(path, queue_size=10, track_batch_age=False)
    gate = threading.Event()
    real_file = trace._file

    class StuckDisk:
        def write(self, text: str) -> int:
            gate.wait(10)  # the disk hangs until the test lets it go
            return real_file.write(text)

        def flush(self) -> None:
            real_file.flush()

        def close(self) -> None:
            real_file.close()

    trace._file = StuckDisk()  # type: ignore[assignment]
    trace.emit("weight_sync", version=0)
    deadline = time.time() + 5
    while trace._queue.qsize() and time.time() < deadline:  # the writer holds event 0, stuck
        time.sleep(0.001)
    slowest = 0.0
    for v in range(1, 101):
        start = time.perf_counter()
        trace.emit("weight_sync", version=v)
        slowest = max(slowest, time.perf_counter() - start)
    assert slowest < 1.0  # the disk is stuck for good: a blocking emit would never return
    assert trace.dropped == 90  # 10 fit in the queue, 90 did not
    gate.set()
    trace.close()
    assert [e["version"] for e in read_events(path)] == list(range(11))


def _writer_script(path: Path, n: int) -> str:
    return textwrap.dedent(f"""
        import sys
        from rlprobe.rollouts import RolloutTrace
        trace = RolloutTrace({str(path)!r})
        for i in range({n}):
            trace.emit("rollout_dispatch", attempt_id=f"a{{i}}", group_id=f"g{{i}}", prompt_id=i,
                       generation_index=0, version=0, padding="x" * 200)
            trace.emit("rollout_seal", attempt_id=f"a{{i}}", tokens=i % 50 + 1)
            trace.emit("group_publish", group_id=f"g{{i}}", step=i)
            trace.emit("train_step", step=i, trained_version=i % 7)
            if i == 200:
                trace.flush()
                print("ready", flush=True)
        trace.close()
        print(trace.run_id, flush=True)
    """)


def test_a_killed_writer_leaves_a_torn_line_that_readers_skip_and_a_resume_survives(tmp_path: Path) -> None:
    path = tmp_path / "run" / "rollout_trace.jsonl"
    proc = subprocess.Popen([sys.executable, "-c", _writer_script(path, 10**7)], stdout=subprocess.PIPE, text=True)
    assert proc.stdout is not None and proc.stdout.readline().strip() == "ready"
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait(10)
    raw = path.read_bytes()
    if raw.endswith(b"\n"):  # the kill landed between two writes: tear the line ourselves
        path.write_bytes(raw + b'{"t": 1, "run_id": "x", "event": "train_st')
    assert not path.read_bytes().endswith(b"\n")
    first = list(read_events(path))
    assert len(first) >= 4 * 201
    ages = assert_sql_matches_python(path)
    assert len(ages) >= 200
    # a second process appends to the same file: its first line must not be glued to the torn one
    out = subprocess.run([sys.executable, "-c", _writer_script(path, 3)], capture_output=True, text=True, check=True)
    second_run = out.stdout.split()[-1]
    events = list(read_events(path))
    assert len(events) == len(first) + 12
    assert [e["event"] for e in events if e["run_id"] == second_run][0] == "rollout_dispatch"
    assert_sql_matches_python(path)


def test_a_second_process_has_a_new_run_id_and_later_values_win(tmp_path: Path) -> None:
    path = tmp_path / "run" / "rollout_trace.jsonl"
    script = textwrap.dedent(f"""
        import sys
        from rlprobe.rollouts import RolloutTrace
        version = int(sys.argv[1])
        with RolloutTrace({str(path)!r}) as trace:
            trace.emit("rollout_dispatch", attempt_id="a", group_id="g", prompt_id=0, generation_index=0, version=version)
            trace.emit("rollout_seal", attempt_id="a", tokens=4)
            trace.emit("group_publish", group_id="g", step=3)
            trace.emit("train_step", step=3, trained_version=5)
            print(trace.batch_age(3))
    """)
    ages = [subprocess.run([sys.executable, "-c", script, str(v)], capture_output=True, text=True, check=True).stdout.strip()
            for v in (1, 4)]
    assert ages == ["4.0", "1.0"]
    assert len({e["run_id"] for e in read_events(path)}) == 2
    assert assert_sql_matches_python(path) == {3: 1.0}
    # a third process seeded from the file knows step 3 before it trains anything
    assert RolloutTrace(path).batch_age(3) == 1.0


# -- views and the CLI ---------------------------------------------------------------------------


def _run_with_trace(tmp_path: Path) -> Path:
    run = tmp_path / "runs" / "my-run"
    RunWriter(run, RunManifest(run_id="run-42"))
    write_trace(run / "rollout_trace.jsonl", HAND_TRACE, torn='{"t": 9, "ev')
    return run


def test_rollout_events_view_in_a_run_directory(tmp_path: Path) -> None:
    run = _run_with_trace(tmp_path)
    con = open_traces(run).con
    got = con.sql("SELECT run_id, seq, event, attempt_id, version, calls, tokens_by_version FROM rollout_events "
                  "WHERE event IN ('refit', 'group_publish', 'rollout_dispatch') ORDER BY seq").fetchall()
    assert got[0] == ("run-42", 2, "rollout_dispatch", "a1", 0, None, None)
    assert ("run-42", 5, "refit", None, None, [{"attempt_id": "a1", "tokens_so_far": 25}], None) in got
    assert ("run-42", 10, "group_publish", None, None, None, [{"version": 1, "tokens": 60}]) in got
    assert con.sql("SELECT count(*) FROM rollout_events").fetchall() == [(len(HAND_TRACE),)]
    assert con.sql("SELECT count(DISTINCT event) FROM v1.rollout_events").fetchall() == [(9,)]
    # the ordinary connection sees the trace too, over the run and over its root
    import rlprobe

    for target in (run, run.parent):
        assert rlprobe.connect(target).sql("SELECT run_id, step, tokens FROM batch_age").fetchall() == [("run-42", 1, 220)]


def test_an_external_trace_belongs_to_the_run_it_is_given_with(tmp_path: Path) -> None:
    run = tmp_path / "my-run"
    RunWriter(run, RunManifest(run_id="run-7"))
    external = write_trace(tmp_path / "logs" / "controller.jsonl", HAND_TRACE)
    assert [(r["run_id"], r["step"]) for r in sql_rows(run, (external,))] == [("run-7", 1)]
    assert [(r["run_id"], r["step"]) for r in sql_rows(external)] == [("controller", 1)]


def invoke(*args: Any) -> Any:
    return CliRunner().invoke(cli, [str(a) for a in args])


def test_cli_batch_age_prints_the_per_step_table(tmp_path: Path) -> None:
    run = _run_with_trace(tmp_path)
    result = invoke("batch-age", run)
    assert result.exit_code == 0, result.output
    lines = result.stdout.splitlines()
    assert lines[0].split() == ["run_id", "step", "batch_age", "tokens", "trained_version", "groups", "derived_groups"]
    assert lines[2].split() == ["run-42", "1", f"{65 / 220:.6g}", "220", "1", "3", "2"]
    as_json = json.loads(invoke("batch-age", run / "rollout_trace.jsonl", "--json").stdout)
    assert as_json == [{"run_id": "run-42", "step": 1, "batch_age": pytest.approx(65 / 220), "tokens": 220,
                        "trained_version": 1, "groups": 3, "derived_groups": 2}]
    csv_lines = invoke("batch-age", run, "--csv").stdout.splitlines()
    assert csv_lines[0] == "run_id,step,batch_age,tokens,trained_version,groups,derived_groups"
    assert csv_lines[1].startswith("run-42,1,0.29545")


def test_cli_batch_age_on_a_bare_trace_file(tmp_path: Path) -> None:
    path = write_trace(tmp_path / "anywhere" / "trace.jsonl", HAND_TRACE)
    result = invoke("batch-age", path, "--csv")
    assert result.exit_code == 0, result.output
    assert result.stdout.splitlines()[1].startswith("trace,1,")


@pytest.mark.parametrize("case, expected", [
    ("missing", "no such file or directory"),
    ("not-json", "is not a rollout trace"),
    ("binary", "is not UTF-8 text"),
    ("no-trace", "holds no rollout_trace.jsonl"),
    ("missing-extra", "no such trace file"),
])
def test_cli_batch_age_errors_are_one_line_and_exit_2(tmp_path: Path, case: str, expected: str) -> None:
    run = _run_with_trace(tmp_path)
    (tmp_path / "notes.jsonl").write_text("hello\n[1, 2]\n{\"no_event\": 1}\n")
    (tmp_path / "blob.jsonl").write_bytes(b'{"event": "refit", "calls": []}\n\xff\xfe\n')
    (tmp_path / "empty-run").mkdir()
    RunWriter(tmp_path / "empty-run", RunManifest(run_id="e"))
    args = {
        "missing": [tmp_path / "nope"],
        "not-json": [tmp_path / "notes.jsonl"],
        "binary": [tmp_path / "blob.jsonl"],
        "no-trace": [tmp_path / "empty-run"],
        "missing-extra": [run, "--trace", tmp_path / "nope.jsonl"],
    }[case]
    result = invoke("batch-age", *args)
    assert result.exit_code == 2, result.output
    assert expected in result.stderr and len(result.stderr.strip().splitlines()) == 1
    assert result.stderr.startswith("rlprobe: ")


def test_the_writer_never_imports_duckdb_and_the_reader_never_imports_the_writer() -> None:
    code = textwrap.dedent("""
        import sys, tempfile, os
        from rlprobe.rollouts import RolloutTrace
        with RolloutTrace(os.path.join(tempfile.mkdtemp(), "t.jsonl")) as t:
            t.emit("weight_sync", version=1)
        assert "duckdb" not in sys.modules, "the writer imported duckdb"
        del sys.modules["rlprobe.rollouts.trace"]
        from rlprobe.rollouts.views import open_traces
        assert "rlprobe.rollouts.trace" not in sys.modules, "the reader imported the writer"
    """)
    subprocess.run([sys.executable, "-c", code], check=True)


def _fuzz_value(rng: random.Random, good: list[Any], odd: list[Any], p_odd: float = 0.15) -> Any:
    return rng.choice(odd) if rng.random() < p_odd else rng.choice(good)


def fuzz_trace(rng: random.Random) -> list[dict[str, Any]]:
    """Events in no sensible order from a few ids, with odd values mixed in: ids as numbers,
    versions as text or fractions, negative counts, refits naming unknown calls, publishes
    before seals, resumes with and without their own counts, lines without run_id."""
    kinds = (["rollout_dispatch"] * 4 + ["rollout_seal"] * 4 + ["refit"] * 2 + ["group_publish"] * 3
             + ["train_step"] * 3 + ["rollout_abandon", "rollout_refusal", "rollout_resume", "rollout_resume",
                                     "group_discard", "weight_sync"])
    version = lambda: _fuzz_value(rng, [0, 1, 2, 3], [None, "2", 1.5, 2.0, -1, True], 0.3)  # noqa: E731
    events = []
    for i in range(rng.randint(20, 120)):
        name = rng.choice(kinds)
        e: dict[str, Any] = {"t": T0 + i, "run_id": _fuzz_value(rng, ["r1", "r1", "r2"], [None, 7], 0.1), "event": name}
        attempt = _fuzz_value(rng, ["a0", "a1", "a2", "a3"], [4, None], 0.1)
        group = _fuzz_value(rng, ["g0", "g1"], [None, "g2"], 0.1)
        if name in ("rollout_dispatch", "rollout_resume"):
            e.update(attempt_id=attempt, group_id=group, prompt_id=rng.choice([0, 1, "1", None]),
                     generation_index=rng.choice([0, 1, None]))
            if name == "rollout_dispatch" or rng.random() < 0.5:
                e.update(version=version(), tokens=rng.choice([5, 9, None]) if name == "rollout_resume" else None)
        elif name == "rollout_seal":
            e.update(attempt_id=attempt, tokens=_fuzz_value(rng, [5, 10, 17, 40], [0, None, -3, 7.5], 0.2))
        elif name == "refit":
            calls = [[rng.choice(["a0", "a1", "a2", 4]), rng.choice([0, 3, 8, 50, -2, None, 2.5])] for _ in range(rng.randint(1, 3))]
            e.update(replaced_version=version(), new_version=version(), calls=_fuzz_value(rng, [calls], [[], "x", [["a0"]], [1, 2]], 0.2))
        elif name == "group_publish":
            e.update(group_id=group, step=rng.choice([0, 1]))
            if rng.random() < 0.3:
                e["tokens_by_version"] = rng.choice([{"0": 5, "1": 3}, {"2": 10, "x": 3, "1": "4"}, {}, [1], {"1.5": 2, "3": 7.0}])
        elif name == "train_step":
            e.update(step=rng.choice([0, 1, 2]), trained_version=version())
        elif name in ("rollout_abandon", "rollout_refusal"):
            e.update(attempt_id=attempt, reason="timeout")
        elif name == "group_discard":
            e.update(group_id=group)
        events.append({k: v for k, v in e.items() if v is not None or rng.random() < 0.9})
    return events


def test_sql_and_python_agree_on_odd_traces(tmp_path: Path) -> None:
    """Whatever a trace holds, the view and the Python give the same rows: 120 random traces,
    one SQL query over a root holding them all."""
    names = [f"t{seed:03d}" for seed in range(120)]
    for seed, name in enumerate(names):
        write_trace(tmp_path / name / "rollout_trace.jsonl", fuzz_trace(random.Random(seed)))
    _, _, rows = open_traces(tmp_path).rows(
        "SELECT run_id, step, batch_age, tokens, trained_version, groups, trace_run_id FROM batch_age ORDER BY run_id, step")
    by_trace: dict[str, list[tuple[Any, ...]]] = {}
    for r in rows:
        by_trace.setdefault(r[0], []).append(r[1:])
    with_rows = 0
    for name in names:
        py = [(a.step, a.batch_age, a.tokens, a.trained_version, a.groups, a.trace_run_id)
              for a in batch_age_rows(read_events(tmp_path / name / "rollout_trace.jsonl"))]
        sql = by_trace.get(name, [])
        assert [s[:1] + s[2:] for s in sql] == [p[:1] + p[2:] for p in py], name
        assert [s[1] for s in sql] == pytest.approx([p[1] for p in py], rel=1e-12, abs=1e-12), name
        with_rows += bool(py)
    assert with_rows >= 60  # most traces do train something


def _one_step(run: str, t: float, began: int, step: int = 1, trained: int = 3) -> list[dict[str, Any]]:
    return [
        line("rollout_dispatch", run, t, attempt_id="a", group_id="g", prompt_id=0, generation_index=0, version=began),
        line("rollout_seal", run, t, attempt_id="a", tokens=8),
        line("group_publish", run, t, group_id="g", step=step),
        line("train_step", run, t, step=step, trained_version=trained),
    ]


def test_several_trace_files_of_one_run_the_latest_training_wins(tmp_path: Path) -> None:
    run = tmp_path / "runs" / "r"
    RunWriter(run, RunManifest(run_id="run-9"))
    write_trace(run / "rollout_trace.jsonl", _one_step("p1", T0 + 50, began=0) + _one_step("p1", T0 + 50, began=2, step=2))
    write_trace(run / "rank-001" / "rollout_trace.jsonl", _one_step("p2", T0 + 10, began=1, step=2))
    external = write_trace(tmp_path / "logs" / "trace.jsonl", _one_step("p3", T0 + 90, began=1))
    got = [(r["run_id"], r["step"], r["batch_age"], r["trace_run_id"]) for r in sql_rows(run, (external,))]
    # step 1: the external file trained it last (age 3 - 1); step 2: the run's own file did (3 - 2)
    assert got == [("run-9", 1, 2.0, "p3"), ("run-9", 2, 1.0, "p1")]
    assert [(r["run_id"], r["step"]) for r in sql_rows(tmp_path / "runs")] == [("run-9", 1), ("run-9", 2)]


@pytest.mark.parametrize("view", ["rollout_events", "batch_age"])
def test_a_views_header_lists_its_columns_exactly(view: str) -> None:
    import duckdb

    from rlprobe.store.engine import Target, init_script

    sql_file = Path(__file__).resolve().parents[1] / "sql" / "v1" / "views" / f"{view}.sql"
    header = " ".join(l[len("-- columns: "):] for l in sql_file.read_text().splitlines() if l.startswith("-- columns: "))
    con = duckdb.connect()
    con.execute(init_script(Target(Path("/nonexistent-rlprobe-root"), "root"), features=False))
    described = ", ".join(f"{name} {type_}" for name, type_ in con.sql(f"SELECT column_name, column_type FROM (DESCRIBE {view})").fetchall())
    assert header == described


def test_the_views_work_in_a_plain_duckdb_session(tmp_path: Path) -> None:
    import duckdb

    from rlprobe.store import init_script, resolve

    run = _run_with_trace(tmp_path)
    external = write_trace(tmp_path / "logs" / "controller.jsonl", _one_step("p9", T0 + 10**6, began=0))
    con = duckdb.connect()
    con.execute(init_script(resolve(run)))
    assert con.sql("SELECT run_id, step, tokens FROM batch_age").fetchall() == [("run-42", 1, 220)]
    con.execute(f"SET VARIABLE rlprobe_rollout_traces = MAP {{'{external}': '{run.resolve()}'}}")
    assert con.sql("SELECT run_id, step, batch_age, trace_run_id FROM batch_age").fetchall() == [("run-42", 1, 3.0, "p9")]


def test_the_number_a_training_loop_logs_is_the_number_the_file_gives(tmp_path: Path) -> None:
    """RolloutTrace.batch_age (computed as events are emitted, numpy values and all) equals
    batch_age_by_step over the written file and the SQL view."""
    import numpy as np

    sim = Simulator(11, group_size=3)
    sim.run("ignored", version=0, first_step=1, steps=6)
    path = tmp_path / "rollout_trace.jsonl"
    with RolloutTrace(path) as trace:
        for e in sim.events:
            fields = {k: (np.int64(v) if type(v) is int and k != "prompt_id" else v)
                      for k, v in e.items() if k not in ("t", "run_id", "event")}
            trace.emit(e["event"], **fields)
        logged = {s: trace.batch_age(s) for s in range(1, 7)}
    assert logged == pytest.approx(sim.truth, rel=1e-12)
    assert batch_age_by_step(read_events(path)) == logged
    assert assert_sql_matches_python(path) == logged
