"""The HTML report: self-contained, escaped, findings overlaid and linked, on every kind of run.

The page is parsed with the standard library's HTMLParser, so the checks are about what a
browser would build, not about substrings. tests/test_report_browser.py opens it in Chromium.
"""

from __future__ import annotations

import json
import os
import time
from html.parser import HTMLParser
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from conftest import event, make_run
from rlprobe.cli import cli
from rlprobe.errors import NoStepsYet, NotARecording, RecordingNotFound
from rlprobe.report import ReportRefused, render_report
from rlprobe.report.data import BUCKETS, KEY_SERIES

NASTY_COMPLETION = "</textarea><script>alert(1)</script><!-- & \u2028 </pre> \"quoted\" 'x'"
NASTY_PROMPT = "</script><img src=x onerror=alert(2)>"


class Page(HTMLParser):
    """What a browser would see: scripts (attrs, text), every src/href, ids, the texts of <pre>s."""

    def __init__(self, html: str) -> None:
        super().__init__(convert_charrefs=True)
        self.scripts: list[tuple[dict[str, Any], str]] = []
        self.urls: list[tuple[str, str, str]] = []
        self.ids: set[str] = set()
        self.pre: list[tuple[str, str]] = []
        self.body: dict[str, Any] = {}
        self._script: dict[str, Any] | None = None
        self._pre: str | None = None
        self._text: list[str] = []
        self.feed(html)
        self.close()

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        a = {k: v or "" for k, v in attrs}
        if "id" in a:
            self.ids.add(a["id"])
        for key in ("src", "href", "action", "data", "poster"):
            if key in a:
                self.urls.append((tag, key, a[key]))
        if tag == "body":
            self.body = a
        if tag == "script":
            self._script, self._text = a, []
        if tag == "pre":
            self._pre, self._text = a.get("class", ""), []

    def handle_endtag(self, tag: str) -> None:
        if tag == "script" and self._script is not None:
            self.scripts.append((self._script, "".join(self._text)))
            self._script = None
        if tag == "pre" and self._pre is not None:
            self.pre.append((self._pre, "".join(self._text)))
            self._pre = None

    def handle_data(self, data: str) -> None:
        if self._script is not None or self._pre is not None:
            self._text.append(data)

    def payload(self) -> dict[str, Any]:
        [(_, text)] = [s for s in self.scripts if s[0].get("id") == "rlprobe-data"]
        return json.loads(text)


def nasty_run(root: Path) -> Path:
    """A closed run whose samples, events and config hold markup that must stay text."""
    run = root / "nasty"
    writer = make_run(run, 30, state="import", trainer_config={"note": "</script><b>bold</b>"},
                      extra_events=[event("checkpoint", 1_700_000_010.0, step=10, message="<img src=x onerror=alert(3)>")])
    writer.write_samples([
        {"step": 5, "sample_id": "evil-1", "rank": 0, "prompt_text": NASTY_PROMPT, "completion_text": NASTY_COMPLETION,
         "reward_total": 1.0, "capture_reason": "all"},
        {"step": 6, "sample_id": "plain-1", "rank": 0, "prompt_text": "p", "completion_text": "fine", "reward_total": 0.0,
         "capture_reason": "all"},
    ])
    return run


