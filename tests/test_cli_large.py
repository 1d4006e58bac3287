"""Large results: a terminal table shows the first and last rows; CSV, JSON and --out write every
row, a batch at a time, with the same bytes as the whole result written at once."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import duckdb
import pytest
from click.testing import CliRunner, Result

from rlprobe.cli import cli, output

MIXED = ("SELECT i, 'row ' || i AS label, CASE WHEN i % 7 = 0 THEN NULL ELSE i / 3 END AS third, "
         "CASE WHEN i % 5 = 0 THEN 'line\none, é 日本' ELSE '' END AS text, [i, i + 1] AS pair, "
         "CASE WHEN i % 11 = 0 THEN 'nan'::DOUBLE WHEN i % 13 = 0 THEN 'inf'::DOUBLE ELSE i END AS odd, "
         "i % 2 = 0 AS even FROM range({n}) t(i) ORDER BY i")


def invoke(*args: Any) -> Result:
    return CliRunner().invoke(cli, [str(a) for a in args], catch_exceptions=False, env={"COLUMNS": None, "NO_COLOR": None})


def test_a_long_result_shows_its_first_and_last_rows_with_a_count_and_a_hint(finished_run: Path) -> None:
    result = invoke("query", finished_run, "SELECT range AS i FROM range(100)")
    lines = result.stdout.splitlines()
    assert lines[:2] == [" i", "--"]  # widths are those of the rows shown
    assert [ln.strip() for ln in lines[2:22]] == [str(i) for i in range(20)]
    assert lines[22].strip() == "…"
    assert [ln.strip() for ln in lines[23:43]] == [str(i) for i in range(80, 100)]
    assert lines[43] == "(100 rows, 40 shown: the first 20 and the last 20; use --csv, --json or --out FILE for all of them)"
    assert len(lines) == 44


def test_forty_rows_are_all_shown(finished_run: Path) -> None:
    result = invoke("query", finished_run, "SELECT range AS i FROM range(40)")
    assert "…" not in result.stdout
    assert result.stdout.splitlines()[-1] == "(40 rows)"
    assert len(result.stdout.splitlines()) == 43


def test_left_out_columns_and_rows_share_one_count_line(finished_run: Path) -> None:
    wide = ", ".join(f"'{'x' * 30}' AS c{i}" for i in range(8))
    result = CliRunner().invoke(cli, ["query", str(finished_run), f"SELECT {wide} FROM range(50)"], env={"COLUMNS": "80"})
    assert result.stdout.splitlines()[-1] == (
        "(50 rows, 40 shown: the first 20 and the last 20; 2 of 8 columns not shown; "
        "select fewer, or use --csv, --json or --out FILE for all of them)")


def test_only_the_rows_shown_are_formatted(finished_run: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    calls = []
    real = output.cell_text
    monkeypatch.setattr(output, "cell_text", lambda value, *a, **k: calls.append(value) or real(value, *a, **k))
    result = invoke("query", finished_run, "SELECT range AS i, 'x' AS s FROM range(100000)")
    assert "(100000 rows, 40 shown" in result.stdout
    assert len(calls) == 40 * 2


def test_ls_shapes_only_the_rows_it_shows(root_of_many: Path) -> None:
    result = invoke("ls", root_of_many)
    runs = invoke("ls", root_of_many, "--csv").stdout.count("\n") - 1
    assert runs > 40
    assert f"({runs} rows, 40 shown" in result.stdout


def _reference(sql: str) -> tuple[list[str], list[str], list[tuple[Any, ...]], Any]:
    """Columns, types, Python rows and the Arrow table of sql, fetched straight from DuckDB."""
    rel = duckdb.sql(sql)
    columns, types = rel.columns, [str(t) for t in rel.types]
    return columns, types, rel.fetchall(), duckdb.sql(sql).to_arrow_table()


@pytest.mark.parametrize("lines", [False, True], ids=["json", "nl"])
@pytest.mark.parametrize("batch", [1, 3, 4096])
@pytest.mark.parametrize("n", [0, 1, 10])
def test_json_written_in_batches_is_the_whole_result_written_at_once(monkeypatch: pytest.MonkeyPatch, lines: bool,
                                                                    batch: int, n: int) -> None:
    columns, types, rows, table = _reference(MIXED.format(n=n))
    monkeypatch.setattr(output, "BATCH_ROWS", batch)
    pieces: list[str] = []
    output.write_json(columns, types, table, pieces.append, lines=lines)
    whole = output.json_text(columns, types, rows, lines=lines)
    assert "".join(pieces) == whole + ("\n" if rows or not lines else "")
    if n:
        assert json.loads(whole if not lines else "[" + ",".join(whole.splitlines()) + "]")[0]["label"] == "row 0"


def test_json_output_never_holds_more_than_a_batch_as_python_rows(finished_run: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    sizes: list[int] = []
    real = output.python_rows
    monkeypatch.setattr(output, "python_rows", lambda columns, table: sizes.append(table.num_rows) or real(columns, table))
    result = invoke("query", finished_run, MIXED.format(n=10000), "--nl")
    assert result.stdout.count("\n") == 10000
    assert max(sizes) <= output.BATCH_ROWS and len(sizes) >= 3


@pytest.mark.parametrize("flag,suffix", [("--json", "json"), ("--nl", "jsonl"), ("--csv", "csv"), ("--tsv", "tsv")])
def test_stdout_and_out_file_hold_the_same_bytes(finished_run: Path, tmp_path: Path, flag: str, suffix: str) -> None:
    sql = MIXED.format(n=5000)
    printed = CliRunner().invoke(cli, ["query", str(finished_run), sql, flag], catch_exceptions=False).stdout_bytes
    out = tmp_path / f"rows.{suffix}"
    invoke("query", finished_run, sql, "--out", out)
    assert out.read_bytes() == printed


def test_json_on_stdout_matches_json_dumps_of_the_rows(finished_run: Path) -> None:
    sql = "SELECT i, 'row ' || i AS label, [i] AS l, NULL AS nothing FROM range(9000) t(i) ORDER BY i"
    printed = invoke("query", finished_run, sql, "--json").stdout
    columns, _, rows, _ = _reference(sql)
    expected = json.dumps([dict(zip(columns, row)) for row in rows], indent=2, ensure_ascii=False)
    assert printed == expected + "\n"
