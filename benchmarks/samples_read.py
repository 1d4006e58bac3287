"""Sample reads on a 100k-step run with 800k samples: `show --step N`, `samples -k 10`, `doctor`.

The recording is scale.py's (every StepRecord field, 32 samples a step of which the default
sampling keeps 8: 800k samples in 196 sealed shards), plus a copy taken before close() (the live
layout: deltas, open versions, superseded copies within their grace period). Each surface runs
as a fresh process (`python -m rlprobe ...`, output to /dev/null), timed end to end, with its peak
RSS (os.wait4), against:

- the checkout under test (this repository),
- the pre-change checkout (--baseline-src DIR, else a git worktree of --baseline-rev made for the
  run and removed after): the same commands with the samples source that reads every shard
  through a materialized scan,
- DuckDB on the raw files in the same run: the rows the command needs read straight from the
  sealed shards (read_parquet of the glob, a step filter or a top 10 by reward with its text),
  and the interpreter with rlprobe imported (`python -m rlprobe --version`).

Targets (issue 17): show and samples under 0.3 s and 300 MB; doctor under 1 s and 600 MB.
Nothing is asserted.

    python benchmarks/samples_read.py                       # records the run (~2 min), then ~3 min
    python benchmarks/samples_read.py --run DIR --live DIR  # reuse recordings kept by --keep
    python benchmarks/samples_read.py --quick               # 5k steps, 2 reps
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
import _common as C  # noqa: E402

BASELINE_REV = "0d3728c"  # main before sample pushdown (issue 17 item 2)

RAW_CODE = r"""
import sys, duckdb
what, run, step = sys.argv[1], sys.argv[2], int(sys.argv[3])
con = duckdb.connect()
glob = run + "/samples/shard-*.parquet"
if what == "raw_show":
    rows = con.sql("SELECT * FROM read_parquet(?, union_by_name = true) WHERE step = ? ORDER BY reward_total DESC LIMIT 10",
                   params=[glob, step]).fetchall()
else:
    rows = con.sql("SELECT * FROM read_parquet(?, union_by_name = true) ORDER BY reward_total DESC LIMIT 10",
                   params=[glob]).fetchall()