@pytest.fixture(scope="module")
def pathological_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A synthetic run (KL blow-up) the doctor has a critical finding with cited samples on."""
    from rlprobe.synth import write_run

    run = tmp_path_factory.mktemp("report") / "kl"
    write_run(run, "KL_BLOWUP", n_steps=400, seed=1)
    return run


@pytest.fixture(scope="module")
def pathological_page(pathological_run: Path, tmp_path_factory: pytest.TempPathFactory) -> tuple[str, Page]:
    out = render_report(pathological_run, tmp_path_factory.mktemp("out") / "kl.html")
    html = out.read_text(encoding="utf-8")
    return html, Page(html)


def test_the_report_loads_nothing_from_anywhere(pathological_page: tuple[str, Page]) -> None:
    html, page = pathological_page
    external = [u for u in page.urls if u[2] and not u[2].startswith("#")]
    assert not external, f"the report references outside resources: {external[:5]}"
    assert not [s for s in page.scripts if "src" in s[0]]
    assert "<link" not in html and "@import" not in html and "url(" not in html
    assert "http://" not in html.replace("http://www.w3.org", "")  # only in text, never loaded
    # uPlot itself is inlined (its banner names its home page, in a comment).
    assert any("uPlot" in text and len(text) > 40_000 for _, text in page.scripts)


def test_findings_are_overlaid_and_link_to_embedded_samples(pathological_page: tuple[str, Page]) -> None:
    _, page = pathological_page
    data = page.payload()
    [kl] = [f for f in data["findings"] if f["sig"] == "KL_BLOWUP"]
    assert kl["severity"] == "critical" and kl["first"] is not None and kl["colour"].startswith("#")
    kl_chart = next(c for c in data["charts"] if c["title"] == "kl_mean")
    assert kl["i"] in kl_chart["findings"]
    assert f"finding-{kl['i']}" in page.ids
    sample_links = [u for u in page.urls if u[1] == "href" and u[2].startswith("#sample-")]
    assert sample_links, "the finding's cited samples are not linked"
    assert all(u[2][1:] in page.ids for u in sample_links), "a sample link points at nothing"
    titles = [c["title"] for c in data["charts"]]
    key = [t for t in titles if t in KEY_SERIES]
    assert titles[0] == "reward_mean" and key == [k for k in KEY_SERIES if k in key], titles
    assert page.body["data-charts"] == str(len(data["charts"]))


def test_a_finding_is_drawn_on_the_series_it_is_about() -> None:
    from rlprobe.doctor.findings import Finding
    from rlprobe.report.data import _finding_series

    present = {"completion_len_mean", "reward_mean", "kl_mean", "kl_max", "reward_component.correct"}
    hack = Finding(signature_id="REWARD_HACK_LENGTH", severity="critical", confidence=0.9, explanation="",
                   evidence={"completion_len_baseline": 90.0, "reward_mean_before": 0.5, "reward_component.correct_during": 0.1})
    assert _finding_series(hack, present, ["reward_component.correct"]) == ["completion_len_mean", "reward_mean", "reward_components"]
    custom = Finding(signature_id="MY_SQL_DETECTOR", severity="warn", confidence=0.5, explanation="",
                     evidence={"metric": "kl_max", "kl_mean_peak": 3.0, "unrelated": 1})
    assert _finding_series(custom, present, []) == ["kl_max", "kl_mean"]
    assert _finding_series(Finding(signature_id="X", severity="info", confidence=0.1, explanation=""), present, []) == []


def test_every_chart_series_is_drawable(pathological_page: tuple[str, Page]) -> None:
    _, page = pathological_page
    for chart in page.payload()["charts"]:
        n = len(chart["x"])
        assert 0 < n <= BUCKETS and chart["x"] == sorted(chart["x"])
        for s in chart["series"]:
            assert len(s["mean"]) == len(s["min"]) == len(s["max"]) == n
            assert any(v is not None for v in s["mean"]), f"{chart['title']}: an all-null series is drawn"


def test_model_text_is_escaped(tmp_path: Path) -> None:
    out = render_report(nasty_run(tmp_path), tmp_path / "nasty.html")
    html = out.read_text(encoding="utf-8")
    page = Page(html)
    # What the browser builds: only the report's four scripts, and the completion as text.
    assert len(page.scripts) == 4, [a for a, _ in page.scripts]
    assert ("text completion", NASTY_COMPLETION) in page.pre
    assert ("text", NASTY_PROMPT) in page.pre
    assert "<script>alert(1)" not in html and "</textarea>" not in html and "<img src=x" not in html
    assert "&lt;/textarea&gt;&lt;script&gt;alert(1)&lt;/script&gt;" in html
    assert "<b>bold</b>" not in html
    assert page.payload()["events"][0]["message"] == "<img src=x onerror=alert(3)>"  # JSON keeps it as data


def test_json_island_cannot_close_its_script() -> None:
    from rlprobe.report.render import script_json

    text = script_json({"m": "</script><!--<script>&"})
    assert "<" not in text and ">" not in text and "&" not in text
    assert json.loads(text) == {"m": "</script><!--<script>&"}


@pytest.mark.parametrize("state", ["live", "crashed", "closed"])
def test_live_crashed_and_closed_runs(run_factory: Any, tmp_path: Path, state: str) -> None:
    run = run_factory(state, 12, samples_per_step=2, state=state)
    before = sorted(p.relative_to(run) for p in run.rglob("*"))
    out = render_report(run, tmp_path / f"{state}.html")
    page = Page(out.read_text(encoding="utf-8"))
    assert sorted(p.relative_to(run) for p in run.rglob("*")) == before, "the report wrote into the recording"
    assert state in out.read_text(encoding="utf-8")
    charts = {c["title"]: c for c in page.payload()["charts"]}
    assert set(charts) >= {"reward_mean", "reward components", "kl_mean", "entropy_mean", "loss"}
    assert [s["label"] for s in charts["reward components"]["series"]] == ["correct", "format"]
    assert "sample-0" in page.ids


def test_a_live_run_with_a_step_logged_twice_draws_the_latest(tmp_path: Path) -> None:
    run = tmp_path / "dup"
    writer = make_run(run, [0, 1, 2, 3, 4], state="live")
    writer.write_steps([{"step": 2, "wall_time": 1_700_000_100.0, "loss": 999.0}])  # step 2 again, later
    data = Page(render_report(run, tmp_path / "dup.html").read_text(encoding="utf-8")).payload()
    [loss] = next(c for c in data["charts"] if c["title"] == "loss")["series"]
    assert next(c for c in data["charts"] if c["title"] == "loss")["x"] == [0, 1, 2, 3, 4]
    assert loss["mean"][2] == loss["min"][2] == loss["max"][2] == 999.0
    kl = next(c for c in data["charts"] if c["title"] == "kl_mean")
    # the later row of step 2 did not log kl_mean: the step keeps the first write's, as after close()
    assert kl["x"] == [0, 1, 2, 3, 4] and kl["series"][0]["mean"][2] == 1001.0


def test_events_are_drawn_and_listed(run_factory: Any, tmp_path: Path) -> None:
    ckpts = [event("checkpoint", 1_700_000_000.0 + s, step=s, path=f"/ckpt/{s}") for s in range(300)]
    run = run_factory("events", 300, state="crashed", extra_events=ckpts)
    html = render_report(run, tmp_path / "events.html").read_text(encoding="utf-8")
    drawn = Page(html).payload()["events"]
    assert [e["step"] for e in drawn if e["kind"] == "checkpoint"] == list(range(300))
    assert [e for e in drawn if e["kind"] == "crash"][0]["step"] == 299  # logged without a step: placed by wall time
    assert html.count('<tr class="ev-checkpoint">') == 200 and "(200 of 300 listed)" in html
    assert '<tr class="ev-crash">' in html


def test_an_imported_source(tmp_path: Path) -> None:
    state = tmp_path / "out" / "trainer_state.json"
    state.parent.mkdir()
    history = [{"step": s, "loss": 1.0 / s, "reward": 0.1 * s, "kl": 0.001 * s, "entropy": 2.0 - 0.01 * s} for s in range(1, 40)]
    state.write_text(json.dumps({"global_step": 39, "logging_steps": 1, "log_history": history}))
    out = render_report(state, tmp_path / "imported.html")
    html = out.read_text(encoding="utf-8")
    titles = {c["title"] for c in Page(html).payload()["charts"]}
    assert {"reward_mean", "kl_mean", "entropy_mean", "loss"} <= titles
    assert str(state) in html  # the source is named, not the temporary recording
    assert sorted(p.name for p in state.parent.iterdir()) == ["trainer_state.json"]


def test_cli_writes_to_the_current_folder_and_prints_the_path(finished_run: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    result = CliRunner().invoke(cli, ["report", str(finished_run)])
    assert result.exit_code == 0, result.output
    path = Path(result.output.strip().splitlines()[-1])
    assert path == tmp_path / "finished-report.html" and path.is_file()
    assert path.stat().st_mode & 0o044, "the report should be readable like any file the user writes"
    assert "rendering report" not in result.output  # no progress bar outside a terminal


@pytest.mark.parametrize("args, message", [
    (["{missing}"], "no such file or directory"),
    (["{run}", "--out", "{run}/report.html"], "never written into a recording"),
    (["{root}"], "runs root"),
    (["{run}", "--out", "{tmp}/no/such/dir/r.html"], "no such directory"),
    (["{run}", "--config", "{tmp}/nope.toml"], "does not exist"),
    (["{run}", "--bogus"], "No such option"),
    ([], "Missing argument"),
])
def test_bad_arguments_get_one_line_and_exit_2(finished_run: Path, tmp_path: Path, args: list[str], message: str) -> None:
    values = {"missing": tmp_path / "missing", "run": finished_run, "root": finished_run.parent, "tmp": tmp_path}
    result = CliRunner().invoke(cli, ["report"] + [a.format(**values) for a in args])
    assert result.exit_code == 2, result.output
    lines = result.output.strip().splitlines()
    assert len(lines) == 1 and message in lines[0], result.output


def test_cli_refuses_the_default_path_inside_the_recording(finished_run: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(finished_run)
    result = CliRunner().invoke(cli, ["report", "."])
    assert result.exit_code == 2 and "never written into a recording" in result.output
    assert not list(finished_run.glob("*.html"))


def test_library_errors(tmp_path: Path, finished_run: Path) -> None:
    with pytest.raises(RecordingNotFound):
        render_report(tmp_path / "nope", tmp_path / "r.html")
    with pytest.raises(ReportRefused):
        render_report(finished_run, finished_run / "steps.html")
    (tmp_path / "empty").mkdir()
    with pytest.raises(NotARecording):
        render_report(tmp_path / "empty", tmp_path / "r.html")
    make_run(tmp_path / "starting", 0, state="live")  # a run that has not flushed a step yet
    with pytest.raises(NoStepsYet):
        render_report(tmp_path / "starting", tmp_path / "r.html")
    assert not (tmp_path / "r.html").exists()


def test_a_one_step_spike_survives_downsampling(tmp_path: Path) -> None:
    import pyarrow as pa
    import pyarrow.parquet as pq

    run = tmp_path / "spiky"
    make_run(run, 0, state="import")
    n = 9_000
    grad = [1.0] * n
    grad[4321] = 1000.0
    loss = [0.5] * n
    loss[777] = float("nan")
    pq.write_table(pa.table({"step": pa.array(range(n), pa.int64()), "grad_norm": grad, "loss": loss}), run / "steps.parquet")
    html = render_report(run, tmp_path / "spiky.html").read_text(encoding="utf-8")
    charts = {c["title"]: c for c in Page(html).payload()["charts"]}
    [g] = charts["grad_norm"]["series"]
    assert len(charts["grad_norm"]["x"]) == BUCKETS and charts["grad_norm"]["banded"]
    assert max(g["max"]) == 1000.0 and max(g["mean"]) < 1000.0  # the envelope keeps it, the mean dilutes it
    [lo] = charts["loss"]["series"]
    assert lo["nonfinite"] == 1 and "(loss: 1 non-finite value, not drawn)" in html


@pytest.mark.slow
def test_a_100k_step_report_stays_small(tmp_path: Path) -> None:
    """100k steps of 20 metrics and 3 reward components, 8 samples every 10 steps with ~2 kB
    completions: the file stays under 5 MB because series are bucketed and samples selected."""
    import numpy as np
    import pyarrow as pa
    import pyarrow.parquet as pq

    run = tmp_path / "big"
    make_run(run, 0, state="import")
    n = 100_000
    rng = np.random.default_rng(0)
    steps = np.arange(n)
    cols = {"step": pa.array(steps, pa.int64()), "wall_time": pa.array(1.7e9 + steps * 1.0)}
    for name in ("reward_mean", "reward_std", "kl_mean", "kl_max", "entropy_mean", "loss", "grad_norm", "clip_fraction",
                 "completion_len_mean", "max_len_hit_frac", "zero_variance_group_frac", "step_time_s", "lr", "ratio_mean",
                 "adv_std", "eos_rate", "logprob_mean", "completion_len_p95", "generation_time_s", "optimization_time_s"):
        cols[name] = pa.array(rng.normal(size=n).cumsum() / 100 + 1)
    for c in ("correct", "format", "length"):
        cols[f"reward_component.{c}"] = pa.array(rng.random(n))
    pq.write_table(pa.table(cols), run / "steps.parquet")
    sample_steps = np.repeat(steps[::10], 8)
    m = len(sample_steps)
    text = "lorem ipsum dolor sit amet " * 80
    samples = pa.table({
        "step": pa.array(sample_steps, pa.int64()), "rank": pa.array(np.zeros(m, np.int64)),
        "sample_id": pa.array([f"s{i}" for i in range(m)]), "prompt_text": pa.array(["question?"] * m),
        "completion_text": pa.array([text] * m), "reward_total": pa.array(rng.random(m)), "capture_reason": pa.array(["all"] * m),
    })
    (run / "samples").mkdir()
    pq.write_table(samples, run / "samples" / "shard-00000.parquet")
    t0 = time.perf_counter()
    out = render_report(run, tmp_path / "big.html")
    elapsed = time.perf_counter() - t0
    size = os.path.getsize(out)
    assert size < 5_000_000, f"{size} bytes"
    data = Page(out.read_text(encoding="utf-8")).payload()
    assert all(len(c["x"]) <= BUCKETS for c in data["charts"]) and len(data["charts"]) >= 10
    print(f"100k-step report: {size / 1e6:.2f} MB in {elapsed:.1f} s")
