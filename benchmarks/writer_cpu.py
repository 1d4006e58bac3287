"""What the Recorder's writer thread costs in CPU: per step with samples, and per second idle.

1. Per step (issue 17, item 5): log_step(44 metrics, the overhead.py workload) +
   log_samples(64 samples, ~200-char completions, groups of 8, default SamplingConfig: 8 kept)
   every `--step-ms` ms (the training thread sleeps in between, so the writer has a core), the
   recorder at its default flush (5 s or 200 steps). The figure is the writer thread's CPU
   clock (user + system, pthread_getcpuclockid) over `--steps` steps and the flush after them,
   divided by the steps. Its idle waits between steps are counted too, as in a real run.
2. Idle: a Recorder open and nothing logged for `--idle-s` seconds; writer-thread CPU per second.

Baselines measured in the same run, each in a fresh process, arms interleaved rep by rep:
- the same code from a baseline checkout (--baseline-src DIR, e.g. the commit before a change:
  `git archive <sha> | tar -x -C /tmp/base`): the before/after ratio;
- the floor: the same rows written by a bare thread with pyarrow only, in the same process
  (each flush: the step dicts flattened and converted with Table.from_pylist, the samples chosen
  with numpy and converted the same way, each table written to parquet, zstd, through a temp
  file, fsync and a rename, as the recorder writes); and for idle, a bare thread waiting on an
  Event with a 0.2 s timeout (what polling alone costs) and with a 5 s timeout.

Targets (issue 17): <= 60 us of writer CPU per step with 64 samples; <= 0.4 ms/s idle.
Nothing is asserted. Figures are medians over `--reps` reps.

    python benchmarks/writer_cpu.py --baseline-src /tmp/base     # about 4 minutes
    python benchmarks/writer_cpu.py --quick                      # seconds, a smoke test
"""

from __future__ import annotations

import json
import os
import random
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent


# -- the child: one rep of one arm, in a fresh process ----------------------------------------
def _thread_clock(thread: threading.Thread) -> Any:
    clock = time.pthread_getcpuclockid(thread.ident)  # type: ignore[arg-type]
    return lambda: time.clock_gettime(clock)


def child_steps(steps: int, step_ms: float, workdir: Path) -> dict[str, Any]:
    """Writer-thread CPU per step of a Recorder fed log_step + log_samples(64) every step_ms."""
    import _common as C
    from overhead import SampleFactory, make_metrics
    from rlprobe import Recorder

    rng = random.Random(7)
    metrics = [make_metrics(rng) for _ in range(64)]
    factory = SampleFactory(rng, 64)
    rec = Recorder(workdir / "steps", algorithm="bench", install_handlers=False)
    clock = C.writer_cpu_clock(rec.run_id)
    assert clock is not None, "no writer thread clock on this platform"
    pause = step_ms / 1000.0
    warm = 200
    for step in range(warm):  # first parquet writes, first shard, imports: not the steady state
        rec.log_step(step, **metrics[step % 64])
        rec.log_samples(step, factory(step))
        time.sleep(pause)
    rec.flush(60)
    c0, t0 = clock(), time.perf_counter()
    for step in range(warm, warm + steps):
        rec.log_step(step, **metrics[step % 64])
        rec.log_samples(step, factory(step))
        time.sleep(pause)
    rec.flush(60)
    cpu, wall = clock() - c0, time.perf_counter() - t0
    dropped, failures = rec.dropped, rec.write_failures
    rec.close()
    return {"us_per_step": cpu / steps * 1e6, "wall_s": wall, "dropped": dropped, "write_failures": failures}


def _atomic_parquet(path: Path, table: Any) -> None:
    import pyarrow.parquet as pq

    tmp = path.with_name(f".{path.name}.tmp")
    with open(tmp, "wb") as fh:
        pq.write_table(table, fh, compression="zstd")
        fh.flush()
        os.fsync(fh.fileno())
    os.replace(tmp, path)


