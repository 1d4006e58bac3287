"""Wide recordings: `rlprobe doctor`, `report` and `query` on a 30-step run with 10,000 extra
metric names, against the same run without them, measured in the same run (issue 13, item 15).

Both runs are recorded through rlprobe.Recorder with the same run_id and the same 44 metrics
per step (overhead.py's log_step workload: 38 scalar fields, kl_positional, 3 reward
components, 2 extras); the wide one also logs `extra={...}` with 10,000 names per step. Each
command runs in a fresh process (`python -m rlprobe ...`), `--repeats` times: the median wall
time and the peak resident memory of that process (os.wait4) are reported, wide over baseline
as a ratio. The doctor's findings (`doctor --json`) and the report's charts and findings (the
page's JSON island) must be the same on both runs; the script says whether they are.

    python benchmarks/wide.py            # 30 steps x 10,000 extra names, 3 repeats (~2 min)
    python benchmarks/wide.py --quick    # 30 steps x 1,000 extra names, 1 repeat

Targets (issue 13, item 15): doctor and report each < 3 s and < 300 MB on the wide run.
Before this benchmark existed the issue measured query 9.9 s, doctor 15.5 s / 527 MB and report
21.9 s / 738 MB there; on this machine the doctor and report died in DuckDB (SIGFPE).
"""

from __future__ import annotations

import json
import os
import random
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import base_parser, header, machine_info, median, print_table, target, write_json  # noqa: E402

STEPS = 30
RUN_ID = "wide-bench"


def build(run_dir: Path, n_extra: int) -> None:
    """30 steps of the overhead workload, plus n_extra extra.* names per step (their values
    drawn from their own generator, so both runs log the same 44 metrics)."""
    from overhead import make_metrics

    from rlprobe import Recorder

    rng, extra_rng = random.Random(0), random.Random(1)
    rec = Recorder(run_dir, algorithm="grpo", run_id=RUN_ID, capture_env=False, install_handlers=False)
    for step in range(STEPS):
        metrics = make_metrics(rng)
        if n_extra:
            metrics["extra"] = {f"layer{i:05d}.grad_norm": extra_rng.random() for i in range(n_extra)}
        rec.log_step(step, **metrics)
    rec.close()


def cli(args: list[str]) -> tuple[float, float, int, str]:
    """(wall seconds, peak RSS in MB, exit code, stdout) of one `python -m rlprobe ARGS`."""
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
        t0 = time.perf_counter()
        proc = subprocess.Popen([sys.executable, "-m", "rlprobe", *args], stdout=out, stderr=err)
        _, status, usage = os.wait4(proc.pid, 0)  # this child's own peak memory, not the largest so far
        seconds = time.perf_counter() - t0
        proc.returncode = code = os.waitstatus_to_exitcode(status)
        out.seek(0)
        err.seek(0)
        stdout, stderr = out.read().decode(errors="replace"), err.read().decode(errors="replace")
    if code not in (0, 1):  # 1: the doctor found something
        raise SystemExit(f"rlprobe {' '.join(args)} failed ({code}): {stderr.strip()[-400:]}")
    return seconds, usage.ru_maxrss / 1024, code, stdout


def findings_of(doctor_json: str) -> list[dict[str, Any]]:
    payload = json.loads(doctor_json)
    payload = payload[0] if isinstance(payload, list) else payload
    return payload["findings"]


def report_payload(html_path: Path) -> dict[str, Any]:
    """The report page's chart JSON and its findings section (what differs from run to run is
    the generation time and the run folder, left out)."""
    html = html_path.read_text(encoding="utf-8")
    island = re.search(r'<script type="application/json"[^>]*>(.*?)</script>', html, re.S)
    findings = re.search(r'<section id="findings">(.*?)</section>', html, re.S)
    return {"charts": json.loads(island.group(1)) if island else None, "findings": findings.group(1) if findings else None}


