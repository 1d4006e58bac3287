"""How long a RunWatcher tick takes on a 100k-step live run (step parts, not compacted).

The run is recorded through the real Recorder from a synthetic series (rlprobe.synth,
REWARD_HACK_LENGTH, so step and sample detectors both have work), flushed every 200 steps as a
live trainer would: 500 step part files plus sample shards, no steps.parquet. Then, in this
process:

- baseline: a full `diagnose_path` of the same live run (what the first, non-incremental
  watcher did every tick);
- first tick: a fresh RunWatcher reads every file and diagnoses;
- steady tick: the still-open Recorder logs 200 more steps (and their samples) and flushes,
  then the watcher ticks: it reads the one new part and the open shard's new version, updates
  its feature tables for the bins and steps that changed, and diagnoses again. Split into
  read_s and diagnose_s; how each feature table was updated is printed per tick ("by bin",
  "by step", or "all" when the bins moved);
- idle tick: nothing new on disk (no read, no diagnosis);
- compaction tick: after close() replaces the parts with steps.parquet (happens once).

    python benchmarks/watch.py                 # 100k steps, samples every step (8 kept of 32)
    python benchmarks/watch.py --quick         # 10k steps
    python benchmarks/watch.py --samples-every 0   # steps only

Target (issue 4): a steady tick "well under a second" on the 100k-step live run; printed as
< 1 s, with the figure itself next to it.
"""

from __future__ import annotations

import os
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import base_parser, header, machine_info, print_table, summary, target, write_json  # noqa: E402

from rlprobe import Recorder, SamplingConfig  # noqa: E402
from rlprobe.layout import newest_shards  # noqa: E402
from rlprobe.doctor import diagnose_path  # noqa: E402
from rlprobe.doctor.live import RunWatcher  # noqa: E402
from rlprobe.synth import make_run  # noqa: E402
from rlprobe.synth.writer import _step_rows  # noqa: E402

FLUSH_EVERY = 200


def log_steps(rec: Recorder, run, rows, lo: int, hi: int, samples_every: int) -> None:  # type: ignore[no-untyped-def]
    """Log steps [lo, hi) with their samples, flushing every FLUSH_EVERY steps like a live trainer."""
    for i in range(lo, hi):
        step = int(run.steps[i])
        rec.log_step(step, **rows[i])
        if samples_every and step % samples_every == 0:
            rec.log_samples(step, run.samples(step))
        if (i + 1) % FLUSH_EVERY == 0 or i + 1 == hi:
            if not rec.flush(60):
                raise RuntimeError("the recorder did not flush within 60 s")


