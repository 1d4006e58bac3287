"""A recorder belongs to the process that made it: forked children never write, close or die for it.

multiprocessing's fork start method (the Linux default) copies the Recorder, its exit hooks and
its open files into every worker, and Pool.__exit__ SIGTERMs the workers. Each scenario runs a
real training script in a subprocess and reads the run back through the views.
"""

from __future__ import annotations

import signal
import subprocess
import sys

import pytest

from recorder_helpers import events, rows, run_script, status, step_numbers, write_script

pytestmark = pytest.mark.skipif(sys.platform == "win32", reason="fork is POSIX only")


def test_a_fork_pool_in_every_step_loses_no_step_and_writes_no_bogus_event(tmp_path):
    run = tmp_path / "run"
    script = write_script(tmp_path, """
        import sys, multiprocessing as mp
        from rlprobe import Recorder

        def square(x):
            return x * x

        if __name__ == "__main__":
            mp.set_start_method("fork")
            rec = Recorder(sys.argv[1], capture_env=False, flush_interval_s=0.05)
            for step in range(20):
                with mp.Pool(2) as pool:  # __exit__ SIGTERMs both workers
                    pool.map(square, range(4))
                rec.log_step(step, loss=float(step))
            rec.close()
            print("done", flush=True)
    """)
    try:
        result = run_script(script, str(run), timeout=60)
    except subprocess.TimeoutExpired:
        pytest.fail("the training process hung: a pool worker ran the recorder's close() on SIGTERM")
    assert result.returncode == 0, result.stderr
    assert step_numbers(run) == list(range(20))
    assert events(run, "sigterm") == [], "a worker's SIGTERM is the worker's, not the run's"
    assert [e["kind"] for e in events(run) if e["kind"].startswith("recorder_")] == ["recorder_open", "recorder_close"]
    assert status(run) == "closed"


def test_a_forked_child_that_exits_normally_leaves_the_parents_recording_alone(tmp_path):
    run = tmp_path / "run"
    script = write_script(tmp_path, """
        import os, sys
        from rlprobe import Recorder

        rec = Recorder(sys.argv[1], capture_env=False, flush_interval_s=0.05)
        rec.log_step(0, loss=0.0)
        assert rec.flush()
        pid = os.fork()
        if pid == 0:
            rec.log_step(99, loss=99.0)          # ignored: the child is not the recording process
            rec.log_event("from_child")
            rec.close()
            sys.exit(0)                          # atexit runs in the child too
        _, code = os.waitpid(pid, 0)
        assert code == 0, code
        rec.log_step(1, loss=1.0)
        rec.close()
    """)
    result = run_script(script, str(run), timeout=30)
    assert result.returncode == 0, result.stderr
    assert step_numbers(run) == [0, 1]
    assert events(run, "from_child") == []
    assert len(events(run, "recorder_close")) == 1
    assert status(run) == "closed"


def test_sigterm_in_a_forked_child_kills_the_child_the_default_way_and_records_nothing(tmp_path):
    run = tmp_path / "run"
    script = write_script(tmp_path, """
        import os, signal, sys, time
        from rlprobe import Recorder

        rec = Recorder(sys.argv[1], capture_env=False, flush_interval_s=0.05)
        pid = os.fork()
        if pid == 0:
            time.sleep(30)
            os._exit(0)
        os.kill(pid, signal.SIGTERM)
        _, code = os.waitpid(pid, 0)
        print(os.WTERMSIG(code) if os.WIFSIGNALED(code) else -1, flush=True)
        rec.log_step(0, loss=0.0)
        rec.close()
    """)
    result = run_script(script, str(run), timeout=30)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == str(int(signal.SIGTERM)), "the child must die of SIGTERM, as it would without rlprobe"
    assert events(run, "sigterm") == []
    assert rows(run, "SELECT count(*) AS n FROM events WHERE kind = 'recorder_close'") == [{"n": 1}]
    assert step_numbers(run) == [0]
