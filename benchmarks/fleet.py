"""How `rlprobe ls`, `rlprobe query ROOT` and `rlprobe doctor ROOT` scale: a root of 1,000 runs x 5,000 steps.

The root is built fast: five synthetic runs (rlprobe.synth, one per kind) are made once, and each
of the 1,000 run directories (--runs) gets a manifest and lifecycle events from RunWriter and one of the
five step tables as its compacted steps.parquet (no samples). Commands are timed as a user runs
them (`python -m rlprobe ...`, a fresh process each time). The same-run baseline is the floor of
any query over the root: a bare DuckDB scan of every steps.parquet (`count(*)` over the glob)
without rlprobe's views; each command's ratio to it says what the views and the command add.

It also asks EXPLAIN ANALYZE whether a filter on run_id lets the scan skip other runs' files,
by comparing the files a filtered query reads with those a one-run query reads.

    python benchmarks/fleet.py                          # 1,000 runs x 5,000 steps (a few minutes to build)
    python benchmarks/fleet.py --quick                  # 50 runs x 1,000 steps
    python benchmarks/fleet.py --runs 200 --steps 5000  # another size (one alone: the other's default)
    python benchmarks/fleet.py --no-doctor              # skip the doctor (the slowest command)

Targets (issue 7, "stay fast"): ls < 5 s, a root query < 10 s, doctor on the root < 120 s.
These are this benchmark's reading of "fast" on a laptop-class machine, not a contract.
"""

from __future__ import annotations

import argparse
import re
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import base_parser, fmt, header, machine_info, median, print_table, target, write_json  # noqa: E402


from rlprobe.record.writer import RunWriter, atomic_write_table  # noqa: E402
from rlprobe.schemas import Event, RunManifest  # noqa: E402
from rlprobe.store import open_store  # noqa: E402
from rlprobe.synth import make_run  # noqa: E402

KINDS = ["healthy", "KL_BLOWUP", "ENTROPY_COLLAPSE", "CLIP_SATURATION", "REWARD_HACK_LENGTH"]


def step_table(kind: str, n_steps: int, seed: int) -> pa.Table:
    """One synthetic run's step series as the table a RunWriter would compact."""
    run = make_run(kind, n_steps=n_steps, seed=seed)
    columns: dict[str, Any] = {"step": pa.array(np.asarray(run.steps, dtype=np.int64))}
    for name, values in run.series.items():
        logged = np.asarray(run.logged(name)) & np.isfinite(values)
        columns[name] = pa.array(np.where(logged, values, np.nan), mask=~logged, type=pa.float64())
    for name, values in run.components.items():
        columns[f"reward_component.{name}"] = pa.array(np.asarray(values, dtype=np.float64))
    columns["wall_time"] = pa.array(1.7e9 + np.arange(len(run.steps), dtype=np.float64))
    return pa.table(columns)


def build_root(root: Path, n_runs: int, n_steps: int) -> None:
    """n_runs closed runs in team-*/ folders, each with a manifest, events and a steps.parquet."""
    tables = {kind: step_table(kind, n_steps, seed) for seed, kind in enumerate(KINDS)}
    for i in range(n_runs):
        kind = KINDS[i % len(KINDS)]
        run_dir = root / f"team-{i % 10}" / f"run-{i:04d}"
        writer = RunWriter(run_dir, RunManifest(run_id=f"run-{i:04d}", algorithm="grpo", model_name=kind,
                                                created_at=f"2026-01-01T00:{i // 60 % 60:02d}:{i % 60:02d}+00:00"))
        writer.append_event(Event(kind="recorder_open", timestamp=1.7e9 - 1, data={"pid": 1}))
        atomic_write_table(run_dir / "steps.parquet", tables[kind])
        writer.append_event(Event(kind="recorder_close", timestamp=1.7e9 + n_steps, data={"dropped": 0}))


