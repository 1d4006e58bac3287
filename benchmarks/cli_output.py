"""`rlprobe query RUN "SELECT * FROM steps"` on a 100k-step run: as a table, as CSV, as JSON.

A user points the query at every step of a long run and waits: the table used to format every
cell of every row (100k rows: 5.3 s, 1 GB) for a terminal that shows a screenful; CSV and JSON
must write all of them, a batch at a time. Each command runs as a user runs it (`python -m
rlprobe ...`, a fresh process, stdout to a file), alternating between this checkout and a
baseline checkout given with --baseline-src (say, the commit before a change: `git archive <sha>
| tar -x -C /tmp/base`), so both see the same load. The floor in the same run is DuckDB fetching
the same rows over the same views in a fresh process (`open_store(RUN).table(SQL)`: imports,
views and the Arrow fetch, nothing printed).

For each command: median wall time, CPU time (user + system of the child) and peak RSS of the
child (os.wait4), the ratio to the floor and to the baseline checkout; for CSV and JSON whether
the bytes printed are the same as the baseline checkout's (they must be).

    python benchmarks/cli_output.py --baseline-src /tmp/base
    python benchmarks/cli_output.py --quick            # 10k steps, 1 repetition

Targets: the table within 1.5x of the floor's wall time and under 300 MB; CSV and JSON output
byte-identical to the baseline checkout's.
"""

from __future__ import annotations

import hashlib
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import REPO, base_parser, header, machine_info, median, met_text, print_table, summary, target, write_json  # noqa: E402

SQL = "SELECT * FROM steps ORDER BY step"

# `python -m` puts the current folder first on sys.path, ahead of PYTHONPATH: run from a folder
# that holds no rlprobe, or a checkout in the current folder would be timed for both sides
_NEUTRAL = tempfile.gettempdir()


def commands(run: str) -> dict[str, list[str]]:
    """What is timed: label -> arguments after `python`."""
    floor = ("import sys; from rlprobe.store import open_store; "
             "t = open_store(sys.argv[1]).table(sys.argv[2]); print(t.num_rows, t.num_columns)")
    return {
        "duckdb fetch (floor)": ["-c", floor, run, SQL],
        "query (table)": ["-m", "rlprobe", "query", run, SQL],
        "query --csv": ["-m", "rlprobe", "query", run, SQL, "--csv"],
        "query --json": ["-m", "rlprobe", "query", run, SQL, "--json"],
        "query --nl": ["-m", "rlprobe", "query", run, SQL, "--nl"],
    }


def run_once(args: list[str], src: Path, out: Path) -> dict[str, Any]:
    """Wall s, CPU s and peak RSS MB of one fresh `python args` with src first on the path, stdout to out."""
    env = dict(os.environ, PYTHONPATH=str(src))
    env.pop("COLUMNS", None)
    with open(out, "wb") as fh:
        t0 = time.perf_counter()
        proc = subprocess.Popen([sys.executable, *args], env=env, stdout=fh, stderr=subprocess.PIPE, cwd=_NEUTRAL)
        _, status, usage = os.wait4(proc.pid, 0)
        wall = time.perf_counter() - t0
        err = proc.stderr.read().decode() if proc.stderr else ""
        proc.returncode = os.waitstatus_to_exitcode(status)
    if proc.returncode != 0:
        raise SystemExit(f"{' '.join(args[:3])} failed in {src}: {err[-500:]}")
    return {"wall": wall, "cpu": usage.ru_utime + usage.ru_stime, "rss_mb": usage.ru_maxrss / 1024}