assert rows
"""


def child(cmd: list[str], pythonpath: str | None) -> dict[str, float]:
    """Wall seconds and peak RSS (MB) of one fresh process."""
    env = dict(os.environ)
    if pythonpath:
        env["PYTHONPATH"] = pythonpath
    else:
        env.pop("PYTHONPATH", None)
    t0 = time.perf_counter()
    # cwd outside both checkouts: `python -m` puts the working directory first on sys.path
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, env=env, cwd=tempfile.gettempdir())
    _, status, usage = os.wait4(proc.pid, 0)
    wall = time.perf_counter() - t0
    err = proc.stderr.read().decode() if proc.stderr else ""
    proc.returncode = os.waitstatus_to_exitcode(status)
    if proc.returncode not in (0, 1):  # doctor exits 1 when it finds something
        raise RuntimeError(f"{' '.join(cmd)} failed ({proc.returncode}): {err.strip()[-500:]}")
    return {"wall_s": wall, "rss_mb": usage.ru_maxrss / 1024}


def measure(cmd: list[str], pythonpath: str | None, reps: int) -> dict[str, Any]:
    runs = [child(cmd, pythonpath) for _ in range(reps)]
    return {"wall_s": C.summary([r["wall_s"] for r in runs]), "rss_mb": C.summary([r["rss_mb"] for r in runs])}


def baseline_checkout(args: Any, tmp: Path) -> tuple[Path, bool]:
    if args.baseline_src:
        return Path(args.baseline_src).resolve(), False
    dest = tmp / "baseline"
    subprocess.run(["git", "-C", str(C.REPO), "worktree", "add", "--detach", str(dest), args.baseline_rev],
                   check=True, capture_output=True)
    return dest, True


def main() -> None:
    parser = C.base_parser(__doc__ or "")
    parser.add_argument("--steps", type=int, default=100_000)
    parser.add_argument("--reps", type=int, default=3, help="fresh processes per surface and checkout")
    parser.add_argument("--run", help="an existing closed recording to read (skips recording)")
    parser.add_argument("--live", help="an existing live copy of it (as scale.py --keep leaves)")
    parser.add_argument("--baseline-src", help="the pre-change checkout (default: a worktree of --baseline-rev)")
    parser.add_argument("--baseline-rev", default=BASELINE_REV)
    parser.add_argument("--keep", metavar="DIR", help="record into DIR and keep it")
    args = parser.parse_args()
    if args.quick:
        args.steps, args.reps = 5_000, 2
    info = C.machine_info()
    params = {"steps": args.steps, "reps": args.reps, "baseline_rev": args.baseline_rev, "run": args.run}
    C.header("samples_read", info, params)
    load_start = os.getloadavg()
    tmp = Path(tempfile.mkdtemp(prefix="rlprobe-samples-read-"))
    base_dir, made_worktree = baseline_checkout(args, tmp)
    try:
        if args.run:
            run_dir, live_dir = Path(args.run), Path(args.live) if args.live else None
            steps = args.steps
        else:
            where = Path(args.keep) if args.keep else tmp
            run_dir, live_dir = where / "run", where / "live"
            print(f"recording {args.steps} steps with samples ...", flush=True)
            # in a child: a child's peak RSS counts the parent's pages at the fork, so the
            # measuring process stays small
            code = ("import sys; sys.path.insert(0, sys.argv[1]); import scale; from pathlib import Path; "
                    "r = scale.record_big_run(Path(sys.argv[2]), int(sys.argv[3]), 1000, 100_000, Path(sys.argv[4])); "
                    "print(r['sample_rows'], round(r['record_s']))")
            out = subprocess.run([sys.executable, "-c", code, str(Path(__file__).resolve().parent), str(run_dir),
                                  str(args.steps), str(live_dir)], check=True, capture_output=True, text=True).stdout.split()
            print(f"  {out[-2]} samples in {out[-1]} s", flush=True)
            steps = args.steps
        step = steps // 2
        py = sys.executable
        surfaces = {
            "show": [py, "-m", "rlprobe", "show", str(run_dir), "--step", str(step)],
            "samples": [py, "-m", "rlprobe", "samples", str(run_dir), "-k", "10"],
            "doctor": [py, "-m", "rlprobe", "doctor", str(run_dir), "--json"],
        }
        if live_dir is not None:
            surfaces["show (live)"] = [py, "-m", "rlprobe", "show", str(live_dir), "--step", str(step)]
            surfaces["samples (live)"] = [py, "-m", "rlprobe", "samples", str(live_dir), "-k", "10"]
        floors = {
            "start-up": [py, "-m", "rlprobe", "--version"],
            "raw show": [py, "-c", RAW_CODE, "raw_show", str(run_dir), str(step)],
            "raw samples": [py, "-c", RAW_CODE, "raw_samples", str(run_dir), str(step)],
        }
        here = str(C.REPO)
        results: dict[str, Any] = {"floors": {}, "new": {}, "base": {}}
        for name, cmd in floors.items():
            results["floors"][name] = measure(cmd, here, args.reps)
            print(f"  [floor] {name:<16} {results['floors'][name]['wall_s']['median']:.3f} s", flush=True)
        for name, cmd in surfaces.items():
            # alternate the checkouts so load drifts hit both alike
            results["new"][name] = measure(cmd, here, args.reps)
            results["base"][name] = measure(cmd, str(base_dir), args.reps)
            print(f"  {name:<16} new {results['new'][name]['wall_s']['median']:.3f} s, "
                  f"base {results['base'][name]['wall_s']['median']:.3f} s", flush=True)

        floor_of = {"show": "raw show", "samples": "raw samples", "show (live)": "raw show", "samples (live)": "raw samples",
                    "doctor": "start-up"}
        rows = []
        for name, r in results["floors"].items():
            rows.append([f"[floor] {name}", r["wall_s"]["median"], r["rss_mb"]["median"], "-", "-", "-", "-"])
        for name in surfaces:
            new, base = results["new"][name], results["base"][name]
            floor = results["floors"][floor_of[name]]
            rows.append([
                name, new["wall_s"]["median"], new["rss_mb"]["median"], base["wall_s"]["median"], base["rss_mb"]["median"],
                f"{new['wall_s']['median'] / base['wall_s']['median']:.2f}x / {new['rss_mb']['median'] / base['rss_mb']['median']:.2f}x",
                f"{new['wall_s']['median'] / floor['wall_s']['median']:.1f}x {floor_of[name]}",
            ])
        C.print_table(
            f"sample reads at {steps} steps (fresh processes, median of {args.reps}; wall s and peak RSS MB)",
            ["surface", "new s", "new MB", "base s", "base MB", "new/base (s / MB)", "new / floor (s)"],
            rows,
        )
        limits = {"show": (0.3, 300), "samples": (0.3, 300), "doctor": (1.0, 600)}
        targets: dict[str, Any] = {}
        for name, (secs, mb) in limits.items():
            targets[f"{name}_s"] = C.target(results["new"][name]["wall_s"]["median"], "<", secs, " s")
            targets[f"{name}_mb"] = C.target(results["new"][name]["rss_mb"]["median"], "<", mb, " MB")
        print("\ntargets (reported, not asserted):")
        for name, t in targets.items():
            print(f"  {name:<12} {C.fmt(t['value'])}  {C.met_text(t)}")
        load_end = os.getloadavg()
        print(f"  load average (1 min) at start {load_start[0]:.2f}, at end {load_end[0]:.2f} on {os.cpu_count()} cpus"
              + ("  <- other processes were competing for the CPU" if max(load_start[0], load_end[0]) > 1.5 else ""))
        C.write_json("samples_read", args.out, {
            "benchmark": "samples_read", "machine": info, "params": params, "baseline_src": str(base_dir),
            "results": results, "targets": targets,
            "load_average_1min": {"start": load_start[0], "end": load_end[0]},
        })
    finally:
        if made_worktree:
            subprocess.run(["git", "-C", str(C.REPO), "worktree", "remove", "--force", str(base_dir)], capture_output=True)
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
