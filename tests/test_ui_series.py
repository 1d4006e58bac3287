"""`rlprobe ui`'s charts read from the step files directly give the bins the views give.

A chart of runs whose files need no merging reads only the step, wall_time and charted columns
of the files the steps view would read (ui_series_files, rlprobe.ui.stepfiles); every other run
goes through the views (ui_series). Checked here: on a root of runs in the states a user meets
(compacted, live parts, sparse steps, a column that appears late, NaN and inf, a rank
sub-recording, glob characters in a folder name) both ways give the same bins on every axis,
zoomed or not, and the same as binning the values in Python (the one definition both call,
v1.series_bins, is checked against that oracle on every axis); several metrics in one request
are each what it is asked alone; runs the view must merge (a step logged twice, overlapping
parts, one run_id in two folders) are read through the views; a live run's new part is drawn on
the next request and only that part is learned; a file replaced while it is read is not
trusted; nothing outside the root is read. The columns a chart read are held in memory for the
next one (rlprobe.ui.columns): charts from them are the files' charts to the bit, a live run's
new step is drawn from its new part, and what is held stays under its bound. Nothing here is
timed (benchmarks/ui.py is).
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from rlprobe.record.writer import RunWriter
from rlprobe.schemas import RunManifest
from rlprobe.ui import catalog as catalog_module
from rlprobe.ui.catalog import Catalog, dumps

from conftest import T0, make_run

ODD = "sweep[lr=1e-5] *?"  # glob characters: the reader must take them literally


def _values(rng: np.random.Generator, n: int) -> np.ndarray:
    """A random walk with a few spikes: distinct floats, so min and max name one step each."""
    walk = np.cumsum(rng.normal(0, 0.1, n)) + rng.normal(0, 0.01, n)
    walk[rng.integers(0, n, 3)] += 50.0
    return walk


def _write(run_dir: Path, run_id: str, steps: list[int], rng: np.random.Generator, *, per_part: int = 0,
           compact: bool = True, late: int | None = None, nonfinite: dict[int, float] | None = None) -> RunWriter:
    """A run of the given steps: kl_mean and reward_mean random walks, wall_time 1.5 s a step
    (plus jitter), extra.late from step `late` on, NaN/inf where nonfinite says."""
    writer = RunWriter(run_dir, RunManifest(run_id=run_id, created_at="2024-01-01T00:00:00+00:00"))
    kl, reward = _values(rng, len(steps)), _values(rng, len(steps))
    rows = []
    for i, s in enumerate(steps):
        row: dict[str, Any] = {"step": s, "wall_time": T0 + 1.5 * s + float(rng.uniform(0, 0.5)),
                               "kl_mean": float(kl[i]), "reward_mean": float(reward[i])}
        if nonfinite and s in nonfinite:
            row["kl_mean"] = nonfinite[s]
        if late is not None and s >= late:
            row["extra.late"] = float(s) * 0.25 + float(rng.normal())
        rows.append(row)
    per_part = per_part or len(rows)
    for i in range(0, len(rows), per_part):
        writer.write_steps(rows[i:i + per_part])
    if compact:
        writer.compact()
    return writer


@pytest.fixture
def mixed_root(tmp_path: Path) -> Path:
    """Runs the dashboard can chart from their files, each in a state a user meets."""
    rng = np.random.default_rng(15)
    root = tmp_path / "runs"
    _write(root / "closed", "closed", list(range(300)), rng, per_part=64, nonfinite={17: math.nan, 18: math.inf, 250: -math.inf})
    _write(root / "live", "live", list(range(250)), rng, per_part=37, compact=False, late=120)
    _write(root / "sparse", "sparse", list(range(0, 3000, 10)), rng)
    _write(root / ODD / "odd", "odd", list(range(5, 205)), rng, per_part=50, compact=False)
    _write(root / "ranked", "ranked", list(range(120)), rng)
    make_run(root / "ranked" / "rank-001", 120, rank=1, run_id="ranked", columns=("kl_mean", "grad_norm"))  # never drawn
    return root


def _catalog(root: Path) -> Catalog:
    cat = Catalog(root)
    cat.runs_max_age_s = 0.0  # each request sees the files as they are
    return cat


def _through_views(cat: Catalog, run_ids: list[str], metrics: list[str], **kwargs: Any) -> dict[str, Any]:
    """The chart as the dashboard drew it before it read files: every run through the views."""
    direct = cat._series_direct
    cat._series_direct = lambda *a, **k: None  # type: ignore[method-assign]
    try:
        cat._cache.clear()
        return json.loads(dumps(cat.series(run_ids, metrics, **kwargs)))
    finally:
        cat._series_direct = direct  # type: ignore[method-assign]


def _drawn(cat: Catalog, run_ids: list[str], metrics: list[str], **kwargs: Any) -> dict[str, Any]:
    cat._cache.clear()
    return json.loads(dumps(cat.series(run_ids, metrics, **kwargs)))


def assert_same_chart(got: dict[str, Any], want: dict[str, Any]) -> None:
    """Equal answers; the means only up to rounding (a float sum's order may differ)."""
    assert {k: v for k, v in got.items() if k != "series"} == {k: v for k, v in want.items() if k != "series"}
    assert {r: sorted(m) for r, m in got["series"].items()} == {r: sorted(m) for r, m in want["series"].items()}
    for run_id, by_metric in want["series"].items():
        for metric, cols in by_metric.items():
            mine = got["series"][run_id][metric]
            for name, values in cols.items():
                if name in ("x_mean", "v_mean"):  # None where a bin holds no finite value
                    assert [v is None for v in mine[name]] == [v is None for v in values], (run_id, metric, name)
                    assert [v for v in mine[name] if v is not None] == pytest.approx([v for v in values if v is not None],
                                                                                    rel=1e-12, abs=1e-12), (run_id, metric, name)
                else:
                    assert mine[name] == values, (run_id, metric, name)


RUNS = ["closed", "live", "sparse", "odd", "ranked"]
METRICS = ["kl_mean", "reward_mean", "extra.late", "grad_norm", "loss", "not_a_metric"]


@pytest.mark.parametrize("x", ["step", "wall_time", "relative"])
def test_charts_read_from_the_files_are_the_charts_read_through_the_views(mixed_root: Path, x: str) -> None:
    cat = _catalog(mixed_root)
    assert cat.series_plan(RUNS) is not None  # every one of these runs is read from its files
    span = {"step": (40.5, 190.0), "wall_time": (T0 + 60.0, T0 + 300.25), "relative": (10.0, 200.0)}[x]
    for run_ids in (RUNS, ["live"], ["sparse", "closed"], ["odd"]):
        for bins, lo, hi in ((1000, None, None), (7, None, None), (50, *span), (1, None, None), (20, span[0], None), (20, None, span[1])):
            got = _drawn(cat, run_ids, METRICS, x=x, bins=bins, lo=lo, hi=hi)
            want = _through_views(cat, run_ids, METRICS, x=x, bins=bins, lo=lo, hi=hi)
            assert_same_chart(got, want)
            assert got["series"], (run_ids, bins, lo, hi)
    drawn = _drawn(cat, RUNS, METRICS, x=x)
    assert "grad_norm" not in drawn["series"]["ranked"]  # rank 1's own metric: rank 0 never logged it
    assert set(drawn["series"]["live"]) == {"kl_mean", "reward_mean", "extra.late"}


@pytest.mark.parametrize("x", ["step", "wall_time", "relative"])
def test_the_bins_are_the_values_binned_in_python(mixed_root: Path, x: str) -> None:
    """An oracle that shares nothing with the SQL: the file's rows binned with numpy, on each axis
    (where a value occurs is its step on the step axis, its x and step on the time axes)."""
    import pyarrow.parquet as pq

    table = pq.read_table(mixed_root / "closed" / "steps.parquet", columns=["step", "wall_time", "kl_mean"]).to_pydict()
    steps, walls, values = np.array(table["step"]), np.array(table["wall_time"]), np.array(table["kl_mean"])
    xs = {"step": steps.astype(float), "wall_time": walls, "relative": walls - walls.min()}[x]
    bins = 13
    got = _drawn(_catalog(mixed_root), ["closed"], ["kl_mean"], x=x, bins=bins)["series"]["closed"]["kl_mean"]
    lo, hi = (0.0 if x == "relative" else float(xs.min())), float(xs.max())
    which = np.minimum(np.floor((xs - lo) * bins / (hi - lo)), bins - 1).astype(int)
    names = ("bin", "n", "x_min", "v_min", "step_min", "x_max", "v_max", "step_max", "x_mean", "v_mean")
    want: dict[str, list[Any]] = {k: [] for k in names}
    nonfinite = []
    for b in range(bins):
        v, s, at = values[which == b], steps[which == b], xs[which == b]
        finite = np.isfinite(v)
        want["bin"].append(b)
        want["n"].append(int(len(v)))
        for end, pick in (("min", np.argmin), ("max", np.argmax)):
            i = pick(v[finite])
            want[f"x_{end}"].append(float(at[finite][i]))
            want[f"v_{end}"].append(float(v[finite][i]))
            want[f"step_{end}"].append(int(s[finite][i]))
        want["x_mean"].append(float(at[finite].mean()))
        want["v_mean"].append(float(v[finite].mean()))
        if (~finite).any():
            nonfinite.append({"step": int(s[~finite].min()), "n": int((~finite).sum())})
    for name in names[:-2]:
        assert got[name] == want[name], name
    assert got["x_mean"] == pytest.approx(want["x_mean"], rel=1e-12)
    assert got["v_mean"] == pytest.approx(want["v_mean"], rel=1e-12)
    assert got["nonfinite"] == nonfinite == [{"step": 17, "n": 2}, {"step": 250, "n": 1}]
    if x == "step":
        assert got["x_min"] == [float(s) for s in got["step_min"]]


@pytest.mark.parametrize("x", ["step", "wall_time", "relative"])
def test_several_metrics_in_one_request_are_each_metric_asked_alone(mixed_root: Path, x: str) -> None:
    """A chart request binds every metric it names side by side in one pass over the rows (a
    struct of aggregates per metric, unpivoted after): each comes out as it does asked alone,
    from the files and through the views, and a metric no run holds is simply absent."""
    cat = _catalog(mixed_root)
    for read in (_drawn, _through_views):
        together = read(cat, RUNS, METRICS, x=x)
        assert set(together["series"]["live"]) == {"kl_mean", "reward_mean", "extra.late"}
        for metric in METRICS:
            alone = read(cat, RUNS, [metric], x=x)
            one_of_together = {r: {metric: m[metric]} for r, m in together["series"].items() if metric in m}
            assert_same_chart({"series": alone["series"]}, {"series": one_of_together})


def test_step_files_written_before_step_was_delta_encoded_draw_the_same(mixed_root: Path) -> None:
    """Recordings written before the writer stored step DELTA_BINARY_PACKED keep it in a
    dictionary: their charts, read from the files and through the views, are the same."""
    import pyarrow.parquet as pq

    cat = _catalog(mixed_root)
    want = {x: _drawn(cat, RUNS, METRICS, x=x) for x in ("step", "wall_time")}
    files = sorted(mixed_root.rglob("steps.parquet")) + sorted(mixed_root.rglob("part-*.parquet"))
    for path in files:  # as the writer stored them before: every non-float column in a dictionary
        table = pq.read_table(path)
        floats = [f.name for f in table.schema if str(f.type) in ("float", "double")]
        pq.write_table(table, path, compression="zstd", use_dictionary=[c for c in table.column_names if c not in floats],
                       use_byte_stream_split=floats)
    cat.forget_files()
    assert cat.series_plan(RUNS) is not None
    for x, chart in want.items():
        assert _drawn(cat, RUNS, METRICS, x=x) == chart
        assert_same_chart(_through_views(cat, RUNS, METRICS, x=x), chart)


def test_runs_the_view_merges_are_read_through_the_views(tmp_path: Path) -> None:
    rng = np.random.default_rng(7)
    root = tmp_path / "runs"
    _write(root / "plain", "plain", list(range(100)), rng)
    resumed = _write(root / "resumed", "resumed", list(range(60)), rng, per_part=20, compact=False)
    resumed.write_steps([{"step": 30, "wall_time": T0 + 999.0, "kl_mean": 77.0, "reward_mean": 1.0}])  # step 30 again
    _write(root / "woven", "woven", list(range(0, 40, 2)), rng, compact=False)  # parts whose step ranges overlap
    _write(root / "woven", "woven", list(range(1, 40, 2)), rng, compact=False)
    _write(root / "a" / "twin", "twin", list(range(50)), rng)  # one run_id in two folders
    _write(root / "b" / "twin", "twin", list(range(50, 90)), rng)
    cat = _catalog(root)
    assert cat.series_plan(["plain"]) is not None
    for run_id in ("resumed", "woven", "twin"):
        assert cat.series_plan([run_id]) is None, run_id
        assert cat.series_plan(["plain", run_id]) is None, run_id
    got = _drawn(cat, ["plain", "resumed", "woven", "twin"], ["kl_mean"], bins=500)
    assert_same_chart(got, _through_views(cat, ["plain", "resumed", "woven", "twin"], ["kl_mean"], bins=500))
    at30 = got["series"]["resumed"]["kl_mean"]
    i = at30["step_max"].index(30)
    assert (at30["v_max"][i], at30["n"][i], sum(at30["n"])) == (77.0, 1, 60)  # the latest write of step 30, once
    assert sum(got["series"]["woven"]["kl_mean"]["n"]) == 40 and sum(got["series"]["twin"]["kl_mean"]["n"]) == 90


def test_a_live_runs_new_part_is_drawn_and_only_it_is_learned(tmp_path: Path) -> None:
    rng = np.random.default_rng(3)
    writer = _write(tmp_path / "runs" / "live", "live", list(range(100)), rng, per_part=25, compact=False)
    cat = _catalog(tmp_path / "runs")
    before = _drawn(cat, ["live"], ["kl_mean"], bins=1000)["series"]["live"]["kl_mean"]
    assert max(before["step_max"]) == 99 and len(cat.step_files) == 4
    writer.write_steps([{"step": 100, "wall_time": T0 + 150.0, "kl_mean": 1e6, "reward_mean": 0.0}])
    after = _drawn(cat, ["live"], ["kl_mean"], bins=1000)
    kl = after["series"]["live"]["kl_mean"]
    assert max(kl["v_max"]) == 1e6 and kl["step_max"][kl["v_max"].index(1e6)] == 100 and sum(kl["n"]) == 101
    assert len(cat.step_files) == 5  # the four parts drawn before were not read for their facts again
    assert cat.series_plan(["live"]) is not None
    assert_same_chart(after, _through_views(cat, ["live"], ["kl_mean"], bins=1000))
    writer.compact()  # one new file, its facts learned, the same bins (the query shown says it is closed now)
    assert_same_chart({"series": _drawn(cat, ["live"], ["kl_mean"], bins=1000)["series"]}, {"series": after["series"]})
    assert cat.series_plan(["live"]) == [("live", catalog_module.stat_key(str(tmp_path / "runs" / "live" / "steps.parquet")))]


def test_the_chart_of_a_run_that_grew_between_two_requests_is_not_kept(tmp_path: Path) -> None:
    """The answers are kept by the runs' versions: a new part means a new answer (live charts)."""
    pytest.importorskip("starlette", reason="the ui extra (starlette) is not installed")
    pytest.importorskip("httpx", reason="starlette's TestClient needs httpx")
    from starlette.testclient import TestClient

    from rlprobe.ui.app import create_app

    rng = np.random.default_rng(4)
    writer = _write(tmp_path / "runs" / "live", "live", list(range(10)), rng, compact=False)
    app = create_app(tmp_path / "runs", allowed_hosts=None)
    app.state.catalog.runs_max_age_s = 0.0
    ui = TestClient(app)
    first = ui.get("/api/series", params={"run": "live", "metric": "kl_mean"}).json()["series"]["live"]["kl_mean"]
    writer.write_steps([{"step": 10, "wall_time": T0 + 20.0, "kl_mean": 5.0}])
    second = ui.get("/api/series", params={"run": "live", "metric": "kl_mean"}).json()["series"]["live"]["kl_mean"]
    assert max(first["step_max"]) == 9 and max(second["step_max"]) == 10
    app.state.doctor.stop()


def test_a_file_replaced_while_it_is_read_is_not_trusted(mixed_root: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    cat = _catalog(mixed_root)
    want = _through_views(cat, ["closed"], ["kl_mean"])
    reads = []
    monkeypatch.setattr(catalog_module, "stat_key", lambda path: reads.append(path) or ("replaced", 0, 0, 0))
    assert_same_chart(_drawn(cat, ["closed"], ["kl_mean"]), want)  # drawn through the views
    assert reads  # the files were looked at again after the read


def _bytes(cat: Catalog, run_ids: list[str], metrics: list[str], **kwargs: Any) -> str:
    """The chart's answer as the dashboard sends it (the answer itself never kept)."""
    cat._cache.clear()
    return dumps(cat.series(run_ids, metrics, **kwargs))


@pytest.mark.parametrize("x", ["step", "wall_time", "relative"])
def test_charts_from_the_columns_held_in_memory_are_the_files_charts_to_the_bit(mixed_root: Path, x: str) -> None:
    """The first chart reads the columns and holds them; the next ones bin them from memory. Every
    figure is the same bits as binning the files again (NaN/inf, a column that appears late, a
    metric only a rank sub-recording holds, zoomed, coarse bins spanning several parts).

    A bin whose rows lie in several files of a run is summed in parts when DuckDB's two threads
    read those files, and its mean then moves in the last bit from one request to the next,
    files or memory alike: on one thread every sum adds its rows in order, so both are compared
    there; on the default threads, the runs of one file each."""
    for threads, runs in ((1, RUNS), (None, ["closed", "sparse", "ranked"])):
        held = Catalog(mixed_root, threads=threads)
        held._series_json = lambda name, *a, **k: pytest.fail(f"{name} read the files")  # type: ignore[method-assign]
        files = Catalog(mixed_root, column_cache_bytes=0, threads=threads)
        for kwargs in ({}, {"bins": 7}, {"lo": 40.0, "hi": 90.0, "bins": 50}):
            first = _bytes(held, runs, METRICS, x=x, **kwargs)
            assert len(held.columns) > 0 and len(files.columns) == 0
            assert _bytes(held, runs, METRICS, x=x, **kwargs) == first == _bytes(files, runs, METRICS, x=x, **kwargs)


def test_only_columns_finite_in_every_row_skip_the_checks_for_nan_and_inf(mixed_root: Path) -> None:
    cat = _catalog(mixed_root)
    _bytes(cat, ["closed"], ["kl_mean", "reward_mean"])
    (key,) = [k for r, k in cat.series_plan(["closed"]) or []]
    held = cat.columns.get([(key, cat.step_files.get([key])[key])], ["kl_mean", "reward_mean"])[key]
    assert (held["kl_mean"].clean, held["reward_mean"].clean) == (False, True)  # kl_mean holds NaN, inf and -inf


def test_a_live_run_gaining_a_step_between_requests_is_drawn_from_its_new_part(tmp_path: Path) -> None:
    rng = np.random.default_rng(8)
    writer = _write(tmp_path / "runs" / "live", "live", list(range(100)), rng, per_part=25, compact=False)
    cat, files = _catalog(tmp_path / "runs"), Catalog(tmp_path / "runs", column_cache_bytes=0)
    files.runs_max_age_s = 0.0
    before = json.loads(_bytes(cat, ["live"], ["kl_mean"]))["series"]["live"]["kl_mean"]
    held_before = len(cat.columns)
    writer.write_steps([{"step": 100, "wall_time": T0 + 150.0, "kl_mean": 1e6, "reward_mean": 0.0}])
    after = _bytes(cat, ["live"], ["kl_mean"])
    kl = json.loads(after)["series"]["live"]["kl_mean"]
    assert max(before["step_max"]) == 99 and max(kl["step_max"]) == 100 and max(kl["v_max"]) == 1e6
    assert len(cat.columns) == held_before + 3  # the new part's step, wall_time and kl_mean; the others were held
    assert after == _bytes(files, ["live"], ["kl_mean"])
    writer.compact()  # the parts replaced by one new file: read, and the same figures
    assert json.loads(_bytes(cat, ["live"], ["kl_mean"]))["series"] == json.loads(after)["series"]


def test_the_columns_held_stay_under_their_bound(mixed_root: Path) -> None:
    """Least recently used columns go first; a chart that needs more than the bound reads the files."""
    want = _bytes(_catalog(mixed_root), RUNS, METRICS)
    small = Catalog(mixed_root, column_cache_bytes=10_000)  # about one run's columns
    small.runs_max_age_s = 0.0
    for run_id in RUNS:
        _bytes(small, [run_id], ["kl_mean"])
        assert 0 < small.columns.nbytes <= 10_000
    assert _bytes(small, RUNS, METRICS) == want  # more than 10 kB: read from the files
    assert small.columns.nbytes <= 10_000


def test_the_metric_picker_counts_from_the_footers_what_the_views_count(mixed_root: Path) -> None:
    """Each metric's values per run, read from the step files' footers where the view reads the
    files as they are: the rows ui_metrics counts through the views, NaN and inf included."""
    import pyarrow.parquet as pq

    cat = _catalog(mixed_root)
    through_views = cat.query("ui_metrics", {"run_ids": RUNS}, cat.dirs_of(RUNS))
    assert cat._metrics_from_footers(RUNS, cat.dirs_of(RUNS)) == through_views
    assert cat.metrics(RUNS) == through_views
    assert {m["metric"]: m["runs"] for m in through_views}["extra.late"] == ["live"]  # NULL before step 120
    steps = mixed_root / "closed" / "steps.parquet"  # a file written without statistics: counted through the views
    pq.write_table(pq.read_table(steps), steps, write_statistics=False)
    cat.forget_files()
    assert cat._metrics_from_footers(RUNS, cat.dirs_of(RUNS)) is None
    assert cat.metrics(RUNS) == through_views


def test_nothing_outside_the_root_is_read(tmp_path: Path) -> None:
    """A step file that is a link out of the root: DuckDB refuses it on this path as on the views'."""
    rng = np.random.default_rng(5)
    _write(tmp_path / "outside" / "secret", "secret", list(range(20)), rng)
    _write(tmp_path / "runs" / "r", "r", list(range(20)), rng)
    _write(tmp_path / "runs" / "ok", "ok", list(range(20)), rng)
    link = tmp_path / "runs" / "r" / "steps.parquet"
    link.unlink()
    link.symlink_to(tmp_path / "outside" / "secret" / "steps.parquet")
    cat = _catalog(tmp_path / "runs")
    key = catalog_module.stat_key(str(link))
    assert key is not None
    with pytest.raises(catalog_module.QueryError, match="Cannot access file"):
        cat.step_files.get([key])
    got = _drawn(cat, ["ok", "r"], ["kl_mean"])
    assert "ok" in got["series"] and "r" not in got["series"]
    assert "Cannot access file" in got["errors"]["r"]
