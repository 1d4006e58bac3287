"""How long `render_report` takes, how big the file is, and how long a browser takes to draw it,
on 10k- and 100k-step runs.

Runs are synthetic (rlprobe.synth, REWARD_HACK_LENGTH: findings with cited samples) written with
RunWriter directly: every step's series, and every N steps (default 10) 8 of the synthetic
batch's samples with their text (2 best, 2 worst, 4 spread between, like the default sampling).

Figures per run:
- render_report: seconds end to end (open, diagnose, series, samples, events, write), median of
  the repeats, next to two same-run baselines: a full scan of the steps view (open + SELECT *
  FROM steps, what any reader pays once) and diagnose_path alone (the report runs the doctor);
- the file size (target: < 5 MB at 100k steps);
- in headless Chromium, if installed: render_ms, the page's own clock (performance.now() since
  navigation start) when every chart has drawn, read from the DOM; and the wall time of the
  chromium process next to the same process on an empty page (its start-up cost). Target: the
  page draws in < 3 s at 100k steps.

    python benchmarks/report.py            # 10k and 100k steps
    python benchmarks/report.py --quick    # 2k and 10k steps, samples every 20 steps
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import base_parser, fmt, header, machine_info, median, print_table, target, times, write_json  # noqa: E402

from rlprobe.doctor import diagnose_path  # noqa: E402
from rlprobe.record.writer import RunWriter  # noqa: E402
from rlprobe.report import render_report  # noqa: E402
from rlprobe.schemas import RunManifest, flatten_dicts  # noqa: E402
from rlprobe.store import open_store  # noqa: E402
from rlprobe.synth import make_run  # noqa: E402

FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--no-first-run", "--disable-background-networking"]


def build(run_dir: Path, kind: str, n_steps: int, seed: int, samples_every: int) -> int:
    """Write a synthetic run's steps and every samples_every steps 8 samples; return the sample count."""
    run = make_run(kind, n_steps=n_steps, seed=seed)
    writer = RunWriter(run_dir, RunManifest(algorithm=run.truth.algorithm, run_id=f"{kind}-{n_steps}",
                                            model_name="synthetic", trainer_config={"synthetic": True}))
    rows, samples, n_samples = [], [], 0
    for i, step in enumerate(run.steps):
        row: dict[str, Any] = {"step": int(step), "wall_time": 1.7e9 + 30.0 * i}
        for name, values in run.series.items():
            if run.logged(name)[i] and np.isfinite(values[i]):
                row[name] = float(values[i])
        for name, values in run.components.items():
            row[f"reward_component.{name}"] = float(values[i])
        rows.append(row)
        if samples_every and int(step) % samples_every == 0:
            batch = sorted(run.samples(int(step)), key=lambda s: s.get("reward_total") or 0.0)
            keep = batch[:2] + batch[-2:] + [batch[j] for j in np.linspace(2, len(batch) - 3, 4).astype(int)] if len(batch) > 8 else batch
            for k, s in enumerate(keep):
                flat = flatten_dicts({key: v for key, v in s.items() if key not in ("step", "rank")})
                flat.update(step=int(step), rank=0, sample_id=str(s.get("sample_id") or f"{int(step)}-0-{k}"), capture_reason="random")
                samples.append(flat)
        if len(rows) == 20_000:
            writer.write_steps(rows)
            rows = []
        if len(samples) >= 4096:
            writer.write_samples(samples)
            n_samples += len(samples)
            samples = []
    if rows:
        writer.write_steps(rows)
    if samples:
        writer.write_samples(samples)
        n_samples += len(samples)
    writer.compact()
    return n_samples


def chromium() -> str | None:
    return shutil.which("chromium") or shutil.which("chromium-browser") or (
        "/usr/bin/chromium" if os.path.exists("/usr/bin/chromium") else None)


def browse(binary: str, page: Path, profile: Path) -> tuple[float, dict[str, str]]:
    """Wall seconds of `chromium --dump-dom` on page, and the <body> attributes it ended with."""
    t0 = time.perf_counter()
    done = subprocess.run([binary, *FLAGS, f"--user-data-dir={profile}", "--dump-dom", page.resolve().as_uri()],
                          capture_output=True, text=True, timeout=300)
    wall = time.perf_counter() - t0
    match = re.search(r"<body([^>]*)>", done.stdout)
    return wall, dict(re.findall(r'([\w-]+)="([^"]*)"', match.group(1))) if match else {}


