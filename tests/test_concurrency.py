"""Several writer processes recording into one root while this process queries it.

Three writers (real processes, each a Recorder flushing every few steps) record into run
directories under one root; one closes (compacts) early, one at the end, one is killed without
closing. Meanwhile the test queries the root over and over, through fresh stores (as `rlprobe
query` does) and one long-lived store (as a notebook does). Every query must succeed, and:

- no torn row: every column of every row is the writer's formula of its step and run;
- no gap or duplicate: a run's steps are exactly 0..max (a compaction shown twice or half
  would break it), its sample ids are distinct;
- every row flushed before a query started is in it (writers report the last flushed step
  in a side file, written after Recorder.flush() returns, read before the query);
- counts never go down between queries.

Each step is logged once, so compaction's last-write-wins never changes a count.

Writers flush about four times a second (twenty times the default rate). No file a reader can
list is replaced or deleted while a run is live (each flush adds a sample delta; see
docs/storage.md), so no read needs a retry; tests/test_faults_live_reads.py checks a plain
rlprobe.connect() at twenty flushes a second.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from rlprobe.store import open_store

WRITER = r"""
import json, os, sys, time
from rlprobe import Recorder

run_dir, run_id, n_steps, mode, report, stop = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4], sys.argv[5], sys.argv[6]
k = int(run_id[1:])

def tell(step, closed):
    tmp = report + ".tmp"
    with open(tmp, "w") as fh:
        json.dump({"step": step, "closed": closed}, fh)
    os.replace(tmp, report)  # the reader never sees half a report

rec = Recorder(run_dir, run_id=run_id, algorithm="grpo", flush_interval_s=0.25, steps_per_flush=50,
               capture_env=False, install_handlers=False)
for step in range(n_steps):
    rec.log_step(step, reward_mean=step * 0.25, reward_max=float(k), kl_mean=step * 0.5 + 1, entropy_mean=1000.0 - step,
                 loss=-float(step), extra_metric=step * 2.0)
    rec.log_samples(step, [{"prompt_text": f"{run_id}/{step}/{i}", "completion_text": "x" * i, "reward_total": step * 0.25,
                            "advantage": float(i), "group_id": str(step)} for i in range(2)], select=False)
    if step % 50 == 49:
        assert rec.flush(timeout=30), rec.last_write_error
        tell(step, False)
    time.sleep(0.004)
assert rec.flush(timeout=30)
tell(n_steps - 1, False)
if mode == "close":
    rec.close()
    tell(n_steps - 1, True)
else:
    while not os.path.exists(stop):  # stays live until killed: no close, no compaction
        time.sleep(0.02)
"""

# (run dir below the root, run_id, steps, how it ends)
WRITERS = [("team-a/w0", "w0", 300, "close"), ("w1", "w1", 1200, "close"), ("team-b/deep/w2", "w2", 1200, "kill")]

STEPS_SQL = """
SELECT run_id, count(*), count(DISTINCT step), min(step), max(step),
       count(*) FILTER (WHERE reward_mean IS DISTINCT FROM step * 0.25
                           OR reward_max IS DISTINCT FROM CAST(substr(run_id, 2) AS DOUBLE)
                           OR kl_mean IS DISTINCT FROM step * 0.5 + 1
                           OR entropy_mean IS DISTINCT FROM 1000.0 - step
                           OR loss IS DISTINCT FROM -step
                           OR "extra.extra_metric" IS DISTINCT FROM step * 2.0
                           OR wall_time IS NULL)
FROM steps GROUP BY run_id
"""

SAMPLES_SQL = """
SELECT run_id, count(*), count(DISTINCT sample_id), max(step),
       count(*) FILTER (WHERE reward_total IS DISTINCT FROM step * 0.25
                           OR prompt_text IS DISTINCT FROM run_id || '/' || step || '/' || CAST(advantage AS BIGINT)
                           OR length(completion_text) IS DISTINCT FROM CAST(advantage AS BIGINT)
                           OR group_id IS DISTINCT FROM CAST(step AS VARCHAR))
