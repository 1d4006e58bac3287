"""`rlprobe ui`'s API and guard, driven with starlette's TestClient over runs in every state.

What a user of the dashboard relies on: every run is listed (a broken one as broken), charts
keep their spikes however long the run, findings and new steps show up, the console reads and
never writes, and nothing is served to a request that lacks the token or comes by another name.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("starlette")
pytest.importorskip("uvicorn")

from starlette.testclient import TestClient  # noqa: E402

from rlprobe.record.writer import RunWriter  # noqa: E402
from rlprobe.schemas import RunManifest  # noqa: E402
from rlprobe.ui.app import create_app  # noqa: E402

from conftest import T0, make_run, metric  # noqa: E402

LOCAL = {"host": "127.0.0.1:8765"}


def name_run(run_dir: Path, name: str | None = None, tags: list[str] | None = None) -> None:
    """Give a fixture run a name and tags, as Recorder(name=, tags=) would have."""
    manifest = json.loads((run_dir / "manifest.json").read_text())
    manifest.update(name=name, tags=tags or [])
    (run_dir / "manifest.json").write_text(json.dumps(manifest))


APPS: list[Any] = []


@pytest.fixture(autouse=True)
def _stop_doctors() -> Any:
    """Each test's apps stop their doctor (and its process) when the test ends."""
    yield
    while APPS:
        APPS.pop().state.doctor.stop()


def client(root: Path, **kwargs: Any) -> TestClient:
    """A client of the dashboard over root; the listing is never reused, so each request sees the files as they are."""
    app = create_app(root, allowed_hosts=kwargs.pop("allowed_hosts", None), **kwargs)
    app.state.catalog.runs_max_age_s = 0.0
    APPS.append(app)
    return TestClient(app)


def files_of(root: Path) -> dict[str, tuple[int, int]]:
    """Every file below root with its size and mtime: what must not change while the dashboard reads."""
    out = {}
    for dirpath, _, names in os.walk(root):
        for n in names:
            st = os.stat(os.path.join(dirpath, n))
            out[os.path.join(dirpath, n)] = (st.st_size, st.st_mtime_ns)
    return out


@pytest.fixture
def root(tmp_path: Path) -> Path:
    """A named and tagged closed run, a live run (no name: shown by its run_id) and a crashed run."""
    root = tmp_path / "runs"
    make_run(root / "a" / "named", 40, run_id="named", samples_per_step=3,
             trainer_config={"lr": 1e-6, "max_steps": 100})
    name_run(root / "a" / "named", "lr 1e-6 <b>bold</b>", ["sweep-3", "baseline"])
    make_run(root / "live", 7, run_id="live", state="live", samples_per_step=2)
    make_run(root / "crashed", 6, run_id="crashed", state="crashed")
    return root


def spiky_run(run_dir: Path, n_steps: int, spike_at: int, run_id: str = "spiky") -> None:
    """kl_mean is 0.0 at every step but one, where it is 100.0; reward_mean climbs by 1 a step."""
    writer = RunWriter(run_dir, RunManifest(run_id=run_id, created_at="2024-01-02T00:00:00+00:00"))
    rows = [{"step": s, "wall_time": T0 + 2.0 * s, "kl_mean": 100.0 if s == spike_at else 0.0, "reward_mean": float(s)}
            for s in range(n_steps)]
    for i in range(0, n_steps, 2500):
        writer.write_steps(rows[i:i + 2500])
    writer.compact()


# -- the runs table -------------------------------------------------------------------------------

def test_the_runs_table_lists_every_run_with_its_name_tags_status_and_progress(root: Path) -> None:
    got = client(root).get("/api/runs").json()
    runs = {r["run_id"]: r for r in got["runs"]}
    assert set(runs) == {"named", "live", "crashed"}
    named = runs["named"]
    assert (named["name"], named["tags"], named["status"], named["path"]) == ("lr 1e-6 <b>bold</b>", ["sweep-3", "baseline"], "closed", os.path.join("a", "named"))
    assert (named["steps_recorded"], named["last_step"], named["planned_steps"]) == (40, 39, 100)
    assert (runs["live"]["name"], runs["live"]["status"], runs["live"]["planned_steps"]) == ("live", "live", None)  # no name: its run_id
    assert runs["crashed"]["status"] == "crashed"
    assert all(r["findings"]["state"] == "pending" for r in got["runs"])  # the doctor has not run yet


