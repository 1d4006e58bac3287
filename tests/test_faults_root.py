"""One broken run never takes a root down: it is left out, named with its file, and the rest is read.

Before, one corrupt part, one manifest that is not UTF-8 or one recording of a newer format in
one run of a root made `ls`, every root query and `doctor ROOT` fail; some errors named no file
at all ("TProtocolException: Invalid data"). `--strict` keeps the old all-or-nothing behaviour.
"""

from __future__ import annotations

import json
import struct
import warnings
from pathlib import Path
from typing import Callable

import pytest
import pyarrow.parquet as pq
from click.testing import CliRunner

import rlprobe
from conftest import make_run
from rlprobe.cli import cli
from rlprobe.errors import BrokenRunWarning, SchemaTooNew
from rlprobe.store import open_store


def _part(run: Path, i: int = 1) -> Path:
    return sorted((run / "steps").glob("part-*.parquet"))[i]


def corrupt_pages(run: Path) -> Path:
    """Zero the middle of the `step` column's page: every read of the part decodes it (a query
    reads only the columns it needs, so a corrupt page of another column surfaces only when that
    column is read), decoding fails and the file is named."""
    path = _part(run)
    data = path.read_bytes()
    chunk = pq.ParquetFile(path).metadata.row_group(0).column(0)
    assert chunk.path_in_schema == "step"
    lo = chunk.data_page_offset + 8
    hi = chunk.data_page_offset + chunk.total_compressed_size
    path.write_bytes(data[:lo] + b"\x00" * (hi - lo) + data[hi:])
    return path


def corrupt_footer(run: Path) -> Path:
    path = _part(run)
    data = path.read_bytes()
    start = len(data) - 8 - struct.unpack("<I", data[-8:-4])[0]
    path.write_bytes(data[: start + 2] + b"\x00" * 10 + data[start + 12 :])  # "TProtocolException: Invalid data", no file named
    return path


def truncate_part(run: Path) -> Path:
    path = _part(run)
    path.write_bytes(path.read_bytes()[:40])
    return path


def garble_shard(run: Path) -> Path:
    path = sorted((run / "samples").glob("shard-*.parquet"))[0]
    path.write_bytes(b"PAR1 not a shard PAR1")
    return path


def non_utf8_manifest(run: Path) -> Path:
    path = run / "manifest.json"
    path.write_bytes(b'{"schema_version": 1, "run_id": "\xff\xfe"}')
    return path


def _set_version(path: Path, version: object) -> Path:
    doc = json.loads(path.read_text())
    doc["schema_version"] = version
    path.write_text(json.dumps(doc))
    return path


def newer_schema(run: Path) -> Path:
    return _set_version(run / "manifest.json", 99)


def newer_rank_manifest(run: Path) -> Path:
    make_run(run / "rank-001", 2, rank=1, state="closed", samples_per_step=1)
    return _set_version(run / "rank-001" / "manifest.json", 99)


def text_schema_version(run: Path) -> Path:
    return _set_version(run / "manifest.json", "2")


BREAKS: dict[str, Callable[[Path], Path]] = {
    "corrupt pages in a part": corrupt_pages,
    "a corrupt footer (no file in DuckDB's message)": corrupt_footer,
    "a truncated part": truncate_part,
    "a garbled sample shard": garble_shard,
    "a manifest that is not UTF-8": non_utf8_manifest,
    "a newer schema_version": newer_schema,
    "a newer rank-001 manifest": newer_rank_manifest,
    "schema_version as text": text_schema_version,
}


def _root(tmp_path: Path, breaker: Callable[[Path], Path]) -> tuple[Path, Path, Path]:
    root = tmp_path / "root"
    make_run(root / "a", 6, state="closed", samples_per_step=1)
    make_run(root / "team" / "b", 6, state="live", samples_per_step=1)
    bad = root / "team" / "bad"
    make_run(bad, 6, state="live", samples_per_step=1, steps_per_part=2)
    return root, bad, breaker(bad)


def _snapshot(root: Path) -> dict[Path, tuple[int, int]]:
    return {p: (p.stat().st_size, p.stat().st_mtime_ns) for p in root.rglob("*") if p.is_file()}