def child_floor(steps: int, step_ms: float, workdir: Path) -> dict[str, Any]:
    """The same workload written by a bare thread with pyarrow only: the floor."""
    import collections

    import numpy as np
    import pyarrow as pa
    from overhead import SampleFactory, make_metrics

    rng = random.Random(7)
    metrics = [make_metrics(rng) for _ in range(64)]
    factory = SampleFactory(rng, 64)
    out = workdir / "floor"
    out.mkdir(parents=True)
    queue: collections.deque[Any] = collections.deque()
    wake, done = threading.Event(), threading.Event()
    state: dict[str, Any] = {"stop": False, "files": 0}
    pick = random.Random(7)

    def flush(step_rows: list[dict[str, Any]], sample_rows: list[dict[str, Any]]) -> None:
        if step_rows:
            _atomic_parquet(out / f"s{state['files']}.parquet", pa.Table.from_pylist(step_rows))
        if sample_rows:
            _atomic_parquet(out / f"x{state['files']}.parquet", pa.Table.from_pylist(sample_rows))
        state["files"] += 1

    def run() -> None:
        step_rows: list[dict[str, Any]] = []
        sample_rows: list[dict[str, Any]] = []
        last = time.monotonic()
        while True:
            wake.wait(0.2)
            wake.clear()
            while queue:
                kind, step, payload, wall = queue.popleft()
                if kind == 0:
                    row = {"step": step, "wall_time": wall}
                    for k, v in payload.items():
                        if isinstance(v, dict):
                            row.update({f"reward_component.{a}": b for a, b in v.items()})
                        else:
                            row[k] = v
                    step_rows.append(row)
                else:
                    rewards = np.array([s["reward_total"] for s in payload])
                    order = np.argsort(rewards)
                    keep = set(order[:2].tolist()) | set(order[-2:].tolist())
                    rest = [i for i in range(len(payload)) if i not in keep]
                    keep.update(pick.sample(rest, 4))
                    for i in sorted(keep):
                        s = payload[i]
                        sample_rows.append({**s, "group_id": str(s["group_id"]), "step": step, "rank": 0,
                                            "sample_id": f"{step}-0-{i}", "capture_reason": "random"})
                if len(step_rows) >= 200:
                    flush(step_rows, sample_rows)
                    step_rows, sample_rows, last = [], [], time.monotonic()
            if state["stop"] or time.monotonic() - last >= 5.0:
                flush(step_rows, sample_rows)
                step_rows, sample_rows, last = [], [], time.monotonic()
                if state["stop"]:
                    state["cpu_end"] = time.thread_time()  # this thread's CPU clock, read before it ends
                    done.set()
                    return

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    clock = _thread_clock(thread)
    pause = step_ms / 1000.0
    warm = 200
    c0 = 0.0
    for step in range(warm + steps):
        if step == warm:
            c0 = clock()
        queue.append((0, step, metrics[step % 64], time.time()))
        queue.append((1, step, factory(step), None))
        time.sleep(pause)
    state["stop"] = True
    wake.set()
    done.wait(60)
    return {"us_per_step": (state["cpu_end"] - c0) / steps * 1e6}


def child_idle(idle_s: float, workdir: Path) -> dict[str, Any]:
    """Writer-thread CPU per second of an open Recorder that is given nothing to do."""
    import _common as C
    from rlprobe import Recorder

    rec = Recorder(workdir / "idle", algorithm="bench", install_handlers=False)
    clock = C.writer_cpu_clock(rec.run_id)
    assert clock is not None
    time.sleep(1.0)  # past the start-up (prewarm, recorder_open)
    c0 = clock()
    time.sleep(idle_s)
    cpu = clock() - c0
    rec.close()
    return {"ms_per_s": cpu / idle_s * 1e3}


def child_idle_floor(idle_s: float, timeout_s: float) -> dict[str, Any]:
    """CPU per second of a bare thread that waits on an Event with timeout_s, in a loop."""
    stop = threading.Event()

    def run() -> None:
        while not stop.wait(timeout_s):
            pass

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    clock = _thread_clock(thread)
    time.sleep(0.5)
    c0 = clock()
    time.sleep(idle_s)
    cpu = clock() - c0
    stop.set()
    thread.join()
    return {"ms_per_s": cpu / idle_s * 1e3}


def child_main(argv: list[str]) -> None:
    what, params = argv[0], json.loads(argv[1])
    sys.path.insert(0, str(HERE))
    import rlprobe

    workdir = Path(tempfile.mkdtemp(prefix="rlprobe-bench-wcpu-"))
    try:
        if what == "steps":
            result = child_steps(params["steps"], params["step_ms"], workdir)
        elif what == "floor":
            result = child_floor(params["steps"], params["step_ms"], workdir)
        elif what == "idle":
            result = child_idle(params["idle_s"], workdir)
        else:
            result = child_idle_floor(params["idle_s"], params["timeout_s"])
    finally:
        shutil.rmtree(workdir, ignore_errors=True)
    result["rlprobe_from"] = str(Path(rlprobe.__file__).parent.parent)
    print("RESULT " + json.dumps(result))