def test_a_corrupted_run_is_listed_as_broken_and_the_others_still_are(root: Path) -> None:
    (root / "a" / "named" / "steps.parquet").write_bytes(b"PAR1 not parquet at all PAR1")
    ui = client(root)
    runs = {r["run_dir"]: r for r in ui.get("/api/runs").json()["runs"]}
    broken = runs[str(root / "a" / "named")]
    assert broken["status"] == "broken" and "steps.parquet" in broken["error"]
    assert {r["run_id"] for r in runs.values() if r["status"] != "broken"} == {"live", "crashed"}
    assert ui.get("/").status_code == 200
    series = ui.get("/api/series", params={"run": ["live", "crashed"], "metric": "reward_mean"}).json()
    assert set(series["series"]) == {"live", "crashed"}
    make_run(root / "later", 3, run_id="later")  # a run that appears after the break is listed too
    assert "later" in {r["run_id"] for r in ui.get("/api/runs").json()["runs"]}


def test_a_repaired_run_comes_back(root: Path, tmp_path: Path) -> None:
    good = (root / "crashed" / "steps").iterdir().__next__()
    saved = good.read_bytes()
    good.write_bytes(b"garbage")
    ui = client(root)
    assert {r["run_id"]: r["status"] for r in ui.get("/api/runs").json()["runs"]}.get("crashed") == "broken"
    good.write_bytes(saved)
    assert {r["run_id"]: r["status"] for r in ui.get("/api/runs").json()["runs"]}["crashed"] == "crashed"


def test_the_runs_are_listed_again_when_a_file_below_the_root_changes_and_only_then(root: Path) -> None:
    from conftest import event, step_row

    catalog = create_app(root, allowed_hosts=None).state.catalog
    catalog.runs_max_age_s = 0.01
    first = catalog.runs()
    time.sleep(0.05)
    assert catalog.runs() is first  # nothing changed: no query at all
    RunWriter(root / "live", RunManifest(run_id="live")).write_steps([step_row(7)])
    time.sleep(0.05)
    second = catalog.runs()
    assert second is not first and second.by_id("live")["last_step"] == 7
    RunWriter(root / "crashed", RunManifest(run_id="crashed")).append_event(event("checkpoint", T0 + 9, step=5))
    time.sleep(0.05)
    assert catalog.runs().by_id("crashed")["events"] == first.by_id("crashed")["events"] + 1


# -- charts ---------------------------------------------------------------------------------------

def test_the_metric_picker_lists_every_logged_metric_with_the_runs_that_logged_it(root: Path) -> None:
    make_run(root / "other", 5, run_id="other", columns=("reward_mean", "grad_norm"), components=(), extra=("clip_higher",))
    got = client(root).get("/api/metrics", params={"run": ["named", "other"]}).json()["metrics"]
    by = {m["metric"]: m for m in got}
    assert {"reward_mean", "kl_mean", "grad_norm", "reward_component.format", "extra.my_metric", "extra.clip_higher"} <= set(by)
    assert "step" not in by and "wall_time" not in by
    assert by["reward_mean"]["runs"] == ["named", "other"] and by["grad_norm"]["runs"] == ["other"]
    assert by["reward_mean"]["n"] == 45


