"""rlprobe.connect() on a live run needs no retries: no file it can list is replaced or deleted.

Before, each flush rewrote the open sample shard as a new version and deleted the old one, and a
raw DuckDB connection (no retries, unlike the CLI) failed on 6% of sample reads at a 1 s flush
interval and 60% at 0.05 s. Now a flush only adds files; the deltas a seal replaces stay for
readers that listed them (rlprobe.layout).
"""

from __future__ import annotations

import sys
import time

import pytest

import rlprobe
from rlprobe.record import writer as writer_module

from recorder_helpers import start_script, wait_for_line, write_script


@pytest.mark.slow
def test_plain_connect_reads_of_a_live_run_never_fail(tmp_path):
    run = tmp_path / "run"
    script = write_script(tmp_path, """
        import sys, time
        from rlprobe import Recorder
        from rlprobe.record import writer
        writer.SAMPLES_PER_SHARD = 512  # a seal every 8 steps, so reads race seals too
        rec = Recorder(sys.argv[1], capture_env=False, flush_interval_s=0.05, install_handlers=False)
        step = 0
        while True:
            rec.log_step(step, loss=float(step))
            rec.log_samples(step, [{"prompt_text": "p" * 200, "completion_text": "c" * 2000, "reward_total": float(i)}
                                   for i in range(64)], select=False)
            if step == 5:
                assert rec.flush()
                print("ready", flush=True)
            step += 1
            time.sleep(0.01)
    """)
    proc = start_script(script, str(run))
    failures, reads, seen = [], 0, []
    try:
        wait_for_line(proc, "ready", timeout=60)
        deadline = time.monotonic() + 8.0
        while time.monotonic() < deadline:
            reads += 1
            try:
                seen.append(rlprobe.connect(run).sql("SELECT count(*), count(DISTINCT sample_id) FROM samples").fetchall()[0])
            except Exception as exc:  # what a notebook user would see
                failures.append(str(exc).splitlines()[0])
    finally:
        proc.kill()
        proc.communicate(timeout=20)
    assert not failures, f"{len(failures)} of {reads} reads failed: {failures[:3]}"
    assert all(n == d for n, d in seen), "a sample read twice (a shard and its deltas both counted)"
    assert [n for n, _ in seen] == sorted(n for n, _ in seen), "counts never go down"
    assert seen[-1][0] > 512, "the run sealed at least one shard while being read"
