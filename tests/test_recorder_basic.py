"""The Recorder's everyday contract, checked by reading the run back through the public views.

Round trips of steps, samples and events; flush and close; malformed values; the manifest's
environment; the exit handlers; and that the write side stays free of duckdb and torch.
"""

from __future__ import annotations

import math
import platform
import re
import shutil
import signal
import subprocess
import sys
import time

import numpy as np
import pyarrow
import pytest

import rlprobe
from rlprobe import Recorder, SamplingConfig
from rlprobe.schemas import STEP_FLOAT_FIELDS

from recorder_helpers import FAST, events, part_files, rows, status, step_numbers, steps


def bad_record_problems(run_dir, step=None) -> list[str]:
    """Every problem listed by the run's bad_record events (of one step, if given)."""
    found = events(run_dir, "bad_record")
    return [p for e in found if step is None or e["step"] == step for p in e["data"].get("problems", [])]


# -- round trip ------------------------------------------------------------------------------

def test_every_step_field_round_trips(tmp_path):
    run = tmp_path / "run"
    scalars = {name: i + 0.25 for i, name in enumerate(STEP_FLOAT_FIELDS) if name != "wall_time"}
    # every scalar StepRecord field except wall_time (the recorder stamps that), ~45 metrics in all
    t0 = time.time()
    with Recorder(run, algorithm="grpo", **FAST) as rec:
        for step in (0, 1):
            rec.log_step(
                step,
                **{k: v + step for k, v in scalars.items()},
                kl_positional=[0.1, 0.2, 0.3],
                reward_components={"format": 0.5, "correct": float(step)},
                extra={"temperature": 0.7},
                my_custom_metric=42 + step,  # an unknown name lands in extra
            )
    t1 = time.time()

    got = steps(run)
    assert [r["step"] for r in got] == [0, 1]
    for step, row in enumerate(got):
        for name, value in scalars.items():
            assert row[name] == value + step, name
        assert row["kl_positional"] == [0.1, 0.2, 0.3]
        assert row["reward_component.format"] == 0.5
        assert row["reward_component.correct"] == float(step)
        assert row["extra.temperature"] == 0.7
        assert row["extra.my_custom_metric"] == 42.0 + step
        assert t0 <= row["wall_time"] <= t1, "wall_time is stamped by the recorder at log_step"
    assert not bad_record_problems(run)

    typed = rlprobe.RunReader(run).steps()
    assert typed[1].reward_components == {"format": 0.5, "correct": 1.0}
    assert typed[1].extra == {"temperature": 0.7, "my_custom_metric": 43.0}
    assert typed[1].kl_positional == [0.1, 0.2, 0.3]


def sample(i: int, reward: float) -> dict:
    return {
        "prompt_text": f"prompt {i}",
        "completion_text": f"completion {i}",
        "completion_token_ids": [i, i + 1],
        "reward_total": reward,
        "reward_components": {"format": reward / 2},
        "advantage": reward - 10.0,
        "completion_len": 2,
        "truncated": i % 2 == 0,
        "group_id": i // 4,  # ints are fine: group ids are stored as text
        "judge_score": 0.5,  # an unknown name lands in extra
    }


