"""Distributed runs: rank 0 records, other ranks are inert unless record_all_ranks=True."""

from __future__ import annotations

import signal
import sys
import threading
from collections import Counter

import pytest

import rlprobe
from rlprobe import Recorder

from recorder_helpers import FAST, events, rows, status


def test_a_non_zero_rank_is_inert(tmp_path):
    run = tmp_path / "run"
    hook, sigterm = sys.excepthook, signal.getsignal(signal.SIGTERM)
    threads = set(threading.enumerate())

    rec = Recorder(run, rank=1, world_size=2, algorithm="grpo", flush_interval_s=0.05)
    assert rec.active is False
    assert sys.excepthook is hook and signal.getsignal(signal.SIGTERM) == sigterm, "no handlers installed"
    assert not set(threading.enumerate()) - threads, "no writer thread"

    with pytest.raises(ValueError, match="inside the loop"):
        with rec:
            rec.log_step(0, loss=1.0)
            rec.log_step("junk", loss={"x": 1})
            rec.log_samples(0, [{"prompt_text": "p", "reward_total": 1.0}], select=False)
            rec.log_event("checkpoint", step=0)
            assert rec.flush() is True
            raise ValueError("inside the loop")  # the context manager's crash path is inert too
    rec.close()
    rec.close()
    assert rec.dropped == 0
    assert list(tmp_path.iterdir()) == [], "an inert recorder creates no files or directories"
    assert sys.excepthook is hook


def test_record_all_ranks_merges_samples_and_events_but_not_steps(tmp_path):
    run = tmp_path / "run"
    common = dict(world_size=2, record_all_ranks=True, install_handlers=False, **FAST)
    rank0 = Recorder(run, rank=0, **common)
    rank1 = Recorder(run, rank=1, **common)
    assert rank1.active
    for step in range(3):
        for rank, rec in enumerate((rank0, rank1)):
            rec.log_step(step, loss=float(100 * rank + step))
            rec.log_samples(step, [{"prompt_text": f"r{rank}-s{step}-{i}", "reward_total": float(i)} for i in range(2)], select=False)
            rec.log_event("checkpoint", step=step, who=rank)
    rank1.close()
    rank0.close()

    assert (run / "rank-001" / "manifest.json").is_file(), "rank 1 writes a rank-001/ sub-recording"

    got = rows(run, "SELECT run_id, rank, step, prompt_text FROM samples ORDER BY rank, prompt_text")
    assert Counter(r["rank"] for r in got) == {0: 6, 1: 6}
    assert all(r["prompt_text"].startswith(f"r{r['rank']}-") for r in got), "the rank column says who logged it"
    assert {r["run_id"] for r in got} == {rank0.run_id}, "rank samples belong to the run"

    checkpoints = events(run, "checkpoint")
    assert sorted((e["rank"], e["data"]["who"], e["step"]) for e in checkpoints) == sorted(
        (rank, rank, step) for rank in (0, 1) for step in range(3)
    )
    typed = rlprobe.RunReader(run).events("checkpoint")
    assert [e.timestamp for e in typed] == sorted(e.timestamp for e in typed)

    step_rows = rows(run, "SELECT run_id, step, loss FROM steps ORDER BY step")
    assert [(r["step"], r["loss"]) for r in step_rows] == [(0, 0.0), (1, 1.0), (2, 2.0)], "steps are rank 0's only"

    for target in (run, tmp_path):  # the run itself, and the root above it
        listed = rows(target, "SELECT run_id, steps_recorded FROM runs")
        assert listed == [{"run_id": rank0.run_id, "steps_recorded": 3}], "rank-NNN/ is part of its run, not a run"
    assert status(run) == "closed"
    assert {s.rank for s in rlprobe.RunReader(run).samples()} == {0, 1}
