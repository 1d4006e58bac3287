"""`rlprobe ui` in a real browser: headless Chromium (Debian's package, no browser download) drives
the dashboard served by `rlprobe ui` over a root of synthetic runs.

Chromium is driven over the DevTools protocol on a pipe (--remote-debugging-pipe: JSON messages
on file descriptors 3 and 4), so no Python browser package is needed. Checked: the table lists
the runs, two runs overlay on a chart with their findings drawn, a step appended to a live run
appears without a reload, an XSS payload in a completion stays text, and no script error or
Content-Security-Policy violation happens on any page. A screenshot is saved (to the path in
RLPROBE_UI_SCREENSHOT when set: that is how docs/ui.png is made).

Without a chromium binary the tests skip, except where RLPROBE_REQUIRE_BROWSER (set by .ci/run)
or CI is set: there they fail.
"""

from __future__ import annotations

import base64
import json
import os
import queue
import shutil
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any, Iterator

import pytest

pytest.importorskip("starlette")
pytest.importorskip("uvicorn")

from conftest import make_run, step_row  # noqa: E402
from rlprobe.record.writer import RunWriter  # noqa: E402
from rlprobe.schemas import RunManifest  # noqa: E402

FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--no-first-run", "--disable-background-networking",
         "--disable-extensions", "--disable-sync", "--hide-scrollbars", "--mute-audio"]
XSS_COMPLETION = "</pre><script>window.pwned=1;document.title='pwned'</script><img src=x onerror=\"window.pwned=2\">"


def chromium() -> str:
    for name in ("chromium", "chromium-browser"):
        found = shutil.which(name)
        if found:
            return found
    if os.path.exists("/usr/bin/chromium"):
        return "/usr/bin/chromium"
    if os.environ.get("RLPROBE_REQUIRE_BROWSER") or os.environ.get("CI"):
        pytest.fail("chromium is not installed, and CI must run the browser test (.ci/run installs Debian's chromium)")
    pytest.skip("chromium is not installed (apt-get install chromium)")


