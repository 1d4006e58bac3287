"""Random SIGKILLs during flushes, compactions and resumes: nothing flushed is lost, nothing is
read twice, nothing is unreadable.

A writer records steps and samples, flushing often and closing (compacting) and resuming every
few steps, so a kill at a random moment lands inside every kind of write. The run is read
through the views while it records and after each kill; then the writer restarts from a
checkpoint a few steps before its last flushed step (so it logs steps again, as a resumed
training run does) and is killed again.
"""

from __future__ import annotations

import json
import random
import signal
import time

import pytest

from rlprobe.store import open_store

from recorder_helpers import start_script, write_script

WRITER = """
import json, os, sys, time
from rlprobe import Recorder

run_dir, report = sys.argv[1], sys.argv[2]
flushed = json.load(open(report))["step"] if os.path.exists(report) else -1

def tell(step):
    with open(report + ".tmp", "w") as fh:
        json.dump({"step": step}, fh)
    os.replace(report + ".tmp", report)

step = max(0, flushed - 12)  # a restart from a checkpoint: it re-runs steps already recorded
print("ready", flush=True)
while True:
    rec = Recorder(run_dir, capture_env=False, flush_interval_s=0.02, install_handlers=False)  # a resume
    for _ in range(40):
        rec.log_step(step, loss=float(step), reward_mean=step * 0.5)
        rec.log_samples(step, [{"prompt_text": f"{step}/{i}", "reward_total": float(i)} for i in range(3)], select=False)
        if step % 5 == 4:
            assert rec.flush(30)
            tell(step)
        step += 1
        time.sleep(0.002)
    assert rec.flush(30)
    tell(step - 1)
    rec.close()  # compaction: killed in it now and then
"""


def _check(run, flushed: int) -> int:
    store = open_store(run)
    (n, distinct, top, wrong), = store.rows(
        "SELECT count(*), count(DISTINCT step), max(step), "
        "count(*) FILTER (WHERE loss IS DISTINCT FROM step OR reward_mean IS DISTINCT FROM step * 0.5) FROM steps")[2]
    assert n == distinct, f"{n - distinct} steps read twice"
    assert wrong == 0, f"{wrong} torn or wrong step rows"
    if flushed >= 0:
        missing = store.rows("SELECT count(*) FROM range(?) AS r(s) ANTI JOIN steps ON steps.step = r.s", [flushed + 1])[2][0][0]
        assert missing == 0, f"{missing} flushed steps lost (flushed up to {flushed})"
    (bad,), = [r for r in store.rows(
        "SELECT count(*) FILTER (WHERE prompt_text NOT LIKE step || '/%' OR reward_total IS DISTINCT FROM "
        "CAST(split_part(prompt_text, '/', 2) AS DOUBLE)) FROM samples")[2]]
    assert bad == 0, f"{bad} torn sample rows"
    if flushed >= 0:
        lost = store.rows("SELECT count(*) FROM range(?) AS r(s) ANTI JOIN samples ON samples.step = r.s", [flushed + 1])[2][0][0]
        assert lost == 0, f"samples of {lost} flushed steps lost"
    return int(top if top is not None else -1)


@pytest.mark.slow
def test_random_sigkills_lose_no_flushed_step_and_leave_a_readable_run(tmp_path):
    run = tmp_path / "run"
    report = tmp_path / "flushed.json"
    script = write_script(tmp_path, WRITER)
    rng = random.Random(13)
    kills = 0
    for _ in range(20):
        proc = start_script(script, str(run), str(report))
        try:
            line = proc.stdout.readline() if proc.stdout else ""
            assert line.strip() == "ready", proc.stderr.read() if proc.stderr else ""
            time.sleep(rng.uniform(0.1, 0.6))
            # read while it records: what was flushed is there, once
            _check(run, json.loads(report.read_text())["step"] if report.exists() else -1)
            time.sleep(rng.uniform(0.0, 0.6))  # into a flush, a compaction or a resume
            proc.send_signal(signal.SIGKILL)
            proc.communicate(timeout=30)
        finally:
            proc.kill()
        kills += 1
        flushed = json.loads(report.read_text())["step"] if report.exists() else -1
        _check(run, flushed)
        assert not list(run.rglob(".rlprobe-writer.lock.*"))
    # a last session that ends cleanly: everything compacted, every step once
    proc = start_script(script, str(run), str(report))
    try:
        assert proc.stdout is not None and proc.stdout.readline().strip() == "ready"
        deadline = time.monotonic() + 60
        start = json.loads(report.read_text())["step"] if report.exists() else -1
        while time.monotonic() < deadline and (json.loads(report.read_text())["step"] if report.exists() else -1) < start + 30:
            time.sleep(0.05)
        proc.send_signal(signal.SIGKILL)
        proc.communicate(timeout=30)
    finally:
        proc.kill()
    top = _check(run, json.loads(report.read_text())["step"])
    assert kills == 20 and top > 100, f"the writer made too little progress to prove much (last step {top})"
    assert not list(run.rglob("*.quarantined-*")), "a SIGKILL never leaves a corrupt file"