def test_log_samples_select_keeps_the_extremes_and_a_random_middle(tmp_path):
    run = tmp_path / "run"
    rewards = [float((i * 7) % 20) for i in range(20)]  # 0..19, shuffled
    sampling = SamplingConfig(top_k=2, bottom_k=3, random_k=4, seed=0)
    with Recorder(run, sampling=sampling, **FAST) as rec:
        rec.log_samples(5, [sample(i, r) for i, r in enumerate(rewards)])

    got = rows(run, "SELECT * FROM samples ORDER BY reward_total")
    by_reason = {}
    for r in got:
        by_reason.setdefault(r["capture_reason"], []).append(r["reward_total"])
    assert sorted(by_reason["top_k"]) == [18.0, 19.0], "top_k must be the highest rewards"
    assert sorted(by_reason["bottom_k"]) == [0.0, 1.0, 2.0], "bottom_k must be the lowest rewards"
    assert len(by_reason["random"]) == 4 and all(3.0 <= r <= 17.0 for r in by_reason["random"])
    assert set(by_reason) == {"top_k", "bottom_k", "random"}
    assert len({r["sample_id"] for r in got}) == 9

    top = got[-1]
    i = rewards.index(19.0)
    assert (top["step"], top["rank"], top["prompt_text"], top["completion_text"]) == (5, 0, f"prompt {i}", f"completion {i}")
    assert top["completion_token_ids"] == [i, i + 1]
    assert top["advantage"] == 9.0 and top["completion_len"] == 2 and top["truncated"] == (i % 2 == 0)
    assert top["group_id"] == str(i // 4)
    assert top["reward_component.format"] == 9.5 and top["extra.judge_score"] == 0.5


def test_log_samples_select_false_keeps_everything(tmp_path):
    run = tmp_path / "run"
    with Recorder(run, sampling=SamplingConfig(top_k=1, bottom_k=1, random_k=0), **FAST) as rec:
        rec.log_samples(0, [sample(i, float(i)) for i in range(12)], select=False)

    got = rows(run, "SELECT prompt_text, capture_reason FROM samples ORDER BY reward_total")
    assert [r["prompt_text"] for r in got] == [f"prompt {i}" for i in range(12)]
    assert {r["capture_reason"] for r in got} == {"all"}
    assert [s.prompt_text for s in rlprobe.RunReader(run).samples()] != []


def test_log_event_is_readable_at_once(tmp_path):
    run = tmp_path / "run"
    with Recorder(run, flush_interval_s=60, capture_env=False) as rec:
        rec.log_event("checkpoint", step=3, message="saved", path="/ckpt/3", keep=True)
        # no flush: events are written immediately
        got = events(run, "checkpoint")
        assert got == [{"kind": "checkpoint", "step": 3, "rank": 0, "message": "saved",
                        "data": {"path": "/ckpt/3", "keep": True}}]
    typed = rlprobe.RunReader(run).events("checkpoint")
    assert typed[0].data == {"path": "/ckpt/3", "keep": True}


def test_flush_makes_a_live_run_readable_from_part_files(tmp_path):
    run = tmp_path / "run"
    rec = Recorder(run, flush_interval_s=60, steps_per_flush=10_000, capture_env=False)
    try:
        for step in range(3):
            rec.log_step(step, loss=float(step))
        assert step_numbers(run) == [], "nothing is written before a flush is due"
        assert rec.flush() is True
        assert part_files(run) and not (run / "steps.parquet").exists()
        assert step_numbers(run) == [0, 1, 2]
        assert status(run) == "live"

        rec.log_step(3, loss=3.0)
        assert rec.flush() is True
        assert len(part_files(run)) == 2
        assert [s.loss for s in rlprobe.RunReader(run).steps()] == [0.0, 1.0, 2.0, 3.0]
    finally:
        rec.close()
    assert step_numbers(run) == [0, 1, 2, 3]


def test_close_compacts_into_steps_parquet_and_is_idempotent(tmp_path):
    run = tmp_path / "run"
    rec = Recorder(run, steps_per_flush=2, **FAST)
    for step in range(7):
        rec.log_step(step, loss=step / 10)
    assert rec.flush()
    assert len(part_files(run)) >= 2

    rec.close()
    assert (run / "steps.parquet").is_file()
    assert part_files(run) == [], "close() must leave no steps/part-*.parquet behind"
    assert step_numbers(run) == list(range(7))
    assert status(run) == "closed"

    rec.close()  # idempotent
    rec.log_step(99, loss=1.0)  # after close: a no-op, never an error
    assert rec.flush() is True
    assert step_numbers(run) == list(range(7))
    assert len(events(run, "recorder_close")) == 1


def test_context_manager_closes_the_run(tmp_path):
    run = tmp_path / "run"
    with Recorder(run, **FAST) as rec:
        rec.log_step(0, loss=1.0)
    assert (run / "steps.parquet").is_file()
    assert status(run) == "closed"
    assert step_numbers(run) == [0]


def test_context_manager_records_a_crash_and_reraises(tmp_path):
    run = tmp_path / "run"
    with pytest.raises(RuntimeError, match="loss went sideways"):
        with Recorder(run, **FAST) as rec:
            rec.log_step(0, loss=1.0)
            raise RuntimeError("loss went sideways")
    crash = events(run, "crash")
    assert len(crash) == 1 and "loss went sideways" in crash[0]["data"]["traceback"]
    assert step_numbers(run) == [0]
    assert status(run) == "crashed"


# -- malformed values -----------------------------------------------------------------------

def test_numeric_strings_are_coerced(tmp_path):
    run = tmp_path / "run"
    with Recorder(run, **FAST) as rec:
        rec.log_step(0, loss="2.5", lr=" 1e-4 ", my_metric="7")
    row = steps(run)[0]
    assert (row["loss"], row["lr"], row["extra.my_metric"]) == (2.5, 1e-4, 7.0)
    assert not bad_record_problems(run)


def test_none_means_absent(tmp_path):
    run = tmp_path / "run"
    with Recorder(run, **FAST) as rec:
        rec.log_step(0, loss=None, kl_mean=0.5, reward_components={"format": None, "ok": 1.0}, my_metric=None)
    row = steps(run)[0]
    assert row["loss"] is None and row["kl_mean"] == 0.5 and row["reward_component.ok"] == 1.0
    assert "extra.my_metric" not in row and "reward_component.format" not in row
    assert not bad_record_problems(run), "None is 'not logged', not a bad value"


@pytest.mark.parametrize(
    "field, bad",
    [
        ("loss", "not a number"),
        ("loss", {"nested": 1.0}),
        ("loss", [1.0, 2.0]),
        ("loss", np.array([1.0, 2.0])),
        ("loss", object()),
        ("kl_positional", "abc"),
        ("reward_components", "format=1"),
        ("my_metric", "abc"),  # an unknown name with a bad value
    ],
    ids=["text", "dict", "list", "ndarray", "object", "kl_positional-text", "components-text", "unknown-text"],
)
def test_a_bad_value_is_dropped_named_and_the_rest_of_the_step_kept(tmp_path, field, bad):
    run = tmp_path / "run"
    with Recorder(run, **FAST) as rec:
        rec.log_step(0, reward_mean=1.0, **{field: bad}, entropy_mean=0.3)  # must not raise
        rec.log_step(1, reward_mean=2.0)
    got = steps(run)
    assert [r["step"] for r in got] == [0, 1]
    assert (got[0]["reward_mean"], got[0]["entropy_mean"]) == (1.0, 0.3)
    assert got[0].get(field) is None and got[0].get(f"extra.{field}") is None
    problems = bad_record_problems(run, step=0)
    assert any(p.startswith(f"{field}:") for p in problems), problems


def test_a_bad_reward_component_keeps_the_others(tmp_path):
    run = tmp_path / "run"
    with Recorder(run, **FAST) as rec:
        rec.log_step(0, reward_components={"format": "oops", "correct": 1.0})
    row = steps(run)[0]
    assert row["reward_component.correct"] == 1.0 and "reward_component.format" not in row
    assert any("format" in p for p in bad_record_problems(run, step=0))


def test_numpy_scalars_are_numbers(tmp_path):
    run = tmp_path / "run"
    with Recorder(run, **FAST) as rec:
        rec.log_step(np.int64(4), loss=np.float32(0.5), lr=np.float64(1.25), nan_count=np.int64(7), kl_mean=np.array(2.5))
    (row,) = steps(run)
    assert (row["step"], row["loss"], row["lr"], row["nan_count"], row["kl_mean"]) == (4, 0.5, 1.25, 7.0, 2.5)
    assert not bad_record_problems(run)


def test_nan_and_inf_are_kept_as_values(tmp_path):
    run = tmp_path / "run"
    with Recorder(run, **FAST) as rec:
        rec.log_step(0, loss=float("nan"), grad_norm=float("inf"), kl_mean=-math.inf, entropy_mean=np.nan, lr="nan")
    row = steps(run)[0]
    assert math.isnan(row["loss"]) and math.isnan(row["entropy_mean"]) and math.isnan(row["lr"])
    assert row["grad_norm"] == math.inf and row["kl_mean"] == -math.inf
    assert not bad_record_problems(run), "NaN and inf are evidence, not bad values"
    view = rlprobe.RunView.load(run)
    assert math.isnan(view.series("loss")[0]) and view.series("grad_norm")[0] == math.inf


@pytest.mark.parametrize("bad_step", ["x", 1.5, None, [1], float("nan")], ids=repr)
def test_a_non_integer_step_drops_that_record_only(tmp_path, bad_step):
    run = tmp_path / "run"
    with Recorder(run, **FAST) as rec:
        rec.log_step(0, loss=0.0)
        rec.log_step(bad_step, loss=1.0)
        rec.log_step(2, loss=2.0)
        rec.log_step(3.0, loss=3.0)  # an integral float is a fine step
    assert step_numbers(run) == [0, 2, 3]
    assert any(p.startswith("step:") for p in bad_record_problems(run)), events(run, "bad_record")


def test_a_metric_too_large_for_a_float_costs_only_that_field(tmp_path):
    run = tmp_path / "run"
    with Recorder(run, **FAST) as rec:
        rec.log_step(0, reward_mean=1.0, loss=10**400)  # a Python int float() cannot hold
    got = steps(run)
    assert got, (
        "the whole step was dropped: float(10**400) raises OverflowError, which coerce.to_float does "
        f"not turn into a field-level BadValue; events: {events(run, 'bad_record')}"
    )
    assert got[0]["reward_mean"] == 1.0
    assert got[0]["loss"] == math.inf or any(p.startswith("loss:") for p in bad_record_problems(run, 0))


def test_a_bad_sample_field_does_not_kill_the_writer(tmp_path):
    run = tmp_path / "run"
    with Recorder(run, **FAST) as rec:
        # a per-sample value given as an array by mistake: bool(array) raises ValueError
        rec.log_samples(0, [{"prompt_text": "p", "reward_total": 1.0, "truncated": np.array([True, False])}], select=False)
        rec.log_step(1, loss=1.0)
        flushed = rec.flush(timeout=0.5)
    assert flushed and step_numbers(run) == [1], (
        "the writer thread died on a bad sample field (coerce.sample_row only catches BadValue and "
        "TypeError, and Recorder._run has no guard), so nothing logged after it was written"
    )
    assert [r["prompt_text"] for r in rows(run, "SELECT prompt_text FROM samples")] == ["p"]
    assert any(p.startswith("truncated:") for p in bad_record_problems(run, 0))


def test_log_calls_never_raise_on_garbage(tmp_path):
    run = tmp_path / "run"
    with Recorder(run, **FAST) as rec:
        rec.log_step(0, **{"reward_components": 5, "extra": [1, 2], "kl_positional": {"a": 1}, "": 1.0})
        rec.log_samples(0, [None, 3, "text", {"reward_total": "high"}])
        rec.log_samples("step", None)
        rec.log_event("custom", step="not an int")
        rec.log_step(1, loss=1.0)
    assert 1 in step_numbers(run)
    assert len(events(run, "bad_record")) >= 3


# -- the manifest's environment -----------------------------------------------------------

def test_manifest_records_python_and_package_versions(tmp_path, monkeypatch):
    monkeypatch.setenv("GIT_CEILING_DIRECTORIES", str(tmp_path))
    monkeypatch.chdir(tmp_path)
    run = tmp_path / "run"
    with Recorder(run, algorithm="ppo", model_name="org/m", trainer_config={"lr": 1e-5}, flush_interval_s=0.05):
        pass
    manifest = rlprobe.RunReader(run).manifest
    env = manifest.environment
    assert env["python"] == platform.python_version()
    assert env["packages"]["pyarrow"] == pyarrow.__version__
    assert env["packages"]["rlprobe"] == rlprobe.__version__
    assert (manifest.algorithm, manifest.model_name, manifest.trainer_config) == ("ppo", "org/m", {"lr": 1e-5})
    got = rows(run, "SELECT json_extract_string(environment, '$.python') AS py FROM manifest")
    assert got == [{"py": platform.python_version()}]


def git(cwd, *args) -> str:
    return subprocess.run(
        ["git", "-c", "user.name=t", "-c", "user.email=t@example.com", "-c", "commit.gpgsign=false", *args],
        cwd=cwd, check=True, capture_output=True, text=True,
    ).stdout.strip()


@pytest.mark.skipif(shutil.which("git") is None, reason="needs the git command")
def test_git_sha_is_recorded_inside_a_repository(tmp_path, monkeypatch):
    repo = tmp_path / "repo"
    repo.mkdir()
    git(repo, "init", "-q")
    (repo / "train.py").write_text("print('hi')\n")
    git(repo, "add", "train.py")
    git(repo, "commit", "-q", "-m", "first")
    head = git(repo, "rev-parse", "HEAD")
    monkeypatch.delenv("GIT_DIR", raising=False)
    monkeypatch.chdir(repo)

    run = tmp_path / "run"
    with Recorder(run, flush_interval_s=0.05):
        pass
    env = rlprobe.RunReader(run).manifest.environment
    assert re.fullmatch(r"[0-9a-f]{40}", env["git_sha"] or ""), env
    assert env["git_sha"] == head
    assert env["git_dirty"] is False


def test_git_sha_is_none_outside_a_repository(tmp_path, monkeypatch):
    outside = tmp_path / "not-a-repo"
    outside.mkdir()
    monkeypatch.setenv("GIT_CEILING_DIRECTORIES", str(tmp_path))
    monkeypatch.delenv("GIT_DIR", raising=False)
    monkeypatch.chdir(outside)
    run = tmp_path / "run"
    with Recorder(run, flush_interval_s=0.05):
        pass
    env = rlprobe.RunReader(run).manifest.environment
    assert env["git_sha"] is None and env["git_dirty"] is None


def test_capture_env_false_records_no_environment(tmp_path):
    run = tmp_path / "run"
    with Recorder(run, **FAST):
        pass
    assert rlprobe.RunReader(run).manifest.environment == {}


# -- exit handlers and imports --------------------------------------------------------------

def test_close_removes_the_installed_handlers(tmp_path):
    hook, sigterm = sys.excepthook, signal.getsignal(signal.SIGTERM)
    rec = Recorder(tmp_path / "run", **FAST)
    try:
        assert sys.excepthook is not hook, "install_handlers=True installs an excepthook"
        assert signal.getsignal(signal.SIGTERM) != sigterm, "... and a SIGTERM handler"
    finally:
        rec.close()
    assert sys.excepthook is hook
    assert signal.getsignal(signal.SIGTERM) == sigterm


def test_install_handlers_false_installs_nothing(tmp_path):
    hook, sigterm = sys.excepthook, signal.getsignal(signal.SIGTERM)
    with Recorder(tmp_path / "run", install_handlers=False, **FAST):
        assert sys.excepthook is hook and signal.getsignal(signal.SIGTERM) == sigterm


def test_two_recorders_closed_in_opening_order_restore_the_hooks(tmp_path, monkeypatch):
    monkeypatch.setattr(sys, "excepthook", sys.excepthook)  # put back whatever this test leaves
    hook, sigterm = sys.excepthook, signal.getsignal(signal.SIGTERM)
    first = Recorder(tmp_path / "a", **FAST)
    second = Recorder(tmp_path / "b", **FAST)
    first.close()
    second.close()
    hook_after, sigterm_after = sys.excepthook, signal.getsignal(signal.SIGTERM)
    signal.signal(signal.SIGTERM, sigterm)
    assert hook_after is hook, (
        "after both recorders closed, sys.excepthook is still the first recorder's hook: "
        "handlers.InstalledHandlers.uninstall only restores when its own hook is on top, and the "
        f"second one restores the first's; got {hook_after!r}. A later unrelated exception then "
        "writes a crash event into the closed run and flips its status to 'crashed'"
    )
    assert sigterm_after == sigterm


def test_the_recorder_side_imports_neither_duckdb_nor_torch(tmp_path):
    code = f"""
import sys
import rlprobe.record
from rlprobe import Recorder, SamplingConfig
rec = Recorder({str(tmp_path / 'run')!r}, sampling=SamplingConfig(), flush_interval_s=0.05)
rec.log_step(0, loss=1.0)
rec.log_samples(0, [{{"prompt_text": "p", "reward_total": 1.0}}])
rec.log_event("checkpoint", step=0)
assert rec.flush()
rec.close()
print(sorted(m for m in ("duckdb", "torch") if m in sys.modules))
"""
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=30)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "[]", f"the write side imported {done.stdout.strip()}"
    assert step_numbers(tmp_path / "run") == [0]  # and it really recorded