class Browser:
    """Headless Chromium over the DevTools protocol on a pipe: one page, commands and events."""

    def __init__(self, profile: Path) -> None:
        to_browser_r, self._to_browser = os.pipe()
        self._from_browser, from_browser_w = os.pipe()

        def fds() -> None:  # in the child: the protocol is read from fd 3 and written to fd 4
            os.dup2(to_browser_r, 3)
            os.dup2(from_browser_w, 4)

        # preexec_fn runs before the child closes the fds it was not told to keep: keep 3 and 4 too
        self.proc = subprocess.Popen(
            [chromium(), *FLAGS, "--remote-debugging-pipe", f"--user-data-dir={profile}", "about:blank"],
            pass_fds=(to_browser_r, from_browser_w, 3, 4), preexec_fn=fds, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        os.close(to_browser_r)
        os.close(from_browser_w)
        self._next_id = 0
        self._replies: dict[int, queue.Queue[dict[str, Any]]] = {}
        self._lock = threading.Lock()
        self.events: list[dict[str, Any]] = []
        threading.Thread(target=self._read, daemon=True).start()
        target = self.send("Target.createTarget", {"url": "about:blank"})["targetId"]
        self.session = self.send("Target.attachToTarget", {"targetId": target, "flatten": True})["sessionId"]
        for domain in ("Page", "Runtime", "Log"):
            self.send(f"{domain}.enable", session=True)
        self.send("Emulation.setDeviceMetricsOverride", {"width": 1400, "height": 1000, "deviceScaleFactor": 1, "mobile": False}, session=True)

    def _read(self) -> None:
        buffer = b""
        while True:
            try:
                chunk = os.read(self._from_browser, 1 << 16)
            except OSError:
                return
            if not chunk:
                return
            buffer += chunk
            while b"\0" in buffer:
                raw, buffer = buffer.split(b"\0", 1)
                message = json.loads(raw)
                if "id" in message:
                    with self._lock:
                        box = self._replies.get(message["id"])
                    if box is not None:
                        box.put(message)
                else:
                    self.events.append(message)

    def send(self, method: str, params: dict[str, Any] | None = None, session: bool = False, timeout_s: float = 60.0) -> dict[str, Any]:
        """Run one protocol command and return its result (AssertionError on a protocol error)."""
        with self._lock:
            self._next_id += 1
            msg_id = self._next_id
            self._replies[msg_id] = queue.Queue()
        message: dict[str, Any] = {"id": msg_id, "method": method, "params": params or {}}
        if session:
            message["sessionId"] = self.session
        os.write(self._to_browser, json.dumps(message).encode() + b"\0")
        try:
            reply = self._replies[msg_id].get(timeout=timeout_s)
        except queue.Empty:
            raise AssertionError(f"chromium did not answer {method} within {timeout_s} s") from None
        assert "error" not in reply, (method, reply["error"])
        return reply["result"]

    def goto(self, url: str) -> None:
        """Load url afresh (by way of about:blank: a change of #fragment alone would not reload) and wait until the page is ready."""
        self.send("Page.navigate", {"url": "about:blank"}, session=True)
        self.wait("location.href === 'about:blank'")
        self.send("Page.navigate", {"url": url}, session=True)
        self.wait("document.readyState === 'complete' && document.body && document.body.dataset.ready === '1'")

    def js(self, expression: str) -> Any:
        """The value of a JavaScript expression in the page (awaited when it is a promise)."""
        result = self.send("Runtime.evaluate", {"expression": expression, "returnByValue": True, "awaitPromise": True}, session=True)
        assert "exceptionDetails" not in result, result["exceptionDetails"]
        return result["result"].get("value")

    def wait(self, expression: str, timeout_s: float = 30.0) -> Any:
        """Poll the expression until it is truthy; its value."""
        deadline = time.monotonic() + timeout_s
        value = None
        while time.monotonic() < deadline:
            value = self.js(expression)
            if value:
                return value
            time.sleep(0.1)
        raise AssertionError(f"timed out after {timeout_s} s waiting for {expression} (last value {value!r}); "
                             f"page errors: {self.problems()}")

    def problems(self) -> list[str]:
        """Script exceptions, console errors and CSP violations seen so far."""
        out = []
        for e in self.events:
            method, params = e.get("method"), e.get("params", {})
            if method == "Runtime.exceptionThrown":
                out.append(params["exceptionDetails"].get("exception", {}).get("description") or params["exceptionDetails"]["text"])
            elif method == "Runtime.consoleAPICalled" and params.get("type") == "error":
                out.append(" ".join(str(a.get("value", a.get("description"))) for a in params.get("args", [])))
            elif method == "Log.entryAdded" and params["entry"]["level"] == "error":
                out.append(params["entry"]["text"])
        return out

    def screenshot(self, path: Path) -> bytes:
        height = int(self.js("Math.min(document.documentElement.scrollHeight, 4000)"))
        self.send("Emulation.setDeviceMetricsOverride", {"width": 1400, "height": height, "deviceScaleFactor": 1, "mobile": False}, session=True)
        time.sleep(0.5)
        data = base64.b64decode(self.send("Page.captureScreenshot", {"format": "png"}, session=True)["data"])
        self.send("Emulation.setDeviceMetricsOverride", {"width": 1400, "height": 1000, "deviceScaleFactor": 1, "mobile": False}, session=True)
        path.write_bytes(data)
        return data

    def close(self) -> None:
        try:
            self.send("Browser.close", timeout_s=10)
        except (AssertionError, OSError):
            pass
        try:
            self.proc.wait(10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
        os.close(self._to_browser)


def run_id_of(run_dir: Path) -> str:
    return json.loads((run_dir / "manifest.json").read_text())["run_id"]


@pytest.fixture(scope="module")
def root(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Two synthetic runs (KL blowing up, healthy), a live run, and a run holding an XSS payload."""
    from rlprobe.synth import write_run

    root = tmp_path_factory.mktemp("ui-browser") / "runs"
    write_run(root / "kl", "KL_BLOWUP", n_steps=400, seed=1)
    write_run(root / "ok", "healthy:steady", n_steps=400, seed=2)  # this seed logs kl_mean, as the overlay needs
    manifest = json.loads((root / "kl" / "manifest.json").read_text())
    manifest.update(name="KL blows up", tags=["demo", "beta 0.05"])
    (root / "kl" / "manifest.json").write_text(json.dumps(manifest))
    make_run(root / "live", 7, run_id="live", state="live")
    writer = make_run(root / "evil", 20, run_id="evil", state="import")
    writer.write_samples([{"step": 3, "sample_id": "evil-1", "rank": 0, "reward_total": 1.0, "capture_reason": "all",
                           "prompt_text": "<img src=x onerror=\"window.pwned=3\">", "completion_text": XSS_COMPLETION}])
    return root


@pytest.fixture(scope="module")
def server(root: Path) -> Iterator[str]:
    """`rlprobe ui ROOT` on a free port; its address."""
    proc = subprocess.Popen([sys.executable, "-m", "rlprobe", "ui", str(root), "--port", "0", "--poll", "0.5"],
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    assert proc.stdout is not None
    url = None
    deadline = time.monotonic() + 90
    while time.monotonic() < deadline and url is None:
        line = proc.stdout.readline()
        if "open http" in line:
            url = line.split("open ", 1)[1].strip()
        elif not line and proc.poll() is not None:
            break
    if url is None:
        proc.kill()
        raise AssertionError("rlprobe ui printed no address")
    threading.Thread(target=proc.stdout.read, daemon=True).start()  # keep its pipe drained
    yield url
    proc.terminate()
    proc.wait(30)


@pytest.fixture(scope="module")
def browser(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Browser]:
    b = Browser(tmp_path_factory.mktemp("chromium-profile"))
    yield b
    b.close()


def no_problems(browser: Browser, expected: str | None = None) -> None:
    """No script error, console error or CSP violation so far (but the one the test caused, if any)."""
    assert browser.js("document.body.dataset.errors") == "0", browser.js("Array.from(document.querySelectorAll('#js-errors li')).map(l => l.textContent)")
    assert [p for p in browser.problems() if expected is None or expected not in p] == []
    browser.events.clear()  # the next test answers for its own


def test_the_table_lists_the_runs(browser: Browser, server: str, root: Path) -> None:
    browser.goto(server)
    rows = browser.wait("document.querySelectorAll('#runs-table tbody tr').length === 4 && "
                        "Array.from(document.querySelectorAll('#runs-table tbody tr')).map(r => r.dataset.run)")
    assert set(rows) == {run_id_of(root / "kl"), run_id_of(root / "ok"), "live", "evil"}
    names = browser.js("Array.from(document.querySelectorAll('#runs-table td.name a')).map(a => a.textContent)")
    assert "KL blows up" in names and "live" in names  # the name, else the run_id
    assert browser.js("Array.from(document.querySelectorAll('#runs-table .tag')).map(t => t.textContent)").count("demo") == 1
    status = browser.js("document.querySelector('tr[data-run=\"live\"] .status').textContent")
    assert status == "live"
    # the most recently written runs are drawn on the usual charts, those none of them logged left out
    drawn = browser.wait("document.querySelectorAll('figure.chart').length >= 4 && "
                         "Array.from(document.querySelectorAll('figure.chart')).map(f => [f.dataset.metric, f.dataset.runsDrawn])")
    assert drawn[0][0] == "reward_mean" and all(n != "0" for _, n in drawn), drawn
    no_problems(browser)


def test_two_runs_overlay_on_a_chart_with_their_findings(browser: Browser, server: str, root: Path) -> None:
    kl, ok = run_id_of(root / "kl"), run_id_of(root / "ok")
    browser.goto(f"{server}#runs={kl},{ok}&metrics=kl_mean,reward_mean")
    chart = "document.querySelector('figure[data-metric=\"kl_mean\"]')"
    browser.wait(f"{chart} && {chart}.dataset.runsDrawn === '2'")
    # the doctor diagnoses in the background; the page picks its findings up on its own
    browser.wait(f"+{chart}.dataset.findingsDrawn >= 1", timeout_s=90)
    assert browser.js(f"{chart}.querySelectorAll('canvas').length") >= 1
    assert browser.js(f"{chart}.querySelector('.chart-legend').textContent").count("step") == 2
    cell = browser.wait(f"(document.querySelector('tr[data-run=\"{kl}\"] td:last-child') || {{}}).textContent.includes('KL_BLOWUP') && "
                        f"document.querySelector('tr[data-run=\"{kl}\"] td:last-child').textContent", timeout_s=90)
    assert "critical" in cell
    no_problems(browser)


def test_a_step_appended_to_a_live_run_appears_without_a_reload(browser: Browser, server: str, root: Path) -> None:
    browser.goto(f"{server}#runs=live&metrics=kl_mean,reward_mean")
    chart = "document.querySelector('figure[data-metric=\"kl_mean\"]')"
    browser.wait(f"{chart} && {chart}.dataset.maxStep === '6'")
    browser.js("window.notReloaded = true")
    writer = RunWriter(root / "live", RunManifest(run_id="live"))  # what the recorder's next flush writes
    writer.write_steps([step_row(s) for s in (7, 8, 9)])
    t0 = time.monotonic()
    browser.wait(f"{chart}.dataset.maxStep === '9'", timeout_s=20)
    seconds = time.monotonic() - t0
    assert browser.js("window.notReloaded") is True
    assert browser.js("document.querySelector('tr[data-run=\"live\"]').dataset.steps") == "10"
    print(f"a flushed step was drawn {seconds:.1f} s after it was written")
    no_problems(browser)


def test_an_xss_payload_in_a_completion_stays_text(browser: Browser, server: str) -> None:
    browser.goto(f"{server}run?id=evil")
    browser.wait("document.body.dataset.samples === '1'")
    assert browser.js("window.pwned") is None
    assert browser.js("document.title") != "pwned"
    assert browser.js("document.querySelectorAll('script').length") == 3  # the page's own: config island, uPlot, ui.js
    assert browser.js("document.querySelectorAll('img').length") == 0
    shown = browser.js("document.querySelector('#sample-list pre.completion').textContent")
    assert shown == XSS_COMPLETION
    no_problems(browser)


def test_the_console_runs_a_query_and_charts_it(browser: Browser, server: str) -> None:
    browser.goto(f"{server}#runs=live&metrics=kl_mean")
    browser.js("document.getElementById('sql').value = 'SELECT run_id, step, kl_mean FROM steps WHERE run_id = \\'live\\' ORDER BY step'")
    browser.js("document.getElementById('sql-run').click()")
    rows = browser.wait("document.body.dataset.sqlRows")
    assert int(rows) >= 7
    browser.js("document.getElementById('sql-chart').click()")
    browser.wait("document.querySelectorAll('#sql-chart-box canvas').length >= 1")
    browser.js("document.getElementById('sql').value = 'COPY (SELECT 1) TO \\'x.csv\\''")
    browser.js("document.getElementById('sql-run').click()")
    browser.wait("document.body.dataset.sqlRows === 'error'")
    assert "one SELECT" in browser.js("document.getElementById('sql-status').textContent")
    no_problems(browser, expected="status of 400")  # the refused COPY, as the browser logs any 4xx


def test_the_run_and_compare_pages_render(browser: Browser, server: str, root: Path) -> None:
    kl, ok = run_id_of(root / "kl"), run_id_of(root / "ok")
    browser.goto(f"{server}run?id={kl}")
    browser.wait("document.querySelectorAll('#finding-list article.finding').length >= 1", timeout_s=90)
    assert browser.js("document.getElementById('run-name').textContent").startswith("KL blows up")
    assert int(browser.js("document.body.dataset.rendered")) >= 3
    browser.goto(f"{server}compare?a={ok}&b={kl}")
    browser.wait("document.querySelectorAll('#divergence-table tbody tr').length >= 1", timeout_s=60)
    assert "kl_mean" in browser.js("document.getElementById('divergence-table').textContent")
    no_problems(browser)


def test_screenshot(browser: Browser, server: str, root: Path, tmp_path: Path) -> None:
    kl, ok = run_id_of(root / "kl"), run_id_of(root / "ok")
    browser.goto(f"{server}#runs={kl},{ok}&metrics=kl_mean,reward_mean,entropy_mean,completion_len_mean")
    chart = "document.querySelector('figure[data-metric=\"kl_mean\"]')"
    browser.wait(f"+{chart}.dataset.findingsDrawn >= 1", timeout_s=90)
    browser.js("window.scrollTo(0, 0)")
    shot = tmp_path / "ui.png"
    data = browser.screenshot(shot)
    assert data[:8] == b"\x89PNG\r\n\x1a\n" and len(data) > 50_000, len(data)
    if os.environ.get("RLPROBE_UI_SCREENSHOT"):
        shutil.copyfile(shot, os.environ["RLPROBE_UI_SCREENSHOT"])
    print(f"screenshot: {shot}")