def _digest(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def main() -> None:
    parser = base_parser(__doc__ or "")
    parser.add_argument("--baseline-src", metavar="DIR", help="a checkout of the baseline commit (its rlprobe/ and sql/)")
    parser.add_argument("--steps", type=int, default=None, help="steps in the run (default 100000, quick 10000)")
    parser.add_argument("--repeats", type=int, default=None, help="runs of each command per checkout (default 3, quick 1)")
    args = parser.parse_args()
    steps = args.steps or (10_000 if args.quick else 100_000)
    repeats = args.repeats or (1 if args.quick else 3)
    trees: dict[str, Path] = {"this": REPO}
    if args.baseline_src:
        trees = {"baseline": Path(args.baseline_src).resolve(), "this": REPO}
    info = machine_info()
    params = {"steps": steps, "repeats": repeats, "baseline_src": args.baseline_src, "sql": SQL,
              "load_1min": os.getloadavg()[0]}
    header("cli_output", info, params)

    with tempfile.TemporaryDirectory(prefix="rlprobe-bench-output-") as tmp:
        run = str(Path(tmp) / "run")
        # written by a child: a child's peak RSS (ru_maxrss) counts the parent's memory at fork, so
        # this process must stay small for the figures to be the commands' own
        subprocess.run([sys.executable, "-c", "import sys; from rlprobe.synth import write_run; "
                        "write_run(sys.argv[1], 'healthy', n_steps=int(sys.argv[2]), seed=0)", run, str(steps)],
                       env=dict(os.environ, PYTHONPATH=str(REPO)), check=True, cwd=_NEUTRAL)
        cmds = commands(run)
        figures: dict[str, dict[str, list[dict[str, Any]]]] = {label: {name: [] for name in trees} for label in cmds}
        digests: dict[str, dict[str, set[str]]] = {label: {name: set() for name in trees} for label in cmds}
        sizes: dict[str, int] = {}
        for _ in range(repeats):  # interleaved, so both checkouts see the same load
            for label, argv in cmds.items():
                for name, src in trees.items():
                    out = Path(tmp) / "stdout"
                    figures[label][name].append(run_once(argv, src, out))
                    digests[label][name].add(_digest(out))
                    sizes[label] = out.stat().st_size
        shape = (Path(tmp) / "stdout")
        run_once(cmds["duckdb fetch (floor)"], REPO, shape)
        rows, columns = shape.read_text().split()

    floor_label = "duckdb fetch (floor)"
    floor_wall = median(f["wall"] for f in figures[floor_label]["this"])
    floor_cpu = median(f["cpu"] for f in figures[floor_label]["this"])
    results: dict[str, Any] = {"rows": int(rows), "columns": int(columns)}
    table_rows = []
    for label in cmds:
        entry: dict[str, Any] = {}
        for name in trees:
            runs = figures[label][name]
            entry[name] = {"wall": summary([f["wall"] for f in runs]), "cpu": summary([f["cpu"] for f in runs]),
                           "rss_mb": summary([f["rss_mb"] for f in runs])}
        this = entry["this"]
        entry["stdout_bytes"] = sizes[label]
        entry["ratio_to_floor"] = this["wall"]["median"] / floor_wall
        entry["cpu_ratio_to_floor"] = this["cpu"]["median"] / floor_cpu
        row: list[Any] = [label]
        if "baseline" in trees:
            base = entry["baseline"]
            entry["ratio_to_baseline"] = this["wall"]["median"] / base["wall"]["median"]
            entry["cpu_ratio_to_baseline"] = this["cpu"]["median"] / base["cpu"]["median"]
            entry["same_bytes_as_baseline"] = digests[label]["this"] == digests[label]["baseline"] and len(digests[label]["this"]) == 1
            row += [base["wall"]["median"], base["cpu"]["median"], base["rss_mb"]["median"]]
        row += [this["wall"]["median"], this["cpu"]["median"], this["rss_mb"]["median"], entry["ratio_to_floor"]]
        if "baseline" in trees:
            row += [entry["ratio_to_baseline"], entry["cpu_ratio_to_baseline"],
                    "-" if label in (floor_label, "query (table)") else ("yes" if entry["same_bytes_as_baseline"] else "NO")]
        row += [f"{sizes[label] / 1e6:.1f}"]
        results[label] = entry
        table_rows.append(row)
    headers = ["command"] + (["base wall s", "base cpu s", "base MB"] if "baseline" in trees else [])
    headers += ["wall s", "cpu s", "peak MB", "wall / floor"]
    headers += (["wall / base", "cpu / base", "same bytes"] if "baseline" in trees else [])
    headers += ["stdout MB"]
    print_table(f"{rows} rows x {columns} columns; median of {repeats} fresh processes each", headers, table_rows)

    table = results["query (table)"]
    table["target_wall"] = target(table["ratio_to_floor"], "<=", 1.5)
    table["target_rss"] = target(table["this"]["rss_mb"]["median"], "<=", 300, " MB")
    print()
    print(f"  table wall / floor {table['ratio_to_floor']:.2f}: {met_text(table['target_wall'])}")
    print(f"  table peak RSS {table['this']['rss_mb']['median']:.0f} MB: {met_text(table['target_rss'])}")
    if "baseline" in trees:
        for label in ("query --csv", "query --json", "query --nl"):
            same = results[label]["same_bytes_as_baseline"]
            results[label]["target_bytes"] = {"value": same, "target": "same bytes as the baseline", "met": same, "resolved": True}
            print(f"  {label}: output {'byte-identical to' if same else 'DIFFERS from'} the baseline checkout's")
    write_json("cli_output", args.out, {"machine": info, "params": params, "results": results})


if __name__ == "__main__":
    main()
