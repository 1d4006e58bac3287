"""The black box survives: a full queue, a full disk, SIGTERM, SIGKILL, a crash, leftovers, resume.

Signals and crashes run a real training script in a subprocess; the run is then read back
through the public views, the way a post-mortem would read it.
"""

from __future__ import annotations

import errno
import os
import signal
import time
from pathlib import Path

import pyarrow.parquet as pq
import pytest

import rlprobe
from rlprobe import Recorder
from rlprobe.record import writer
from rlprobe.schemas import RunManifest

from recorder_helpers import (
    FAST, events, part_files, rows, run_script, start_script, status, step_numbers, wait_for_line, write_script,
)

# -- a full queue ---------------------------------------------------------------------------

def test_a_full_queue_drops_and_counts_but_never_blocks(tmp_path):
    run = tmp_path / "run"
    calls = 100_000
    rec = Recorder(run, queue_size=10, **FAST)
    try:
        started = time.perf_counter()
        for step in range(calls):
            rec.log_step(step, loss=1.0)
        elapsed = time.perf_counter() - started
    finally:
        rec.close()

    # Generous on purpose (a loaded 2-core CI box): a call that waited for the writer would
    # take minutes here, since the writer drains the queue only every 50 ms.
    assert elapsed < 10.0, f"{calls} log_step calls took {elapsed:.2f}s: the call must never wait for the writer"
    assert rec.dropped > 0
    drops = events(run, "recorder_drops")
    assert drops, "dropped records must be reported as a recorder_drops event"
    assert max(e["data"]["total"] for e in drops) == rec.dropped
    assert len(step_numbers(run)) + rec.dropped == calls, "every call is either recorded or counted as dropped"


# -- a full disk ----------------------------------------------------------------------------

def fail_parquet_writes(monkeypatch, times: int, match=lambda path: True) -> dict:
    """Make the next `times` parquet writes to matching files hit ENOSPC after writing half a file."""
    real = writer.pq.write_table
    state = {"left": times, "failed": 0}

    def write_table(table, where, *args, **kwargs):
        path = Path(where if isinstance(where, (str, os.PathLike)) else where.name)
        if state["left"] > 0 and match(path):
            state["left"] -= 1
            state["failed"] += 1
            half = b"PAR1\x00\x00 half a parquet file"  # the disk filled mid-write
            if isinstance(where, (str, os.PathLike)):
                path.write_bytes(half)
            else:
                where.write(half)
            raise OSError(errno.ENOSPC, "No space left on device", str(path))
        return real(table, where, *args, **kwargs)

    monkeypatch.setattr(writer.pq, "write_table", write_table)
    return state


def assert_no_torn_files(run: Path) -> None:
    """Every file a reader can match by name opens as parquet, and no temp file is left over."""
    for path in [*run.glob("steps/part-*.parquet"), *run.glob("samples/shard-*.parquet"), *run.glob("steps.parquet")]:
        try:
            pq.read_table(path)
        except Exception as exc:  # pragma: no cover - the failure message is the point
            raise AssertionError(f"{path.relative_to(run)} is torn: {exc}") from exc
    leftovers = [p.name for p in run.rglob("*.tmp")]
    assert not leftovers, f"temp files left behind: {leftovers}"


def test_a_disk_full_during_flush_loses_nothing_and_tears_nothing(tmp_path, monkeypatch):
    run = tmp_path / "run"
    state = fail_parquet_writes(monkeypatch, times=3)
    rec = Recorder(run, steps_per_flush=5, **FAST)
    try:
        for step in range(20):
            rec.log_step(step, loss=float(step))  # must not raise while the disk is full
            rec.log_samples(step, [{"prompt_text": f"p{step}-{i}", "reward_total": float(i)} for i in range(3)], select=False)
        deadline = time.monotonic() + 5
        while state["left"] and time.monotonic() < deadline:
            time.sleep(0.01)
        assert state["left"] == 0, "the writer never retried"
        assert rec.flush() is True, "once the disk has room again, a flush succeeds"
        assert_no_torn_files(run)
        assert step_numbers(run) == list(range(20))  # readable mid-run, nothing lost
    finally:
        rec.close()

    assert rec.write_failures == 3
    failed = events(run, "write_failed")
    assert len(failed) == 3 and all("No space left" in e["message"] for e in failed)
    assert rec.dropped == 0
    assert_no_torn_files(run)
    assert step_numbers(run) == list(range(20))
    prompts = [r["prompt_text"] for r in rows(run, "SELECT prompt_text FROM samples")]
    assert sorted(prompts) == sorted(f"p{s}-{i}" for s in range(20) for i in range(3))


