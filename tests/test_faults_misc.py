"""Smaller hostile conditions: a webhook that answers with a huge body, a Ctrl-C, custom SQL that
tries to write files."""

from __future__ import annotations

import json
import signal
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest

from rlprobe.doctor.findings import Finding
from rlprobe.doctor.live import webhook_sink

from recorder_helpers import events, start_script, status, step_numbers, wait_for_line, write_script

FINDING = Finding(signature_id="KL_BLOWUP", severity="critical", confidence=0.9, first_step=10, explanation="kl went up")


def test_the_webhook_reads_a_bounded_part_of_a_huge_response(tmp_path):
    sent = {"bytes": 0}

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:  # noqa: N802
            self.rfile.read(int(self.headers["Content-Length"]))
            self.send_response(200)
            self.send_header("Content-Length", str(200 * 2**20))
            self.end_headers()
            chunk = b"x" * 2**20
            try:
                for _ in range(200):  # 200 MB, unless the client stops reading
                    self.wfile.write(chunk)
                    sent["bytes"] += len(chunk)
            except OSError:
                pass

        def log_message(self, *args: Any) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    server.daemon_threads = True
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        sink = webhook_sink(f"http://127.0.0.1:{server.server_address[1]}/hook", timeout=10)
        started = time.monotonic()
        sink(FINDING)
        assert sink.close(30)
        assert sink.sent == 1 and sink.failed == 0
        time.sleep(0.5)
        assert sent["bytes"] < 50 * 2**20, f"the sink read {sent['bytes'] / 2**20:.0f} MB of an answer it does not use"
        assert time.monotonic() - started < 20
    finally:
        server.shutdown()
        server.server_close()


# -- Ctrl-C -------------------------------------------------------------------------------------

CTRL_C_SCRIPTS = {
    "excepthook": """
import sys, time
from rlprobe import Recorder
rec = Recorder(sys.argv[1], capture_env=False, flush_interval_s=60)
for step in range(10):
    rec.log_step(step, loss=float(step))
print("ready", flush=True)
while True:
    time.sleep(0.05)
""",
    "with block": """
import sys, time
from rlprobe import Recorder
with Recorder(sys.argv[1], capture_env=False, flush_interval_s=60) as rec:
    for step in range(10):
        rec.log_step(step, loss=float(step))
    print("ready", flush=True)
    while True:
        time.sleep(0.05)
""",
}


@pytest.mark.parametrize("script", CTRL_C_SCRIPTS.values(), ids=CTRL_C_SCRIPTS.keys())
def test_a_run_stopped_with_ctrl_c_says_so_and_reads_as_interrupted(tmp_path, script):
    run = tmp_path / "run"
    proc = start_script(write_script(tmp_path, script), str(run))
    try:
        wait_for_line(proc, "ready")
        proc.send_signal(signal.SIGINT)
        _, err = proc.communicate(timeout=30)
    finally:
        proc.kill()
    assert "KeyboardInterrupt" in err
    assert step_numbers(run) == list(range(10))
    assert [e["kind"] for e in events(run)][-2:] == ["interrupted", "recorder_close"]
    assert status(run) == "interrupted"


# -- custom SQL detectors write nothing ----------------------------------------------------------

HEADER = "-- id: MY_DETECTOR\n-- severity: warn\n-- explanation: x\n"


@pytest.mark.parametrize("sql", [
    "SELECT 1 AS first_step; COPY (SELECT 1) TO '{out}'",
    "COPY (SELECT step FROM steps) TO '{out}'",
    "SELECT * FROM read_csv('{secret}')",
    "SELECT * FROM '{secret}'",
    "ATTACH '{out}' AS x",
    "SELECT min(step) AS first_step FROM steps, (SELECT * FROM read_text('{secret}')) WHERE run_id = ?",
], ids=["second statement", "copy", "read_csv", "a file as a table", "attach", "a reader in a subquery"])
def test_a_custom_detector_that_touches_files_is_refused_before_it_runs(tmp_path, sql):
    from conftest import make_run
    from rlprobe.doctor import diagnose_path
    from rlprobe.errors import RlprobeError

    run = tmp_path / "run"
    make_run(run, 30, state="closed")
    secret = tmp_path / "secret.csv"
    secret.write_text("a\n1\n")
    out = tmp_path / "pwned.csv"
    detectors = tmp_path / "detectors"
    detectors.mkdir()
    (detectors / "mine.sql").write_text(HEADER + sql.format(out=out, secret=secret) + "\n")
    with pytest.raises(RlprobeError, match="one SELECT over rlprobe's views"):
        diagnose_path(run, config={"doctor": {"custom_detectors": str(detectors)}})
    assert not out.exists()


def test_a_plain_custom_detector_still_runs(tmp_path):
    from conftest import make_run
    from rlprobe.doctor import diagnose_path

    run = tmp_path / "run"
    make_run(run, 30, state="closed")
    detectors = tmp_path / "detectors"
    detectors.mkdir()
    (detectors / "mine.sql").write_text(HEADER + "WITH s AS (SELECT * FROM steps WHERE run_id = ?)\n"
                                        "SELECT min(step) AS first_step, max(loss) AS max_loss FROM s HAVING count(*) > 0\n")
    [diagnosis] = diagnose_path(run, config={"doctor": {"custom_detectors": str(detectors)}})
    assert [f.signature_id for f in diagnosis.findings if f.signature_id == "MY_DETECTOR"] == ["MY_DETECTOR"]
