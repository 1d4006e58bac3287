"""Shared helpers for the benchmarks: timing, statistics, tables, machine info, JSON output.

Project rules for benchmarks (see benchmarks/README.md): every figure is printed next to a
baseline measured in the same run (as a ratio), targets are printed with whether they are
met, nothing about time is asserted, and every figure goes to a JSON file so runs can be
compared across commits.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import platform
import statistics
import subprocess
import sys
import threading
import time
from datetime import datetime, timezone
from importlib import metadata
from pathlib import Path
from typing import Any, Callable, Iterable, Sequence

REPO = Path(__file__).resolve().parent.parent
RESULTS_DIR = REPO / "benchmarks" / "results"


# -- machine and provenance ------------------------------------------------------------------
def _git(*args: str) -> str | None:
    try:
        out = subprocess.run(["git", "-C", str(REPO), *args], capture_output=True, text=True, timeout=5, check=True)
    except (OSError, subprocess.SubprocessError):
        return None
    return out.stdout.strip()


def _version(package: str) -> str | None:
    try:
        return metadata.version(package)
    except metadata.PackageNotFoundError:
        return None


def _cpu_model() -> str | None:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or None


def machine_info() -> dict[str, Any]:
    """Where and on what the figures were taken: commit, versions, CPU, timestamp."""
    status = _git("status", "--porcelain", "--untracked-files=no")
    return {
        "timestamp": datetime.now(timezone.utc).isoformat(timespec="seconds"),
        "git_sha": _git("rev-parse", "HEAD"),
        "git_dirty": bool(status) if status is not None else None,
        "python": platform.python_version(),
        "python_implementation": platform.python_implementation(),
        "rlprobe": _version("rlprobe"),
        "duckdb": _version("duckdb"),
        "pyarrow": _version("pyarrow"),
        "numpy": _version("numpy"),
        "pydantic": _version("pydantic"),
        "platform": platform.platform(),
        "cpu": _cpu_model(),
        "cpu_count": os.cpu_count(),
        "affinity_cpus": len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else None,
    }


# -- statistics ------------------------------------------------------------------------------
def writer_cpu_clock(run_id: str) -> Callable[[], float] | None:
    """CPU-time clock of a Recorder's writer thread (Linux), found by its documented name."""
    for thread in threading.enumerate():
        if thread.name == f"rlprobe-writer-{run_id}" and thread.ident is not None:
            try:
                clock = time.pthread_getcpuclockid(thread.ident)
                time.clock_gettime(clock)
            except (AttributeError, OSError):
                return None
            return lambda: time.clock_gettime(clock)
    return None


def percentile(values: Sequence[float], q: float) -> float:
    """q-th percentile (0..100) by linear interpolation, like numpy's default."""
    if not values:
        return math.nan
    data = sorted(values)
    pos = (len(data) - 1) * q / 100.0
    lo = math.floor(pos)
    hi = min(lo + 1, len(data) - 1)
    return data[lo] + (data[hi] - data[lo]) * (pos - lo)


def median(values: Iterable[float]) -> float:
    data = list(values)
    return statistics.median(data) if data else math.nan


def summary(values: Sequence[float]) -> dict[str, float]:
    """median, min, max and the spread (max-min relative to the median) of repeated timings."""
    if not values:
        return {"median": math.nan, "min": math.nan, "max": math.nan, "n": 0}
    med = median(values)
    return {
        "median": med,
        "min": min(values),
        "max": max(values),
        "spread_pct": 100.0 * (max(values) - min(values)) / med if med else math.nan,
        "n": len(values),
        "all": list(values),
    }


def timed(fn: Callable[[], Any]) -> tuple[float, Any]:
    """Seconds fn() took (perf_counter) and what it returned."""
    t0 = time.perf_counter()
    result = fn()
    return time.perf_counter() - t0, result


def times(fn: Callable[[], Any], repeats: int) -> list[float]:
    """Seconds each of `repeats` calls of fn() took (perf_counter)."""
    return [timed(fn)[0] for _ in range(repeats)]


# -- targets and output ----------------------------------------------------------------------
def target(value: float, op: str, limit: float, unit: str = "", unresolved: str | None = None) -> dict[str, Any]:
    """A target next to its figure: {'value', 'target', 'met', 'resolved'}; never asserted.

    unresolved names why the figure cannot decide the target (noise larger than the margin,
    say); the verdict is still computed but printed with that caveat.
    """
    met = {"<=": value <= limit, "<": value < limit, ">=": value >= limit, ">": value > limit}[op]
    out = {"value": value, "target": f"{op} {limit:g}{unit}", "met": bool(met), "resolved": unresolved is None}
    if unresolved:
        out["unresolved"] = unresolved
    return out


def met_text(t: dict[str, Any]) -> str:
    text = f"{t['target']}: {'met' if t['met'] else 'NOT met'}"
    return text + (f" (not resolved: {t['unresolved']})" if t.get("unresolved") else "")


def fmt(value: Any, digits: int = 3) -> str:
    if value is None:
        return "-"
    if isinstance(value, float):
        if math.isnan(value):
            return "nan"
        if value != 0 and (abs(value) >= 10**6 or abs(value) < 10 ** -(digits)):
            return f"{value:.{digits}g}"
        return f"{value:,.{digits}f}" if abs(value) < 100 else f"{value:,.1f}"
    return str(value)


def print_table(title: str, headers: Sequence[str], rows: Sequence[Sequence[Any]]) -> None:
    """An aligned text table; the first column left-aligned, the others right-aligned."""
    cells = [[fmt(v) if not isinstance(v, str) else v for v in row] for row in rows]
    widths = [max([len(h)] + [len(r[i]) for r in cells]) for i, h in enumerate(headers)]

    def line(values: Sequence[str]) -> str:
        return "  ".join(v.ljust(w) if i == 0 else v.rjust(w) for i, (v, w) in enumerate(zip(values, widths))).rstrip()

    print()
    print(title)
    print(line(headers))
    print("  ".join("-" * w for w in widths))
    for row in cells:
        print(line(row))
    sys.stdout.flush()


def _json_default(value: Any) -> Any:
    if hasattr(value, "item"):  # numpy scalars
        return value.item()
    if isinstance(value, Path):
        return str(value)
    return str(value)


def _finite(obj: Any) -> Any:
    """NaN/inf are not JSON: write them as null."""
    if isinstance(obj, float) and not math.isfinite(obj):
        return None
    if isinstance(obj, dict):
        return {k: _finite(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [_finite(v) for v in obj]
    return obj


def write_json(name: str, out: str | None, payload: dict[str, Any]) -> Path:
    """Write payload to out (default benchmarks/results/<name>.json) and say where."""
    path = Path(out) if out else RESULTS_DIR / f"{name}.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(_finite(payload), indent=2, default=_json_default) + "\n")
    print(f"\nfigures written to {path}")
    return path


def base_parser(description: str) -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(description=description, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true", help="a much smaller run (seconds), for checking the script works")
    parser.add_argument("--out", metavar="PATH", help="where to write the JSON figures (default benchmarks/results/<name>.json)")
    return parser


def header(name: str, info: dict[str, Any], params: dict[str, Any]) -> None:
    print(f"rlprobe benchmark: {name}")
    print(
        f"  commit {(info['git_sha'] or '?')[:12]}{' (dirty)' if info['git_dirty'] else ''}, python {info['python']}, "
        f"duckdb {info['duckdb']}, pyarrow {info['pyarrow']}, {info['cpu_count']} cpus ({info['cpu']})"
    )
    print("  params: " + ", ".join(f"{k}={v}" for k, v in params.items()))
    sys.stdout.flush()