def test_a_one_step_spike_survives_downsampling_at_any_length(tmp_path: Path) -> None:
    spiky_run(tmp_path / "runs" / "long", 100_000, spike_at=61_234, run_id="long")
    spiky_run(tmp_path / "runs" / "short", 1_000, spike_at=123, run_id="short")
    got = client(tmp_path / "runs").get("/api/series", params={"run": ["long", "short"], "metric": ["kl_mean", "reward_mean"], "bins": 500}).json()
    for run_id, spike in (("long", 61_234), ("short", 123)):
        kl = got["series"][run_id]["kl_mean"]
        assert len(kl["bin"]) <= 500
        assert max(kl["v_max"]) == 100.0 and kl["step_max"][kl["v_max"].index(100.0)] == spike
        assert min(kl["v_min"]) == 0.0 and sum(kl["n"]) == (100_000 if run_id == "long" else 1_000)
    reward = got["series"]["long"]["reward_mean"]
    assert (min(reward["v_min"]), max(reward["v_max"])) == (0.0, 99_999.0)  # both ends of the run are drawn


def test_nan_and_inf_are_counted_where_they_are_never_drawn_as_numbers(tmp_path: Path) -> None:
    writer = RunWriter(tmp_path / "runs" / "nan", RunManifest(run_id="nan"))
    writer.write_steps([{"step": s, "wall_time": T0 + s, "loss": {5: float("nan"), 7: float("inf")}.get(s, 1.0 * s)} for s in range(10)])
    cols = client(tmp_path / "runs").get("/api/series", params={"run": "nan", "metric": "loss", "bins": 100}).json()["series"]["nan"]["loss"]
    assert cols["nonfinite"] == [{"step": 5, "n": 1}, {"step": 7, "n": 1}]
    assert max(v for v in cols["v_max"] if v is not None) == 9.0 and 5 not in cols["step_max"]


def test_a_step_a_live_run_logged_twice_is_drawn_once_with_its_latest_value(tmp_path: Path) -> None:
    writer = RunWriter(tmp_path / "runs" / "resumed", RunManifest(run_id="resumed"))  # parts only: live
    writer.write_steps([{"step": s, "wall_time": T0 + s, "loss": 1.0} for s in range(5)])
    writer.write_steps([{"step": 3, "wall_time": T0 + 100, "loss": 50.0}])  # step 3 again, after a resume
    ui = client(tmp_path / "runs")
    assert ui.get("/api/runs").json()["runs"][0]["status"] == "live"
    cols = ui.get("/api/series", params={"run": "resumed", "metric": "loss", "bins": 100}).json()["series"]["resumed"]["loss"]
    at3 = cols["step_max"].index(3)
    assert (cols["v_min"][at3], cols["v_max"][at3], cols["n"][at3], sum(cols["n"])) == (50.0, 50.0, 1, 5)


def test_a_zoomed_chart_is_read_again_at_full_detail_in_that_range(tmp_path: Path) -> None:
    spiky_run(tmp_path / "runs" / "long", 100_000, spike_at=61_234, run_id="long")
    got = client(tmp_path / "runs").get("/api/series", params={"run": "long", "metric": "reward_mean", "bins": 400,
                                                                 "lo": 61_000, "hi": 61_399}).json()
    cols = got["series"]["long"]["reward_mean"]
    assert min(cols["step_min"]) == 61_000 and max(cols["step_max"]) == 61_399
    assert len(cols["bin"]) == 400 and set(cols["n"]) == {1}  # one step per bin: every step is drawn


def test_the_x_axis_can_be_wall_time_or_time_since_start(tmp_path: Path) -> None:
    spiky_run(tmp_path / "runs" / "r", 100, spike_at=50, run_id="r")
    ui = client(tmp_path / "runs")
    wall = ui.get("/api/series", params={"run": "r", "metric": "kl_mean", "x": "wall_time", "bins": 100}).json()["series"]["r"]["kl_mean"]
    rel = ui.get("/api/series", params={"run": "r", "metric": "kl_mean", "x": "relative", "bins": 100}).json()["series"]["r"]["kl_mean"]
    spike = wall["v_max"].index(100.0)
    assert wall["x_max"][spike] == T0 + 100.0 and rel["x_max"][rel["v_max"].index(100.0)] == 100.0
    assert min(rel["x_min"]) == 0.0


