"""Rows the sqlite-utils way: --out picks the format by extension, --tsv, --nl, --no-headers,
SQL from @FILE or stdin, run_id on every root table, the same column names in every format."""

from __future__ import annotations

import csv
import io
import json
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq
import pytest
from click.testing import CliRunner, Result

from rlprobe.cli import cli

from conftest import metric

SQL = "SELECT step, reward_mean, run_id FROM steps ORDER BY step"


def invoke(*args: Any, input: str | None = None) -> Result:
    return CliRunner().invoke(cli, [str(a) for a in args], catch_exceptions=False, input=input, env={"COLUMNS": None})


@pytest.mark.parametrize("name, reader", [
    ("rows.parquet", lambda p: pq.read_table(p).to_pylist()),
    ("rows.csv", lambda p: [{k: _num(v) for k, v in r.items()} for r in csv.DictReader(p.open())]),
    ("rows.tsv", lambda p: [{k: _num(v) for k, v in r.items()} for r in csv.DictReader(p.open(), delimiter="\t")]),
    ("rows.json", lambda p: json.loads(p.read_text())),
    ("rows.jsonl", lambda p: [json.loads(line) for line in p.read_text().splitlines()]),
    ("ROWS.NDJSON", lambda p: [json.loads(line) for line in p.read_text().splitlines()]),
])
def test_out_picks_the_format_by_extension(finished_run: Path, tmp_path: Path, name: str, reader: Any) -> None:
    out = tmp_path / name
    result = invoke("query", finished_run, SQL, "--out", out)
    assert result.exit_code == 0, result.output
    assert result.stdout == "" and "wrote 10 rows" in result.stderr
    assert reader(out) == [{"step": s, "reward_mean": metric("reward_mean", s), "run_id": "finished"} for s in range(10)]


def _num(text: str) -> Any:
    for kind in (int, float):
        try:
            return kind(text)
        except ValueError:
            pass
    return text


def test_out_never_writes_parquet_into_a_csv(finished_run: Path, tmp_path: Path) -> None:
    out = tmp_path / "rows.csv"
    invoke("query", finished_run, SQL, "--out", out)
    assert not out.read_bytes().startswith(b"PAR1")
    assert out.read_text().splitlines()[0] == "step,reward_mean,run_id"


def test_a_flag_says_otherwise_and_an_unknown_extension_is_refused(finished_run: Path, tmp_path: Path) -> None:
    out = tmp_path / "rows.dat"
    result = invoke("query", finished_run, SQL, "--out", out)
    assert result.exit_code == 2 and not out.exists()
    assert "cannot tell the format of" in result.stderr and ".parquet" in result.stderr
    assert invoke("query", finished_run, SQL, "--out", out, "--csv").exit_code == 0
    assert out.read_text().startswith("step,reward_mean,run_id\n")
    result = invoke("query", finished_run, SQL, "--out", tmp_path / "p.dat", "--parquet")
    assert result.exit_code == 0 and pq.read_table(tmp_path / "p.dat").num_rows == 10
    result = invoke("query", finished_run, SQL, "--parquet")
    assert result.exit_code == 2 and "--out" in result.stderr


def test_tsv_nl_and_no_headers_on_stdout(finished_run: Path) -> None:
    tsv = invoke("query", finished_run, SQL, "--tsv").stdout.splitlines()
    assert tsv[0] == "step\treward_mean\trun_id" and tsv[1] == "0\t0.0\tfinished"
    lines = invoke("query", finished_run, SQL, "--nl").stdout.splitlines()
    assert len(lines) == 10 and json.loads(lines[3]) == {"step": 3, "reward_mean": metric("reward_mean", 3), "run_id": "finished"}
    assert invoke("query", finished_run, SQL, "--csv", "--no-headers").stdout.splitlines()[0].startswith("0,")
    assert invoke("query", finished_run, SQL, "--tsv", "--no-headers").stdout.splitlines()[0].startswith("0\t")
    table = invoke("query", finished_run, SQL, "--no-headers").stdout.splitlines()
    assert table[0].split()[0] == "0" and table[-1] == "(10 rows)"


def test_nl_of_no_rows_prints_nothing(empty_run: Path) -> None:
    assert invoke("query", empty_run, "SELECT step FROM steps", "--nl").stdout == ""


def test_sql_from_a_file_and_from_stdin(finished_run: Path, tmp_path: Path) -> None:
    query = tmp_path / "q.sql"
    query.write_text("-- the steps\nSELECT count(*) AS n\nFROM steps;\n")
    assert json.loads(invoke("query", finished_run, f"@{query}", "--json").stdout) == [{"n": 10}]
    assert json.loads(invoke("query", finished_run, "-", "--json", input="SELECT max(step) AS m FROM steps").stdout) == [{"m": 9}]


@pytest.mark.parametrize("args, needle", [
    (["@/no/such/file.sql"], "cannot read sql from /no/such/file.sql"),
    (["-"], "sql is empty (read from standard input)"),
])
def test_sql_from_a_missing_file_or_empty_stdin_is_one_line(finished_run: Path, args: list[str], needle: str) -> None:
    result = invoke("query", finished_run, *args, input="")
    assert result.exit_code == 2 and needle in result.stderr.lower() and len(result.stderr.splitlines()) == 1


def test_samples_on_a_root_always_carries_run_id(nested_root: Path) -> None:
    # one run of the root has samples: the table still says which run each row is from
    result = invoke("samples", nested_root, "-k", "3")
    assert result.exit_code == 0, result.output
    header = result.stdout.splitlines()[0].split()
    assert header[0] == "run_id"
    assert {line.split()[0] for line in result.stdout.splitlines()[2:-1]} == {"run1"}


def test_samples_out_by_extension_and_refused_inside_the_run(finished_run: Path, tmp_path: Path) -> None:
    result = invoke("samples", finished_run, "-k", "2", "--out", tmp_path / "s.jsonl")
    assert result.exit_code == 0, result.output
    rows = [json.loads(line) for line in (tmp_path / "s.jsonl").read_text().splitlines()]
    assert len(rows) == 2 and rows[0]["run_id"] == "finished"
    inside = finished_run / "mine.csv"
    result = invoke("samples", finished_run, "--out", inside)
    assert result.exit_code == 2 and "inside the recording" in result.stderr and not inside.exists()


def test_ls_has_the_same_columns_in_every_format(nested_root: Path) -> None:
    table = invoke("ls", nested_root).stdout.splitlines()[0].split()
    csv_head = invoke("ls", nested_root, "--csv").stdout.splitlines()[0].split(",")
    json_keys = list(json.loads(invoke("ls", nested_root, "--json").stdout)[0])
    assert table == csv_head == json_keys
    assert "run_dir" in table and "path" not in table


def test_batch_age_takes_the_same_options(tmp_path: Path) -> None:
    result = invoke("batch-age", tmp_path / "missing.jsonl", "--out", tmp_path / "x.dat")
    assert result.exit_code == 2 and "cannot tell the format" in result.stderr
