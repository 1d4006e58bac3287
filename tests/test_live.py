"""The live guardian: RunWatcher tailing a growing run, webhook_sink, `rlprobe watch`.

The webhook tests post to a real HTTP server on 127.0.0.1 (an ephemeral port, in a thread).
The tailing tests run the training side as a separate process (a small script using
rlprobe.Recorder to log a synthetic pathological run in flushed chunks) while the watcher
tails the directory, as it would in production. Nothing sleeps for a fixed time: every wait
polls with a deadline.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any, Callable, Iterator

import pytest
from click.testing import CliRunner

from rlprobe import Recorder
from rlprobe.cli import cli
from rlprobe.doctor import HaltPolicy, RunWatcher, diagnose_path, webhook_sink
from rlprobe.doctor import live
from rlprobe.doctor.findings import Finding
from rlprobe.errors import NotARecording, SchemaTooNew
from rlprobe.synth import make_run, write_run
from rlprobe.synth.writer import _step_rows

from conftest import set_schema_version

FINDING = Finding(
    signature_id="KL_BLOWUP", severity="critical", confidence=0.91, first_step=412, run_id="run-7",
    explanation="KL to the reference grew 40x in 60 steps & kept <rising>.",
    suggested_actions=["Lower the learning rate", "Raise beta"],
)


# -- helpers ----------------------------------------------------------------------------------
def wait_for(condition: Callable[[], Any], timeout: float = 20.0, every: float = 0.02) -> Any:
    """Poll condition until it returns something truthy; fail the test at the deadline."""
    deadline = time.monotonic() + timeout
    while True:
        value = condition()
        if value:
            return value
        if time.monotonic() > deadline:
            pytest.fail(f"condition not met within {timeout} s")
        time.sleep(every)


class Hook:
    """A webhook endpoint on 127.0.0.1: records each POSTed JSON body, answers as told."""

    def __init__(self, statuses: list[int] | None = None, hang: bool = False) -> None:
        self.bodies: list[Any] = []
        self.statuses = list(statuses or [])
        self.hang = hang
        self.release = threading.Event()
        hook = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:  # noqa: N802 (http.server's naming)
                body = self.rfile.read(int(self.headers["Content-Length"]))
                hook.bodies.append(json.loads(body))
                if hook.hang:
                    hook.release.wait(30)
                status = hook.statuses.pop(0) if hook.statuses else 200
                self.send_response(status)
                self.end_headers()
                self.wfile.write(b"ok")

            def log_message(self, *args: Any) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/hook"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def stop(self) -> None:
        self.release.set()
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def hook_factory() -> Iterator[Callable[..., Hook]]:
    hooks: list[Hook] = []

    def make(**kwargs: Any) -> Hook:
        hooks.append(Hook(**kwargs))
        return hooks[-1]

    yield make
    for h in hooks:
        h.stop()


WRITER = r'''
"""The training side: log a synthetic run through rlprobe.Recorder, flushed every --chunk steps."""
import argparse, sys, time
from pathlib import Path
from rlprobe import Recorder
from rlprobe.synth import make_run
from rlprobe.synth.writer import _step_rows

p = argparse.ArgumentParser()
p.add_argument("run_dir"); p.add_argument("kind"); p.add_argument("--seed", type=int, default=1)
p.add_argument("--steps", type=int, default=600); p.add_argument("--chunk", type=int, default=50)
p.add_argument("--pause-at", type=int, default=0); p.add_argument("--go")
p.add_argument("--hang", action="store_true", help="never close: sleep after the last step (to be killed)")
a = p.parse_args()
run = make_run(a.kind, n_steps=a.steps, seed=a.seed)
rows = _step_rows(run)
rec = Recorder(a.run_dir, algorithm=run.truth.algorithm, capture_env=False, install_handlers=False,
               steps_per_flush=10**6, flush_interval_s=3600)
for i, step in enumerate(run.steps.tolist()):
    rec.log_step(step, **rows[i])
    if (i + 1) % a.chunk == 0:
        assert rec.flush(30)
        print(i + 1, flush=True)
        if i + 1 == a.pause_at:
            while not Path(a.go).exists():
                time.sleep(0.02)
if a.hang:
    rec.flush(30)
    print("hanging", flush=True)
    time.sleep(600)
rec.close()
'''


@pytest.fixture
def writer(tmp_path: Path) -> Iterator[Callable[..., subprocess.Popen[str]]]:
    """Start the training-side process; every process started is killed at teardown."""
    script = tmp_path / "train.py"
    script.write_text(WRITER)
    procs: list[subprocess.Popen[str]] = []

    def start(*args: str) -> subprocess.Popen[str]:
        proc = subprocess.Popen([sys.executable, str(script), *args], stdout=subprocess.PIPE, text=True)
        procs.append(proc)
        return proc

    yield start
    for proc in procs:
        if proc.poll() is None:
            proc.kill()
        proc.wait(10)
        if proc.stdout:
            proc.stdout.close()


def same_as_full_doctor(watcher: RunWatcher, run: Path) -> None:
    """The watcher's incremental diagnosis equals a fresh diagnose_path of the same files."""
    mine = watcher.diagnose()
    assert mine is not None
    full = diagnose_path(run)
    assert len(full) == 1
    assert (mine.run_id, mine.run_dir, mine.steps, mine.last_step) == (full[0].run_id, full[0].run_dir, full[0].steps, full[0].last_step)
    assert [f.model_dump() for f in mine.findings] == [f.model_dump() for f in full[0].findings]
    assert [s.model_dump() for s in mine.skipped] == [s.model_dump() for s in full[0].skipped]