def test_a_disk_that_stays_full_keeps_at_most_queue_size_rows(tmp_path, monkeypatch):
    run = tmp_path / "run"
    state = fail_parquet_writes(monkeypatch, times=10**9)
    rec = Recorder(run, queue_size=10, steps_per_flush=1, **FAST)
    try:
        for step in range(30):
            rec.log_step(step, loss=float(step))
            assert rec.flush(timeout=2.0) is False, "flush reports that the data is not on disk"
        assert rec.write_failures >= 30
    finally:
        state["left"] = 0  # the disk has room again
        rec.close()
    assert step_numbers(run) == list(range(20, 30)), "the newest rows within the bound are kept"
    assert rec.dropped == 20, "the rows beyond the bound are counted as dropped"
    assert events(run, "recorder_close")[-1]["data"]["dropped"] == 20


def test_a_disk_full_in_the_middle_of_a_multi_shard_write_duplicates_nothing(tmp_path, monkeypatch):
    run = tmp_path / "run"
    monkeypatch.setattr(writer, "SAMPLES_PER_SHARD", 4)
    fail_parquet_writes(monkeypatch, times=1, match=lambda p: "shard-00001" in p.name)
    with Recorder(run, **FAST) as rec:
        rec.log_samples(0, [{"prompt_text": f"p{i}", "reward_total": float(i)} for i in range(6)], select=False)
        assert rec.flush() is False  # shard 0 written, shard 1 hit the full disk
        assert rec.flush() is True
    assert rec.write_failures == 1
    assert_no_torn_files(run)
    prompts = sorted(r["prompt_text"] for r in rows(run, "SELECT prompt_text FROM samples"))
    assert prompts == [f"p{i}" for i in range(6)], (
        "samples were duplicated: RunWriter.write_samples had already written (and closed) shard 0 "
        "when shard 1 failed, but the Recorder keeps and retries every row of the call"
    )


# -- signals and crashes, in a real process ------------------------------------------------

LOOP = """
import sys, time
from rlprobe import Recorder

rec = Recorder(sys.argv[1], flush_interval_s=60, steps_per_flush=10_000, capture_env=False)
"""


@pytest.fixture
def run(tmp_path):
    return tmp_path / "run"


def test_sigterm_flushes_then_dies_by_the_signal(tmp_path, run):
    script = write_script(tmp_path, LOOP + """
for step in range(10):
    rec.log_step(step, loss=float(step))  # nothing flushed yet: the flush window is 60 s
print("ready", flush=True)
while True:
    time.sleep(0.05)
""")
    proc = start_script(script, str(run))
    try:
        wait_for_line(proc, "ready")
        proc.send_signal(signal.SIGTERM)
        _, err = proc.communicate(timeout=20)
    finally:
        proc.kill()
    assert proc.returncode == -signal.SIGTERM, f"the process must still die by SIGTERM; stderr:\n{err}"
    assert step_numbers(run) == list(range(10)), "steps logged before the signal are on disk"
    assert len(events(run, "sigterm")) == 1
    assert status(run) == "crashed"


def test_sigkill_after_a_flush_leaves_a_readable_live_run(tmp_path, run):
    script = write_script(tmp_path, LOOP + """
for step in range(10):
    rec.log_step(step, loss=float(step))
    rec.log_samples(step, [{"prompt_text": f"p{step}", "reward_total": 1.0}], select=False)
rec.log_event("checkpoint", step=9, path="ckpt-9")
assert rec.flush()
for step in range(10, 20):
    rec.log_step(step, loss=float(step))  # the unflushed window a SIGKILL may lose
print("flushed", flush=True)
while True:
    time.sleep(0.05)
""")
    proc = start_script(script, str(run))
    try:
        wait_for_line(proc, "flushed")
        proc.kill()
        proc.communicate(timeout=20)
    finally:
        proc.kill()
    assert proc.returncode == -signal.SIGKILL
    assert not (run / "steps.parquet").exists() and part_files(run)
    got = step_numbers(run)
    assert got[:10] == list(range(10)) and set(got) <= set(range(20)), got
    assert [s.loss for s in rlprobe.RunReader(run).steps()][:10] == [float(s) for s in range(10)]
    assert sorted(r["prompt_text"] for r in rows(run, "SELECT prompt_text FROM samples")) == sorted(f"p{s}" for s in range(10))
    assert events(run, "checkpoint")[0]["data"] == {"path": "ckpt-9"}
    assert status(run) == "live", "a SIGKILLed run cannot say so: it reads as live"


def test_an_uncaught_exception_records_a_crash_and_chains_the_excepthook(tmp_path, run):
    script = write_script(tmp_path, """
import sys
from rlprobe import Recorder

def original_hook(exc_type, exc, tb):
    sys.stderr.write("ORIGINAL HOOK RAN\\n")
    sys.__excepthook__(exc_type, exc, tb)

sys.excepthook = original_hook
rec = Recorder(sys.argv[1], flush_interval_s=60, steps_per_flush=10_000, capture_env=False)
for step in range(5):
    rec.log_step(step, loss=float(step))
raise RuntimeError("reward model returned garbage at step 4")
""")
    done = run_script(script, str(run))
    assert done.returncode == 1
    assert "ORIGINAL HOOK RAN" in done.stderr, "the excepthook that was there before must still run"
    assert "Traceback" in done.stderr and "RuntimeError: reward model returned garbage" in done.stderr
    crash = events(run, "crash")
    assert len(crash) == 1
    assert "reward model returned garbage at step 4" in crash[0]["data"]["traceback"]
    assert "RuntimeError" in crash[0]["message"]
    assert step_numbers(run) == list(range(5)), "the steps before the crash are flushed"
    assert status(run) == "crashed"


