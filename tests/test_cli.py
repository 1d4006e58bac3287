"""The `rlprobe` command: ls, query, sql, shell, schema, and how it fails.

Most cases run in-process through click's CliRunner. rlprobe's group overrides main() to turn
errors into one line and an exit code, so the error cases also run for real, as a subprocess of
`python -m rlprobe` and of the installed `rlprobe` script, where stderr and the exit code are
exactly what a user sees.
"""

from __future__ import annotations

import csv
import io
import json
import math
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import click
import duckdb
import pyarrow.parquet as pq
import pytest
from click.testing import CliRunner, Result

import rlprobe
from rlprobe.cli import cli

from conftest import make_run, metric

RLPROBE_SCRIPT = Path(sys.executable).parent / "rlprobe"


def invoke(*args: str, **kwargs: Any) -> Result:
    return CliRunner().invoke(cli, [str(a) for a in args], catch_exceptions=False, **kwargs)


def run_rlprobe(*args: str, how: str = "module", cwd: Path | None = None, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    """rlprobe as a user runs it: `python -m rlprobe ...` or the console script."""
    command = [sys.executable, "-m", "rlprobe"] if how == "module" else [str(RLPROBE_SCRIPT)]
    return subprocess.run(command + [str(a) for a in args], capture_output=True, text=True, timeout=120, cwd=cwd, env=env)


def assert_one_line_error(stderr: str, *needles: str) -> None:
    lines = stderr.strip().splitlines()
    assert len(lines) == 1, f"expected one line on stderr, got {len(lines)}:\n{stderr}"
    assert "Traceback" not in stderr
    for needle in needles:
        assert needle.lower() in lines[0].lower(), f"{needle!r} not in {lines[0]!r}"


def strict_json(text: str) -> Any:
    """json.loads that refuses NaN/Infinity: the output must be JSON any tool can read."""
    def refuse(name: str) -> Any:
        raise ValueError(f"not strict JSON: {name}")
    return json.loads(text, parse_constant=refuse)


# -- ls -----------------------------------------------------------------------------------------

def test_ls_table(nested_root: Path) -> None:
    result = invoke("ls", nested_root)
    assert result.exit_code == 0, result.output
    lines = result.stdout.splitlines()
    assert lines[0].split() == ["run_id", "name", "status", "steps", "last_step", "algorithm", "model_name", "tags",
                                "created_at", "run_dir"]
    assert set(lines[1]) <= {"-", " "}
    body = {line.split()[0]: line.split() for line in lines[2:-1]}  # no tags here: that cell is blank
    assert body["run0"][1:5] == ["run0", "crashed", "4", "3"] and body["run0"][-1] == "run0"
    assert body["run1"][1:5] == ["run1", "closed", "5", "4"] and body["run1"][-1] == os.path.join("a", "run1")
    assert body["run2"][1:5] == ["run2", "live", "3", "2"] and body["run2"][-1] == os.path.join("b", "c", "run2")
    assert lines[-1] == "(3 rows)"


def test_ls_csv(nested_root: Path) -> None:
    result = invoke("ls", nested_root, "--csv")
    assert result.exit_code == 0, result.output
    got = list(csv.DictReader(io.StringIO(result.stdout)))
    assert [(r["run_id"], r["status"], r["steps"], r["last_step"]) for r in got] == [
        ("run0", "crashed", "4", "3"), ("run1", "closed", "5", "4"), ("run2", "live", "3", "2")]
    assert got[1]["run_dir"] == str((nested_root / "a" / "run1").resolve())


def test_ls_json(nested_root: Path) -> None:
    result = invoke("ls", nested_root, "--json")
    assert result.exit_code == 0, result.output
    got = strict_json(result.stdout)
    assert [(r["run_id"], r["status"], r["steps"], r["last_step"], r["algorithm"]) for r in got] == [
        ("run0", "crashed", 4, 3, "grpo"), ("run1", "closed", 5, 4, "grpo"), ("run2", "live", 3, 2, "grpo")]


def test_ls_of_one_run(finished_run: Path) -> None:
    got = strict_json(invoke("ls", finished_run, "--json").stdout)
    assert [(r["run_id"], r["status"], r["steps"]) for r in got] == [("finished", "closed", 10)]


def test_ls_of_hundreds_of_runs(root_of_many: Path) -> None:
    result = invoke("ls", root_of_many, "--json")
    assert result.exit_code == 0
    got = strict_json(result.stdout)
    assert len(got) == 300 and {r["status"] for r in got} == {"closed"}
    assert sum(r["steps"] for r in got) == sum(i % 5 + 1 for i in range(300))


def test_ls_warns_about_a_corrupt_manifest_and_goes_on(corrupt_manifest_run: Path) -> None:
    result = invoke("ls", corrupt_manifest_run, "--json")
    assert result.exit_code == 0
    assert strict_json(result.stdout)[0]["steps"] == 4
    assert "warning" in result.stderr and "manifest.json" in result.stderr


# -- query --------------------------------------------------------------------------------------

SQL = 'SELECT step, reward_mean, "reward_component.correct" AS correct, run_id FROM steps ORDER BY step'


def test_query_table(finished_run: Path) -> None:
    result = invoke("query", finished_run, SQL)
    assert result.exit_code == 0, result.output
    lines = result.stdout.splitlines()
    assert lines[0].split() == ["step", "reward_mean", "correct", "run_id"]
    assert lines[2].split() == ["0", f"{metric('reward_mean', 0):.6g}", "0", "finished"]
    assert lines[-1] == "(10 rows)"
    assert len(lines) == 13
    # numbers right-aligned under their header
    assert len({len(line) for line in lines[2:12]}) == 1


def test_query_csv(finished_run: Path) -> None:
    result = invoke("query", finished_run, SQL, "--csv")
    assert result.exit_code == 0, result.output
    got = list(csv.DictReader(io.StringIO(result.stdout)))
    assert [(int(r["step"]), float(r["reward_mean"]), float(r["correct"]), r["run_id"]) for r in got] == [
        (s, metric("reward_mean", s), float(s % 2), "finished") for s in range(10)]


def test_query_json_parses_back_to_the_values(finished_run: Path) -> None:
    result = invoke("query", finished_run, SQL, "--json")
    assert result.exit_code == 0, result.output
    assert strict_json(result.stdout) == [
        {"step": s, "reward_mean": metric("reward_mean", s), "correct": float(s % 2), "run_id": "finished"} for s in range(10)]


def test_query_json_keeps_json_columns_structured_and_nan_as_strings(tmp_path: Path) -> None:
    run = tmp_path / "nan"
    w = make_run(run, 1, state="live")
    w.write_steps([{"step": 5, "loss": float("nan"), "grad_norm": float("inf"), "kl_positional": [0.5, 1.5]}])
    result = invoke("query", run, "SELECT step, loss, grad_norm, kl_positional FROM steps WHERE step = 5", "--json")
    assert result.exit_code == 0, result.output
    (row,) = strict_json(result.stdout)
    assert row["step"] == 5 and row["kl_positional"] == [0.5, 1.5]
    assert math.isnan(float(row["loss"])) and float(row["grad_norm"]) == math.inf
    events = strict_json(invoke("query", run, "SELECT kind, data FROM events", "--json").stdout)
    assert events == [{"kind": "recorder_open", "data": {"pid": 1234}}]
    config = strict_json(invoke("query", run, "SELECT trainer_config FROM manifest", "--json").stdout)
    assert config == [{"trainer_config": {"lr": 1e-6, "beta": 0.04}}]


def test_query_out_parquet(finished_run: Path, tmp_path: Path) -> None:
    out = tmp_path / "out" / "steps.parquet"
    out.parent.mkdir()
    result = invoke("query", finished_run, SQL, "--out", out)
    assert result.exit_code == 0, result.output
    assert result.stdout == ""
    assert "10 rows" in result.stderr
    table = pq.read_table(out)
    assert table.column_names == ["step", "reward_mean", "correct", "run_id"]
    assert table.column("step").to_pylist() == list(range(10))
    assert table.column("reward_mean").to_pylist() == [metric("reward_mean", s) for s in range(10)]


def test_query_over_a_root(nested_root: Path) -> None:
    result = invoke("query", nested_root, "SELECT run_id, count(*) AS n FROM steps GROUP BY run_id ORDER BY run_id", "--json")
    assert strict_json(result.stdout) == [{"run_id": "run0", "n": 4}, {"run_id": "run1", "n": 5}, {"run_id": "run2", "n": 3}]


def test_query_an_empty_run_prints_the_header_and_no_rows(empty_run: Path) -> None:
    result = invoke("query", empty_run, "SELECT step, reward_mean FROM steps", "--csv")
    assert result.exit_code == 0, result.output
    assert result.stdout == "step,reward_mean\n"
    assert strict_json(invoke("query", empty_run, "SELECT step FROM steps", "--json").stdout) == []


def test_query_with_a_trailing_semicolon(finished_run: Path) -> None:
    assert strict_json(invoke("query", finished_run, "SELECT count(*) AS n FROM steps;", "--json").stdout) == [{"n": 10}]


def test_query_with_a_relative_path(finished_run: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(finished_run.parent)
    result = invoke("query", finished_run.name, "SELECT count(*) AS n FROM steps", "--json")
    assert strict_json(result.stdout) == [{"n": 10}]


# -- errors: one line, exit code 2 ----------------------------------------------------------------

@pytest.fixture
def not_a_recording(tmp_path: Path) -> Path:
    folder = tmp_path / "photos"
    (folder / "2024").mkdir(parents=True)
    (folder / "2024" / "cat.txt").write_text("meow")
    return folder


BAD_CASES = {
    "bad-sql": (lambda f: ["query", f["run"], "SELEC step FROM steps"], ["syntax"]),
    "unknown-table": (lambda f: ["query", f["run"], "SELECT * FROM stepz"], ["stepz"]),
    "unknown-column": (lambda f: ["query", f["run"], "SELECT no_such_column FROM steps"], ["no_such_column"]),
    "missing-path": (lambda f: ["query", f["missing"], "SELECT 1"], ["no such file"]),
    "not-a-recording": (lambda f: ["query", f["not_rec"], "SELECT 1"], ["recording"]),
    "a-file": (lambda f: ["query", f["a_file"], "SELECT 1"], ["not a recording"]),
    "empty-dir": (lambda f: ["query", f["empty"], "SELECT 1"], ["empty"]),
    "newer-schema": (lambda f: ["query", f["newer"], "SELECT * FROM steps"], ["upgrade", "v2", "v1"]),
    "ls-missing": (lambda f: ["ls", f["missing"]], ["no such file"]),
    "ls-empty-dir": (lambda f: ["ls", f["empty"]], ["empty"]),
    "ls-newer": (lambda f: ["ls", f["newer"]], ["upgrade"]),
    "sql-missing": (lambda f: ["sql", f["missing"]], ["no such file"]),
    "schema-missing": (lambda f: ["schema", f["missing"]], ["no such file"]),
    "out-unwritable": (lambda f: ["query", f["run"], "SELECT 1", "--out", f["missing"] / "x.parquet"], ["cannot write"]),
    "empty-sql": (lambda f: ["query", f["run"], "  "], ["empty"]),
    "missing-argument": (lambda f: ["query"], ["missing argument"]),
    "no-such-command": (lambda f: ["qurey"], ["no such command"]),
}


@pytest.fixture
def bad_inputs(finished_run: Path, tmp_path: Path, empty_dir: Path, newer_schema_run: Path, not_a_recording: Path) -> dict[str, Path]:
    a_file = tmp_path / "notes.txt"
    a_file.write_text("hello")
    return {"run": finished_run, "missing": tmp_path / "does-not-exist", "not_rec": not_a_recording,
            "a_file": a_file, "empty": empty_dir, "newer": newer_schema_run}


@pytest.mark.parametrize("case", list(BAD_CASES))
def test_bad_input_is_one_line_and_exit_2(bad_inputs: dict[str, Path], case: str) -> None:
    args, needles = BAD_CASES[case]
    result = invoke(*args(bad_inputs))
    assert result.exit_code == 2, f"exit {result.exit_code}: {result.output}"
    assert result.stdout == ""
    assert_one_line_error(result.stderr, *needles)


@pytest.mark.parametrize("case, how", [
    ("bad-sql", "module"), ("missing-path", "module"), ("not-a-recording", "module"), ("empty-dir", "module"),
    ("newer-schema", "module"), ("missing-argument", "module"), ("bad-sql", "script"), ("newer-schema", "script"),
])
def test_bad_input_for_real(bad_inputs: dict[str, Path], case: str, how: str) -> None:
    args, needles = BAD_CASES[case]
    proc = run_rlprobe(*args(bad_inputs), how=how)
    assert proc.returncode == 2, f"exit {proc.returncode}\nstdout: {proc.stdout}\nstderr: {proc.stderr}"
    assert proc.stdout == ""
    assert_one_line_error(proc.stderr, *needles)


@pytest.mark.parametrize("how", ["module", "script"])
def test_a_good_query_for_real(finished_run: Path, how: str, tmp_path: Path) -> None:
    proc = run_rlprobe("query", finished_run, "SELECT count(*) AS n, max(step) AS last FROM steps", "--json", how=how, cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert strict_json(proc.stdout) == [{"n": 10, "last": 9}]
    assert proc.stderr == ""


def test_version_for_real() -> None:
    proc = run_rlprobe("--version")
    assert proc.returncode == 0 and rlprobe.__version__ in proc.stdout


# -- sql ----------------------------------------------------------------------------------------

def _rows_via_cli(target: Path, sql: str) -> list[dict[str, Any]]:
    result = invoke("query", target, sql, "--json")
    assert result.exit_code == 0, result.output
    return strict_json(result.stdout)


@pytest.mark.parametrize("fixture", ["finished_run", "nested_root", "ranked_run"])
def test_sql_script_gives_the_same_rows_in_a_plain_duckdb_session(
    fixture: str, request: pytest.FixtureRequest, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    target: Path = request.getfixturevalue(fixture)
    monkeypatch.chdir(target.parent)
    result = invoke("sql", target.name)  # a relative path: the script must carry the absolute one
    assert result.exit_code == 0, result.output
    script = result.stdout
    assert str(target.resolve()) in script

    elsewhere = tmp_path / "somewhere" / "else"
    elsewhere.mkdir(parents=True)
    monkeypatch.chdir(elsewhere)
    con = duckdb.connect()
    con.execute(script)
    queries = [
        "SELECT run_id, step, reward_mean, kl_mean FROM steps ORDER BY run_id, step",
        "SELECT run_id, rank, step, sample_id, reward_total FROM samples ORDER BY run_id, rank, sample_id",
        "SELECT run_id, kind, step, rank, timestamp FROM events ORDER BY run_id, timestamp, rank, kind",
        "SELECT run_id, status, steps_recorded, last_step FROM runs ORDER BY run_id",
        "SELECT run_id, algorithm, world_size FROM manifest ORDER BY run_id",
        "SELECT count(*) AS n FROM v1.steps",
    ]
    for sql in queries:
        rel = con.sql(sql)
        plain = [dict(zip(rel.columns, row)) for row in rel.fetchall()]
        assert plain == _rows_via_cli(target, sql), sql
    assert con.sql("SELECT count(*) FROM steps").fetchall()[0][0] > 0


def test_sql_script_is_readable_by_the_duckdb_cli_dot_read(finished_run: Path, tmp_path: Path) -> None:
    """What `duckdb -init views.sql` would run: the same text, executed statement by statement."""
    script = invoke("sql", finished_run).stdout
    views = tmp_path / "views.sql"
    views.write_text(script)
    con = duckdb.connect()
    con.execute(views.read_text())
    assert con.sql("SELECT count(*) FROM steps").fetchall() == [(10,)]
    assert script.splitlines()[0].startswith("--")


# -- schema -------------------------------------------------------------------------------------

def test_schema_lists_every_view_and_its_columns() -> None:
    result = invoke("schema")
    assert result.exit_code == 0, result.output
    out = result.stdout
    sections: dict[str, list[str]] = {}
    current = None
    for line in out.splitlines():
        if line and not line.startswith(" "):
            current = line.split()[0]
            sections[current] = []
        elif line.startswith("    ") and current:
            sections[current].append(line.split()[0])
    assert set(sections) == {"steps", "samples", "events", "runs", "manifest", "rollout_events", "batch_age"}
    for view, cols in sections.items():
        assert cols[0] == "run_id", view
    assert {"step", "reward_mean", "kl_positional", "wall_time"} <= set(sections["steps"])
    assert {"sample_id", "rank", "completion_text", "capture_reason"} <= set(sections["samples"])
    assert {"timestamp", "kind", "data"} <= set(sections["events"])
    assert {"status", "steps_recorded", "last_step", "run_dir"} <= set(sections["runs"])
    assert {"schema_version", "trainer_config", "environment"} <= set(sections["manifest"])
    assert {"step", "batch_age"} <= set(sections["batch_age"])
    assert "v1.steps" in out


def test_schema_of_a_run_shows_its_own_columns(finished_run: Path) -> None:
    out = invoke("schema", finished_run).stdout
    assert "reward_component.correct" in out and "extra.my_metric" in out


# -- shell --------------------------------------------------------------------------------------

def test_shell_with_duckdb_asked_for_and_no_duckdb_cli(finished_run: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("shutil.which", lambda *a, **k: None)
    result = invoke("shell", finished_run, "--with", "duckdb")
    assert result.exit_code == 2
    assert_one_line_error(result.stderr, "duckdb", "install", "--with python")


def test_shell_without_the_duckdb_cli_opens_what_pip_installed(finished_run: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import rlprobe.cli.query as query_cli

    monkeypatch.setattr("shutil.which", lambda *a, **k: None)
    opened: list[str] = []
    monkeypatch.setattr(query_cli, "_harlequin_installed", lambda: True)
    monkeypatch.setattr(query_cli, "_open_harlequin", lambda run, why="": opened.append(why) or 0)
    result = invoke("shell", finished_run)
    assert result.exit_code == 0 and opened == ["no duckdb CLI on PATH"]
    monkeypatch.setattr(query_cli, "_harlequin_installed", lambda: False)
    result = invoke("shell", finished_run, input="SELECT count(*) AS n FROM steps;\n")
    assert result.exit_code == 0, result.output
    assert "no duckdb CLI on PATH and harlequin is not installed" in result.stderr  # it says which one it opened
    assert "opening rlprobe's SQL prompt over Python duckdb" in result.stderr
    assert "n\n--" in result.stdout and "10" in result.stdout.split()


def test_shell_for_real_with_the_python_prompt(finished_run: Path, tmp_path: Path) -> None:
    empty_bin = tmp_path / "bin"
    empty_bin.mkdir()
    env = {**os.environ, "PATH": str(empty_bin)}
    proc = subprocess.run([str(RLPROBE_SCRIPT), "shell", str(finished_run), "--with", "python"],
                          input="SELECT count(*) AS n\nFROM steps;\n.quit\n", capture_output=True, text=True, timeout=120, env=env)
    assert proc.returncode == 0, proc.stderr
    assert "opening rlprobe's SQL prompt" in proc.stderr
    assert "10" in proc.stdout.split() and "(1 row)" in proc.stdout


def _fake_duckdb(bin_dir: Path, version: str) -> Path:
    """A stand-in duckdb CLI: answers --version, copies its -init script to $FAKE_DUCKDB_OUT."""
    bin_dir.mkdir(exist_ok=True)
    exe = bin_dir / "duckdb"
    exe.write_text(
        "#!/bin/sh\n"
        f'if [ "$1" = "--version" ]; then echo "{version} (fake)"; exit 0; fi\n'
        'if [ "$1" = "-init" ]; then cp "$2" "$FAKE_DUCKDB_OUT"; exit 7; fi\n'
        "exit 99\n"
    )
    exe.chmod(0o755)
    return exe


def test_shell_opens_the_duckdb_cli_with_the_views(finished_run: Path, tmp_path: Path) -> None:
    _fake_duckdb(tmp_path / "bin", "v2.0.1 1a2b3c")
    seen = tmp_path / "init.sql"
    env = {**os.environ, "PATH": f"{tmp_path / 'bin'}{os.pathsep}{os.environ['PATH']}", "FAKE_DUCKDB_OUT": str(seen)}
    proc = run_rlprobe("shell", finished_run, how="script", env=env)
    assert proc.returncode == 7, proc.stderr  # the duckdb CLI's own exit code
    assert seen.read_text() == invoke("sql", finished_run).stdout


def test_shell_with_a_duckdb_cli_older_than_2(finished_run: Path, tmp_path: Path) -> None:
    _fake_duckdb(tmp_path / "bin", "v1.1.3 19864453f7")
    env = {**os.environ, "PATH": f"{tmp_path / 'bin'}{os.pathsep}{os.environ['PATH']}", "FAKE_DUCKDB_OUT": str(tmp_path / "x")}
    proc = run_rlprobe("shell", finished_run, "--with", "duckdb", how="script", env=env)
    assert proc.returncode == 2
    assert_one_line_error(proc.stderr, "2.0")
    assert not (tmp_path / "x").exists()
    # asked for nothing in particular, it says why it did not open that one, and opens another
    # (harlequin hidden, so the test does not depend on what is installed)
    env["PYTHONPATH"] = str(_without_harlequin(tmp_path))
    proc = subprocess.run([str(RLPROBE_SCRIPT), "shell", str(finished_run)], input="", capture_output=True, text=True,
                          timeout=120, env=env)
    assert proc.returncode == 0, proc.stderr
    assert "DuckDB 1.1" in proc.stderr and "opening rlprobe's SQL prompt" in proc.stderr
    assert not (tmp_path / "x").exists()


def _without_harlequin(tmp_path: Path) -> Path:
    """A folder for PYTHONPATH whose harlequin package cannot be found (a spec-less stub that hides it)."""
    stub = tmp_path / "no-harlequin"
    stub.mkdir(exist_ok=True)
    (stub / "sitecustomize.py").write_text(
        "import importlib.abc, sys\n"
        "class _Hide(importlib.abc.MetaPathFinder):\n"
        "    def find_spec(self, name, path=None, target=None):\n"
        "        if name == 'harlequin' or name.startswith('harlequin.'):\n"
        "            raise ModuleNotFoundError(name)\n"
        "        return None\n"
        "sys.meta_path.insert(0, _Hide())\n")
    return stub


# -- help ---------------------------------------------------------------------------------------

@pytest.mark.parametrize("command", [None, "ls", "query", "sql", "shell", "schema"])
def test_help_has_an_example(command: str | None) -> None:
    args = [command, "--help"] if command else ["--help"]
    result = invoke(*args)
    assert result.exit_code == 0, result.output
    assert "Example" in result.stdout, result.stdout


def test_every_registered_command_has_an_example() -> None:
    ctx = click.Context(cli)
    for name in cli.list_commands(ctx):
        result = invoke(name, "--help")
        assert result.exit_code == 0 and "Example" in result.stdout, f"rlprobe {name} --help has no example"


def test_doctor_says_a_detector_that_failed_apart_from_the_ones_it_skipped(finished_run: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A detector that raises is a bug in rlprobe, not an input the run did not log: the text
    names it with its error on a line of its own, and the other detectors still run."""
    import dataclasses

    from rlprobe.doctor.registry import all_detectors

    detectors = all_detectors()

    def broken(ctx: Any, p: Any) -> None:
        raise ZeroDivisionError("float division by zero")

    monkeypatch.setitem(detectors, "GRAD_PATHOLOGY", dataclasses.replace(detectors["GRAD_PATHOLOGY"], detect=broken))
    result = invoke("doctor", str(finished_run))
    assert "GRAD_PATHOLOGY failed on this run and was not checked (please report it): detector error: ZeroDivisionError" in result.output
    skipped_line = next((line for line in result.output.splitlines() if line.startswith("skipped")), "")
    assert "GRAD_PATHOLOGY" not in skipped_line