def log_chunk(rec: Recorder, run: Any, rows: list[dict[str, Any]], lo: int, hi: int, samples_every: int = 0) -> None:
    for i in range(lo, hi):
        step = int(run.steps[i])
        rec.log_step(step, **rows[i])
        if samples_every and step % samples_every == 0:
            rec.log_samples(step, run.samples(step))
    assert rec.flush(30)


# -- the webhook sink -------------------------------------------------------------------------
def test_webhook_posts_slack_compatible_json(hook_factory: Callable[..., Hook]) -> None:
    hook = hook_factory()
    sink = webhook_sink(hook.url)
    sink(FINDING)
    assert sink.close(10)
    assert (sink.sent, sink.failed, sink.dropped) == (1, 0, 0)
    [body] = hook.bodies
    text = body["text"]
    for part in ("CRITICAL", "KL_BLOWUP", "run-7", "step 412", "confidence 91%", "grew 40x", "Lower the learning rate"):
        assert part in text
    assert "&amp;" in text and "&lt;rising&gt;" in text  # Slack mrkdwn control characters escaped
    assert body["blocks"] == [{"type": "section", "text": {"type": "mrkdwn", "text": text}}]


def test_webhook_retries_a_5xx_then_delivers(hook_factory: Callable[..., Hook]) -> None:
    hook = hook_factory(statuses=[500, 503])
    sink = webhook_sink(hook.url, retries=3, backoff_s=0.01)
    sink(FINDING)
    assert sink.close(10)
    assert (sink.sent, sink.failed, sink.attempts) == (1, 0, 3)
    assert len(hook.bodies) == 3 and hook.bodies[0] == hook.bodies[2]


def test_webhook_failures_are_counted_never_raised(hook_factory: Callable[..., Hook]) -> None:
    always_500 = hook_factory(statuses=[500] * 10)
    sink = webhook_sink(always_500.url, retries=2, backoff_s=0.01)
    sink(FINDING)
    assert sink.close(10)
    assert (sink.sent, sink.failed, sink.attempts) == (0, 1, 3)
    assert "HTTP 500" in sink.errors[0]

    client_error = hook_factory(statuses=[404])
    sink = webhook_sink(client_error.url, retries=3, backoff_s=0.01)
    sink(FINDING)
    assert sink.close(10)
    assert (sink.failed, sink.attempts) == (1, 1), "a 4xx is not retried"

    refused = webhook_sink("http://127.0.0.1:9/nothing-listens", retries=1, backoff_s=0.01, timeout=1.0)
    refused(FINDING)
    assert refused.close(10)
    assert refused.failed == 1 and refused.attempts == 2 and refused.last_error


