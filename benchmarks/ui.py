"""How fast `rlprobe ui` answers: page load and chart requests, on a root of 100 runs x 10k steps
and on a 10-run overlay of 100k-step runs, next to reading the same rows with DuckDB directly.

Runs are written with RunWriter directly (compacted steps.parquet, 24 metrics per step: random
walks with noise and a few spikes, wall_time 30 s apart). Requests go through the real app
(rlprobe.ui.create_app) with starlette's TestClient, so routing, JSON encoding and the guard are
counted; the doctor is not started (its diagnoses share the 2 cores: see the "doctor busy" row,
where it works through the root in its own process meanwhile).

Figures, median of the repeats:
- page load: GET / + the three static files + /api/runs + /api/series of the page's default
  charts (the 3 most recent runs, the report's 11 key series): what the page fetches before its
  first chart draws, with no chart answer kept. Target (issue 15): first chart under 1 s. In use
  the runs listing is ready when a page opens (the server lists the runs at start, and its
  doctor looks at the listing every --poll seconds), so that is the figure the target is read
  on; "runs listed afresh too" adds listing every run. The metric picker's list (/api/metrics,
  which counts every column) is fetched beside the charts and timed on its own.
- chart request: /api/series of one metric for 10 runs (and 3 runs on the 100-run root), 1000
  bins, with the runs listing the page's last poll made (at most a second old, as in use), and
  what the app learned of those runs' step files when it drew them before (each file's steps
  and columns, kept while its size and mtime stay: rlprobe.ui.stepfiles; and the columns its
  charts read, held decoded in memory: rlprobe.ui.columns), as for any chart of runs on the
  page: another metric, a zoom. Target: under 300 ms. Also all 8 charts in one
  request, a zoomed request, and "runs never drawn before" (the files' facts and columns learned too, as for
  the first chart after the server starts; the page load rows learn them as well).
- baseline: the same runs' step and metric columns read with DuckDB straight from the parquet
  files into Arrow (what any reader pays to get the rows), in the same run; printed as a ratio.
- asked again: the same chart while no run changed (another tab, a refresh): the app keeps it.
- cold: the very first request of a fresh app (views created, nothing cached by the OS aside).
- CPU ms: this process's CPU time for the request (DuckDB's threads included), the median of
  the repeats: what a request costs, which a loaded machine moves much less than wall time.

    python benchmarks/ui.py            # 100 x 10k and 10 x 100k
    python benchmarks/ui.py --quick    # 20 x 2k and 4 x 20k
    python benchmarks/ui.py --keep /tmp/ui-roots                        # keep the roots ...
    PYTHONPATH=OTHER python benchmarks/ui.py --keep /tmp/ui-roots --reuse  # ... and time another checkout on them
"""

from __future__ import annotations

import json
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import base_parser, header, machine_info, median, print_table, target, timed, times, write_json  # noqa: E402

from rlprobe.record.writer import RunWriter  # noqa: E402
from rlprobe.report.data import KEY_SERIES  # noqa: E402
from rlprobe.schemas import RunManifest  # noqa: E402

METRICS = ["reward_mean", "reward_std", "kl_mean", "kl_max", "entropy_mean", "completion_len_mean", "max_len_hit_frac",
           "truncation_rate", "grad_norm", "clip_fraction", "zero_variance_group_frac", "loss", "step_time_s", "lr",
           "adv_mean", "adv_std", "ratio_mean", "value_loss", "eos_rate", "repetition_rate", "logprob_mean",
           "weight_update_ratio", "extra.gpu_mem_gb", "extra.tokens_per_s"]
KEY = ["reward_mean", "kl_mean", "entropy_mean", "completion_len_mean", "max_len_hit_frac", "truncation_rate", "grad_norm",
       "clip_fraction"]