@pytest.mark.parametrize("breaker", BREAKS.values(), ids=BREAKS.keys())
def test_ls_and_query_of_a_root_leave_the_broken_run_out_and_name_its_file(tmp_path, breaker):
    root, bad, file = _root(tmp_path, breaker)
    before = _snapshot(root)
    runner = CliRunner()
    view = "samples" if breaker is garble_shard else "steps"  # the view that reads the broken file
    sql = f"SELECT run_id, count(*) AS n FROM {view} GROUP BY run_id ORDER BY run_id"

    query = runner.invoke(cli, ["query", str(root), sql, "--json"])
    assert query.exit_code == 0, query.output
    assert json.loads(query.stdout) == [{"run_id": "a", "n": 6}, {"run_id": "b", "n": 6}]
    assert str(file) in query.stderr and "broken run" in query.stderr

    ls = runner.invoke(cli, ["ls", str(root), "--json"])
    assert ls.exit_code == 0, ls.output
    listed = {r["run_id"]: r["status"] for r in json.loads(ls.stdout)}
    # ls reads manifests, events and the step column; a broken shard is no concern of its
    assert listed == {"a": "closed", "b": "live", "bad": "live" if view == "samples" else "broken"}

    strict = runner.invoke(cli, ["query", str(root), sql, "--strict"])
    assert strict.exit_code == 2
    assert str(bad) in strict.stderr and strict.stderr.count("\n") == 1, strict.stderr

    assert _snapshot(root) == before, "nothing in the root was written"


@pytest.mark.parametrize("breaker", [corrupt_footer, garble_shard, non_utf8_manifest, newer_rank_manifest],
                         ids=["footer", "shard", "manifest", "rank manifest"])
def test_a_broken_run_alone_fails_in_one_line_that_names_its_file(tmp_path, breaker):
    run = tmp_path / "run"
    make_run(run, 6, state="live", samples_per_step=1, steps_per_part=2)
    file = breaker(run)
    result = CliRunner().invoke(cli, ["query", str(run), "SELECT count(*) FROM steps, samples"])
    assert result.exit_code == 2
    assert result.output.count("\n") == 1 and (str(file) in result.output or str(file.parent) in result.output), result.output


def test_a_newer_rank_manifest_is_refused_not_read_as_v1(tmp_path):
    run = tmp_path / "run"
    make_run(run, 3, state="closed")
    newer_rank_manifest(run)
    with pytest.raises(SchemaTooNew, match="v99"):
        rlprobe.connect(run)
    import duckdb

    from rlprobe.store import init_script, resolve

    con = duckdb.connect()
    con.execute(init_script(resolve(run)))
    with pytest.raises(duckdb.Error, match="upgrade"):
        con.sql("SELECT * FROM samples").fetchall()


def test_list_runs_reports_the_broken_run_with_its_error_and_warns(tmp_path):
    root, bad, file = _root(tmp_path, corrupt_pages)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        runs = {r["run_id"]: r for r in rlprobe.list_runs(root)}
    assert runs["bad"]["status"] == "broken" and str(file) in runs["bad"]["error"]
    assert {runs["a"]["status"], runs["b"]["status"]} == {"closed", "live"}
    assert any(issubclass(w.category, BrokenRunWarning) and str(file) in str(w.message) for w in caught)
    with pytest.raises(rlprobe.errors.QueryError, match="part-000001"):
        rlprobe.list_runs(root, strict=True)


def test_a_store_keeps_reading_the_others_after_it_met_a_broken_run(tmp_path):
    root, bad, _ = _root(tmp_path, corrupt_footer)
    store = open_store(root)
    with pytest.warns(BrokenRunWarning):
        assert store.rows("SELECT count(*) FROM steps")[2] == [(12,)]
    assert list(store.broken) == [str(bad)]
    assert store.rows("SELECT count(*) FROM samples")[2] == [(12,)]  # no second warning, no second search


@pytest.mark.parametrize("breaker", [corrupt_pages, non_utf8_manifest, newer_schema], ids=["part", "manifest", "newer"])
def test_doctor_of_a_root_diagnoses_the_other_runs(tmp_path, breaker):
    root, bad, file = _root(tmp_path, breaker)
    runner = CliRunner()
    result = runner.invoke(cli, ["doctor", str(root), "--json"])
    assert result.exit_code in (0, 1), result.output
    assert sorted(d["run_id"] for d in json.loads(result.stdout)) == ["a", "b"]
    assert str(file) in result.stderr or str(bad) in result.stderr
    assert runner.invoke(cli, ["doctor", str(root), "--strict"]).exit_code == 2


def test_a_query_that_fails_on_a_file_of_its_own_is_not_blamed_on_a_run(tmp_path):
    root, bad, _ = _root(tmp_path, lambda run: run)  # nothing broken
    store = open_store(root)
    with pytest.raises(rlprobe.errors.QueryError, match="nope.csv"):
        store.rows(f"SELECT * FROM read_csv('{tmp_path / 'nope.csv'}')")
    assert store.broken == {}
