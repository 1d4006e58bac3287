"""Hostile folder names: a path reaches SQL only as a bound parameter or a quoted literal.

A run folder named ``evil\\nCOPY (SELECT 1) TO 'pwned.csv';\\n--`` used to run that COPY on
every `query`, `ls` and `report` (the path was written into a comment of the views' script), and
a folder ``a\\nb`` read as run_dir '' (RE2's '.' does not match a newline), after which a run_id
filter scoped the views to '' and globbed the whole filesystem.
"""

from __future__ import annotations

import os

import duckdb
import pytest
from click.testing import CliRunner

from conftest import make_run
from rlprobe.cli import cli
from rlprobe.store import init_script, open_store, resolve

EVIL = "evil\nCOPY (SELECT 1) TO 'pwned.csv';\n--"
NAMES = [EVIL, "a\nb", "we'ird", "br[a]ck", "st*ar", "q?m", "cur{ly,x}", "sp ace", "%pct_", "ünïcode",
         'dou"ble', "tab\tbed", "**", "semi;colon", "--dash", "cr\rlf"]


@pytest.fixture
def in_tmp(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)  # where a COPY ... TO 'pwned.csv' would land
    return tmp_path


@pytest.mark.parametrize("name", NAMES, ids=repr)
def test_a_hostile_run_name_reads_as_itself_alone_and_in_a_root(in_tmp, name):
    root = in_tmp / "root"
    make_run(root / name, 3, state="closed", samples_per_step=1)
    make_run(root / "other", 2, state="closed")
    run = open_store(root / name)
    assert run.rows("SELECT run_id, run_dir FROM runs")[2] == [(name, str(root / name))]
    assert run.rows("SELECT count(*) FROM steps")[2] == [(3,)]
    whole = open_store(root)
    assert whole.scope_for("SELECT * FROM steps WHERE run_id = ?", [name]) == [str(root / name)]
    assert whole.rows("SELECT count(*) FROM samples WHERE run_id = ?", [name])[2] == [(3,)]
    assert sorted(whole.rows("SELECT run_id FROM runs")[2]) == sorted([(name,), ("other",)])
    assert not (in_tmp / "pwned.csv").exists()


def test_no_command_runs_sql_from_a_folder_name(in_tmp):
    root = in_tmp / "root"
    make_run(root / EVIL, 3, state="closed")
    runner = CliRunner()
    for args in (["query", str(root / EVIL), "SELECT count(*) FROM steps"], ["ls", str(root)],
                 ["query", str(root), "SELECT run_id FROM steps WHERE run_id = 'x'"], ["sql", str(root / EVIL)]):
        result = runner.invoke(cli, args, catch_exceptions=False)
        assert result.exit_code == 0, (args, result.output)
    assert not (in_tmp / "pwned.csv").exists()


def test_the_printed_script_is_safe_to_run_in_plain_duckdb(in_tmp):
    root = in_tmp / "root"
    make_run(root / EVIL, 3, state="closed")
    script = init_script(resolve(root / EVIL))
    assert "\nCOPY" not in script, "the folder name's newline must not start a statement of its own"
    con = duckdb.connect()
    con.execute(script)
    assert con.sql("SELECT count(*) FROM steps").fetchall() == [(3,)]
    assert not (in_tmp / "pwned.csv").exists()


def test_ls_of_a_root_with_a_newline_name_prints_a_table_not_a_traceback(in_tmp):
    root = in_tmp / "root"
    make_run(root / "a\nb", 3, state="closed")
    make_run(root / "c", 3, state="closed")
    result = CliRunner().invoke(cli, ["ls", str(root)], catch_exceptions=False)
    assert result.exit_code == 0, result.output
    assert "a\\nb" in result.output and "(2 rows)" in result.output


@pytest.mark.skipif(os.sep != "/", reason="a backslash is a separator on Windows")
def test_a_path_with_a_backslash_is_refused_in_one_line_not_read_as_empty(in_tmp):
    make_run(in_tmp / "back\\slash", 3, state="closed")
    result = CliRunner().invoke(cli, ["query", str(in_tmp / "back\\slash"), "SELECT count(*) FROM steps"])
    assert result.exit_code == 2
    assert "backslash" in result.output and result.output.count("\n") == 1


# -- --out never writes into a recording ---------------------------------------------------------

@pytest.mark.parametrize("command, target, out", [
    ("query", "run", "run/steps.parquet"),
    ("query", "run", "run/steps/part-000000.parquet"),
    ("query", "run", "run/notes.parquet"),
    ("query", "root", "root/run/samples/x.parquet"),
    ("query", "root", "root/run/rank-001/x.parquet"),
    ("query", "root", "root/new/steps.parquet"),
    ("ls", "root", "root/run/runs.parquet"),
    ("ls", "run", "run/ls.parquet"),
])
def test_out_inside_a_recording_is_refused_and_nothing_is_written(in_tmp, command, target, out):
    run = in_tmp / "run" if target == "run" else in_tmp / "root" / "run"
    make_run(run, 5, state="closed")
    make_run(in_tmp / "root" / "other", 2, state="closed") if target == "root" else None
    before = {p: p.stat().st_mtime_ns for p in run.rglob("*")}
    args = ["query", str(in_tmp / target), "SELECT 1 AS x"] if command == "query" else ["ls", str(in_tmp / target)]
    result = CliRunner().invoke(cli, [*args, "--out", str(in_tmp / out)])
    assert result.exit_code == 2, result.output
    assert "--out" in result.output and result.output.count("\n") == 1
    assert {p: p.stat().st_mtime_ns for p in run.rglob("*")} == before
    assert not (in_tmp / out).exists() or (in_tmp / out) in before
    assert open_store(run).rows("SELECT count(*) FROM steps")[2] == [(5,)]