def test_a_chart_shows_the_query_it_ran_and_that_query_runs_in_rlprobe_query(root: Path) -> None:
    from click.testing import CliRunner

    from rlprobe.cli import cli

    got = client(root).get("/api/series", params={"run": ["named", "live"], "metric": "kl_mean", "bins": 10}).json()
    result = CliRunner().invoke(cli, ["query", str(root), got["sql_by_metric"]["kl_mean"], "--json"], catch_exceptions=False)
    assert result.exit_code == 0, result.output
    rows = {(r["run_id"], r["bin"]): r for r in json.loads(result.stdout)}
    for run_id in ("named", "live"):
        cols = got["series"][run_id]["kl_mean"]
        assert [rows[(run_id, b)]["v_max"] for b in cols["bin"]] == cols["v_max"]
    assert rows[("named", 9)]["v_max"] == metric("kl_mean", 39)


def test_a_run_that_cannot_be_read_is_reported_and_the_other_runs_are_drawn(root: Path) -> None:
    ui = client(root)
    ui.get("/api/runs")
    (root / "crashed" / "steps" / "part-000000.parquet").write_bytes(b"garbage")
    got = ui.get("/api/series", params={"run": ["named", "crashed"], "metric": "kl_mean"}).json()
    assert "named" in got["series"] and "crashed" in got["errors"]


def test_bad_chart_requests_get_one_line_and_a_status(root: Path) -> None:
    ui = client(root)
    assert ui.get("/api/series", params={"run": "nope", "metric": "kl_mean"}).status_code == 404
    assert "x must be one of" in ui.get("/api/series", params={"run": "named", "metric": "kl_mean", "x": "bogus"}).json()["error"]
    assert ui.get("/api/series", params={"run": "named", "metric": "kl_mean", "bins": "many"}).status_code == 400
    assert ui.get("/api/series", params={"run": "named", "metric": "kl_mean", "lo": "nan"}).status_code == 400
    assert ui.get("/api/series", params={"run": "named"}).status_code == 400
    none = ui.get("/api/series", params={"run": "named", "metric": "not_a_metric"}).json()
    assert none["series"] == {}  # a metric no run logged draws nothing, and is never put into SQL


# -- findings and live runs -----------------------------------------------------------------------

def test_findings_are_served_per_run_with_the_metrics_they_are_about(tmp_path: Path) -> None:
    from rlprobe.synth import write_run

    write_run(tmp_path / "runs" / "kl", "KL_BLOWUP", n_steps=300, seed=1)
    ui = client(tmp_path / "runs")
    (row,) = ui.get("/api/runs").json()["runs"]
    assert ui.app.state.doctor.drain() == 1
    (kl,) = ui.get("/api/findings", params={"run": row["run_id"]}).json()["findings"].values()
    assert kl["state"] == "ok"
    (finding,) = [f for f in kl["findings"] if f["signature_id"] == "KL_BLOWUP"]
    assert finding["first_step"] is not None and "kl_mean" in finding["metrics"] and finding["explanation"]
    summary = ui.get("/api/runs").json()["runs"][0]["findings"]
    assert summary["worst"]["signature_id"] == "KL_BLOWUP" and summary["worst"]["severity"] == "critical"
    assert ui.app.state.doctor.drain() == 0  # nothing changed: nothing diagnosed again


def test_a_step_flushed_to_a_live_run_shows_up_and_its_findings_follow(root: Path) -> None:
    from conftest import step_row

    ui = client(root)
    before = {r["run_id"]: r for r in ui.get("/api/runs").json()["runs"]}["live"]
    ui.app.state.doctor.drain()
    assert ui.get("/api/findings", params={"run": "live"}).json()["findings"]["live"]["version"] == before["version"]
    writer = RunWriter(root / "live", RunManifest(run_id="live"))  # the recorder's next flush
    writer.write_steps([step_row(s) for s in (7, 8)])
    after = {r["run_id"]: r for r in ui.get("/api/runs").json()["runs"]}["live"]
    assert after["version"] != before["version"] and after["last_step"] == 8
    cols = ui.get("/api/series", params={"run": "live", "metric": "kl_mean"}).json()["series"]["live"]["kl_mean"]
    assert max(cols["step_max"]) == 8
    assert ui.app.state.doctor.drain() == 1  # the live run, again, through its RunWatcher
    assert ui.get("/api/findings", params={"run": "live"}).json()["findings"]["live"]["version"] == after["version"]