def build_root(root: Path, n_runs: int, n_steps: int, seed: int, reuse: bool = False) -> list[Path]:
    """n_runs compacted runs of n_steps below root; their directories. With reuse, the runs an
    earlier call wrote there with the same sizes and seed are taken as they are."""
    stamp = root / "built.json"
    wanted = {"runs": n_runs, "steps": n_steps, "seed": seed}
    if reuse and stamp.is_file() and json.loads(stamp.read_text()) == wanted:
        return [root / f"sweep-{r // 10}" / f"run-{r:03d}" for r in range(n_runs)]
    shutil.rmtree(root, ignore_errors=True)
    rng = np.random.default_rng(seed)
    dirs = []
    for r in range(n_runs):
        run_dir = root / f"sweep-{r // 10}" / f"run-{r:03d}"
        writer = RunWriter(run_dir, RunManifest(run_id=f"run-{r:03d}", algorithm="grpo", model_name="synthetic",
                                                name=f"lr {1 + r % 7}e-6", tags=[f"sweep-{r // 10}"],
                                                trainer_config={"max_steps": n_steps, "learning_rate": (1 + r % 7) * 1e-6},
                                                created_at=f"2026-01-01T00:{r // 60:02d}:{r % 60:02d}+00:00"))
        steps = np.arange(n_steps)
        columns: dict[str, Any] = {"step": steps, "wall_time": 1.7e9 + r * 1e6 + 30.0 * steps}
        for m in METRICS:
            walk = np.cumsum(rng.normal(0, 0.01, n_steps)) + rng.normal(0, 0.05, n_steps)
            walk[rng.integers(0, n_steps, 3)] += 10.0  # spikes the downsampling must keep
            columns[m] = walk
        rows = [dict(zip(columns, values)) for values in zip(*[np.asarray(v).tolist() for v in columns.values()])]
        for i in range(0, n_steps, 20_000):
            writer.write_steps(rows[i:i + 20_000])
        writer.compact()
        dirs.append(run_dir)
    stamp.write_text(json.dumps(wanted))
    return dirs


def direct_read(dirs: list[Path], metrics: list[str]) -> Any:
    """The baseline: the runs' step and metric columns read with DuckDB from the parquet files."""
    import duckdb

    con = duckdb.connect()
    cols = ", ".join(f'"{m}"' for m in metrics)
    files = [str(d / "steps.parquet") for d in dirs]
    return con.sql(f"SELECT step, {cols} FROM read_parquet(?, union_by_name = true)", params=[files]).to_arrow_table()