def cli_seconds(args: list[str], repeats: int) -> tuple[list[float], str, float]:
    """Wall seconds of `python -m rlprobe ARGS` (a fresh process each time), its last stdout, and
    the peak resident memory in MB of any child so far (Linux reports the largest child's)."""
    times, out = [], ""
    for _ in range(repeats):
        t0 = time.perf_counter()
        proc = subprocess.run([sys.executable, "-m", "rlprobe", *args], capture_output=True, text=True)
        times.append(time.perf_counter() - t0)
        if proc.returncode not in (0, 1):
            raise SystemExit(f"rlprobe {' '.join(args)} failed ({proc.returncode}): {proc.stderr.strip()}")
        out = proc.stdout
    return times, out, resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024


def baseline_seconds(root: Path, repeats: int) -> list[float]:
    """A bare DuckDB count over every steps.parquet, in a fresh process like the commands."""
    code = ("import duckdb, sys; duckdb.connect().sql(\"SELECT count(*) FROM read_parquet('\" + sys.argv[1] + "
            "\"/**/steps.parquet')\").fetchall()")
    out = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        subprocess.run([sys.executable, "-c", code, str(root)], check=True)
        out.append(time.perf_counter() - t0)
    return out


def files_read(run_sql: Any, sql: str) -> tuple[int, float]:
    """(files the query opened, seconds) from EXPLAIN ANALYZE of sql, run by run_sql."""
    t0 = time.perf_counter()
    plan = "\n".join(row[1] for row in run_sql("EXPLAIN ANALYZE " + sql))
    seconds = time.perf_counter() - t0
    counts = [int(n.replace(",", "")) for n in re.findall(r"Total Files Read:\s*([\d,]+)", plan)]
    return (sum(counts) if counts else -1), seconds


def explain(root: Path, one_run: Path, run_id: str) -> dict[str, Any]:
    """Does a run_id filter over the root read only that run's files?

    Three ways to run the same query: through rlprobe (Store.rows, as `rlprobe query` does: the
    query is read first and the views narrowed to the runs it can read), through the bare
    connection with the views (a DuckDB session from `rlprobe sql`: no narrowing), and over the
    one run directory (the floor). Files counted are every file the plan opened: step files and
    the manifests.
    """
    sql = f"SELECT max(kl_mean) FROM steps WHERE run_id = '{run_id}'"
    store = open_store(root)
    scoped_files, scoped_s = files_read(lambda q: store.rows(q)[2], sql)
    bare_files, bare_s = files_read(lambda q: store.con.sql(q).fetchall(), sql)
    single = open_store(one_run)
    single_files, single_s = files_read(lambda q: single.rows(q)[2], "SELECT max(kl_mean) FROM steps")
    return {
        "run_id_filter": {"files_read": scoped_files, "seconds": scoped_s},
        "run_id_filter_bare_connection": {"files_read": bare_files, "seconds": bare_s},
        "one_run_directory": {"files_read": single_files, "seconds": single_s},
    }


def _at_least(low: int) -> Any:
    """An argparse type: a whole number no smaller than low."""

    def parse(text: str) -> int:
        value = int(text)
        if value < low:
            raise argparse.ArgumentTypeError(f"at least {low}, got {value}")
        return value

    return parse


