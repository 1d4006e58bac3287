"""Sample reads push down: the shard files are chosen by name from two listings before a query
(v1.sample_files_listed and v1.sample_files_relisted, bound by rlprobe.store.sample_files), so a step filter and the
columns a query uses reach the parquet scan. The rows are the ones the per-scan choice gives
(src_samples with no list bound, as in a DuckDB session of your own) in every state a recording
can be read in: live with deltas and open versions, mid-seal with copies left beside the sealed
file, written by an earlier writer, resumed, with rank sub-recordings, below a root.
"""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any, Callable

import pyarrow.parquet as pq
import pytest

from conftest import sample_rows
from rlprobe.layout import newest_shards, shard_name
from rlprobe.record import writer as writer_module
from rlprobe.record.writer import RunWriter, _table
from rlprobe.schemas import SAMPLE_COLUMN_TYPES, RunManifest
from rlprobe.store import open_store, sample_files, sqlfiles
from rlprobe.store.engine import run as run_sql

ORDER = "run_id, rank, step, sample_id, reward_total"


@pytest.fixture(autouse=True)
def small_shards(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(writer_module, "SAMPLES_PER_SHARD", 5)
    monkeypatch.setattr(writer_module, "DELTAS_PER_MERGE", 3)
    monkeypatch.setattr(writer_module, "_SUPERSEDED_GRACE_S", 3600.0)  # superseded copies stay beside the new ones


def live_run(path: Path) -> Path:
    """Sealed shards with their deltas still beside them, an open version with newer deltas."""
    w = RunWriter(path, RunManifest(run_id=path.name))
    for step in range(9):
        w.write_samples(sample_rows(step, 1 + step % 2))
    return path


def sealing_run(path: Path) -> Path:
    """The instant between writing a sealed shard and deleting the copies it replaces."""
    live_run(path)
    keep = path.parent / (path.name + ".copies")
    shutil.copytree(path / "samples", keep)
    RunWriter(path, RunManifest(run_id=path.name)).compact()
    for f in keep.iterdir():
        if not (path / "samples" / f.name).exists():
            shutil.copy(f, path / "samples" / f.name)
    shutil.rmtree(keep)
    return path


def legacy_run(path: Path) -> Path:
    """An earlier writer's open versions of the filling shard (whole copies, newest wins)."""
    RunWriter(path, RunManifest(run_id=path.name))
    rows = sample_rows(0, 3)
    (path / "samples").mkdir()
    pq.write_table(_table(rows[:2], SAMPLE_COLUMN_TYPES), path / "samples" / shard_name(0, 1))
    pq.write_table(_table(rows, SAMPLE_COLUMN_TYPES), path / "samples" / shard_name(0, 2))
    return path


def resumed_run(path: Path) -> Path:
    """A killed writer's deltas, sealed by the resumed writer, which writes on (a step again)."""
    w = RunWriter(path, RunManifest(run_id=path.name))
    w.write_samples(sample_rows(0, 2))
    w.write_samples(sample_rows(1, 2))
    resumed = RunWriter(path, RunManifest(run_id=path.name))
    resumed.write_samples(sample_rows(1, 2))  # the re-run step: its samples are new rows, read too
    resumed.write_samples([{**r, "reward_component.length": 0.5} for r in sample_rows(2, 4)])  # a new column
    return path


def ranked_run(path: Path) -> Path:
    """Rank 0 live, rank 1 sealed (a rank-001 sub-recording, rank read from its folder)."""
    live_run(path)
    w1 = RunWriter(path / "rank-001", RunManifest(run_id=path.name), rank=1)
    w1.write_samples([{k: v for k, v in r.items() if k != "rank"} for r in sample_rows(4, 3, rank=1)])
    w1.compact()
    return path


def root_of_runs(path: Path) -> Path:
    for name, make in (("a", live_run), ("b", legacy_run), ("nested/c", sealing_run)):
        (path / name).parent.mkdir(parents=True, exist_ok=True)
        make(path / name)
    return path


STATES: dict[str, Callable[[Path], Path]] = {
    "live": live_run, "sealing": sealing_run, "legacy": legacy_run, "resumed": resumed_run,
    "ranks": ranked_run, "root": root_of_runs,
}


def unbound(store: Any, sql: str) -> list[dict[str, Any]]:
    """sql as a DuckDB session of one's own runs it: no list bound, the per-scan choice."""
    return store.con.sql(sql).to_arrow_table().to_pylist()


@pytest.mark.parametrize("state", STATES)
def test_the_listed_files_give_the_rows_of_the_per_scan_choice(tmp_path: Path, state: str) -> None:
    path = STATES[state](tmp_path / "rec")
    store = open_store(path)
    for sql in (f"SELECT * FROM samples ORDER BY {ORDER}",
                f"SELECT step, sample_id, rank, completion_text FROM samples WHERE step BETWEEN 1 AND 4 ORDER BY {ORDER}",
                "SELECT rec_dir, run_dir, rank, count(*) AS n FROM v1.src_samples GROUP BY ALL ORDER BY ALL"):
        bound = store.table(sql)
        assert bound.to_pylist() == unbound(store, sql)
        assert bound.column_names == store.con.sql(sql).columns
    ids = [(r["run_id"], r["sample_id"]) for r in unbound(store, "SELECT run_id, sample_id FROM samples")]
    assert ids and (len(ids) == len(set(ids)) or state == "resumed")  # each sample once (resumed: its re-run step twice)


@pytest.mark.parametrize("state", STATES)
def test_the_listing_keeps_what_layout_keeps(tmp_path: Path, state: str) -> None:
    path = STATES[state](tmp_path / "rec")
    store = open_store(path)
    ((listed,),) = store.con.sql("SELECT v1.sample_files_listed()").fetchall()
    expected = [str(d / n) for d in sorted({p.parent for p in path.rglob("shard-*.parquet")})
                for n in newest_shards(p.name for p in d.iterdir())]
    assert sorted(listed) == sorted(expected)
    assert store.rows("SELECT count(*) FROM samples")[2] == [(sum(pq.read_metadata(f).num_rows for f in expected),)]


def test_the_second_listing_finds_a_shard_the_first_missed_and_reads_each_file_once(tmp_path: Path) -> None:
    path = live_run(tmp_path / "rec")
    store = open_store(path)
    ((listed,),) = store.con.sql("SELECT v1.sample_files_listed()").fetchall()
    # the first listing read the folder mid-seal and missed the shard; the second sees it
    first = [f for f in listed if "/shard-00000" not in f]
    store.con.execute("SET VARIABLE rlprobe_sample_files = ?::VARCHAR[]", [first])
    ((relisted,),) = store.con.sql("SELECT v1.sample_files_relisted()").fetchall()
    assert sorted(relisted) == sorted(listed) and any("/shard-00000" in f for f in relisted)
    # both listings saw every file: each is read once
    store.con.execute("SET VARIABLE rlprobe_sample_files = ?::VARCHAR[]", [listed])
    ((relisted,),) = store.con.sql("SELECT v1.sample_files_relisted()").fetchall()
    assert sorted(relisted) == sorted(listed)


def test_a_bound_file_gone_before_the_scan_fails_the_query_and_is_never_read_as_no_rows(tmp_path: Path) -> None:
    """The writer deletes a shard's deltas once its sealed file exists. A list bound just before
    must then fail the statement (engine.run lists again and retries), not read as zero rows:
    DuckDB's allow_empty skips a listed name that matches no file."""
    import duckdb

    path = live_run(tmp_path / "rec")
    store = open_store(path)
    ((listed,),) = store.con.sql("SELECT v1.sample_files_listed()").fetchall()
    store.con.execute("SET VARIABLE rlprobe_sample_files = ?::VARCHAR[]", [listed + [str(path / "samples" / "shard-00009.delta-000001.parquet")]])
    with pytest.raises(duckdb.IOException, match="shard-00009"):
        store.con.sql("SELECT count(*) FROM v1.src_samples").fetchall()
    store.con.execute("SET VARIABLE rlprobe_sample_files = []::VARCHAR[]")  # nothing listed: no rows, no error
    assert store.con.sql("SELECT count(*) FROM v1.src_samples").fetchall() == [(0,)]
    store.con.execute("RESET VARIABLE rlprobe_sample_files")
    total = store.rows("SELECT count(*) FROM samples")[2]
    assert total == [(sum(pq.read_metadata(f).num_rows for f in listed),)]


SEAL_BY_RENAME = r"""
import os, sys, time
samples, n = sys.argv[1], int(sys.argv[2])
for i in range(n):  # the seal of an open version with no delta after it: a rename
    os.replace(f"{samples}/shard-{i:05d}.open-000001.parquet", f"{samples}/shard-{i:05d}.parquet")
    time.sleep(0.0005)
"""


def test_a_query_while_shards_are_sealed_by_rename_never_misses_one(tmp_path: Path) -> None:
    """A folder read during a rename can see neither name (on Linux a single listing here
    misses a shard nearly every time); the writer seals an open version with no delta after it by
    renaming it. Every query must still be given every shard."""
    import subprocess
    import sys

    n = 2000
    w = RunWriter(tmp_path / "rec", RunManifest(run_id="r"))
    w.write_samples(sample_rows(0, 2))
    w.seal_samples()
    samples = tmp_path / "rec" / "samples"
    template = (samples / shard_name(0)).read_bytes()
    for i in range(n):
        (samples / shard_name(i)).unlink(missing_ok=True)
        (samples / f"shard-{i:05d}.open-000001.parquet").write_bytes(template)
    store = open_store(tmp_path / "rec")
    sealer = subprocess.Popen([sys.executable, "-c", SEAL_BY_RENAME, str(samples), str(n)])
    short = []
    try:
        while sealer.poll() is None:
            with sample_files.bound(store.con, "SELECT * FROM samples"):
                ((files,),) = store.con.sql("SELECT getvariable('rlprobe_sample_files')").fetchall()
            short.append(n - len(files))
    finally:
        sealer.wait(60)
    assert sealer.returncode == 0 and len(short) >= 3, f"{len(short)} listings while shards were sealed: the test proved little"
    assert not any(short), f"{sum(1 for k in short if k)} of {len(short)} listings missed shards ({max(short)} at most)"


def test_a_step_filter_and_the_columns_used_reach_the_parquet_scan(tmp_path: Path) -> None:
    store = open_store(live_run(tmp_path / "rec"))
    sql = "EXPLAIN SELECT step, reward_total FROM samples WHERE step = 3"
    with sample_files.bound(store.con, sql):
        plan = store.con.sql(sql).fetchall()[0][1]
    scan = plan[plan.index("READ_PARQUET"):]
    assert "step = 3" in scan or "step=3" in scan.replace(" ", "")
    assert "completion_text" not in scan and "prompt_text" not in scan


def test_the_list_holds_for_one_statement_and_the_next_lists_again(tmp_path: Path) -> None:
    path = tmp_path / "rec"
    w = RunWriter(path, RunManifest(run_id="r"))
    w.write_samples(sample_rows(0, 2))
    store = open_store(path)
    assert store.rows("SELECT count(*) FROM samples")[2] == [(2,)]
    assert store.con.sql("SELECT getvariable('rlprobe_sample_files')").fetchall() == [(None,)]
    w.write_samples(sample_rows(1, 2))
    assert store.rows("SELECT count(*) FROM samples")[2] == [(4,)]


def test_queries_that_do_not_name_samples_list_nothing(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    store = open_store(live_run(tmp_path / "rec"))
    seen: list[str] = []
    real = store.con

    class Spy:
        def __getattr__(self, name: str) -> Any:
            return getattr(real, name)

        def execute(self, sql: str, *args: Any) -> Any:
            seen.append(sql)
            return real.execute(sql, *args)

    run_sql(Spy(), "SELECT count(*) FROM manifest", fetch="rows")  # type: ignore[arg-type]
    assert not any("sample_files_listed" in s for s in seen)
    run_sql(Spy(), "SELECT count(*) FROM samples", fetch="rows")  # type: ignore[arg-type]
    assert any("sample_files_listed" in s for s in seen)


def test_ranked_samples_are_the_single_pass_answer_with_ids_a_caller_repeated(tmp_path: Path) -> None:
    """samples_ranked reads the text of the k rows only; rows sharing an id keep their own text."""
    path = tmp_path / "rec"
    w = RunWriter(path, RunManifest(run_id="r"))
    for step in range(6):
        rows = sample_rows(step, 4)
        rows += [{**r, "sample_id": "same", "completion_text": f"twin {r['sample_id']}", "reward_total": r["reward_total"] + 0.01}
                 for r in sample_rows(step, 2)]
        w.write_samples(rows)
    store = open_store(path)
    ranked = sqlfiles.query("samples_ranked")
    for params in ({"sort": "reward", "ascending": False, "k": 7, "step_from": None, "step_to": None},
                   {"sort": "reward", "ascending": True, "k": 3, "step_from": 2, "step_to": 3},
                   {"sort": "length", "ascending": False, "k": 100, "step_from": None, "step_to": None}):
        got = run_sql(store.con, ranked, params).to_pylist()
        for row in got:
            text = row["completion_text"]
            if row["sample_id"] == "same":
                i = int(text.split("-")[-1])
                assert abs(row["reward_total"] - (i / 10 + 0.01)) < 1e-9, "a repeated id got its own row's text"
            else:
                assert text == f"completion {row['step']}.{row['sample_id'].split('-')[-1]} from rank 0"
        keys = [(r["step"], r["sample_id"], r["completion_text"]) for r in got]
        assert len(keys) == len(set(keys)) == min(params["k"], got[0]["matched"])
