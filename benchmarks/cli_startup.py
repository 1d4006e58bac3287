"""How long the `rlprobe` command takes to start: `--help`, a query that reads nothing, and
`rlprobe doctor SMALL` on a 1k-step synthetic run.

A user types `rlprobe --help` or `rlprobe query RUN "SELECT 1"` and waits for Python to import
what the command needs; rich (the tables, colour and progress bars) must not add to that where
it is not used, nor pandas (pyarrow's numpy conversions import it whenever it is installed) or
rlprobe.importers (only a source rlprobe did not record needs it) to any read of a recording,
nor sqlglot (~140 ms; it reads a query that names its columns, which none of these does). Each
command runs as a user runs it (`python -m rlprobe ...`, a fresh process each time), alternating
between this checkout and a baseline checkout given with --baseline-src (say, the commit before
a change: `git archive <sha> | tar -x -C /tmp/base`), so both are timed under the same load. The
same-run floor is the interpreter itself (`python -c pass`) and `python -c "import click"`.
Modules load from cached bytecode, as from an install, even where PYTHONDONTWRITEBYTECODE is set.

For each command it also runs `python -X importtime` once and reports whether rich, pandas,
rlprobe.importers and sqlglot were imported and what each cost (the cumulative time of its
top-level package).

    python benchmarks/cli_startup.py --baseline-src /tmp/base
    python benchmarks/cli_startup.py --quick            # fewer repetitions, no baseline needed

Target: each command's median within 5% of the baseline checkout's (ratio <= 1.05; the ratio of
the fastest runs is shown beside it), and rich not imported by `--help` or by a query in a pipe;
`rlprobe doctor SMALL` under 0.45 s (issue 17, measured at 0.82 s on an unloaded machine; on a
loaded one compare its CPU-time ratio to the baseline), pandas, rlprobe.importers and sqlglot
imported by none of the commands.
On a loaded machine both swing by more than 5%, so the table also counts the modules each
command imports in each checkout (python -X importtime), which does not depend on the load.
"""

from __future__ import annotations

import os
import re
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import REPO, base_parser, header, machine_info, median, met_text, print_table, summary, target, write_json  # noqa: E402


def commands(run: str, small: str) -> dict[str, list[str]]:
    """What is timed: label -> arguments after `python`."""
    return {
        "python -c pass": ["-c", "pass"],
        "python -c 'import click'": ["-c", "import click"],
        "rlprobe --help": ["-m", "rlprobe", "--help"],
        'rlprobe query RUN "SELECT 1"': ["-m", "rlprobe", "query", run, "SELECT 1"],
        'rlprobe query RUN "SELECT 1" --csv': ["-m", "rlprobe", "query", run, "SELECT 1", "--csv"],
        "rlprobe ls RUN": ["-m", "rlprobe", "ls", run],
        "rlprobe doctor SMALL": ["-m", "rlprobe", "doctor", small],
    }


WATCHED = ("rich", "pandas", "rlprobe.importers", "sqlglot")
"""Packages whose import the table reports for each command (none of them should be imported)."""

DOCTOR_SMALL_S = 0.45


# `python -m` puts the current folder first on sys.path, ahead of PYTHONPATH: run from a folder
# that holds no rlprobe, or a checkout in the current folder would be timed for both sides
_NEUTRAL = tempfile.gettempdir()


_OK_CODES = {"doctor": (0, 1)}  # doctor exits 1 when a finding is critical


# Every process reads its modules' bytecode from a cache, as an installed rlprobe does (pip
# compiles a wheel's modules, and an editable install writes __pycache__ on first use). Where
# PYTHONDONTWRITEBYTECODE is set (this machine sets it), each run would compile rlprobe's
# sources again, ~30 ms of `rlprobe --help` that no user pays and that grows with the lines of
# code, not with what the command does. The cache goes to a folder of its own
# (PYTHONPYCACHEPREFIX), not into the checkouts; the warm-up runs fill it.
_PYCACHE = tempfile.mkdtemp(prefix="rlprobe-bench-pycache-")


def _env(src: Path) -> dict[str, str]:
    env = dict(os.environ, PYTHONPATH=str(src), PYTHONPYCACHEPREFIX=_PYCACHE)
    env.pop("COLUMNS", None)
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    return env