def run_child(what: str, params: dict[str, Any], src: Path) -> dict[str, Any]:
    """One rep in a fresh process importing rlprobe from src (the overhead.py workload beside it)."""
    env = dict(os.environ, PYTHONPATH=str(src))
    out = subprocess.run([sys.executable, str(Path(__file__).resolve()), "--child", what, json.dumps(params)],
                         env=env, capture_output=True, text=True, timeout=600)
    line = next((l for l in out.stdout.splitlines() if l.startswith("RESULT ")), None)
    if out.returncode != 0 or line is None:
        raise SystemExit(f"child {what} from {src} failed (exit {out.returncode}):\n{out.stderr[-3000:]}")
    result = json.loads(line[len("RESULT "):])
    if Path(result["rlprobe_from"]).resolve() != src.resolve():
        raise SystemExit(f"child {what} imported rlprobe from {result['rlprobe_from']}, not {src}")
    return result


# -- the parent ---------------------------------------------------------------------------------
def _ratio(a: float, b: float) -> float | None:
    """a / b, or None when b is not above 0: an idle shorter than a wait loop's period can measure
    no CPU at all (the thread never woke), and a ratio to nothing means nothing."""
    return a / b if b > 0 else None


def _median_ratio(pairs: list[tuple[float, float]]) -> float | None:
    """The median of a / b over the pairs whose b is above 0; None when none is."""
    import _common as C

    ratios = [a / b for a, b in pairs if b > 0]
    return C.median(ratios) if ratios else None


