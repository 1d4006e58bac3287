"""The report in a real browser: headless Chromium opens the file (offline), the charts render, no
JavaScript error is raised, model text stays text, and a screenshot is saved.

Chromium is driven from the command line (--dump-dom, --screenshot), so no Python browser
package is needed. Without a chromium binary the tests skip, except where
RLPROBE_REQUIRE_BROWSER (set by .ci/run) or CI is set: there they fail.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest

from rlprobe.report import render_report

FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--no-first-run", "--disable-background-networking"]


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


def open_in_chromium(html: Path, profile: Path, *extra: str, fragment: str = "") -> str:
    """Load the file (at #fragment) in headless Chromium and return its stdout (the DOM with --dump-dom)."""
    cmd = [chromium(), *FLAGS, f"--user-data-dir={profile}", "--virtual-time-budget=5000", *extra, html.resolve().as_uri() + fragment]
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=180)
    assert done.returncode == 0, done.stderr[-2000:]
    return done.stdout


def body_attrs(dom: str) -> dict[str, str]:
    match = re.search(r"<body([^>]*)>", dom)
    assert match, dom[:500]
    return dict(re.findall(r'([\w-]+)="([^"]*)"', match.group(1)))


@pytest.fixture(scope="module")
def report(tmp_path_factory: pytest.TempPathFactory) -> Path:
    from rlprobe.synth import write_run

    root = tmp_path_factory.mktemp("browser")
    run = root / "kl"
    write_run(run, "KL_BLOWUP", n_steps=300, seed=1)
    return render_report(run, root / "kl-report.html")


def test_charts_render_without_javascript_errors(report: Path, tmp_path: Path) -> None:
    dom = open_in_chromium(report, tmp_path / "profile", "--dump-dom")
    body = body_attrs(dom)
    assert body.get("data-errors") == "0", re.findall(r"<li>JavaScript error:[^<]*</li>", dom)
    assert int(body["data-charts"]) >= 4
    assert body["data-rendered"] == body["data-charts"], body
    assert dom.count("<canvas") >= int(body["data-charts"])
    assert 'class="u-legend' in dom  # uPlot built its legends
    assert "KL_BLOWUP" in dom


def visible_samples(dom: str) -> dict[int, int]:
    """Sample cards the page shows: {card number: step}."""
    cards = re.findall(r'<article class="sample[^"]*"([^>]*)>', dom)
    out = {}
    for attrs in cards:
        a = dict(re.findall(r'([\w-]+)="([^"]*)"', attrs))
        if "hidden" not in a:
            out[int(a["id"].split("-")[1])] = int(a["data-step"])
    return out


def test_a_steps_link_zooms_every_chart_and_the_sample_browser(report: Path, tmp_path: Path) -> None:
    dom = open_in_chromium(report, tmp_path / "profile", "--dump-dom", fragment="#steps=100-200")
    ranges = re.findall(r'<figure class="chart"[^>]*data-x-range="([^"]*)"', dom)
    assert len(ranges) == int(body_attrs(dom)["data-charts"]) and set(ranges) == {"100,200"}, ranges
    shown = visible_samples(dom)
    assert shown and all(100 <= step <= 200 for step in shown.values()), shown
    assert body_attrs(dom).get("data-errors") == "0"


def test_a_sample_link_reveals_the_sample(report: Path, tmp_path: Path) -> None:
    html = report.read_text(encoding="utf-8")
    cited = re.findall(r'<a class="sample-link" href="#sample-(\d+)"', html)
    assert cited, "the finding cites no embedded sample"
    target = int(cited[-1])
    shown = visible_samples(open_in_chromium(report, tmp_path / "profile", "--dump-dom", fragment=f"#sample-{target}"))
    assert target in shown
    cited_cards = {int(n) for n in re.findall(r'<article class="sample cited" id="sample-(\d+)"', html)}
    assert set(shown) <= cited_cards, "the browser did not switch to the cited samples"


def test_a_broken_page_is_noticed(report: Path, tmp_path: Path) -> None:
    """The check above can fail: with a corrupt data island the page reports an error."""
    broken = tmp_path / "broken.html"
    broken.write_text(report.read_text(encoding="utf-8").replace('id="rlprobe-data">{', 'id="rlprobe-data">{oops', 1), encoding="utf-8")
    body = body_attrs(open_in_chromium(broken, tmp_path / "profile", "--dump-dom"))
    assert body.get("data-rendered") == "0" and body.get("data-errors", "0") != "0"


def test_model_text_stays_text_in_the_browser(tmp_path: Path) -> None:
    from conftest import make_run

    run = tmp_path / "nasty"
    writer = make_run(run, 20, state="import")
    writer.write_samples([{"step": 3, "sample_id": "evil", "rank": 0, "reward_total": 1.0, "capture_reason": "all",
                           "prompt_text": "<img src=x onerror=alert(2)>",
                           "completion_text": "</textarea><script>document.title='pwned'</script></pre>"}])
    out = render_report(run, tmp_path / "nasty.html")
    dom = open_in_chromium(out, tmp_path / "profile", "--dump-dom")
    assert dom.count("<script") == 4  # the report's own four; the completion made none
    assert "<img src=\"x\"" not in dom and "pwned</title>" not in dom
    assert "&lt;/textarea&gt;&lt;script&gt;document.title='pwned'&lt;/script&gt;" in dom
    assert body_attrs(dom).get("data-errors") == "0"


def test_screenshot(report: Path, tmp_path: Path) -> None:
    shot = tmp_path / "report.png"
    open_in_chromium(report, tmp_path / "profile", "--hide-scrollbars", "--window-size=1400,2000", f"--screenshot={shot}")
    data = shot.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n" and len(data) > 50_000, len(data)
    print(f"screenshot: {shot}")