def time_once(args: list[str], src: Path) -> tuple[float, float]:
    """(wall seconds, CPU seconds) of one fresh `python args` with src first on the path (output discarded).

    CPU time (user + system of the child) moves less than wall time when other processes share
    the cores, so it is the figure to read on a loaded machine.
    """
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.perf_counter()
    proc = subprocess.run([sys.executable, *args], env=_env(src), stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, timeout=120,
                          cwd=_NEUTRAL)
    elapsed = time.perf_counter() - t0
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if proc.returncode not in _OK_CODES.get(args[2] if args[:2] == ["-m", "rlprobe"] and len(args) > 2 else "", (0,)):
        raise SystemExit(f"{' '.join(args)} failed in {src}: {proc.stderr.decode()[-500:]}")
    return elapsed, (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


def imports_of(args: list[str], src: Path) -> dict[str, Any]:
    """What `python -X importtime args` imported: for each WATCHED package whether it was imported,
    its modules and the cumulative µs of its top-level package; all_modules counts every module."""
    proc = subprocess.run([sys.executable, "-X", "importtime", *args], env=_env(src), stdout=subprocess.DEVNULL,
                          stderr=subprocess.PIPE, text=True, timeout=120, cwd=_NEUTRAL)
    found: dict[str, dict[str, Any]] = {w: {"imported": False, "modules": 0, "cumulative_us": None} for w in WATCHED}
    imported = 0
    for line in proc.stderr.splitlines():
        match = re.match(r"import time:\s+(\d+) \|\s+(\d+) \|(\s*)(\S+)", line)
        if not match:
            continue
        imported += 1
        name = match.group(4)
        for w in WATCHED:
            if name == w or name.startswith(w + "."):
                found[w]["imported"] = True
                found[w]["modules"] += 1
                if name == w:
                    found[w]["cumulative_us"] = int(match.group(2))
    return {"all_modules": imported, **found}


def main() -> None:
    parser = base_parser(__doc__ or "")
    parser.add_argument("--baseline-src", metavar="DIR", help="a checkout of the baseline commit (its rlprobe/ and sql/)")
    parser.add_argument("--repeats", type=int, default=None, help="runs of each command per checkout (default 21, quick 5)")
    args = parser.parse_args()
    repeats = args.repeats or (5 if args.quick else 21)
    trees: dict[str, Path] = {"this": REPO}
    if args.baseline_src:
        trees = {"baseline": Path(args.baseline_src).resolve(), "this": REPO}
    info = machine_info()
    params = {"repeats": repeats, "baseline_src": args.baseline_src, "load_1min": os.getloadavg()[0],
              "bytecode": "cached (PYTHONPYCACHEPREFIX)"}
    header("cli_startup", info, params)

    from rlprobe.synth import write_run

    with tempfile.TemporaryDirectory(prefix="rlprobe-bench-startup-") as tmp:
        run = str(Path(tmp) / "run")
        write_run(run, "healthy", n_steps=20, seed=0)
        small = str(Path(tmp) / "small")  # what `rlprobe synth small --n-steps 1000 --seed 0` writes
        write_run(small, "healthy", n_steps=1000, seed=0)
        cmds = commands(run, small)
        timings: dict[str, dict[str, list[float]]] = {label: {name: [] for name in trees} for label in cmds}
        cpu: dict[str, dict[str, list[float]]] = {label: {name: [] for name in trees} for label in cmds}
        for label, argv in cmds.items():  # one warm-up each (page cache, __pycache__)
            for src in trees.values():
                time_once(argv, src)
        for _ in range(repeats):  # interleaved, so both checkouts see the same load
            for label, argv in cmds.items():
                for name, src in trees.items():
                    wall, used = time_once(argv, src)
                    timings[label][name].append(wall)
                    cpu[label][name].append(used)
        imports = {label: {name: imports_of(argv, src) for name, src in trees.items()} for label, argv in cmds.items()}

    results: dict[str, Any] = {}
    rows = []
    floor = median(timings["python -c pass"]["this"])
    for label in cmds:
        entry: dict[str, Any] = {name: summary(timings[label][name]) for name in trees}
        this = median(timings[label]["this"])
        row: list[Any] = [label]
        if "baseline" in trees:
            base = median(timings[label]["baseline"])
            entry["ratio_to_baseline"] = this / base
            entry["min_ratio_to_baseline"] = min(timings[label]["this"]) / min(timings[label]["baseline"])
            if label.startswith("rlprobe"):
                floor_ratio = median(timings["python -c pass"]["this"]) / median(timings["python -c pass"]["baseline"])
                entry["target"] = target(entry["ratio_to_baseline"], "<=", 1.05,
                                         unresolved=f"the interpreter alone differs by {abs(floor_ratio - 1):.0%} between the "
                                                    "two under this load" if abs(floor_ratio - 1) > 0.05 else None)
            row += [1000 * base]
        row += [1000 * this]
        if "baseline" in trees:
            row += [entry["ratio_to_baseline"], entry["min_ratio_to_baseline"]]
        entry["cpu"] = {name: summary(cpu[label][name]) for name in trees}
        if "baseline" in trees:
            entry["cpu_ratio_to_baseline"] = median(cpu[label]["this"]) / median(cpu[label]["baseline"])
            row += [1000 * median(cpu[label]["baseline"]), 1000 * median(cpu[label]["this"]), entry["cpu_ratio_to_baseline"]]
        if "baseline" in trees:  # load-independent: what the command imports at all
            row += [f"{imports[label]['baseline']['all_modules']} -> {imports[label]['this']['all_modules']}"]
        row += [this / floor]
        for w in WATCHED:  # "-" not imported, else the ms of its import (baseline -> this with a baseline)
            def cost(found: dict[str, Any]) -> str:
                return "-" if not found["imported"] else f"{(found['cumulative_us'] or 0) / 1000:.0f}"
            this_cost = cost(imports[label]["this"][w])
            row += [f"{cost(imports[label]['baseline'][w])} -> {this_cost}" if "baseline" in trees else this_cost]
        entry["imports"] = imports[label]
        entry["rich"] = imports[label]["this"]["rich"]
        if label == "rlprobe doctor SMALL":
            entry["target_s"] = target(this, "<", DOCTOR_SMALL_S, " s",
                                       unresolved=f"load {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores: the process "
                                                  "itself is slower than on an idle machine; read its CPU ratio to the "
                                                  "baseline" if os.getloadavg()[0] > 1.0 else None)
            entry["cpu_target_s"] = target(median(cpu[label]["this"]), "<", DOCTOR_SMALL_S, " s")
        results[label] = entry
        rows.append(row)
    headers = ["command"] + (["baseline ms"] if "baseline" in trees else []) + ["this ms"]
    headers += (["this / baseline", "min / min", "cpu ms base", "cpu ms this", "cpu ratio", "modules"] if "baseline" in trees else [])
    headers += ["x python start"] + [f"{w} ms" for w in WATCHED]
    print_table(f"median wall time of {repeats} fresh processes each (min / min: ratio of the fastest runs; "
                "import ms: - when not imported)", headers, rows)
    if "baseline" in trees:
        print()
        for label, entry in results.items():
            if "target" in entry:
                verdict = entry["target"]
                print(f"  {label}: median ratio {verdict['value']:.3f}, {met_text(verdict)}; CPU-time ratio "
                      f"{entry['cpu_ratio_to_baseline']:.3f}")
    for label in ("rlprobe --help", 'rlprobe query RUN "SELECT 1" --csv'):
        print(f"  {label}: rich imported: {'yes (NOT met)' if imports[label]['this']['rich']['imported'] else 'no (met)'}")
    for w in ("pandas", "rlprobe.importers", "sqlglot"):
        by = [label for label in cmds if imports[label]["this"][w]["imported"]]
        print(f"  {w} imported by: {', '.join(by) + ' (NOT met)' if by else 'none of the commands (met)'}")
    doctor = results["rlprobe doctor SMALL"]
    print(f"  rlprobe doctor SMALL: median {doctor['target_s']['value']:.3f} s wall, {met_text(doctor['target_s'])}; "
          f"CPU {doctor['cpu_target_s']['value']:.3f} s, {met_text(doctor['cpu_target_s'])}")
    write_json("cli_startup", args.out, {"machine": info, "params": params, "results": results})
    shutil.rmtree(_PYCACHE, ignore_errors=True)


if __name__ == "__main__":
    main()