# -- leftovers and resuming -------------------------------------------------------------------

def test_a_leftover_temp_file_is_invisible_to_readers(tmp_path, run):
    rec = Recorder(run, flush_interval_s=60, steps_per_flush=10_000, capture_env=False)
    try:
        for step in range(3):
            rec.log_step(step, loss=float(step))
        rec.log_samples(0, [{"prompt_text": "p", "reward_total": 1.0}], select=False)
        assert rec.flush()
        # what a write killed between create and rename leaves behind
        (run / "steps" / ".part-000003.parquet.abcd1234.tmp").write_bytes(b"PAR1 garbage")
        (run / "samples" / ".shard-00000.parquet.deadbeef.tmp").write_bytes(b"garbage")
        assert step_numbers(run) == [0, 1, 2]
        assert len(rlprobe.RunReader(run).samples()) == 1
        rec.log_step(3, loss=3.0)
        assert rec.flush()
        assert step_numbers(run) == [0, 1, 2, 3]
    finally:
        rec.close()
    assert (run / "steps.parquet").exists() and part_files(run) == []
    assert step_numbers(run) == [0, 1, 2, 3]
    assert status(run) == "closed"


def test_resuming_a_closed_recording_keeps_its_steps_and_run_id(tmp_path, run):
    with Recorder(run, algorithm="grpo", **FAST) as first:
        for step in range(5):
            first.log_step(step, loss=float(step))
        first.log_samples(4, [{"prompt_text": "first", "reward_total": 1.0}], select=False)

    with Recorder(run, algorithm="grpo", **FAST) as second:
        assert second.run_id == first.run_id
        assert step_numbers(run) == list(range(5)), "the old steps stay readable while resumed"
        for step in range(5, 10):
            second.log_step(step, loss=float(step))
        second.log_samples(9, [{"prompt_text": "second", "reward_total": 1.0}], select=False)

    assert (run / "steps.parquet").exists() and part_files(run) == []
    got = rows(run, "SELECT run_id, step, loss FROM steps ORDER BY step")
    assert [r["step"] for r in got] == list(range(10))
    assert [r["loss"] for r in got] == [float(s) for s in range(10)]
    assert {r["run_id"] for r in got} == {first.run_id}
    assert sorted(r["prompt_text"] for r in rows(run, "SELECT prompt_text FROM samples")) == ["first", "second"]
    (listed,) = rows(run, "SELECT run_id, status, steps_recorded FROM runs")
    assert listed == {"run_id": first.run_id, "status": "closed", "steps_recorded": 10}
    assert [e["message"] for e in events(run, "recorder_open")] == ["", "resumed"]


def test_resuming_after_a_crash_keeps_the_parts_and_ignores_temp_files(tmp_path, run):
    crashed = writer.RunWriter(run, RunManifest(run_id="crashed-run"))  # parts written, never compacted
    crashed.write_steps([{"step": s, "loss": float(s)} for s in range(3)])
    crashed.write_steps([{"step": s, "loss": float(s)} for s in range(3, 5)])
    (run / "steps" / ".part-000002.parquet.abcd1234.tmp").write_bytes(b"torn")
    assert step_numbers(run) == list(range(5))

    with Recorder(run, **FAST) as rec:
        assert rec.run_id == "crashed-run"
        for step in range(5, 8):
            rec.log_step(step, loss=float(step))
    got = rows(run, "SELECT run_id, step, loss FROM steps ORDER BY step")
    assert [(r["run_id"], r["step"], r["loss"]) for r in got] == [("crashed-run", s, float(s)) for s in range(8)]
    assert part_files(run) == [] and (run / "steps.parquet").exists()


def test_rows_still_pending_when_close_gives_up_are_counted_as_dropped(tmp_path, monkeypatch):
    run = tmp_path / "run"
    fail_parquet_writes(monkeypatch, times=10**9)  # the disk never recovers
    rec = Recorder(run, capture_env=False, flush_interval_s=60)  # nothing written before close
    for step in range(5):
        rec.log_step(step, loss=float(step))
    rec.log_samples(0, [{"prompt_text": "p", "reward_total": 1.0}] * 3, select=False)
    rec.close()
    assert rec.dropped == 5 + 3, "5 step rows and 3 sample rows never reached the disk"
    [drops] = events(run, "recorder_drops")
    assert drops["data"]["cause"] == "close" and drops["data"]["total"] == 8
    assert events(run, "recorder_close")[-1]["data"]["dropped"] == 8