def main() -> None:
    parser = base_parser(__doc__ or "")
    parser.add_argument("--steps", type=int, default=None, help="steps in the live run (default 100000, --quick 10000)")
    parser.add_argument("--samples-every", type=int, default=1, help="log 32 samples (8 kept) every N steps; 0 = no samples")
    parser.add_argument("--repeats", type=int, default=3, help="repetitions of the baseline and of the first tick")
    parser.add_argument("--appends", type=int, default=5, help="steady ticks, each after 200 more steps")
    parser.add_argument("--kind", default="REWARD_HACK_LENGTH")
    parser.add_argument("--keep", metavar="DIR", help="record into DIR (kept) instead of a temp folder")
    args = parser.parse_args()
    n_steps = args.steps or (10_000 if args.quick else 100_000)
    info = machine_info()
    params = {"steps": n_steps, "samples_every": args.samples_every, "flush_every": FLUSH_EVERY, "repeats": args.repeats,
              "appends": args.appends, "kind": args.kind}
    header("watch", info, params)
    t_start = time.perf_counter()
    tmp = None if args.keep else tempfile.TemporaryDirectory(prefix="rlprobe-bench-watch-")
    run_dir = Path(args.keep or tmp.name) / "live-run"  # type: ignore[union-attr]
    total = n_steps + args.appends * FLUSH_EVERY
    synth = make_run(args.kind, n_steps=total, seed=1)
    rows = _step_rows(synth)
    rec = Recorder(run_dir, algorithm=synth.truth.algorithm, capture_env=False, install_handlers=False,
                   sampling=SamplingConfig(seed=1), queue_size=65536, steps_per_flush=10**9, flush_interval_s=3600)
    t0 = time.perf_counter()
    log_steps(rec, synth, rows, 0, n_steps, args.samples_every)
    build_s = time.perf_counter() - t0
    parts = len(list((run_dir / "steps").glob("part-*.parquet")))
    shards = len(newest_shards(p.name for p in (run_dir / "samples").iterdir())) if (run_dir / "samples").exists() else 0
    size_mb = sum(f.stat().st_size for f in run_dir.rglob("*") if f.is_file()) / 1e6
    print(f"  recorded {n_steps} steps in {build_s:.0f} s: {parts} step parts, {shards} sample shards, {size_mb:.1f} MB, dropped {rec.dropped}")

    full = []
    for _ in range(args.repeats):
        t0 = time.perf_counter()
        d = diagnose_path(run_dir)[0]
        full.append(time.perf_counter() - t0)
    full_findings = [(f.signature_id, f.severity) for f in d.findings]

    first, first_read, first_diag = [], [], []
    watcher = None
    for _ in range(args.repeats):
        if watcher is not None:
            watcher.close()
        watcher = RunWatcher(run_dir)
        t0 = time.perf_counter()
        new = watcher.tick()
        first.append(time.perf_counter() - t0)
        first_read.append(watcher.timings.get("read_s", float("nan")))
        first_diag.append(watcher.timings.get("diagnose_s", float("nan")))
    assert watcher is not None
    watch_findings = [(f.signature_id, f.severity) for f in new]

    idle = []
    for _ in range(5):
        t0 = time.perf_counter()
        watcher.tick()
        idle.append(time.perf_counter() - t0)

    steady, steady_read, steady_diag, files_per_tick, refreshes = [], [], [], [], []
    for k in range(args.appends):
        lo = n_steps + k * FLUSH_EVERY
        log_steps(rec, synth, rows, lo, lo + FLUSH_EVERY, args.samples_every)
        before = watcher.files_read
        t0 = time.perf_counter()
        watcher.tick()
        steady.append(time.perf_counter() - t0)
        steady_read.append(watcher.timings.get("read_s", float("nan")))
        steady_diag.append(watcher.timings.get("diagnose_s", float("nan")))
        files_per_tick.append(watcher.files_read - before)
        tables = getattr(watcher, "_tables", None)
        refreshes.append(dict(getattr(tables, "last_refresh", {})))
    after_appends_full = []
    t0 = time.perf_counter()
    diagnose_path(run_dir)
    after_appends_full.append(time.perf_counter() - t0)
    mine = watcher.diagnose()
    same = mine is not None and [f.model_dump() for f in mine.findings] == [f.model_dump() for f in diagnose_path(run_dir)[0].findings]

    rec.close()
    t0 = time.perf_counter()
    watcher.tick()
    compaction_tick = time.perf_counter() - t0
    watcher.close()

    base = summary(full)["median"]
    figures = {
        "diagnose_path_s": summary(full),
        "diagnose_path_after_appends_s": summary(after_appends_full),
        "first_tick_s": summary(first),
        "first_tick_read_s": summary(first_read),
        "first_tick_diagnose_s": summary(first_diag),
        "steady_tick_s": summary(steady),
        "steady_tick_read_s": summary(steady_read),
        "steady_tick_diagnose_s": summary(steady_diag),
        "steady_files_read_per_tick": files_per_tick,
        "steady_feature_refresh_per_tick": refreshes,
        "idle_tick_s": summary(idle),
        "compaction_tick_s": compaction_tick,
        "findings_full": full_findings,
        "findings_watch_first_tick": watch_findings,
        "incremental_equals_full_after_appends": same,
        "recording": {"build_s": build_s, "parts": parts, "shards": shards, "size_mb": size_mb, "dropped": rec.dropped},
    }
    rows_ = []
    for label, key in (("diagnose_path (baseline)", "diagnose_path_s"), ("first tick", "first_tick_s"),
                       ("  of which read", "first_tick_read_s"), ("  of which diagnose", "first_tick_diagnose_s"),
                       ("steady tick (+200 steps)", "steady_tick_s"), ("  of which read", "steady_tick_read_s"),
                       ("  of which diagnose", "steady_tick_diagnose_s"), ("idle tick (nothing new)", "idle_tick_s")):
        s = figures[key]
        rows_.append((label, s["median"], s["min"], s["max"], s["median"] / base if base else float("nan")))
    rows_.append(("compaction tick (once)", compaction_tick, compaction_tick, compaction_tick, compaction_tick / base))
    print_table(f"RunWatcher on a {n_steps}-step live run ({parts} parts, {shards} shards)", ["", "median s", "min s", "max s", "x baseline"], rows_)
    print(f"\n  files read per steady tick: {files_per_tick}")
    print("  feature tables per steady tick: " + "; ".join(", ".join(f"{k} {v}" for k, v in sorted(r.items())) or "-" for r in refreshes))
    print(f"  findings: full {full_findings}, first tick {watch_findings}")
    print(f"  incremental diagnosis == fresh diagnose_path after the appends: {same}")
    targets = {"steady_tick_s": target(summary(steady)["median"], "<", 1.0, " s")}
    load = os.getloadavg()[0]
    print(f"\n  target steady tick < 1 s: {'met' if targets['steady_tick_s']['met'] else 'NOT met'} "
          f"({summary(steady)['median']:.3f} s median, {summary(steady)['max']:.3f} s max); load average {load:.2f}")
    write_json("watch", args.out, {
        "benchmark": "watch", "machine": info, "params": params, **figures, "targets": targets,
        "total_s": time.perf_counter() - t_start, "load_average_1min": load,
    })
    if tmp is not None:
        tmp.cleanup()


if __name__ == "__main__":
    main()