def test_a_hanging_endpoint_never_stalls_the_watcher(tmp_path: Path, hook_factory: Callable[..., Hook]) -> None:
    hook = hook_factory(hang=True)
    sink = webhook_sink(hook.url, timeout=20.0, queue_size=2)
    write_run(tmp_path / "run", "CLIP_SATURATION", n_steps=400, seed=1, samples_every=0)
    watcher = RunWatcher(tmp_path / "run", sinks=[sink])
    assert watcher.tick(), "a critical finding to send"
    wait_for(lambda: hook.bodies)  # the post is in flight and the endpoint does not answer
    t0 = time.perf_counter()
    for _ in range(5):  # one in flight, two queued, the rest dropped and counted
        sink(FINDING)
    assert time.perf_counter() - t0 < 3.0  # the endpoint hangs for 20 s: a blocking call would take that
    assert sink.dropped == 3 and sink.pending == 3
    t0 = time.perf_counter()
    assert sink.close(0.2) is False
    assert time.perf_counter() - t0 < 5.0  # not the 20 s the hanging post could take
    assert watcher.tick() == [] and watcher.errors == []


def test_webhook_sink_rejects_a_url_that_is_not_http() -> None:
    with pytest.raises(ValueError, match="http"):
        webhook_sink("hooks.slack.com/services/x")


# -- the watcher ------------------------------------------------------------------------------
def test_tails_a_writer_process_reporting_each_finding_once_and_escalation_again(
    tmp_path: Path, writer: Callable[..., subprocess.Popen[str]], hook_factory: Callable[..., Hook]
) -> None:
    # KL_BLOWUP seed 1: a warn-level finding from about step 450, critical from about 550
    run, go = tmp_path / "run", tmp_path / "go"
    hook = hook_factory()
    sink = webhook_sink(hook.url)
    seen: list[Finding] = []
    watcher = RunWatcher(run, sinks=[sink, seen.append])
    proc = writer(str(run), "KL_BLOWUP", "--seed", "1", "--steps", "600", "--pause-at", "500", "--go", str(go))

    def kl_at(severity: str) -> bool:
        watcher.tick()
        return any(f.signature_id == "KL_BLOWUP" and f.severity == severity for f in seen)

    wait_for(lambda: kl_at("warn"), timeout=60)
    assert watcher.steps <= 500  # the writer is paused: the warning came before the blow-up
    go.touch()
    wait_for(lambda: proc.poll() is not None, timeout=60)
    assert proc.returncode == 0
    watcher.tick()  # the compacted run
    assert [(f.signature_id, f.severity) for f in seen if f.signature_id == "KL_BLOWUP"] == [("KL_BLOWUP", "warn"), ("KL_BLOWUP", "critical")]
    assert len({(f.signature_id, f.severity) for f in seen}) == len(seen), "no finding reported twice"
    assert watcher.tick() == []
    assert sink.close(10)
    assert [b["text"].split("*")[1] for b in hook.bodies if "KL_BLOWUP" in b["text"]] == ["WARN", "CRITICAL"]
    assert not (run / "steps").exists() and (run / "steps.parquet").exists()
    same_as_full_doctor(watcher, run)