def test_out_beside_a_root_or_in_it_under_another_name_is_written(in_tmp):
    make_run(in_tmp / "root" / "run", 5, state="closed")
    for out in (in_tmp / "rows.parquet", in_tmp / "root" / "summary.parquet"):
        result = CliRunner().invoke(cli, ["query", str(in_tmp / "root"), "SELECT step FROM steps", "--out", str(out)])
        assert result.exit_code == 0, result.output
        assert out.exists()


# -- the inference-records writer stays below its root -----------------------------------------

@pytest.mark.parametrize("field, value", [("run_name", "../../escape"), ("run_name", "a/b"), ("run_name", ".."),
                                          ("run_id", "../x"), ("run_id", "x\ny"), ("run_name", "back\\slash")])
def test_records_writer_refuses_a_name_that_leaves_the_store(tmp_path, field, value):
    from rlprobe.records.identity import build_protocol
    from rlprobe.records.writer import RecordsWriter

    checkpoint = tmp_path / "ck"
    checkpoint.mkdir()
    (checkpoint / "config.json").write_text('{"hidden": 8}')
    root = tmp_path / "store" / "records"
    kwargs = {"run_name": "exp", "run_id": "r1", field: value}
    with pytest.raises(ValueError, match=field):
        RecordsWriter(root, checkpoint=checkpoint, protocol=build_protocol({"temperature": 1.0}), **kwargs)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["ck"], "nothing was created, outside the store or in it"


def test_records_writer_makes_an_id_from_the_environment_safe(tmp_path, monkeypatch):
    from rlprobe.records.identity import build_protocol
    from rlprobe.records.writer import RecordsWriter

    checkpoint = tmp_path / "ck"
    checkpoint.mkdir()
    (checkpoint / "config.json").write_text('{"hidden": 8}')
    monkeypatch.setenv("BEAKER_WORKLOAD_ID", "../../wl/01")
    writer = RecordsWriter(tmp_path / "store", run_name="exp", checkpoint=checkpoint, protocol=build_protocol({"temperature": 1.0}))
    try:
        assert writer.run_dir is not None and (tmp_path / "store") in writer.run_dir.parents
        assert "/" not in writer.run_id
    finally:
        writer.close()


def test_runs_in_key_value_folders_keep_their_own_columns_and_values(in_tmp):
    """Sweep roots are laid out as lr=1e-5/seed=1/: DuckDB reads such paths as hive partitions
    by default, which added VARCHAR columns lr and seed to steps and samples and replaced the
    logged lr metric with the folder's text."""
    from conftest import metric

    root = in_tmp / "root"
    for lr in ("1e-5", "3e-5"):
        make_run(root / f"lr={lr}" / "seed=1", 4, columns=("reward_mean", "lr"), run_id=f"lr{lr}", samples_per_step=2)
    store = open_store(root)
    columns, types, rows = store.rows("SELECT run_id, step, lr FROM steps ORDER BY run_id, step")
    assert types[2] == "DOUBLE" and rows == [(f"lr{lr}", s, metric("lr", s)) for lr in ("1e-5", "3e-5") for s in range(4)]
    assert "seed" not in store.rows("SELECT * FROM steps LIMIT 0")[0]
    assert not {"lr", "seed"} & set(store.rows("SELECT * FROM samples LIMIT 0")[0])
    assert store.rows("SELECT count(*) FROM events WHERE run_id = 'lr1e-5'")[2][0][0] > 0


@pytest.mark.parametrize("pattern, sibling", [("a*", "ab"), ("q?", "qz"), ("br[a]ck", "brack")])
def test_a_run_folder_named_like_a_glob_reads_no_sibling_it_matches(in_tmp, pattern, sibling):
    """DuckDB's readers take each listed file as a glob: 'a*/samples/shard-00000.parquet' also
    matched the sibling 'ab', and the samples of 'ab' were read twice."""
    from rlprobe.doctor.live import RunWatcher

    root = in_tmp / "root"
    make_run(root / pattern, 3, samples_per_step=2)
    make_run(root / sibling, 5, samples_per_step=2)
    store = open_store(root)
    assert store.rows("SELECT run_id, count(*) FROM samples GROUP BY 1 ORDER BY 1")[2] == sorted([(pattern, 6), (sibling, 10)])
    assert store.rows("SELECT run_id, count(*) FROM steps GROUP BY 1 ORDER BY 1")[2] == sorted([(pattern, 3), (sibling, 5)])
    watcher = RunWatcher(root / pattern)
    watcher.tick()
    assert watcher._tables is not None
    assert watcher._tables.con.execute("SELECT count(*) FROM live_samples").fetchall() == [(6,)]