def measure(name: str, root: Path, dirs: list[Path], overlay: int, repeats: int) -> dict[str, Any]:
    from starlette.testclient import TestClient

    from rlprobe.ui.app import create_app

    def fresh() -> TestClient:
        return TestClient(create_app(root, allowed_hosts=None))

    def relist() -> None:
        """Forget the listing and every kept answer: the next requests compute everything again, as
        for a page opened for the first time (the app keeps chart answers until a run grows)."""
        client.app.state.catalog._listing = None
        client.app.state.catalog._cache.clear()

    def uncached() -> None:
        client.app.state.catalog._cache.clear()

    def unlearned() -> None:
        """Forget the kept answers and what the app learned of the step files: the runs are drawn
        for the first time since the server started."""
        uncached()
        client.app.state.catalog.forget_files()

    ids = [f"run-{i:03d}" for i in range(len(dirs))]
    newest = ids[-3:]
    chosen = ids[-overlay:]
    chosen_dirs = dirs[-overlay:]
    out: dict[str, Any] = {"runs": len(dirs), "overlay": overlay}

    cold_s, client = timed(lambda: fresh())
    first_s, _ = timed(lambda: client.get("/api/runs").raise_for_status())
    out["cold_open_s"], out["cold_first_listing_s"] = cold_s, first_s

    def page_load(cold: bool = False) -> None:
        if cold:
            relist()
        unlearned()
        for path in ("/", "/static/ui.js", "/static/uPlot.iife.min.js", "/static/ui.css"):
            client.get(path).raise_for_status()
        client.get("/api/runs").raise_for_status()
        client.get("/api/series", params={"run": newest, "metric": list(KEY_SERIES), "bins": 600}).raise_for_status()

    def chart(run_ids: list[str], metrics: list[str], cached: bool = False, first: bool = False, **extra: Any) -> None:
        if first:
            unlearned()
        elif not cached:
            uncached()
        r = client.get("/api/series", params={"run": run_ids, "metric": metrics, "bins": 1000, **extra})
        r.raise_for_status()

    lo, hi = 0.4 * int(_steps(dirs[0])), 0.45 * int(_steps(dirs[0]))
    cases = {
        "page load (first chart)": lambda: page_load(),
        "page load, runs listed afresh too": lambda: page_load(cold=True),
        "metric picker list (after the first chart)": lambda: (uncached(), client.get("/api/metrics", params={"run": newest}).raise_for_status()),
        "/api/runs (listed afresh)": lambda: (relist(), client.get("/api/runs").raise_for_status()),
        "/api/runs (no file changed)": lambda: client.get("/api/runs").raise_for_status(),
        "stat walk of the root (is a new listing needed?)": lambda: client.app.state.catalog.files_signature(),
        f"chart: 1 metric x {overlay} runs": lambda: chart(chosen, ["kl_mean"]),
        f"chart: 1 metric x {overlay} runs, runs never drawn before": lambda: chart(chosen, ["kl_mean"], first=True),
        f"chart: 8 metrics x {overlay} runs": lambda: chart(chosen, KEY),
        f"chart: 1 metric x {overlay} runs, zoomed to 5%": lambda: chart(chosen, ["kl_mean"], lo=lo, hi=hi),
        f"chart: 1 metric x {overlay} runs, asked again": lambda: chart(chosen, ["kl_mean"], cached=True),
    }
    baselines = {
        "page load (first chart)": lambda: direct_read(dirs[-3:], [m for m in KEY_SERIES if m in METRICS]),
        "page load, runs listed afresh too": lambda: direct_read(dirs[-3:], [m for m in KEY_SERIES if m in METRICS]),
        f"chart: 1 metric x {overlay} runs": lambda: direct_read(chosen_dirs, ["kl_mean"]),
        f"chart: 1 metric x {overlay} runs, runs never drawn before": lambda: direct_read(chosen_dirs, ["kl_mean"]),
        f"chart: 8 metrics x {overlay} runs": lambda: direct_read(chosen_dirs, KEY),
        f"chart: 1 metric x {overlay} runs, zoomed to 5%": lambda: direct_read(chosen_dirs, ["kl_mean"]),
    }
    rows = []
    for label, fn in cases.items():
        fn()  # warm: the page is open, the OS has the files
        walls, cpus = wall_and_cpu(fn, repeats)
        t, cpu = median(walls), median(cpus)
        base = median(times(baselines[label], repeats)) if label in baselines else None
        out[label] = {"median_s": t, "cpu_median_s": cpu, "baseline_s": base, "ratio": t / base if base else None}
        rows.append([label, t * 1000, cpu * 1000, base * 1000 if base else None, t / base if base else None])

    # the same chart request while the doctor works through the root in the background
    app = client.app
    doctor = app.state.doctor
    doctor.start()
    time.sleep(1.0)
    busy = median(times(lambda: chart(chosen, ["kl_mean"]), repeats))
    doctor.stop()
    out["chart with the doctor busy"] = {"median_s": busy, "diagnoses_meanwhile": doctor.diagnoses}
    rows.append([f"chart: 1 metric x {overlay} runs, doctor busy", busy * 1000, None, None, None])
    print_table(f"{name}: {len(dirs)} runs x {_steps(dirs[0])} steps, overlay of {overlay}",
                ["request", "ms (median)", "CPU ms", "DuckDB direct ms", "ratio"], rows)
    out["load_average_1min"] = os.getloadavg()[0]  # a shared 2-core box moves every figure
    print(f"  load average (1 min) after the run: {out['load_average_1min']:.1f} on {os.cpu_count()} cpus")
    out["targets"] = {
        "first chart < 1 s": target(out["page load (first chart)"]["median_s"], "<", 1.0, " s"),
        "chart request < 300 ms": target(out[f"chart: 1 metric x {overlay} runs"]["median_s"], "<", 0.3, " s"),
        "chart request, runs never drawn before < 300 ms": target(
            out[f"chart: 1 metric x {overlay} runs, runs never drawn before"]["median_s"], "<", 0.3, " s"),
    }
    for k, v in out["targets"].items():
        print(f"  {k}: {v['value'] * 1000:.0f} ms, {'met' if v['met'] else 'NOT met'}")
    return out