def test_events_are_served_for_the_charts_without_lifecycle_bookkeeping(root: Path) -> None:
    from conftest import event

    make_run(root / "ck", 10, run_id="ck", extra_events=[event("checkpoint", T0 + 5.25, step=5, path="/ckpt/5")])
    ui = client(root)
    drawn = ui.get("/api/events", params={"run": "ck"}).json()["events"]
    assert [(e["kind"], e["at_step"]) for e in drawn] == [("checkpoint", 5)]
    listed = ui.get("/api/events", params={"run": "ck", "quiet": 1}).json()["events"]
    assert [e["kind"] for e in listed] == ["recorder_open", "checkpoint", "recorder_close"]
    crash = ui.get("/api/events", params={"run": "crashed"}).json()["events"]
    assert [(e["kind"], e["at_step"]) for e in crash] == [("crash", 5)]  # logged without a step: placed at the last one before it


# -- the run page and the compare page -----------------------------------------------------------

def test_a_run_page_gets_the_header_config_and_findings(root: Path) -> None:
    got = client(root).get("/api/run", params={"id": "named"}).json()
    run = got["run"]
    assert (run["name"], run["tags"], run["status"], run["trainer_config"]) == ("lr 1e-6 <b>bold</b>", ["sweep-3", "baseline"], "closed",
                                                                              {"lr": 1e-6, "max_steps": 100})
    assert got["findings"]["state"] in ("pending", "ok")
    assert client(root).get("/api/run", params={"id": "nope"}).status_code == 404


def test_the_sample_browser_searches_text_pages_and_filters(root: Path) -> None:
    ui = client(root)
    page = ui.get("/api/samples", params={"id": "named", "order": "top", "limit": 5}).json()
    assert page["matching"] == 120 and len(page["samples"]) == 5
    assert [s["reward_total"] for s in page["samples"]] == [0.2] * 5
    nxt = ui.get("/api/samples", params={"id": "named", "order": "top", "limit": 5, "offset": 5}).json()
    assert {s["sample_id"] for s in nxt["samples"]}.isdisjoint({s["sample_id"] for s in page["samples"]})
    found = ui.get("/api/samples", params={"id": "named", "q": "COMPLETION 17.", "order": "step"}).json()
    assert found["matching"] == 3 and {s["step"] for s in found["samples"]} == {17}
    ranged = ui.get("/api/samples", params={"id": "named", "lo": 10, "hi": 12, "order": "step"}).json()
    assert ranged["matching"] == 9 and {s["step"] for s in ranged["samples"]} == {10, 11, 12}
    cited = ui.get("/api/samples", params={"id": "named", "cited": "3-0-1,30-0-2"}).json()
    assert sorted(s["sample_id"] for s in cited["samples"]) == ["3-0-1", "30-0-2"]
    assert ui.get("/api/samples", params={"id": "named", "order": "sideways"}).status_code == 400


def test_the_compare_page_draws_diff_runs(tmp_path: Path) -> None:
    from rlprobe.synth import write_run

    write_run(tmp_path / "runs" / "kl", "KL_BLOWUP", n_steps=300, seed=1)
    write_run(tmp_path / "runs" / "ok", "healthy:easy_task", n_steps=300, seed=1)
    ui = client(tmp_path / "runs")
    ids = {r["path"]: r["run_id"] for r in ui.get("/api/runs").json()["runs"]}
    got = ui.get("/api/compare", params={"a": ids["ok"], "b": ids["kl"]}).json()
    assert got["a"]["run_id"] == ids["ok"] and got["b"]["run_id"] == ids["kl"]
    diff = got["diff"]
    assert diff["overlap_steps"] == 300 and diff["config_delta"]
    assert "kl_mean" in {d["metric"] for d in diff["divergences"]}


