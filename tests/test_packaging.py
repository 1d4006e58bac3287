"""The wheel carries the SQL views and works on its own.

sql/ lives at the top of the repository and is force-included into the wheel as rlprobe/_sql.
This builds the wheel, checks every SQL file is inside, installs it into a plain new venv (not
one that sees the editable install, which would hide a missing file) and runs `rlprobe query`
from an unrelated folder.
"""

from __future__ import annotations

import os
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from conftest import make_run

REPO = Path(__file__).resolve().parents[1]

pytestmark = pytest.mark.slow

_NO_INDEX = (
    "No matching distribution found",
    "Could not find a version that satisfies",
    "NewConnectionError",
    "Network is unreachable",
    "Temporary failure in name resolution",
    "Failed to establish a new connection",
    "ConnectTimeoutError",
    "ProxyError",
)


def _run(cmd: list[str], **kwargs: object) -> subprocess.CompletedProcess[str]:
    return subprocess.run(cmd, capture_output=True, text=True, **kwargs)  # type: ignore[call-overload]


@pytest.fixture(scope="module")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("dist")
    # --no-isolation: hatchling is already in the dev environment, so no download is needed
    proc = _run([sys.executable, "-m", "build", "--wheel", "--no-isolation", "--outdir", str(out), str(REPO)], timeout=300)
    if proc.returncode != 0:  # e.g. `build` missing: pip can build the wheel too
        proc = _run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "-w", str(out), str(REPO)], timeout=300)
    assert proc.returncode == 0, f"building the wheel failed:\n{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}"
    wheels = list(out.glob("rlprobe-*.whl"))
    assert len(wheels) == 1, wheels
    return wheels[0]


def test_the_wheel_holds_every_sql_file(wheel: Path) -> None:
    names = set(zipfile.ZipFile(wheel).namelist())
    sql_files = sorted((REPO / "sql").rglob("*.sql"))
    assert sql_files
    missing = [str(p.relative_to(REPO)) for p in sql_files if f"rlprobe/_sql/{p.relative_to(REPO / 'sql').as_posix()}" not in names]
    assert not missing, f"SQL files missing from {wheel.name} (expected under rlprobe/_sql/): {missing}"
    assert "rlprobe/_sql/v1/views/steps.sql" in names
    assert "rlprobe/cli/__init__.py" in names and "rlprobe/store/sqlfiles.py" in names
    with zipfile.ZipFile(wheel) as zf:
        entry_points = next(n for n in names if n.endswith(".dist-info/entry_points.txt"))
        assert "rlprobe = rlprobe.cli:main" in zf.read(entry_points).decode()
        for p in sql_files:
            assert zf.read(f"rlprobe/_sql/{p.relative_to(REPO / 'sql').as_posix()}") == p.read_bytes()


def test_the_installed_wheel_queries_a_run(wheel: Path, tmp_path: Path) -> None:
    venv = tmp_path / "venv"
    proc = _run([sys.executable, "-m", "venv", str(venv)], timeout=300)  # a plain venv: no system site-packages
    assert proc.returncode == 0, proc.stderr
    python = venv / "bin" / "python"
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PYTHONHOME", "VIRTUAL_ENV")}
    proc = _run([str(python), "-m", "pip", "install", "--quiet", str(wheel)], timeout=900, env=env)
    if proc.returncode != 0 and any(marker in proc.stderr for marker in _NO_INDEX):
        pytest.skip(f"pip cannot reach a package index to install rlprobe's dependencies: {proc.stderr.strip().splitlines()[-1]}")
    assert proc.returncode == 0, f"pip install of the wheel failed:\n{proc.stderr[-3000:]}"

    run = tmp_path / "data" / "run"
    make_run(run, 12, samples_per_step=2, state="closed")
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()

    # the installed package reads its own copy of the SQL, not the checkout's
    proc = _run([str(python), "-c", "from rlprobe.store import sqlfiles; print(sqlfiles.sql_root())"], cwd=elsewhere, env=env, timeout=120)
    assert proc.returncode == 0, proc.stderr
    sql_root = Path(proc.stdout.strip())
    assert sql_root.parts[-2:] == ("rlprobe", "_sql") and str(venv) in str(sql_root), sql_root

    rlprobe = venv / "bin" / "rlprobe"
    proc = _run([str(rlprobe), "query", str(run), "SELECT count(*) FROM steps"], cwd=elsewhere, env=env, timeout=120)
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.splitlines()
    assert lines[0].strip() == "count_star()" and lines[2].strip() == "12" and lines[-1] == "(1 row)", proc.stdout

    proc = _run([str(rlprobe), "query", str(run.parent), "SELECT run_id, count(*) AS n FROM samples GROUP BY run_id", "--csv"],
                cwd=elsewhere, env=env, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout == "run_id,n\nrun,24\n"

    proc = _run([str(rlprobe), "query", str(elsewhere / "nope"), "SELECT 1"], cwd=elsewhere, env=env, timeout=120)
    assert proc.returncode == 2 and len(proc.stderr.strip().splitlines()) == 1 and "Traceback" not in proc.stderr
