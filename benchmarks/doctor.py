"""How long `rlprobe doctor` takes: one 10k-step run, one 100k-step run, and a root of 100 runs x 10k steps.

Runs are synthetic (rlprobe.synth) and written with RunWriter directly (no samples, so the
build is quick); the doctor is timed end to end through the library (diagnose_path) and once
through the CLI. The same-run baseline is a full scan of the steps view (open + SELECT *),
which every diagnosis has to pay at least once: the ratio says what the detectors add. The CPU
time of diagnose_path (time.process_time, every thread of the process) is printed beside its
wall time: on a shared machine it moves less with the load.

    python benchmarks/doctor.py            # 10k- and 100k-step runs, root of 100 x 10k steps
    python benchmarks/doctor.py --quick    # 10k- and 20k-step runs, root of 10 x 2k steps

Targets: < 1 s in-process on the 10k-step run (issue 12), < 2 s on the 100k-step run and
< 20 s on the root (issue 3).
"""

from __future__ import annotations

import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Callable

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import base_parser, fmt, header, machine_info, median, print_table, target, times, write_json  # noqa: E402

from rlprobe.doctor import diagnose_path  # noqa: E402
from rlprobe.record.writer import RunWriter  # noqa: E402
from rlprobe.schemas import RunManifest  # noqa: E402
from rlprobe.store import open_store  # noqa: E402
from rlprobe.synth import make_run  # noqa: E402


def build(run_dir: Path, kind: str, n_steps: int, seed: int) -> None:
    """Write a synthetic run's step series (no samples) straight to disk."""
    run = make_run(kind, n_steps=n_steps, seed=seed)
    writer = RunWriter(run_dir, RunManifest(algorithm=run.truth.algorithm, run_id=f"{kind}-{seed}"))
    rows = []
    for i, step in enumerate(run.steps):
        row = {"step": int(step)}
        for name, values in run.series.items():
            if run.logged(name)[i] and np.isfinite(values[i]):
                row[name] = float(values[i])
        for name, values in run.components.items():
            row[f"reward_component.{name}"] = float(values[i])
        rows.append(row)
        if len(rows) == 20_000:
            writer.write_steps(rows)
            rows = []
    if rows:
        writer.write_steps(rows)
    writer.compact()


def cpu_seconds(fn: Callable[[], object], repeats: int) -> list[float]:
    """CPU seconds (process_time: every thread of this process) of each of `repeats` calls of fn()."""
    out = []
    for _ in range(repeats):
        t0 = time.process_time()
        fn()
        out.append(time.process_time() - t0)
    return out


def main() -> None:
    parser = base_parser(__doc__ or "")
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    big_steps, root_runs, root_steps = (20_000, 10, 2_000) if args.quick else (100_000, 100, 10_000)
    info = machine_info()
    params = {"big_steps": big_steps, "root_runs": root_runs, "root_steps": root_steps, "repeats": args.repeats}
    header("doctor", info, params)
    figures: dict[str, object] = {}
    with tempfile.TemporaryDirectory(prefix="rlprobe-bench-doctor-") as tmp:
        tmp_path = Path(tmp)
        t0 = time.perf_counter()
        build(tmp_path / "big", "ENTROPY_COLLAPSE", big_steps, 7)
        build(tmp_path / "ten", "ENTROPY_COLLAPSE", 10_000, 8)
        kinds = ["healthy", "KL_BLOWUP", "ENTROPY_COLLAPSE", "CLIP_SATURATION", "REWARD_HACK_LENGTH"]
        for i in range(root_runs):
            build(tmp_path / "root" / f"team-{i % 7}" / f"run-{i:03d}", kinds[i % len(kinds)], root_steps, i)
        print(f"  built the runs in {time.perf_counter() - t0:.0f} s")

        def scan(path: Path) -> None:
            open_store(path).table("SELECT * FROM steps")

        rows = []
        for label, path, limit in (("run of 10000 steps", tmp_path / "ten", 1.0),
                                   ("run of %d steps" % big_steps, tmp_path / "big", 2.0),
                                   ("root of %d x %d steps" % (root_runs, root_steps), tmp_path / "root", 20.0)):
            base = median(times(lambda: scan(path), args.repeats))
            doc = median(times(lambda: diagnose_path(path), args.repeats))
            cpu = median(cpu_seconds(lambda: diagnose_path(path), args.repeats))
            t0 = time.perf_counter()
            subprocess.run([sys.executable, "-m", "rlprobe", "doctor", str(path)], capture_output=True)
            cli = time.perf_counter() - t0
            goal = target(doc, "<", limit, "s")
            figures[label] = {"doctor_s": doc, "doctor_cpu_s": cpu, "cli_s": cli, "baseline_scan_s": base, "ratio_to_scan": doc / base,
                              "target": goal}
            rows.append((label, fmt(doc), fmt(cpu), fmt(cli), fmt(base), f"{doc / base:.1f}x", f"< {limit} s", "met" if goal["met"] else "NOT MET"))
        print_table("rlprobe doctor", ["input", "diagnose_path s", "its CPU s", "CLI s", "scan s (baseline)", "ratio", "target", ""], rows)
    write_json("doctor", args.out, {"benchmark": "doctor", "machine": info, "params": params, "figures": figures})


if __name__ == "__main__":
    main()