def test_the_static_report_downloads_as_a_file(root: Path) -> None:
    got = client(root).get("/report", params={"id": "named"})
    assert got.status_code == 200 and got.headers["content-disposition"] == 'attachment; filename="named-report.html"'
    assert got.text.startswith("<!DOCTYPE html>") and "lr 1e-6 &lt;b&gt;bold&lt;/b&gt;" in got.text


# -- the SQL console ------------------------------------------------------------------------------

def console(ui: TestClient, sql: str, **body: Any) -> Any:
    return ui.post("/api/query", json={"sql": sql, **body})


def test_the_console_runs_a_select_over_the_views_with_a_row_limit(root: Path) -> None:
    ui = client(root)
    got = console(ui, "SELECT run_id, count(*) AS n FROM steps GROUP BY run_id ORDER BY run_id").json()
    assert got["columns"] == ["run_id", "n"] and got["rows"] == [["crashed", 6], ["live", 7], ["named", 40]]
    assert got["types"] == ["VARCHAR", "BIGINT"] and got["truncated"] is False
    cut = console(ui, "SELECT step FROM steps ORDER BY run_id, step", limit=5).json()
    assert len(cut["rows"]) == 5 and cut["truncated"] is True
    text = console(ui, "SELECT repeat('x', 5000) AS long").json()
    assert len(text["rows"][0][0]) == 2001 and text["cells_cut"] == 1


@pytest.mark.parametrize("sql, says", [
    ("COPY (SELECT 1) TO 'out.csv'", "one SELECT"),
    ("CREATE TABLE t AS SELECT 1", "one SELECT"),
    ("ATTACH 'x.duckdb'", "one SELECT"),
    ("INSTALL httpfs", "one SELECT"),
    ("SET enable_external_access = true", "one SELECT"),
    ("SELECT 1; SELECT 2", "one SELECT"),
    ("SELECT * FROM read_text('/etc/hostname')", "disabled"),
    ("SELECT * FROM read_csv('/etc/passwd')", "disabled"),
    ("SELECT * FROM glob('/*')", "disabled"),
    ("SELEC 1", "syntax error"),
    ("", "empty"),
])
def test_the_console_refuses_anything_but_reading_the_root(root: Path, sql: str, says: str) -> None:
    ui = client(root)
    before = files_of(root.parent)
    got = console(ui, sql)
    assert got.status_code == 400 and says in got.json()["error"], got.json()
    assert files_of(root.parent) == before


def test_the_console_may_read_a_recordings_files_inside_the_root(root: Path) -> None:
    path = root / "a" / "named" / "steps.parquet"
    got = console(client(root), f"SELECT count(*) AS n FROM read_parquet('{path}')").json()
    assert got["rows"] == [[40]]


def test_a_long_query_is_stopped_at_the_time_limit(root: Path) -> None:
    ui = client(root, console_timeout_s=0.5)
    t0 = time.perf_counter()
    got = console(ui, "SELECT count(*) FROM range(100000000000) a, range(1000000) b WHERE a.range + b.range = -1")
    assert got.status_code == 400 and "stopped" in got.json()["error"]
    assert time.perf_counter() - t0 < 30


def test_the_console_takes_json_only(root: Path) -> None:
    ui = client(root)
    assert ui.post("/api/query", content="sql=SELECT 1", headers={"content-type": "application/x-www-form-urlencoded"}).status_code == 415
    assert ui.post("/api/query", content="{not json", headers={"content-type": "application/json"}).status_code == 400
    assert ui.get("/api/query").status_code == 405


