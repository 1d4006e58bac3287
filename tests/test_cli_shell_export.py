"""`rlprobe shell` without a duckdb CLI (the plain prompt, harlequin) and `rlprobe export`."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import pyarrow.dataset as ds
import pyarrow.parquet as pq
import pytest
from click.testing import CliRunner, Result

from rlprobe.cli import cli

from conftest import make_run


def invoke(*args: Any, input: str | None = None) -> Result:
    return CliRunner().invoke(cli, [str(a) for a in args], catch_exceptions=False, input=input, env={"COLUMNS": None})


# -- the plain SQL prompt (rlprobe shell --with python) --------------------------------------

def test_the_prompt_runs_statements_over_lines_and_goes_on_after_an_error(finished_run: Path) -> None:
    script = ("SELECT count(*) AS n\n  FROM steps;\n"
              "SELECT * FROM stepz;\n"
              ".mode json\nSELECT max(step) AS last FROM steps;\n"
              ".tables\n.schema samples\n.nope\n.quit\nSELECT 'never' AS x;\n")
    result = invoke("shell", finished_run, "--with", "python", input=script)
    assert result.exit_code == 0, result.output
    out = result.stdout
    assert "(1 row)" in out and "10" in out.split()
    assert "Error: no table or view named stepz (did you mean steps?)" in out  # one line, and it goes on
    assert '"last": 9' in out
    assert "steps  samples  events  runs  manifest" in out
    assert "completion_text" in out and "Error: unknown command .nope" in out
    assert "never" not in out  # .quit left before it


def test_the_prompt_runs_a_last_statement_without_a_semicolon_at_eof(finished_run: Path) -> None:
    result = invoke("shell", finished_run, "--with", "python", input="SELECT 41 + 1 AS answer")
    assert result.exit_code == 0 and "42" in result.stdout.split()


def test_harlequin_asked_for_but_not_installed(finished_run: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import rlprobe.cli.query as query_cli

    monkeypatch.setattr(query_cli, "_harlequin_installed", lambda: False)
    result = invoke("shell", finished_run, "--with", "harlequin")
    assert result.exit_code == 2 and "pip install harlequin" in result.stderr
    assert len(result.stderr.splitlines()) == 1


def test_harlequin_opens_on_a_connection_with_the_views(finished_run: Path) -> None:
    pytest.importorskip("harlequin")
    from harlequin import Harlequin

    from rlprobe.cli.query import harlequin_adapter
    from rlprobe.store import open_store

    adapter = harlequin_adapter(open_store(finished_run), str(finished_run))
    connection = adapter.connect()
    assert connection.execute("SELECT count(*) AS n FROM steps").fetchall().to_pylist() == [{"n": 10}]
    assert "rlprobe views over" in connection.init_message

    app = Harlequin(adapter=adapter, connection_hash="rlprobe-test", no_download_tzdata=True, record_history=False)

    async def boot() -> str:
        async with app.run_test() as pilot:
            await pilot.pause(0.5)
            name = type(app.connection).__name__
            app.exit()
            return name

    assert asyncio.run(boot()) == "DuckDbConnection"


# -- export ---------------------------------------------------------------------------------

@pytest.fixture
def mixed_root(tmp_path: Path) -> Path:
    """Two runs with different metrics (one logs lr and an extra the other does not), named and tagged."""
    root = tmp_path / "runs"
    make_run(root / "a", 4, samples_per_step=2, columns=("reward_mean", "kl_mean", "lr"), extra=("only_a",))
    make_run(root / "b", 3, samples_per_step=1, columns=("reward_mean",), extra=())
    manifest = json.loads((root / "a" / "manifest.json").read_text())
    manifest.update(name="baseline", tags=["sweep", "lr-1e-6"])
    (root / "a" / "manifest.json").write_text(json.dumps(manifest))
    return root


def test_export_writes_one_table_per_view_with_one_schema(mixed_root: Path, tmp_path: Path) -> None:
    out = tmp_path / "exported"
    result = invoke("export", mixed_root, out)
    assert result.exit_code == 0, result.output
    assert result.stdout.strip() == str(out)
    assert sorted(p.name for p in out.iterdir()) == ["events.parquet", "samples.parquet", "steps.parquet"]
    steps = pq.read_table(out / "steps.parquet")
    assert steps.column_names[:3] == ["run_id", "name", "tags"]
    rows = steps.to_pylist()
    assert [(r["run_id"], r["step"]) for r in rows] == [("a", s) for s in range(4)] + [("b", s) for s in range(3)]
    assert {r["run_id"]: (r["name"], r["tags"]) for r in rows} == {"a": ("baseline", ["sweep", "lr-1e-6"]), "b": ("b", [])}
    assert [r["lr"] is None for r in rows] == [False] * 4 + [True] * 3  # b never logged lr: NULL, same column
    assert [r["extra.only_a"] is None for r in rows] == [False] * 4 + [True] * 3
    assert pq.read_table(out / "samples.parquet").num_rows == 4 * 2 + 3
    assert "wrote 7 steps rows of 2 runs" in result.stderr


def test_export_hive_partitioned_by_run_id_reads_back_as_one_table(mixed_root: Path, tmp_path: Path) -> None:
    out = tmp_path / "hive"
    result = invoke("export", mixed_root, out, "--partition", "--table", "steps")
    assert result.exit_code == 0, result.output
    assert sorted(p.name for p in (out / "steps").iterdir()) == ["run_id=a", "run_id=b"]
    table = ds.dataset(out / "steps", partitioning="hive").to_table()
    assert sorted(set(table.column("run_id").to_pylist())) == ["a", "b"] and table.num_rows == 7
    assert "lr" in table.column_names and "extra.only_a" in table.column_names
    schemas = {pq.read_schema(f) for f in (out / "steps").rglob("*.parquet")}
    assert len(schemas) == 1  # every partition file has the same columns


def test_export_one_file_of_one_table(mixed_root: Path, tmp_path: Path) -> None:
    out = tmp_path / "events.parquet"
    result = invoke("export", mixed_root, out, "--table", "events")
    assert result.exit_code == 0, result.output
    events = pq.read_table(out)
    assert set(events.column("run_id").to_pylist()) == {"a", "b"} and "kind" in events.column_names


@pytest.mark.parametrize("case", ["exists", "inside", "partition-file", "two-tables-one-file"])
def test_export_refuses_what_would_overwrite_or_be_read_as_runs(mixed_root: Path, tmp_path: Path, case: str) -> None:
    existing = tmp_path / "already"
    existing.mkdir()
    args = {
        "exists": [existing],
        "inside": [mixed_root / "exported"],
        "partition-file": [tmp_path / "x.parquet", "--partition"],
        "two-tables-one-file": [tmp_path / "x.parquet", "--table", "steps", "--table", "events"],
    }[case]
    result = invoke("export", mixed_root, *args)
    assert result.exit_code == 2, result.output
    assert len(result.stderr.splitlines()) == 1 and "Traceback" not in result.stderr
    assert not (mixed_root / "exported").exists() and not (tmp_path / "x.parquet").exists()
    assert list(existing.iterdir()) == []
    assert not [p for p in tmp_path.iterdir() if "rlprobe-export" in p.name]  # no temporary left behind