def test_survives_a_writer_killed_mid_run(tmp_path: Path, writer: Callable[..., subprocess.Popen[str]]) -> None:
    run = tmp_path / "run"
    proc = writer(str(run), "CLIP_SATURATION", "--seed", "1", "--steps", "400", "--hang")
    watcher = RunWatcher(run)
    assert proc.stdout is not None
    wait_for(lambda: proc.stdout.readline().strip() == "hanging", timeout=60)
    proc.send_signal(signal.SIGKILL)
    proc.wait(10)
    # what a kill leaves behind: a half-written temp part and a torn event line
    (run / "steps" / ".part-000099.parquet.deadbeef.tmp").write_bytes(b"PAR1 torn \x00" * 20)
    with open(run / "events.jsonl", "a", encoding="utf-8") as fh:
        fh.write('{"timestamp": 1.0, "kind": "chec')
    new = watcher.tick()
    assert [(f.signature_id, f.severity) for f in new] == [("CLIP_SATURATION", "critical")]
    assert watcher.steps == 400 and watcher.tick() == []
    same_as_full_doctor(watcher, run)


def test_waits_for_a_run_that_does_not_exist_yet(tmp_path: Path) -> None:
    run = tmp_path / "later" / "run"
    watcher = RunWatcher(run)
    assert watcher.tick() == [] and watcher.status == "waiting for run"
    rec = Recorder(run, capture_env=False, install_handlers=False)
    assert rec.flush()
    assert watcher.tick() == [] and watcher.status == "no steps yet"  # a manifest, no steps
    rec.close()
    synth = make_run("ENTROPY_COLLAPSE", n_steps=400, seed=3)
    rows = _step_rows(synth)
    with Recorder(run, capture_env=False, install_handlers=False) as rec:  # resumes it
        log_chunk(rec, synth, rows, 0, 400)
        new = watcher.tick()
    assert [f.signature_id for f in new] == ["ENTROPY_COLLAPSE"]
    assert watcher.status == "watching" and watcher.errors == []


def test_reads_incrementally(tmp_path: Path) -> None:
    run = tmp_path / "run"
    synth = make_run("healthy:steady", n_steps=300, seed=2)
    rows = _step_rows(synth)
    rec = Recorder(run, capture_env=False, install_handlers=False, steps_per_flush=10**6, flush_interval_s=3600)
    for lo in range(0, 200, 20):
        log_chunk(rec, synth, rows, lo, lo + 20)  # ten parts
    watcher = RunWatcher(run)
    watcher.tick()
    assert (watcher.files_read, watcher.diagnoses, watcher.steps) == (10, 1, 200)
    watcher.tick()
    assert (watcher.files_read, watcher.diagnoses) == (10, 1), "nothing new: no read, no diagnosis"
    log_chunk(rec, synth, rows, 200, 220)
    watcher.tick()
    assert (watcher.files_read, watcher.diagnoses, watcher.steps) == (11, 2, 220), "only the new part is read"
    rec.close()  # compaction replaces the eleven parts with steps.parquet
    watcher.tick()
    assert (watcher.files_read, watcher.steps) == (12, 220)
    same_as_full_doctor(watcher, run)


# Runs whose findings exercise steps, samples, reward components, kl_positional and PPO columns.
# Three run in the quick subset; the rest are marked slow (about 10 s each).
EQUIVALENCE_RUNS = [
    pytest.param("KL_BLOWUP", 1, id="KL_BLOWUP-1"),
    pytest.param("REWARD_HACK_LENGTH", 1, id="REWARD_HACK_LENGTH-1"),
    pytest.param("healthy:sparse_logging", 3, id="healthy-sparse_logging-3"),
    *[pytest.param(kind, seed, id=f"{kind}-{seed}", marks=pytest.mark.slow) for kind, seed in (
        ("REPETITION_SPIRAL", 2), ("DEGENERATE_GROUPS", 1), ("VALUE_DIVERGENCE", 1),
        ("healthy:reasoning_growth", 0), ("healthy:easy_task", 4),
    )],
]