def main() -> None:
    sys.path.insert(0, str(HERE))
    import _common as C

    parser = C.base_parser(__doc__)
    parser.add_argument("--baseline-src", metavar="DIR", help="a checkout to measure the same way (the before figures)")
    parser.add_argument("--steps", type=int, default=2000, help="steps measured per rep (after 200 of warm-up)")
    parser.add_argument("--step-ms", type=float, default=5.0, help="the training thread sleeps this long between steps")
    parser.add_argument("--idle-s", type=float, default=10.0, help="seconds of idle measured per rep")
    parser.add_argument("--reps", type=int, default=5, help="reps per arm (fresh processes, interleaved)")
    args = parser.parse_args()
    if args.quick:
        args.steps, args.idle_s, args.reps = 300, 2.0, 1
    if args.idle_s <= 0 or args.steps <= 0 or args.reps <= 0:
        parser.error("--idle-s, --steps and --reps must be above 0 (each is divided by)")

    this = C.REPO
    base = Path(args.baseline_src).resolve() if args.baseline_src else None
    params = {"steps": args.steps, "step_ms": args.step_ms, "idle_s": args.idle_s, "reps": args.reps,
              "baseline_src": str(base) if base else None, "samples_per_step": 64, "metrics_per_step": 44,
              "sampling": "SamplingConfig() default (top 2, bottom 2, random 4)"}
    info = C.machine_info()
    C.header("writer_cpu", info, params)
    load_start = os.getloadavg()
    t_start = time.perf_counter()
    step_params = {"steps": args.steps, "step_ms": args.step_ms}
    arms: dict[str, list[dict[str, Any]]] = {}

    def add(label: str, what: str, p: dict[str, Any], src: Path) -> None:
        arms.setdefault(label, []).append(run_child(what, p, src))

    for rep in range(args.reps):
        order = [("this", this), ("baseline", base)] if rep % 2 == 0 else [("baseline", base), ("this", this)]
        for name, src in order:
            if src is not None:
                add(f"steps: {name}", "steps", step_params, src)
        add("steps: floor (bare pyarrow thread)", "floor", step_params, this)
        for name, src in order:
            if src is not None:
                add(f"idle: {name}", "idle", {"idle_s": args.idle_s}, src)
        add("idle: floor, Event.wait(0.2) loop", "idle_floor", {"idle_s": args.idle_s, "timeout_s": 0.2}, this)
        add("idle: floor, Event.wait(5) loop", "idle_floor", {"idle_s": args.idle_s, "timeout_s": 5.0}, this)
        print(f"  rep {rep + 1}/{args.reps} done ({time.perf_counter() - t_start:.0f} s): "
              + ", ".join(f"{label} {C.fmt(reps[-1]['us_per_step' if label.startswith('steps') else 'ms_per_s'])}"
                          for label, reps in arms.items()))
        sys.stdout.flush()

    def med(label: str, key: str) -> float:
        return C.median(r[key] for r in arms[label]) if label in arms else float("nan")

    floor_step = med("steps: floor (bare pyarrow thread)", "us_per_step")
    base_step = med("steps: baseline", "us_per_step")
    idle_floor = med("idle: floor, Event.wait(0.2) loop", "ms_per_s")
    base_idle = med("idle: baseline", "ms_per_s")
    rows = []
    for label, reps in arms.items():
        key = "us_per_step" if label.startswith("steps") else "ms_per_s"
        values = [r[key] for r in reps]
        m = C.median(values)
        to_floor = _ratio(m, floor_step if key == "us_per_step" else idle_floor)
        to_base = _ratio(m, base_step if key == "us_per_step" else base_idle) if base else None
        rows.append([label, m, min(values), max(values), "-" if to_floor is None else f"{to_floor:.2f}x",
                     "-" if to_base is None else f"{to_base:.2f}x", str(sum(r.get("dropped", 0) for r in reps))])
    C.print_table(
        f"writer-thread CPU: per step (us) with log_step(44) + log_samples(64) every {args.step_ms:g} ms; idle (ms/s); "
        f"medians of {args.reps} reps",
        ["arm", "median", "min", "max", "/ floor", "/ baseline", "dropped"], rows)
    paired: dict[str, float | None] = {}
    for kind, key in (("steps", "us_per_step"), ("idle", "ms_per_s")):
        this_reps = arms.get(f"{kind}: this", [])
        if base:
            paired[f"{kind}_this_to_baseline"] = _median_ratio([(a[key], b[key]) for a, b in zip(this_reps, arms[f"{kind}: baseline"])])
    paired["steps_this_to_floor"] = _median_ratio(
        [(a["us_per_step"], b["us_per_step"]) for a, b in zip(arms["steps: this"], arms["steps: floor (bare pyarrow thread)"])])
    print("  ratios of the same rep, medians: " + ", ".join(f"{k} {'-' if v is None else f'{v:.2f}'}" for k, v in paired.items()))
    if not idle_floor > 0 or (base and not base_idle > 0):
        print(f"  idle ratios left out: a waiting thread used no measurable CPU in --idle-s {args.idle_s:g} s "
              "(too short for the floor's wait loop to wake; give a few seconds)")
    load_end = os.getloadavg()
    print(f"  load average (1 min) at start {load_start[0]:.2f}, at end {load_end[0]:.2f} on {os.cpu_count()} cpus"
          + ("  <- other processes were competing for the CPU" if max(load_start[0], load_end[0]) > 1.5 else ""))
    targets = {
        "writer_cpu_us_per_step_64_samples": C.target(med("steps: this", "us_per_step"), "<=", 60, " us"),
        "idle_writer_cpu_ms_per_s": C.target(med("idle: this", "ms_per_s"), "<=", 0.4, " ms/s"),
        # The issue set 60 us beside a floor it measured at 48 us: the same margin over the floor
        # measured here, for a machine slower or busier than that one.
        "writer_cpu_to_floor_same_rep": C.target(paired["steps_this_to_floor"] if paired["steps_this_to_floor"] is not None
                                                 else float("nan"), "<=", 60 / 48),
    }
    print("\ntargets (reported, not asserted):")
    for name, t in targets.items():
        print(f"  {name:<36} {C.fmt(t['value'])}  {C.met_text(t)}")
    total_s = time.perf_counter() - t_start
    print(f"\ntotal {total_s:.0f} s")
    C.write_json("writer_cpu", args.out, {
        "benchmark": "writer_cpu", "machine": info, "params": params,
        "arms": {label: {"median": C.median(r["us_per_step" if label.startswith("steps") else "ms_per_s"] for r in reps),
                         "reps": reps} for label, reps in arms.items()},
        "ratios": {"steps_this_to_floor": _ratio(med("steps: this", "us_per_step"), floor_step),
                   "steps_this_to_baseline": _ratio(med("steps: this", "us_per_step"), base_step) if base else None,
                   "idle_this_to_poll_floor": _ratio(med("idle: this", "ms_per_s"), idle_floor),
                   "idle_this_to_baseline": _ratio(med("idle: this", "ms_per_s"), base_idle) if base else None},
        "ratios_same_rep": paired, "targets": targets, "total_s": total_s,
        "load_average_1min": {"start": load_start[0], "end": load_end[0]},
    })


if __name__ == "__main__":
    if len(sys.argv) > 1 and sys.argv[1] == "--child":
        child_main(sys.argv[2:])
    else:
        main()