def wall_and_cpu(fn: Any, repeats: int) -> tuple[list[float], list[float]]:
    """Seconds of wall time and of this process's CPU time (every thread: DuckDB's, the test
    client's) each of `repeats` calls of fn() took. On a shared 2-core machine the wall time
    moves with the other jobs' load; the CPU time much less (it is what a request costs)."""
    walls, cpus = [], []
    for _ in range(repeats):
        c0 = time.process_time()
        t, _ = timed(fn)
        cpus.append(time.process_time() - c0)
        walls.append(t)
    return walls, cpus


def _steps(run_dir: Path) -> int:
    import pyarrow.parquet as pq

    return pq.ParquetFile(run_dir / "steps.parquet").metadata.num_rows


def main() -> None:
    parser = base_parser(__doc__ or "")
    parser.add_argument("--repeats", type=int, default=5, help="timings per request (median)")
    parser.add_argument("--keep", metavar="DIR", help="write the roots here and keep them")
    parser.add_argument("--reuse", action="store_true",
                        help="with --keep: time the roots an earlier --keep run left in DIR (same sizes) instead of writing "
                             "them again, e.g. to time two checkouts on the same files (PYTHONPATH=OTHER_CHECKOUT)")
    args = parser.parse_args()
    if args.reuse and not args.keep:
        parser.error("--reuse needs --keep DIR")
    wide = (20, 2_000) if args.quick else (100, 10_000)
    long = (4, 20_000) if args.quick else (10, 100_000)
    info = machine_info()
    import rlprobe

    info["rlprobe_source"] = str(Path(rlprobe.__file__).resolve().parent.parent)  # the checkout timed (PYTHONPATH)
    header("ui", info, {"wide": f"{wide[0]} x {wide[1]}", "long": f"{long[0]} x {long[1]}", "repeats": args.repeats,
                        "rlprobe from": info["rlprobe_source"]})
    base = Path(args.keep) if args.keep else Path(tempfile.mkdtemp(prefix="rlprobe-bench-ui-"))
    results: dict[str, Any] = {"machine": info}
    try:
        t, dirs = timed(lambda: build_root(base / "wide", *wide, seed=1, reuse=args.reuse))
        print(f"  built {wide[0]} x {wide[1]} in {t:.1f} s{' (reused)' if args.reuse and t < 1 else ''}")
        results["wide"] = measure("wide root", base / "wide", dirs, overlay=3, repeats=args.repeats)
        t, dirs = timed(lambda: build_root(base / "long", *long, seed=2, reuse=args.reuse))
        print(f"  built {long[0]} x {long[1]} in {t:.1f} s{' (reused)' if args.reuse and t < 1 else ''}")
        results["long"] = measure("long runs", base / "long", dirs, overlay=long[0], repeats=args.repeats)
    finally:
        if not args.keep:
            shutil.rmtree(base, ignore_errors=True)
    write_json("ui", args.out, results)


if __name__ == "__main__":
    main()
