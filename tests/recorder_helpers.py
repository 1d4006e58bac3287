"""Small helpers shared by the recorder tests: read a run back, run a script in a subprocess.

Everything here reads through the public read side (rlprobe.connect and RunReader), so a test
that passes proves the data is visible to users, not merely that some file exists.
"""

from __future__ import annotations

import json
import select
import subprocess
import sys
import textwrap
import time
from pathlib import Path
from typing import Any

import rlprobe

FAST = {"capture_env": False, "flush_interval_s": 0.05}
"""Recorder kwargs for tests: no git/package probing, and a writer that flushes often."""


def rows(run_dir: Path, sql: str, params: list[Any] | None = None) -> list[dict[str, Any]]:
    """Rows of a query over the run's views, as dicts."""
    rel = rlprobe.connect(run_dir).sql(sql, params=params)
    return [dict(zip(rel.columns, r)) for r in rel.fetchall()]


def steps(run_dir: Path) -> list[dict[str, Any]]:
    """Every row of the steps view, ordered by step."""
    return rows(run_dir, "SELECT * FROM steps ORDER BY step")


def step_numbers(run_dir: Path) -> list[int]:
    return [r["step"] for r in rows(run_dir, "SELECT step FROM steps ORDER BY step")]


def events(run_dir: Path, kind: str | None = None) -> list[dict[str, Any]]:
    """Events (all ranks) in time order, data parsed from JSON."""
    out = rows(
        run_dir,
        "SELECT kind, step, rank, message, data FROM events WHERE ? IS NULL OR kind = ? ORDER BY timestamp",
        [kind, kind],
    )
    for r in out:
        r["data"] = json.loads(r["data"]) if r["data"] else {}
    return out


def status(run_dir: Path) -> str:
    """The run's status in the runs view (exactly one run expected)."""
    found = rows(run_dir, "SELECT status FROM runs")
    assert len(found) == 1, f"expected one run in {run_dir}, the runs view has {found}"
    return found[0]["status"]


def part_files(run_dir: Path) -> list[Path]:
    return sorted((run_dir / "steps").glob("part-*.parquet"))


def write_script(tmp_path: Path, body: str, name: str = "train.py") -> Path:
    """A training script in tmp_path; body is dedented."""
    path = tmp_path / name
    path.write_text(textwrap.dedent(body))
    return path


def run_script(script: Path, *args: str, timeout: float = 20.0) -> subprocess.CompletedProcess[str]:
    """Run a script with this interpreter to completion."""
    return subprocess.run([sys.executable, str(script), *args], capture_output=True, text=True, timeout=timeout)


def start_script(script: Path, *args: str) -> subprocess.Popen[str]:
    """Start a script with this interpreter; its stdout is a pipe the test reads lines from."""
    return subprocess.Popen(
        [sys.executable, str(script), *args], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )


def wait_for_line(proc: subprocess.Popen[str], expected: str, timeout: float = 20.0) -> None:
    """Block until the child prints expected on a line of its own; fail if it exits or hangs."""
    assert proc.stdout is not None
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        ready, _, _ = select.select([proc.stdout], [], [], 0.1)
        if ready:
            line = proc.stdout.readline()
            if line.strip() == expected:
                return
            if line == "":  # EOF: the child is gone
                break
    proc.kill()
    _, err = proc.communicate(timeout=10)
    raise AssertionError(f"child did not print {expected!r} (exit code {proc.returncode}):\n{err}")