def test_nothing_the_dashboard_serves_writes_into_the_root(root: Path) -> None:
    ui = client(root)
    before = files_of(root)
    ids = ["named", "live", "crashed"]
    for path, params in [("/", {}), ("/run", {"id": "named"}), ("/compare", {"a": "named", "b": "live"}), ("/api/runs", {}),
                         ("/api/metrics", {"run": ids}), ("/api/series", {"run": ids, "metric": ["kl_mean", "loss"]}),
                         ("/api/events", {"run": ids}), ("/api/run", {"id": "live"}), ("/api/samples", {"id": "live", "q": "x"}),
                         ("/api/compare", {"a": "named", "b": "crashed"}), ("/report", {"id": "named"})]:
        assert ui.get(path, params=params).status_code == 200, path
    ui.app.state.doctor.drain()
    console(ui, "SELECT * FROM samples")
    assert files_of(root) == before


# -- the guard ------------------------------------------------------------------------------------

def test_every_response_carries_a_strict_content_security_policy(root: Path) -> None:
    ui = client(root)
    for path in ("/", "/api/runs", "/static/ui.js", "/nope"):
        csp = ui.get(path).headers["content-security-policy"]
        assert "script-src 'self'" in csp and "unsafe-inline" not in csp and "unsafe-eval" not in csp and "default-src 'none'" in csp
    page = ui.get("/").text
    assert "<script>" not in page  # no inline script: every <script> has a src or is a JSON island
    assert page.count("<script") == 3 and 'type="application/json"' in page


def test_text_a_run_holds_never_becomes_markup_in_a_page(tmp_path: Path) -> None:
    evil = '</script><script>alert(1)</script><img src=x onerror=alert(2)>'
    make_run(tmp_path / "runs" / "evil", 3, run_id=evil)
    name_run(tmp_path / "runs" / "evil", evil, [evil])
    ui = client(tmp_path / "runs")
    for path, params in [("/run", {"id": evil}), ("/compare", {"a": evil, "b": evil}), ("/", {})]:
        page = ui.get(path, params=params).text
        assert "<script>alert" not in page and "<img src=x" not in page, path
    assert ui.get("/api/runs").headers["content-type"] == "application/json"


def test_only_the_dashboards_own_files_are_served(root: Path) -> None:
    ui = client(root)
    assert ui.get("/static/ui.js").status_code == 200 and ui.get("/static/uPlot.iife.min.js").status_code == 200
    for path in ("/static/app.py", "/static/..%2f..%2fapp.py", "/static/manifest.json", "/a/named/manifest.json", "/etc/passwd"):
        assert ui.get(path).status_code == 404, path


def test_it_answers_to_this_machines_names_only(root: Path) -> None:
    app = create_app(root)  # the default: loopback names only
    ui = TestClient(app)
    assert ui.get("/api/runs").status_code == 421  # Host: testserver, as a page on a rebinding domain would send
    assert ui.get("/api/runs", headers={"host": "evil.example:8765"}).status_code == 421
    for host in ("127.0.0.1:8765", "localhost:8765", "[::1]:8765"):
        assert ui.get("/api/runs", headers={"host": host}).status_code == 200, host


def test_with_a_token_every_request_needs_it(root: Path) -> None:
    ui = TestClient(create_app(root, token="s3cret-token", allowed_hosts=None))
    for path in ("/", "/api/runs", "/static/ui.js", "/run?id=named"):
        assert ui.get(path).status_code == 401, path
    assert ui.get("/?token=wrong").status_code == 401
    assert ui.get("/api/runs", headers={"authorization": "Bearer s3cret-token"}).status_code == 200
    first = ui.get("/run?id=named&token=s3cret-token", follow_redirects=False)
    assert first.status_code == 303 and first.headers["location"] == "/run?id=named"  # the token leaves the address
    assert "httponly" in first.headers["set-cookie"].lower() and "samesite=strict" in first.headers["set-cookie"].lower()
    assert ui.get("/api/runs").status_code == 200  # the cookie now carries it
    assert console(ui, "SELECT 1 AS one").json()["rows"] == [[1]]
    odd = ui.get("http://testserver//evil.example/run?id=a b&x=%26&token=s3cret-token", follow_redirects=False)
    assert odd.headers["location"] == "/evil.example/run?id=a+b&x=%26"  # stays on this server, re-encoded


# -- the command ----------------------------------------------------------------------------------