def main() -> None:
    if sys.argv[1:2] == ["--build"]:
        build(Path(sys.argv[2]), int(sys.argv[3]))
        return
    parser = base_parser(__doc__ or "")
    parser.add_argument("--extra", type=int, default=None, help="extra metric names in the wide run (default 10,000; 1,000 with --quick)")
    parser.add_argument("--repeats", type=int, default=None, help="runs of each command (default 3; 1 with --quick)")
    args = parser.parse_args()
    n_extra = args.extra or (1_000 if args.quick else 10_000)
    repeats = args.repeats or (1 if args.quick else 3)
    info = machine_info()
    params = {"steps": STEPS, "extra_names": n_extra, "repeats": repeats}
    header("wide", info, params)
    figures: dict[str, Any] = {}
    with tempfile.TemporaryDirectory(prefix="rlprobe-bench-wide-") as tmp:
        runs = {"baseline": Path(tmp) / "baseline" / RUN_ID, "wide": Path(tmp) / "wide" / RUN_ID}
        for name, run_dir in runs.items():
            # built in a child: a child's peak memory counts the parent's from before its exec,
            # so the parent stays small (a few dozen MB, below every command's own peak)
            t0 = time.perf_counter()
            subprocess.run([sys.executable, __file__, "--build", str(run_dir), str(n_extra if name == "wide" else 0)], check=True)
            figures[f"build_{name}_s"] = time.perf_counter() - t0
        query = 'SELECT step, loss, "extra.tokens_per_s" FROM steps ORDER BY step'
        commands = {
            "doctor": lambda run: ["doctor", str(run), "--json"],
            "report": lambda run: ["report", str(run), "--out", str(Path(tmp) / f"{run.parent.name}.html")],
            "query": lambda run: ["query", str(run), query, "--csv"],
        }
        rows, outputs = [], {}
        for command, make_args in commands.items():
            for name, run_dir in runs.items():
                done = [cli(make_args(run_dir)) for _ in range(repeats)]
                figures[f"{command}_{name}"] = {"seconds": [d[0] for d in done], "median_s": median(d[0] for d in done),
                                                "peak_rss_mb": max(d[1] for d in done), "exit_code": done[-1][2]}
                outputs[(command, name)] = done[-1][3]
            base, wide = figures[f"{command}_baseline"], figures[f"{command}_wide"]
            rows.append([command, base["median_s"], wide["median_s"], wide["median_s"] / base["median_s"],
                         base["peak_rss_mb"], wide["peak_rss_mb"], wide["peak_rss_mb"] / base["peak_rss_mb"]])
        same = {
            "doctor_findings": findings_of(outputs[("doctor", "baseline")]) == findings_of(outputs[("doctor", "wide")]),
            "report_charts_and_findings": report_payload(Path(tmp) / "baseline.html") == report_payload(Path(tmp) / "wide.html"),
            "query_rows": outputs[("query", "baseline")] == outputs[("query", "wide")],
        }
    print_table(f"{STEPS} steps: 44 metrics (baseline) vs 44 + {n_extra:,} extra names (wide); median of {repeats}",
                ["command", "baseline s", "wide s", "ratio", "baseline MB", "wide MB", "ratio"], rows)
    targets = {}
    for command in ("doctor", "report"):
        wide = figures[f"{command}_wide"]
        targets[f"{command}_wide_s"] = target(wide["median_s"], "<", 3.0, " s")
        targets[f"{command}_wide_mb"] = target(wide["peak_rss_mb"], "<", 300.0, " MB")
    print()
    for name, t in targets.items():
        print(f"  {name}: {t['value']:.2f} ({t['target']}: {'met' if t['met'] else 'NOT met'})")
    for name, ok in same.items():
        print(f"  same {name.replace('_', ' ')} on both runs: {'yes' if ok else 'NO'}")
    print(f"  load average (1 min): {os.getloadavg()[0]:.2f} on {info['cpu_count']} cpus")
    write_json("wide", args.out, {"machine": info, "params": params, "figures": figures, "targets": targets, "same": same,
                                  "load_average_1m": os.getloadavg()[0]})


if __name__ == "__main__":
    main()