@pytest.mark.parametrize("kind,seed", EQUIVALENCE_RUNS)
def test_incremental_diagnosis_equals_a_fresh_diagnose_path(tmp_path: Path, kind: str, seed: int) -> None:
    run = tmp_path / "run"
    synth = make_run(kind, n_steps=480, seed=seed)
    rows = _step_rows(synth)
    watcher = RunWatcher(run)
    rec = Recorder(run, capture_env=False, install_handlers=False, steps_per_flush=10**6, flush_interval_s=3600)
    for lo, hi in ((0, 200), (200, 280), (280, 480)):  # live: parts and a growing open sample shard
        log_chunk(rec, synth, rows, lo, hi, samples_every=4)
        watcher.tick()
        same_as_full_doctor(watcher, run)
    rec.close()  # compacted
    watcher.tick()
    same_as_full_doctor(watcher, run)
    # resumed: steps.parquet goes back to a part; steps 470.. are logged again (duplicates while live)
    with Recorder(run, capture_env=False, install_handlers=False, steps_per_flush=10**6, flush_interval_s=3600) as rec:
        log_chunk(rec, synth, rows, 470, 480, samples_every=4)
        watcher.tick()
        same_as_full_doctor(watcher, run)
    watcher.tick()
    same_as_full_doctor(watcher, run)


def cached_features_hold_their_views(watcher: RunWatcher) -> None:
    """Each feature table the watcher updates by deltas holds exactly what its SQL gives over all rows."""
    tables = watcher._tables
    assert tables is not None and tables.cached
    for view in tables.cached:
        cache, full = f"live_cache_{view}", f"v1.live_src_{view}"
        ((differ,),) = tables.con.execute(
            f"SELECT count(*) FROM ((SELECT * FROM {cache} EXCEPT ALL SELECT * FROM {full}) "
            f"UNION ALL (SELECT * FROM {full} EXCEPT ALL SELECT * FROM {cache}))"
        ).fetchall()
        assert differ == 0, f"{view}: {differ} rows differ"


def test_feature_caches_follow_the_run_by_deltas(tmp_path: Path) -> None:
    run = tmp_path / "run"
    synth = make_run("REF_POLICY_DRIFT_ASYMMETRY", n_steps=1100, seed=1)  # logs kl_positional and samples
    rows = _step_rows(synth)
    watcher = RunWatcher(run)
    rec = Recorder(run, capture_env=False, install_handlers=False, steps_per_flush=10**6, flush_interval_s=3600)
    how = []
    # up to 1,000 steps a bin is one step; past that, two: the bins move once, at step 1,000
    for lo, hi in ((0, 600), (600, 990), (990, 1000), (1000, 1050), (1050, 1100)):
        log_chunk(rec, synth, rows, lo, hi, samples_every=2)
        watcher.tick()
        assert watcher._tables is not None
        how.append(watcher._tables.last_refresh)
        cached_features_hold_their_views(watcher)
    assert [h["doctor_binned"] for h in how] == ["all", "by bin", "by bin", "all", "by bin"]
    assert [h["feat_policy_kl_positional"] for h in how] == ["all", "by bin", "by bin", "all", "by bin"]
    assert [h["feat_reward_samples"] for h in how] == ["all", "by step", "by step", "by step", "by step"]
    for view in ("doctor_binned", "feat_policy_kl_positional", "feat_reward_samples"):
        assert watcher._tables.con.execute(f"SELECT count(*) FROM live_cache_{view}").fetchall()[0][0] > 0
    same_as_full_doctor(watcher, run)
    rec.close()  # compacted: every step's file changed
    watcher.tick()
    cached_features_hold_their_views(watcher)
    same_as_full_doctor(watcher, run)


def test_reads_one_copy_of_each_sample_shard(tmp_path: Path) -> None:
    """A listing may catch a shard twice (rlprobe.layout): the sealed copy wins, else the newest open one."""
    run = tmp_path / "run"
    write_run(run, "REWARD_HACK_LENGTH", n_steps=120, seed=1, samples_every=2)  # sealed shards, plain names
    shard = run / "samples" / "shard-00000.parquet"
    watcher = RunWatcher(run)

    def samples_held() -> int:
        watcher.tick()
        assert watcher._tables is not None
        return int(watcher._tables.con.execute("SELECT count(*) FROM live_samples").fetchall()[0][0])

    n = samples_held()
    assert n > 0
    stale = run / "samples" / "shard-00000.open-000009.parquet"
    stale.write_bytes(shard.read_bytes())  # an open version not yet deleted after sealing
    assert samples_held() == n
    stale.unlink()
    shard.rename(run / "samples" / "shard-00000.open-000003.parquet")  # still open: version 3 ...
    stale = run / "samples" / "shard-00000.open-000002.parquet"
    stale.write_bytes((run / "samples" / "shard-00000.open-000003.parquet").read_bytes())  # ... and 2
    assert samples_held() == n
    same_as_full_doctor(watcher, run)


