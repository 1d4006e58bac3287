"""What a read command imports: not pandas, not rlprobe.importers, unless the input needs them;
not sqlglot for a query that names none of the views or selects a star.

pyarrow's numpy conversions import pandas whenever it is installed (153 ms of a 1k-step doctor),
and rlprobe.importers (the source formats, the key map) costs ~50 ms that a recording never
needs. sqlglot (~140 ms) reads a query to narrow the columns and runs it reads, which `SELECT 1`
or `SELECT * FROM steps` cannot be. Each command runs in a fresh interpreter with a finder first on sys.meta_path that notes
every attempt to import a watched module, installed or not, so these tests mean the same on a
machine without pandas. Timings are in benchmarks/cli_startup.py, not here.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from rlprobe.synth import write_run

WATCHED = ("pandas", "rlprobe.importers")

# Runs the CLI as `rlprobe ARGS` does, then prints which watched modules were imported or tried.
PROBE = """
import json, sys
WATCHED = {watched!r}
tried = set()
class Probe:
    def find_spec(self, name, path=None, target=None):
        for w in WATCHED:
            if name == w or name.startswith(w + "."):
                tried.add(w)
        return None
sys.meta_path.insert(0, Probe())
sys.argv = ["rlprobe"] + {args!r}
from rlprobe.cli import main
try:
    main()
except SystemExit as exc:
    code = exc.code
else:
    code = 0
loaded = sorted(w for w in WATCHED if w in sys.modules)
print("RLPROBE-PROBE " + json.dumps({{"tried": sorted(tried), "loaded": loaded, "code": code}}))
"""


def imported_by(*args: str, cwd: Path, watched: tuple[str, ...] = WATCHED) -> dict[str, object]:
    """{'tried': watched modules an import was attempted of, 'loaded': those in sys.modules, 'code': exit code}."""
    code = PROBE.format(watched=watched, args=list(args))
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=cwd, timeout=300)
    line = next((ln for ln in proc.stdout.splitlines() if ln.startswith("RLPROBE-PROBE ")), None)
    assert line is not None, proc.stderr[-2000:]
    return json.loads(line[len("RLPROBE-PROBE "):])


@pytest.fixture(scope="module")
def small(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A synthetic run with samples, as `rlprobe synth` writes it."""
    run = tmp_path_factory.mktemp("startup") / "small"
    write_run(str(run), "healthy", n_steps=200, seed=0)
    return run


READ_COMMANDS = {
    "query": ["query", "{run}", "SELECT step, reward_mean FROM steps ORDER BY step LIMIT 5"],
    "query all columns": ["query", "{run}", "SELECT * FROM steps"],
    "query --csv": ["query", "{run}", "SELECT * FROM steps", "--csv"],
    "query --json": ["query", "{run}", "SELECT * FROM steps", "--json"],
    "query --out parquet": ["query", "{run}", "SELECT * FROM steps", "--out", "{tmp}/out.parquet"],
    "ls": ["ls", "{run}"],
    "show": ["show", "{run}", "--step", "100"],
    "show --json": ["show", "{run}", "--step", "100", "--json"],
    "samples": ["samples", "{run}"],
    "samples --json": ["samples", "{run}", "--json"],
}


@pytest.mark.parametrize("label", READ_COMMANDS)
def test_read_command_on_a_recording_imports_neither_pandas_nor_importers(label: str, small: Path, tmp_path: Path) -> None:
    args = [a.format(run=small, tmp=tmp_path) for a in READ_COMMANDS[label]]
    seen = imported_by(*args, cwd=tmp_path)
    assert seen["code"] == 0
    assert seen["tried"] == [] and seen["loaded"] == []


def test_doctor_on_a_recording_does_not_try_pandas(small: Path, tmp_path: Path) -> None:
    seen = imported_by("doctor", str(small), cwd=tmp_path)
    assert seen["code"] in (0, 1)
    assert "pandas" not in seen["tried"]


def test_doctor_on_a_recording_does_not_import_the_importers(small: Path, tmp_path: Path) -> None:
    seen = imported_by("doctor", str(small), "--json", cwd=tmp_path)
    assert seen["code"] in (0, 1)
    assert "rlprobe.importers" not in seen["tried"]


def test_a_recordings_own_file_reads_without_the_importers(small: Path, tmp_path: Path) -> None:
    seen = imported_by("query", str(small / "manifest.json"), "SELECT 1", cwd=tmp_path)
    assert "rlprobe.importers" not in seen["tried"]


def test_a_source_is_still_imported(small: Path, tmp_path: Path) -> None:
    """The other side: a metrics file is a source, so the importers are what reads it."""
    metrics = tmp_path / "metrics.jsonl"
    metrics.write_text("".join(json.dumps({"step": i, "reward": 0.1 * i, "kl": 0.01}) + "\n" for i in range(30)))
    seen = imported_by("ls", str(metrics), cwd=tmp_path)
    assert seen["code"] == 0
    assert "rlprobe.importers" in seen["loaded"]


@pytest.mark.parametrize("sql", ["SELECT 1", "SELECT * FROM steps", "SELECT 1 AS one, 'x' AS two"])
def test_a_query_with_nothing_to_narrow_does_not_import_sqlglot(sql: str, small: Path, tmp_path: Path) -> None:
    for target in (small, small.parent):  # a run, and the root holding it
        seen = imported_by("query", str(target), sql, cwd=tmp_path, watched=("sqlglot",))
        assert seen["code"] == 0
        assert seen["tried"] == [] and seen["loaded"] == [], (target, sql)


def test_ls_reads_the_columns_sqlglot_would_prove_without_importing_it(small: Path, tmp_path: Path) -> None:
    from rlprobe.store import scope
    from rlprobe.store.reader import LS_NAMES, LS_SQL

    assert scope.columns_read(LS_SQL) == LS_NAMES
    for target in (small, small.parent):
        seen = imported_by("ls", str(target), cwd=tmp_path, watched=("sqlglot",))
        assert seen["code"] == 0 and seen["tried"] == [], target


def test_a_query_naming_its_columns_still_reads_them_with_sqlglot(small: Path, tmp_path: Path) -> None:
    """The other side: narrowing to the columns a query names needs its parse."""
    seen = imported_by("query", str(small), "SELECT step, reward_mean FROM steps", cwd=tmp_path, watched=("sqlglot",))
    assert seen["code"] == 0 and seen["loaded"] == ["sqlglot"]
