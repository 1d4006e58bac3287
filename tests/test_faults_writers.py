"""One recording, one writer: a second Recorder on the same folder refuses, with one clear line.

Without the lock, two writers number their part files from the same place and overwrite each
other: half the steps of two processes logging 250 steps each survived.
"""

from __future__ import annotations

import sys

import pytest

from rlprobe import Recorder
from rlprobe.errors import RecordingInUse

from recorder_helpers import FAST, run_script, start_script, status, step_numbers, wait_for_line, write_script


def test_a_second_recorder_on_the_same_folder_refuses_and_the_first_loses_nothing(tmp_path):
    run = tmp_path / "run"
    first = Recorder(run, **FAST)
    try:
        with pytest.raises(RecordingInUse) as info:
            Recorder(run, **FAST)
        message = str(info.value)
        assert str(run) in message and "rank" in message and "\n" not in message
        for step in range(500):
            first.log_step(step, loss=float(step))
    finally:
        first.close()
    assert step_numbers(run) == list(range(500))
    assert status(run) == "closed"


def test_the_folder_is_free_again_once_the_recorder_closed(tmp_path):
    run = tmp_path / "run"
    with Recorder(run, **FAST) as rec:
        rec.log_step(0, loss=0.0)
    with Recorder(run, **FAST) as rec:  # a resume, not a refusal
        rec.log_step(1, loss=1.0)
    assert step_numbers(run) == [0, 1]


def test_a_killed_writer_frees_the_folder_for_the_next_session(tmp_path):
    run = tmp_path / "run"
    script = write_script(tmp_path, """
        import sys, time
        from rlprobe import Recorder
        rec = Recorder(sys.argv[1], capture_env=False, flush_interval_s=0.05)
        rec.log_step(0, loss=0.0)
        assert rec.flush()
        print("ready", flush=True)
        time.sleep(60)
    """)
    proc = start_script(script, str(run))
    try:
        wait_for_line(proc, "ready")
        with pytest.raises(RecordingInUse, match="pid"):
            Recorder(run, **FAST)  # held by the live process
        proc.kill()
        proc.communicate(timeout=20)
    finally:
        proc.kill()
    with Recorder(run, **FAST) as rec:  # the OS released the lock with the process
        rec.log_step(1, loss=1.0)
    assert step_numbers(run) == [0, 1]


def test_four_processes_that_forgot_rank_record_one_run_and_the_others_say_why(tmp_path):
    run = tmp_path / "run"
    script = write_script(tmp_path, """
        import sys, time
        from rlprobe import Recorder
        from rlprobe.errors import RecordingInUse
        try:
            rec = Recorder(sys.argv[1], capture_env=False, flush_interval_s=0.05)
        except RecordingInUse as exc:
            print("refused:", exc, file=sys.stderr)
            sys.exit(3)
        print("recording", flush=True)
        for step in range(250):
            rec.log_step(step, loss=float(step))
            time.sleep(0.001)
        time.sleep(1.0)  # hold the folder while the others start
        rec.close()
    """)
    procs = [start_script(script, str(run)) for _ in range(4)]
    results = [p.communicate(timeout=60) for p in procs]
    codes = sorted(p.returncode for p in procs)
    assert codes == [0, 3, 3, 3], (codes, [err for _, err in results])
    assert all("already being recorded" in err for (_, err), p in zip(results, procs) if p.returncode == 3)
    assert step_numbers(run) == list(range(250))