FROM samples GROUP BY run_id
"""


def _reports(folder: Path) -> dict[str, dict[str, object]]:
    out = {}
    for _, run_id, _, _ in WRITERS:
        path = folder / f"{run_id}.json"
        if path.exists():
            out[run_id] = json.loads(path.read_text())
    return out


def test_readers_see_every_flushed_row_and_no_torn_one_while_writers_record(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from rlprobe.store import engine

    retried: list[str] = []  # reads that failed on a file replaced mid-scan (there must be none)
    is_replaced = engine._is_replaced_file
    monkeypatch.setattr(engine, "_is_replaced_file", lambda exc: bool(is_replaced(exc) and not retried.append(str(exc)[:60])))
    root, side = tmp_path / "runs", tmp_path / "side"
    root.mkdir()
    side.mkdir()
    stop = side / "stop"
    procs = {
        run_id: subprocess.Popen([sys.executable, "-c", WRITER, str(root / rel), run_id, str(n), mode,
                                  str(side / f"{run_id}.json"), str(stop)], stderr=subprocess.PIPE, text=True)
        for rel, run_id, n, mode in WRITERS
    }
    expected = {run_id: n for _, run_id, n, _ in WRITERS}
    steps_seen: dict[str, int] = {}
    samples_seen: dict[str, int] = {}
    queries = 0
    long_lived = None
    try:
        deadline = time.monotonic() + 240
        while True:
            assert time.monotonic() < deadline, "writers did not finish in 240 s"
            for run_id, proc in procs.items():
                assert proc.poll() in (None, 0), f"writer {run_id} failed: {proc.stderr.read() if proc.stderr else ''}"
            flushed = _reports(side)  # read before the query: all of this must be in it
            finished = all(r.get("closed") or (run_id == "w2" and r["step"] == expected[run_id] - 1)
                           for run_id, r in flushed.items()) and len(flushed) == len(WRITERS)
            if long_lived is None:
                if len(flushed) < len(WRITERS):
                    time.sleep(0.02)  # extra.extra_metric exists once each run has flushed a step
                    continue
                long_lived = open_store(root)
            store = long_lived if queries % 2 else open_store(root)
            _, _, step_rows = store.rows(STEPS_SQL)
            _, _, sample_rows = store.rows(SAMPLES_SQL)
            queries += 1
            steps = {r[0]: r for r in step_rows}
            for run_id, count, distinct, lo, hi, bad in step_rows:
                assert bad == 0, f"{run_id}: {bad} torn or wrong step rows"
                assert count == distinct == hi + 1 and lo == 0, f"{run_id}: steps are not exactly 0..{hi}: {count} rows, {distinct} distinct"
                assert count >= steps_seen.get(run_id, 0), f"{run_id}: step count went down {steps_seen[run_id]} -> {count}"
                steps_seen[run_id] = count
            for run_id, count, distinct, hi, bad in sample_rows:
                assert bad == 0, f"{run_id}: {bad} torn or wrong sample rows"
                assert count == distinct, f"{run_id}: duplicate sample ids"
                assert count >= samples_seen.get(run_id, 0), f"{run_id}: sample count went down"
                samples_seen[run_id] = count
            samples = {r[0]: r for r in sample_rows}
            for run_id, report in flushed.items():
                step = int(report["step"])  # type: ignore[arg-type]
                assert run_id in steps and steps[run_id][4] >= step, f"{run_id}: flushed step {step} not visible ({steps.get(run_id)})"
                assert run_id in samples and samples[run_id][1] >= 2 * (step + 1), f"{run_id}: flushed samples of step {step} not visible"
            if finished:
                break
            time.sleep(0.01)
        stop.touch()
        procs["w0"].wait(60)
        procs["w1"].wait(60)
        procs["w2"].send_signal(signal.SIGKILL)
        procs["w2"].wait(60)
        assert procs["w0"].returncode == procs["w1"].returncode == 0
    finally:
        for proc in procs.values():
            if proc.poll() is None:
                proc.kill()
                proc.wait(10)

    assert queries >= 10, f"only {queries} queries ran while the writers wrote: the test proved little"
    _, _, rows = open_store(root).rows("SELECT run_id, status, steps_recorded FROM runs ORDER BY run_id")
    assert rows == [("w0", "closed", 300), ("w1", "closed", 1200), ("w2", "live", 1200)]
    assert (root / "w1" / "steps.parquet").exists() and not (root / "w1" / "steps").exists()
    assert not (root / "team-b" / "deep" / "w2" / "steps.parquet").exists()
    assert steps_seen == expected and samples_seen == {k: 2 * n for k, n in expected.items()}
    print(f"{queries} queries while 3 writers recorded; {len(retried)} retried reads of a replaced file")
    # no file is ever replaced under its own name (sample shards get a new version each flush),
    # so no read can have caught one half-replaced
    assert retried == [], f"reads failed on replaced files: {retried[:3]}"


def test_a_really_corrupt_shard_still_fails_after_the_retries(tmp_path: Path) -> None:
    """The retries for a shard replaced mid-read must not hide a shard that is broken for good."""
    import pyarrow.parquet as pq

    from conftest import make_run
    from rlprobe.errors import QueryError

    run = tmp_path / "run"
    make_run(run, 4, samples_per_step=2)
    shard = run / "samples" / "shard-00000.parquet"
    data = bytearray(shard.read_bytes())
    footer = len(data) - 8 - int.from_bytes(data[-8:-4], "little")
    data[footer:footer + 64] = bytes(64)  # zero the start of the footer's thrift metadata
    shard.write_bytes(bytes(data))
    store = open_store(run)
    t0 = time.monotonic()
    with pytest.raises(QueryError, match="TProtocolException"):  # one of the errors that are retried
        store.rows("SELECT count(*), sum(reward_total) FROM samples")
    assert time.monotonic() - t0 < 10
    assert pq.read_metadata(run / "steps.parquet").num_rows == 4  # the rest of the run is intact
    assert store.rows("SELECT count(*) FROM steps")[2] == [(4,)]
