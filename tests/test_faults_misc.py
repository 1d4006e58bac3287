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