def main() -> None:
    parser = base_parser(__doc__ or "")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--no-doctor", action="store_true", help="do not time rlprobe doctor ROOT")
    parser.add_argument("--runs", type=_at_least(1), default=None, metavar="N",
                        help="run directories in the root (default 1000, --quick 50)")
    parser.add_argument("--steps", type=_at_least(10), default=None, metavar="N",
                        help="steps per run, at least 10 as rlprobe.synth makes them (default 5000, --quick 1000)")
    args = parser.parse_args()
    n_runs = args.runs or (50 if args.quick else 1_000)
    n_steps = args.steps or (1_000 if args.quick else 5_000)
    info = machine_info()
    params = {"runs": n_runs, "steps_per_run": n_steps, "repeats": args.repeats, "doctor": not args.no_doctor}
    header("fleet", info, params)
    figures: dict[str, Any] = {}
    with tempfile.TemporaryDirectory(prefix="rlprobe-bench-fleet-") as tmp:
        root = Path(tmp) / "root"
        t0 = time.perf_counter()
        build_root(root, n_runs, n_steps)
        figures["build_s"] = time.perf_counter() - t0
        print(f"  built {n_runs} runs x {n_steps} steps in {figures['build_s']:.0f} s")

        base = baseline_seconds(root, args.repeats)
        runs = f"run-{n_runs // 2:04d}"
        one_run = root / f"team-{(n_runs // 2) % 10}" / runs
        commands = {
            "ls": ["ls", str(root), "--csv"],
            "query_root_group_by_run": ["query", str(root), "SELECT run_id, max(kl_mean) AS kl FROM steps GROUP BY run_id", "--csv"],
            "query_root_where_run_id": ["query", str(root), f"SELECT count(*), max(kl_mean) FROM steps WHERE run_id = '{runs}'", "--csv"],
            "query_one_run_dir": ["query", str(one_run), "SELECT count(*), max(kl_mean) FROM steps", "--csv"],
        }
        if not args.no_doctor:
            commands["doctor_root"] = ["doctor", str(root), "--json"]
        rows = [("baseline: bare DuckDB count(*) over every steps.parquet", median(base), 1.0, None, "")]
        figures["baseline_s"] = {"all": base, "median": median(base)}
        targets = {"ls": 5.0, "query_root_group_by_run": 10.0, "query_root_where_run_id": 10.0, "doctor_root": 120.0}
        for name, argv in commands.items():
            repeats = 1 if name == "doctor_root" else args.repeats
            times, out, peak_mb = cli_seconds(argv, repeats)
            med = median(times)
            entry: dict[str, Any] = {"all": times, "median": med, "ratio_to_baseline": med / median(base),
                                     "output_lines": len(out.splitlines()), "peak_rss_mb_of_children_so_far": peak_mb}
            if name in targets:
                entry["target"] = target(med, "<", targets[name], " s")
            figures[name] = entry
            verdict = (f"< {targets[name]:g} s: {'met' if entry['target']['met'] else 'NOT met'}") if name in targets else ""
            rows.append((f"rlprobe {' '.join(argv[:1])} ({name})", med, med / median(base), peak_mb, verdict))
        print_table(f"seconds (median of {args.repeats}; doctor once), fresh process each; peak MB: largest child so far",
                    ["command", "s", "x baseline", "peak MB", "target"], rows)

        figures["explain"] = explain(root, one_run, runs)
        e = figures["explain"]
        print_table("EXPLAIN ANALYZE: files a query opens (step files and manifests)", ["query", "files read", "s"], [
            (f"steps WHERE run_id = '{runs}' (root, through rlprobe)", e["run_id_filter"]["files_read"], e["run_id_filter"]["seconds"]),
            ("the same on the bare DuckDB connection (no narrowing)", e["run_id_filter_bare_connection"]["files_read"],
             e["run_id_filter_bare_connection"]["seconds"]),
            ("steps of the one run directory", e["one_run_directory"]["files_read"], e["one_run_directory"]["seconds"]),
        ])
        skipped = 0 <= e["run_id_filter"]["files_read"] <= e["one_run_directory"]["files_read"] + 1
        print(f"\n  a run_id filter {'skips' if skipped else 'does NOT skip'} other runs' files "
              f"({fmt(e['run_id_filter']['files_read'])} read, of {n_runs} runs)")
        figures["run_id_filter_skips_files"] = skipped
    write_json("fleet", args.out, {"benchmark": "fleet", "machine": info, "params": params, "figures": figures})


if __name__ == "__main__":
    main()