def test_rank_sub_recordings_count_as_the_views_count_them(ranked_run: Path) -> None:
    watcher = RunWatcher(ranked_run)
    watcher.tick()
    assert watcher.steps == 5  # rank 1's steps never reach the steps view
    same_as_full_doctor(watcher, ranked_run)
    assert watcher._tables is not None
    ranks = watcher._tables.con.execute("SELECT rank, count(*) FROM v1.samples GROUP BY rank ORDER BY rank").fetchall()
    assert ranks == [(0, 10), (1, 15)]


def test_a_sink_that_raises_never_stops_the_watcher(tmp_path: Path) -> None:
    write_run(tmp_path / "run", "CLIP_SATURATION", n_steps=400, seed=1, samples_every=0)

    def broken(finding: Finding) -> None:
        raise RuntimeError("slack is down")

    got: list[Finding] = []
    watcher = RunWatcher(tmp_path / "run", sinks=[broken, got.append])
    new = watcher.tick()
    assert new and got == new
    assert watcher.errors == [f"sink broken: RuntimeError: slack is down"] * len(new)
    assert watcher.tick() == []


def test_a_file_vanishing_mid_read_is_retried_next_tick(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    write_run(tmp_path / "run", "CLIP_SATURATION", n_steps=400, seed=1, samples_every=0)
    real = live._list_run

    def listing_with_a_compacted_away_part(run_dir: Path) -> Any:
        out = real(run_dir)
        out.steps[str(run_dir / "steps" / "part-000007.parquet")] = (1, 1, 1)
        return out

    monkeypatch.setattr(live, "_list_run", listing_with_a_compacted_away_part)
    watcher = RunWatcher(tmp_path / "run")
    assert watcher.tick() == []
    assert "raced a compaction" in (watcher.last_error or "")
    monkeypatch.setattr(live, "_list_run", real)
    assert [f.signature_id for f in watcher.tick()] == ["CLIP_SATURATION"]
    assert watcher.last_error is None


def test_refuses_what_it_cannot_read(tmp_path: Path, newer_schema_run: Path, nested_root: Path) -> None:
    with pytest.raises(SchemaTooNew, match="upgrade rlprobe"):
        RunWatcher(newer_schema_run).tick()
    with pytest.raises(NotARecording, match="holds runs"):
        RunWatcher(nested_root).tick()
    (tmp_path / "file").write_text("x")
    with pytest.raises(NotARecording):
        RunWatcher(tmp_path / "file").tick()


def test_a_run_upgraded_to_a_newer_format_mid_watch_is_refused(tmp_path: Path) -> None:
    write_run(tmp_path / "run", "healthy:steady", n_steps=100, seed=0, samples_every=0)
    watcher = RunWatcher(tmp_path / "run")
    watcher.tick()
    set_schema_version(tmp_path / "run", 2)
    with pytest.raises(SchemaTooNew):
        watcher.tick()


def test_halt_policy_is_conservative_by_default() -> None:
    policy = HaltPolicy()
    assert policy.should_halt(FINDING)
    assert not policy.should_halt(FINDING.model_copy(update={"severity": "warn"}))
    assert not policy.should_halt(FINDING.model_copy(update={"confidence": 0.5}))
    assert not HaltPolicy(signatures={"ENTROPY_COLLAPSE"}).should_halt(FINDING)
    assert HaltPolicy(min_severity="warn", min_confidence=0.0).should_halt(FINDING.model_copy(update={"severity": "warn"}))
    with pytest.raises(ValueError):
        HaltPolicy(min_severity="fatal")


def test_halting_judges_every_finding_the_run_has_now_not_only_the_new_ones() -> None:
    """A critical finding reported at 58% confidence is not reported again when its confidence
    grows (tick() reports new findings and higher severities), but once it reaches the policy's
    70% the watcher's halting() names it."""
    watcher = RunWatcher("/nonexistent")
    watcher.findings = [FINDING.model_copy(update={"confidence": 0.58})]
    assert watcher.halting(HaltPolicy()) is None
    watcher.findings = [FINDING.model_copy(update={"severity": "warn", "signature_id": "X", "confidence": 0.99}),
                        FINDING.model_copy(update={"confidence": 0.85})]
    halting = watcher.halting(HaltPolicy())
    assert halting is not None and halting.signature_id == FINDING.signature_id and halting.confidence == 0.85


def test_importing_the_live_module_stays_cheap() -> None:
    code = "import sys, rlprobe.doctor.live; print(sorted(m for m in ('duckdb', 'torch', 'pyarrow') if m in sys.modules))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


# -- rlprobe watch ----------------------------------------------------------------------------
def watch(*args: Any) -> Any:
    return CliRunner().invoke(cli, ["watch", *map(str, args)], catch_exceptions=False)


def test_watch_cli_exit_codes_and_output(tmp_path: Path, newer_schema_run: Path, hook_factory: Callable[..., Hook]) -> None:
    write_run(tmp_path / "bad", "CLIP_SATURATION", n_steps=400, seed=1, samples_every=0)
    write_run(tmp_path / "good", "healthy:steady", n_steps=200, seed=0, samples_every=0)
    hook = hook_factory()

    result = watch(tmp_path / "bad", "--max-ticks", "2", "--poll", "0", "--webhook", hook.url)
    assert result.exit_code == 1
    assert result.stdout.count("CLIP_SATURATION") == 1 and "CRITICAL" in result.stdout
    assert len(hook.bodies) == 1 and "CLIP_SATURATION" in hook.bodies[0]["text"]

    result = watch(tmp_path / "bad", "--max-ticks", "1", "--json")
    [line] = result.stdout.splitlines()
    record = json.loads(line)
    assert (record["signature_id"], record["severity"], record["escalated_from"]) == ("CLIP_SATURATION", "critical", None)
    assert result.exit_code == 1

    assert watch(tmp_path / "good", "--max-ticks", "1").exit_code == 0
    result = watch(tmp_path / "not-yet", "--max-ticks", "2", "--poll", "0")
    # it waited, then said in one last line that the run never appeared: exit 2, not a silent 0
    assert result.exit_code == 2 and "waiting for run" in result.stderr
    assert result.stderr.splitlines()[-1].startswith("rlprobe: ") and "never appeared in 2 looks" in result.stderr

    result = watch(newer_schema_run, "--max-ticks", "1")
    assert result.exit_code == 2
    assert result.stderr.count("\n") == 1 and "upgrade rlprobe" in result.stderr

    assert watch(tmp_path / "good", "--webhook", "ftp://x").exit_code == 2


@pytest.mark.slow
def test_watch_cli_tails_a_live_run_and_stops_on_ctrl_c(tmp_path: Path, writer: Callable[..., subprocess.Popen[str]]) -> None:
    run = tmp_path / "run"
    proc = writer(str(run), "CLIP_SATURATION", "--seed", "1", "--steps", "400", "--hang")
    watcher = subprocess.Popen(
        [sys.executable, "-m", "rlprobe", "watch", str(run), "--poll", "0.2", "--json"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )
    try:
        assert watcher.stdout is not None
        line = wait_for(lambda: watcher.stdout.readline(), timeout=60)
        assert json.loads(line)["signature_id"] == "CLIP_SATURATION"
        watcher.send_signal(signal.SIGINT)
        assert watcher.wait(30) == 1
    finally:
        if watcher.poll() is None:
            watcher.kill()
        proc.kill()