def main() -> None:
    parser = base_parser(__doc__ or "")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--samples-every", type=int, default=None, help="log 8 samples every N steps (default 10, --quick 20)")
    parser.add_argument("--keep", metavar="DIR", help="build the runs and write the reports in DIR (kept)")
    args = parser.parse_args()
    sizes = (2_000, 10_000) if args.quick else (10_000, 100_000)
    every = args.samples_every or (20 if args.quick else 10)
    info = machine_info()
    params = {"steps": list(sizes), "samples_every": every, "repeats": args.repeats, "kind": "REWARD_HACK_LENGTH",
              "load_1min": os.getloadavg()[0]}
    header("report", info, params)
    binary = chromium()
    if not binary:
        print("  chromium not found: browser figures skipped (apt-get install chromium)")
    figures: dict[str, Any] = {}
    rows, brows = [], []
    tmp = None if args.keep else tempfile.TemporaryDirectory(prefix="rlprobe-bench-report-")
    base = Path(args.keep or tmp.name)  # type: ignore[union-attr]
    base.mkdir(parents=True, exist_ok=True)
    try:
        empty = base / "empty.html"
        empty.write_text("<!DOCTYPE html><html><body data-rendered=\"0\"></body></html>")
        for n in sizes:
            run_dir = base / f"run-{n}"
            t0 = time.perf_counter()
            if run_dir.exists():  # --keep DIR from an earlier run: the same build, reused
                n_samples = None
                print(f"  reusing the {n}-step run in {run_dir}")
            else:
                n_samples = build(run_dir, "REWARD_HACK_LENGTH", n, 3, every)
                print(f"  built the {n}-step run ({n_samples} samples) in {time.perf_counter() - t0:.0f} s")
            out = base / f"report-{n}.html"
            scan = median(times(lambda: open_store(run_dir).table("SELECT * FROM steps"), args.repeats))
            doctor = median(times(lambda: diagnose_path(run_dir), args.repeats))
            render_all = times(lambda: render_report(run_dir, out), args.repeats)
            render = median(render_all)
            size = out.stat().st_size
            size_goal = target(size / 1e6, "<", 5.0, " MB")
            fig: dict[str, Any] = {"steps": n, "samples": n_samples, "render_s": render, "render_all_s": render_all,
                                   "baseline_scan_s": scan, "doctor_s": doctor, "ratio_to_scan": render / scan,
                                   "ratio_to_doctor": render / doctor, "size_bytes": size}
            if n == 100_000 or args.quick:
                fig["size_target"] = size_goal
            rows.append((f"{n} steps", fmt(render), fmt(scan), f"{render / scan:.1f}x", fmt(doctor), f"{render / doctor:.2f}x",
                         f"{size / 1e6:.2f}", met(size_goal) if "size_target" in fig else ""))
            if binary:
                walls, render_ms, empties = [], [], []
                for i in range(args.repeats):
                    empties.append(browse(binary, empty, base / "profile")[0])
                    wall, body = browse(binary, out, base / "profile")
                    walls.append(wall)
                    if body.get("data-rendered") != body.get("data-charts") or body.get("data-errors") != "0":
                        print(f"  WARNING: the page did not render cleanly: {body}")
                    render_ms.append(float(body.get("data-render-ms", "nan")))
                draw_s = median(render_ms) / 1000
                goal = target(draw_s, "<", 3.0, " s")
                fig["browser"] = {"render_s": draw_s, "render_all_s": [m / 1000 for m in render_ms], "chromium_wall_s": median(walls),
                                  "baseline_empty_page_wall_s": median(empties), "wall_minus_empty_s": median(walls) - median(empties)}
                if n == 100_000 or args.quick:
                    fig["browser"]["target"] = goal
                brows.append((f"{n} steps", fmt(draw_s), fmt(median(walls)), fmt(median(empties)),
                              fmt(median(walls) - median(empties)), met(goal) if "target" in fig["browser"] else ""))
            figures[f"{n}_steps"] = fig
    finally:
        if tmp is not None:
            tmp.cleanup()
    print_table("render_report (seconds; size in MB)",
                ["run", "render s", "scan s (baseline)", "ratio", "doctor s", "ratio", "MB", "< 5 MB"], rows)
    if brows:
        print_table("headless Chromium (seconds)",
                    ["run", "page draws in", "chromium wall", "empty page wall (baseline)", "difference", "< 3 s"], brows)
    params["load_1min_end"] = os.getloadavg()[0]
    print(f"\n  1-minute load average: {params['load_1min']:.1f} at the start, {params['load_1min_end']:.1f} at the end "
          f"({info['cpu_count']} cpus): {'a loaded machine, absolute times inflated; compare the ratios' if params['load_1min_end'] > info['cpu_count'] else 'quiet enough'}")
    write_json("report", args.out, {"benchmark": "report", "machine": info, "params": params, "figures": figures})


def met(goal: dict[str, Any]) -> str:
    return "met" if goal["met"] else "NOT MET"


if __name__ == "__main__":
    main()