def test_the_read_side_imports_without_the_ui_extra() -> None:
    code = ("import sys, rlprobe, rlprobe.cli, rlprobe.doctor, rlprobe.store, rlprobe.report; "
            "bad = sorted(m for m in sys.modules if m.split('.')[0] in ('starlette', 'uvicorn', 'httpx', 'httpx2', 'anyio')); "
            "assert not bad, bad")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr


def test_without_the_extra_rlprobe_ui_says_what_to_install(root: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from click.testing import CliRunner

    from rlprobe.cli import cli

    monkeypatch.setitem(sys.modules, "uvicorn", None)
    result = CliRunner().invoke(cli, ["ui", str(root)])
    assert result.exit_code == 2 and 'pip install "rlprobe[ui]"' in result.stderr


def test_a_bad_path_is_one_line(tmp_path: Path) -> None:
    from click.testing import CliRunner

    from rlprobe.cli import cli

    result = CliRunner().invoke(cli, ["ui", str(tmp_path / "missing")])
    assert result.exit_code == 2 and result.stderr.strip().startswith("rlprobe:") and len(result.stderr.strip().splitlines()) == 1


def test_a_runs_root_in_object_storage_is_refused_in_one_line() -> None:
    from click.testing import CliRunner

    from rlprobe.cli import cli

    result = CliRunner().invoke(cli, ["ui", "s3://bucket/runs"])
    assert result.exit_code == 2 and "reads local runs" in result.stderr and len(result.stderr.strip().splitlines()) == 1


def start(root: Path, *args: str) -> tuple[subprocess.Popen[str], str]:
    """`rlprobe ui ROOT --port 0 ...` in a subprocess, and the address it printed."""
    proc = subprocess.Popen([sys.executable, "-m", "rlprobe", "ui", str(root), "--port", "0", *args],
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    deadline = time.monotonic() + 60
    assert proc.stdout is not None
    while time.monotonic() < deadline:
        line = proc.stdout.readline()
        if "open http" in line:
            return proc, line.split("open ", 1)[1].strip()
        if not line and proc.poll() is not None:
            break
    proc.kill()
    raise AssertionError("rlprobe ui printed no address")


def fetch(url: str) -> tuple[int, str]:
    """GET url as a browser would: following the redirect, keeping the cookie it sets."""
    import http.cookiejar
    import urllib.error
    import urllib.request

    opener = urllib.request.build_opener(urllib.request.HTTPCookieProcessor(http.cookiejar.CookieJar()))
    try:
        with opener.open(url, timeout=30) as response:
            return response.status, response.read().decode()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read().decode()


@pytest.mark.slow
def test_rlprobe_ui_serves_on_loopback_without_a_token(root: Path) -> None:
    proc, url = start(root)
    try:
        assert url.startswith("http://127.0.0.1:") and "token" not in url
        status, body = fetch(url + "api/runs")
        assert status == 200 and {r["run_id"] for r in json.loads(body)["runs"]} == {"named", "live", "crashed"}
    finally:
        proc.terminate()
        proc.wait(30)


@pytest.mark.slow
def test_rlprobe_ui_on_another_host_prints_a_token_and_requires_it(root: Path) -> None:
    proc, url = start(root, "--host", "0.0.0.0")
    try:
        assert "?token=" in url
        port = url.split(":")[2].split("/")[0]
        token = url.split("token=")[1]
        assert fetch(f"http://127.0.0.1:{port}/api/runs")[0] == 401
        assert fetch(f"http://127.0.0.1:{port}/api/runs?token=nope")[0] == 401
        assert fetch(f"http://127.0.0.1:{port}/?token={token}")[0] == 200  # redirected once, then the cookie
    finally:
        proc.terminate()
        proc.wait(30)


def test_a_taken_port_is_one_line(root: Path) -> None:
    import socket

    from click.testing import CliRunner

    from rlprobe.cli import cli

    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        result = CliRunner().invoke(cli, ["ui", str(root), "--port", str(port)])
    assert result.exit_code == 2 and "cannot listen on 127.0.0.1:" in result.stderr
