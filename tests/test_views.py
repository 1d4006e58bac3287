"""The SQL views users query (steps, samples, events, runs, manifest) over every state of a run.

Everything goes through rlprobe.connect, so these are the rows a user sees in Python, in
`rlprobe query` and in a DuckDB session that ran `rlprobe sql`.
"""

from __future__ import annotations

import json
import math
import shutil
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import rlprobe
from rlprobe.record import writer as writer_module
from rlprobe.record.writer import RunWriter, atomic_write_table
from rlprobe.schemas import EVENT_COLUMN_TYPES, SAMPLE_COLUMN_TYPES, STEP_COLUMN_TYPES, RunManifest

from conftest import ROOT_OF_MANY, T0, component, event, extra_value, make_run, metric

PUBLIC_VIEWS = ("steps", "samples", "events", "runs", "manifest")


_connections: dict[Path, Any] = {}


@pytest.fixture(autouse=True)
def _fresh_connections() -> Any:
    """One connection per path and test (the views re-read the files at every query)."""
    _connections.clear()
    yield
    _connections.clear()


def connect(path: Path) -> Any:
    if path not in _connections:
        _connections[path] = rlprobe.connect(path)
    return _connections[path]


def rows(path: Path, sql: str, params: list[Any] | None = None) -> list[dict[str, Any]]:
    rel = connect(path).sql(sql, params=params)
    return [dict(zip(rel.columns, r)) for r in rel.fetchall()]


def scalar(path: Path, sql: str) -> Any:
    return connect(path).sql(sql).fetchall()[0][0]


def columns(path: Path, view: str) -> dict[str, str]:
    con = connect(path)
    return {name: type_ for name, type_ in con.sql(f"SELECT column_name, column_type FROM (DESCRIBE {view})").fetchall()}


# -- steps --------------------------------------------------------------------------------------

def test_steps_of_a_finished_run_are_every_logged_value(finished_run: Path) -> None:
    got = rows(finished_run, "SELECT * FROM steps ORDER BY step")
    assert [r["step"] for r in got] == list(range(10))
    for r in got:
        s = r["step"]
        assert r["run_id"] == "finished"
        assert r["reward_mean"] == metric("reward_mean", s)
        assert r["kl_mean"] == metric("kl_mean", s)
        assert r["wall_time"] == T0 + s
        assert r["reward_component.format"] == component("format", s)
        assert r["reward_component.correct"] == component("correct", s)
        assert r["extra.my_metric"] == extra_value("my_metric", s)
        assert r["value_loss"] is None  # a known field the run never logged


def test_steps_of_a_live_run_come_from_the_part_files(live_run: Path) -> None:
    assert not (live_run / "steps.parquet").exists()
    assert len(list((live_run / "steps").glob("part-*.parquet"))) == 2
    got = rows(live_run, "SELECT step, reward_mean FROM steps ORDER BY step")
    assert got == [{"step": s, "reward_mean": metric("reward_mean", s)} for s in range(7)]


def test_leftover_temp_part_file_is_never_read(crashed_run: Path) -> None:
    """A hidden .part-*.tmp (a write cut short) must not match the glob, nor break the query."""
    assert list((crashed_run / "steps").glob(".part-*.tmp"))
    assert [r["step"] for r in rows(crashed_run, "SELECT step FROM steps ORDER BY step")] == list(range(6))
    assert scalar(crashed_run, "SELECT count(*) FROM samples") == 6


def _compact_but_keep_parts(run: Path, transform: Any = None) -> None:
    """What compaction leaves at the instant between its rename and the removal of the parts."""
    parts = sorted((run / "steps").glob("part-*.parquet"))
    assert parts, "the fixture should have part files"
    import pyarrow as pa

    table = pa.concat_tables([pq.read_table(p) for p in parts], promote_options="permissive")
    if transform is not None:
        table = transform(table)
    atomic_write_table(run / "steps.parquet", table)


def test_step_files_store_step_delta_encoded_and_older_files_read_the_same(live_run: Path) -> None:
    """The writer stores a step table's step column DELTA_BINARY_PACKED (no dictionary: every
    step is distinct, and a dictionary costs each reader a lookup per row); a recording written
    before, with step in a dictionary, reads the same rows: no reader depends on the encoding."""
    parts = sorted((live_run / "steps").glob("part-*.parquet"))
    for part in parts:
        chunk = pq.ParquetFile(part).metadata.row_group(0)
        encodings = {chunk.column(i).path_in_schema: chunk.column(i).encodings for i in range(chunk.num_columns)}
        assert "DELTA_BINARY_PACKED" in encodings["step"] and "RLE_DICTIONARY" not in encodings["step"]
    want = rows(live_run, "SELECT * FROM steps ORDER BY step")
    for part in parts:  # as the writer stored it before: step (and every non-float column) in a dictionary
        table = pq.read_table(part)
        floats = [f.name for f in table.schema if f.type in (pa.float32(), pa.float64())]
        pq.write_table(table, part, compression="zstd", use_dictionary=[c for c in table.column_names if c not in floats],
                       use_byte_stream_split=floats)
        assert "RLE_DICTIONARY" in pq.ParquetFile(part).metadata.row_group(0).column(table.column_names.index("step")).encodings
    _connections.clear()
    assert rows(live_run, "SELECT * FROM steps ORDER BY step") == want


def test_compacted_file_wins_over_parts_still_present(live_run: Path) -> None:
    _compact_but_keep_parts(live_run)
    assert (live_run / "steps.parquet").exists() and list((live_run / "steps").glob("part-*.parquet"))
    got = rows(live_run, "SELECT step, count(*) AS n FROM steps GROUP BY step ORDER BY step")
    assert got == [{"step": s, "n": 1} for s in range(7)], "a step was read twice (parts and compacted file)"


def test_compacted_file_wins_per_file_not_per_row(live_run: Path) -> None:
    """The choice is by file: rows only in the parts are not merged back in, and values come
    from the compacted file (here it holds steps 0-4 with different values)."""
    import pyarrow as pa
    import pyarrow.compute as pc

    def first_five_shifted(table: pa.Table) -> pa.Table:
        table = table.slice(0, 5)
        i = table.column_names.index("reward_mean")
        return table.set_column(i, "reward_mean", pc.add(table.column("reward_mean"), 100.0))

    _compact_but_keep_parts(live_run, first_five_shifted)
    got = rows(live_run, "SELECT step, reward_mean FROM steps ORDER BY step")
    assert got == [{"step": s, "reward_mean": metric("reward_mean", s) + 100.0} for s in range(5)]


def test_compacted_file_of_one_run_does_not_hide_parts_of_another(tmp_path: Path) -> None:
    make_run(tmp_path / "root" / "a", 5, state="live")
    make_run(tmp_path / "root" / "b", 3, state="live")
    _compact_but_keep_parts(tmp_path / "root" / "a")
    got = rows(tmp_path / "root", "SELECT run_id, count(*) AS n, count(DISTINCT step) AS d FROM steps GROUP BY ALL ORDER BY run_id")
    assert got == [{"run_id": "a", "n": 5, "d": 5}, {"run_id": "b", "n": 3, "d": 3}]
    # the runs view counts from file statistics (step and wall_time only): the same choice per file
    got = rows(tmp_path / "root", "SELECT run_id, steps_recorded, first_step, last_step FROM runs ORDER BY run_id")
    assert got == [{"run_id": "a", "steps_recorded": 5, "first_step": 0, "last_step": 4},
                   {"run_id": "b", "steps_recorded": 3, "first_step": 0, "last_step": 2}]


def test_runs_counts_from_the_compacted_file_alone_mid_compaction(live_run: Path) -> None:
    _compact_but_keep_parts(live_run, lambda table: table.slice(0, 5))
    got = rows(live_run, "SELECT steps_recorded, first_step, last_step FROM runs")
    assert got == [{"steps_recorded": 5, "first_step": 0, "last_step": 4}]
    assert rows(live_run, "SELECT count(*) AS n FROM steps") == [{"n": 5}]


def test_steps_are_rank_0_only(ranked_run: Path) -> None:
    got = rows(ranked_run, "SELECT step, count(*) AS n FROM steps GROUP BY step ORDER BY step")
    assert got == [{"step": s, "n": 1} for s in range(5)]
    # rank 1 logged grad_norm; rank 0 did not: no rank-1 value may leak into the series
    assert scalar(ranked_run, "SELECT count(grad_norm) FROM steps") == 0
    assert (ranked_run / "rank-001" / "steps.parquet").exists()


def test_parts_with_different_columns_union_by_name(tmp_path: Path) -> None:
    """Schema evolution: a metric that appears later, one that stops, an extra that comes and goes."""
    w = RunWriter(tmp_path / "evolving", RunManifest(run_id="evolving"))
    w.write_steps([{"step": 0, "reward_mean": 0.5}, {"step": 1, "reward_mean": 1.5}])
    w.write_steps([{"step": 2, "kl_mean": 0.25, "extra.new_metric": 7.0, "reward_component.fmt": 1.0}])
    w.write_steps([{"step": 3, "reward_mean": 3.5, "kl_positional": [0.1, 0.2]}])
    got = rows(tmp_path / "evolving",
               'SELECT step, reward_mean, kl_mean, "extra.new_metric", "reward_component.fmt", kl_positional, '
               "value_loss FROM steps ORDER BY step")
    assert got == [
        {"step": 0, "reward_mean": 0.5, "kl_mean": None, "extra.new_metric": None, "reward_component.fmt": None, "kl_positional": None, "value_loss": None},
        {"step": 1, "reward_mean": 1.5, "kl_mean": None, "extra.new_metric": None, "reward_component.fmt": None, "kl_positional": None, "value_loss": None},
        {"step": 2, "reward_mean": None, "kl_mean": 0.25, "extra.new_metric": 7.0, "reward_component.fmt": 1.0, "kl_positional": None, "value_loss": None},
        {"step": 3, "reward_mean": 3.5, "kl_mean": None, "extra.new_metric": None, "reward_component.fmt": None, "kl_positional": [0.1, 0.2], "value_loss": None},
    ]
    # and after compaction, the same rows
    w.compact()
    assert rows(tmp_path / "evolving",
                'SELECT step, reward_mean, kl_mean, "extra.new_metric" FROM steps ORDER BY step') == [
        {k: r[k] for k in ("step", "reward_mean", "kl_mean", "extra.new_metric")} for r in got
    ]


def test_every_known_step_column_exists_even_if_never_logged(finished_run: Path) -> None:
    cols = columns(finished_run, "steps")
    for name, type_ in STEP_COLUMN_TYPES.items():
        assert cols.get(name) == type_, f"steps.{name}: expected {type_}, got {cols.get(name)}"
    assert cols["run_id"] == "VARCHAR"
    assert scalar(finished_run, "SELECT count(*) FROM steps WHERE value_loss IS NULL AND batch_age IS NULL") == 10
    for hidden in ("filename", "rec_dir", "run_dir", "rank", "empty"):
        assert hidden not in cols, f"internal column {hidden!r} leaks into the steps view"


def test_nan_and_inf_are_values_not_nulls(tmp_path: Path) -> None:
    w = RunWriter(tmp_path / "nan", RunManifest(run_id="nan"))
    w.write_steps([{"step": 0, "loss": float("nan"), "grad_norm": float("inf")}, {"step": 1, "loss": 1.0}])
    got = rows(tmp_path / "nan", "SELECT step, loss, grad_norm FROM steps ORDER BY step")
    assert math.isnan(got[0]["loss"]) and got[0]["grad_norm"] == float("inf")
    assert got[1] == {"step": 1, "loss": 1.0, "grad_norm": None}


# -- samples ------------------------------------------------------------------------------------

def test_samples_of_every_shard(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(writer_module, "SAMPLES_PER_SHARD", 4)
    run = tmp_path / "sharded"
    make_run(run, 5, samples_per_step=3, state="closed")  # 15 samples -> shards of 4, 4, 4, 3
    assert len(list((run / "samples").glob("shard-*.parquet"))) == 4
    got = rows(run, "SELECT step, sample_id, reward_total, rank, run_id FROM samples ORDER BY step, sample_id")
    assert [(r["step"], r["sample_id"]) for r in got] == [(s, f"{s}-0-{i}") for s in range(5) for i in range(3)]
    assert {r["run_id"] for r in got} == {"sharded"}
    assert {r["rank"] for r in got} == {0}


def test_samples_of_every_rank_with_rank(ranked_run: Path) -> None:
    got = rows(ranked_run, "SELECT run_id, rank, count(*) AS n FROM samples GROUP BY ALL ORDER BY rank")
    assert got == [{"run_id": "ranked-run", "rank": 0, "n": 10}, {"run_id": "ranked-run", "rank": 1, "n": 15}]
    sample = rows(ranked_run, "SELECT * FROM samples WHERE sample_id = '2-1-0'")[0]
    assert sample["completion_text"] == "completion 2.0 from rank 1"
    assert sample["completion_token_ids"] == [2, 0, 1]
    assert sample["reward_component.format"] == 1.0


def test_sample_rank_comes_from_the_rank_dir_when_rows_lack_it(ranked_run: Path) -> None:
    import pyarrow as pa

    rank2 = ranked_run / "rank-002" / "samples"
    rank2.mkdir(parents=True)
    pq.write_table(pa.table({"step": pa.array([1], pa.int64()), "sample_id": ["no-rank-col"]}), rank2 / "shard-00000.parquet")
    assert rows(ranked_run, "SELECT rank FROM samples WHERE sample_id = 'no-rank-col'") == [{"rank": 2}]


def test_samples_view_has_every_sample_column(finished_run: Path) -> None:
    cols = columns(finished_run, "samples")
    for name, type_ in SAMPLE_COLUMN_TYPES.items():
        assert cols.get(name) == type_, f"samples.{name}: expected {type_}, got {cols.get(name)}"
    assert cols["run_id"] == "VARCHAR"
    for hidden in ("filename", "rec_dir", "run_dir", "empty"):
        assert hidden not in cols


# -- events -------------------------------------------------------------------------------------

def test_events_have_run_id_and_parsed_data(finished_run: Path) -> None:
    got = rows(finished_run, "SELECT run_id, kind, step, rank, message, json_extract_string(data, '$.path') AS path "
                             "FROM events ORDER BY timestamp")
    assert [r["kind"] for r in got] == ["recorder_open", "checkpoint", "nan_detected", "recorder_close"]
    assert {r["run_id"] for r in got} == {"finished"}
    assert got[1] == {"run_id": "finished", "kind": "checkpoint", "step": 5, "rank": 0, "message": "", "path": "/ckpt/5"}
    assert got[2]["message"] == "loss is nan"


def test_torn_last_event_line_is_dropped_not_a_row_of_nulls(torn_events_run: Path) -> None:
    got = rows(torn_events_run, "SELECT kind, step FROM events ORDER BY timestamp")
    assert got == [{"kind": "recorder_open", "step": None}, {"kind": "checkpoint", "step": 1}]
    assert scalar(torn_events_run, "SELECT count(*) FROM events WHERE kind IS NULL OR timestamp IS NULL") == 0


def test_an_event_line_cut_anywhere_is_dropped(tmp_path: Path) -> None:
    run = tmp_path / "cut"
    make_run(run, 1, state="live")
    complete = (run / "events.jsonl").read_text()
    line = json.dumps(event("checkpoint", T0 + 3, step=3, message="saved", path="/ckpt/3", nested={"a": [1, 2]}).model_dump())
    con = rlprobe.connect(run)
    wrong = {}
    for cut in range(1, len(line), 3):
        (run / "events.jsonl").write_text(complete + line[:cut])
        got = con.sql("SELECT kind, step FROM events").fetchall()
        if got != [("recorder_open", None)]:
            wrong[line[:cut]] = got
    assert not wrong, f"torn lines read as rows: {wrong}"


def test_events_of_every_rank(ranked_run: Path) -> None:
    got = rows(ranked_run, "SELECT run_id, rank, kind FROM events ORDER BY rank, timestamp")
    assert [(r["rank"], r["kind"]) for r in got] == [
        (0, "recorder_open"), (0, "recorder_close"), (1, "recorder_open"), (1, "recorder_close")]
    assert {r["run_id"] for r in got} == {"ranked-run"}


def test_events_view_columns(finished_run: Path) -> None:
    cols = columns(finished_run, "events")
    assert cols == {"run_id": "VARCHAR", **EVENT_COLUMN_TYPES}


# -- runs ---------------------------------------------------------------------------------------

def test_runs_over_a_nested_root(nested_root: Path) -> None:
    got = rows(nested_root, "SELECT run_id, run_dir, status, steps_recorded, first_step, last_step, algorithm "
                            "FROM runs ORDER BY run_id")
    assert got == [
        {"run_id": "run0", "run_dir": str((nested_root / "run0").resolve()), "status": "crashed",
         "steps_recorded": 4, "first_step": 0, "last_step": 3, "algorithm": "grpo"},
        {"run_id": "run1", "run_dir": str((nested_root / "a" / "run1").resolve()), "status": "closed",
         "steps_recorded": 5, "first_step": 0, "last_step": 4, "algorithm": "grpo"},
        {"run_id": "run2", "run_dir": str((nested_root / "b" / "c" / "run2").resolve()), "status": "live",
         "steps_recorded": 3, "first_step": 0, "last_step": 2, "algorithm": "grpo"},
    ]


def test_rank_dirs_are_not_runs(ranked_run: Path, tmp_path: Path) -> None:
    for target in (ranked_run, ranked_run.parent):
        got = rows(target, "SELECT run_id, run_dir, steps_recorded, world_size, status FROM runs")
        assert got == [{"run_id": "ranked-run", "run_dir": str(ranked_run.resolve()), "steps_recorded": 5,
                        "world_size": 2, "status": "closed"}], f"runs view over {target}"
    assert scalar(ranked_run, "SELECT count(*) FROM manifest") == 1


@pytest.mark.parametrize(
    "state, expected",
    [("closed", "closed"), ("live", "live"), ("crashed", "crashed"), ("import", "closed"), ("none", "live")],
)
def test_run_status(tmp_path: Path, state: str, expected: str) -> None:
    run = tmp_path / "r"
    make_run(run, 3, state=state)
    assert rows(run, "SELECT status, steps_recorded, last_step FROM runs") == [
        {"status": expected, "steps_recorded": 3, "last_step": 2}]


def _append(run: Path, *events: Any) -> None:
    with open(run / "events.jsonl", "a", encoding="utf-8") as fh:
        for e in events:
            fh.write(json.dumps(e.model_dump()) + "\n")


def test_run_status_follows_the_latest_session(tmp_path: Path) -> None:
    run = tmp_path / "r"
    make_run(run, 3, state="crashed")
    status = lambda: scalar(run, "SELECT status FROM runs")  # noqa: E731
    # the Recorder writes recorder_close after crash on its way out: still a crash
    _append(run, event("recorder_close", T0 + 10))
    assert status() == "crashed"
    # resumed after the crash: live again ...
    _append(run, event("recorder_open", T0 + 20))
    assert status() == "live"
    # ... SIGTERM: crashed ...
    _append(run, event("sigterm", T0 + 30))
    assert status() == "crashed"
    # ... resumed and closed cleanly
    _append(run, event("recorder_open", T0 + 40), event("recorder_close", T0 + 50))
    assert status() == "closed"


def test_runs_over_a_root_of_hundreds(root_of_many: Path) -> None:
    got = rows(root_of_many, "SELECT run_id, steps_recorded, last_step, status FROM runs ORDER BY run_id")
    assert len(got) == ROOT_OF_MANY
    for i, r in enumerate(got):
        assert r == {"run_id": f"many-{i:03d}", "steps_recorded": i % 5 + 1, "last_step": i % 5, "status": "closed"}
    per_run = rows(root_of_many, "SELECT run_id, min(reward_mean) AS lo, max(reward_mean) AS hi FROM steps GROUP BY run_id")
    assert len(per_run) == ROOT_OF_MANY
    assert all(r["lo"] == r["hi"] == float(r["run_id"].split("-")[1]) for r in per_run)


def test_a_corrupt_manifest_does_not_hide_the_run(corrupt_manifest_run: Path) -> None:
    got = rows(corrupt_manifest_run, "SELECT run_id, steps_recorded, status FROM runs")
    assert got == [{"run_id": "corrupt-manifest", "steps_recorded": 4, "status": "closed"}]
    assert scalar(corrupt_manifest_run, "SELECT count(*) FROM steps") == 4
    assert scalar(corrupt_manifest_run, "SELECT count(*) FROM samples") == 4


# -- one query, a run or a root -----------------------------------------------------------------

def test_every_view_has_run_id_on_a_run_and_on_a_root(finished_run: Path, nested_root: Path) -> None:
    for target in (finished_run, nested_root):
        for view in PUBLIC_VIEWS:
            assert "run_id" in columns(target, view), f"{view} over {target} has no run_id"
            assert scalar(target, f"SELECT count(*) FROM {view} WHERE run_id IS NULL") == 0


def test_one_query_text_works_on_a_run_and_on_a_root(finished_run: Path, tmp_path: Path) -> None:
    root = tmp_path / "root"
    shutil.copytree(finished_run, root / "team" / "finished")
    make_run(root / "other", 2, state="closed")
    sql = ("SELECT run_id, count(*) AS steps, max(kl_mean) AS max_kl, "
           "(SELECT count(*) FROM events e WHERE e.run_id = s.run_id) AS events "
           "FROM steps s GROUP BY run_id ORDER BY run_id")
    on_run = rows(finished_run, sql)
    on_root = rows(root, sql)
    assert on_run == [{"run_id": "finished", "steps": 10, "max_kl": metric("kl_mean", 9), "events": 4}]
    assert on_root == on_run + [{"run_id": "other", "steps": 2, "max_kl": metric("kl_mean", 1), "events": 2}]


@pytest.mark.parametrize("view", PUBLIC_VIEWS)
def test_versioned_name_is_the_same_view(nested_root: Path, view: str) -> None:
    con = connect(nested_root)
    assert con.sql(f"SELECT * FROM v1.{view}").columns == con.sql(f"SELECT * FROM {view}").columns
    diff = con.sql(f"(SELECT * FROM v1.{view} EXCEPT ALL SELECT * FROM {view}) UNION ALL "
                   f"(SELECT * FROM {view} EXCEPT ALL SELECT * FROM v1.{view})").fetchall()
    assert diff == []
    assert con.sql(f"SELECT count(*) FROM {view}").fetchall()[0][0] > 0


def test_manifest_view(finished_run: Path) -> None:
    got = rows(finished_run, "SELECT run_id, schema_version, algorithm, model_name, world_size, created_at, "
                             "json_extract_string(trainer_config, '$.beta') AS beta, run_dir FROM manifest")
    assert got == [{"run_id": "finished", "schema_version": 1, "algorithm": "grpo", "model_name": "tiny/model",
                    "world_size": 1, "created_at": "2024-01-01T00:00:00+00:00", "beta": "0.04",
                    "run_dir": str(finished_run.resolve())}]


# -- nothing recorded yet -----------------------------------------------------------------------

@pytest.mark.parametrize("view", PUBLIC_VIEWS)
def test_a_run_with_only_a_manifest_has_empty_views_with_all_columns(empty_run: Path, view: str) -> None:
    con = connect(empty_run)
    result = con.sql(f"SELECT * FROM {view}")
    assert "run_id" in result.columns
    got = result.fetchall()
    expected_rows = {"runs": 1, "manifest": 1, "events": 1}.get(view, 0)  # events: recorder_open
    assert len(got) == expected_rows
    cols = columns(empty_run, view)
    fixed = {"steps": STEP_COLUMN_TYPES, "samples": SAMPLE_COLUMN_TYPES, "events": EVENT_COLUMN_TYPES}.get(view, {})
    for name, type_ in fixed.items():
        assert cols.get(name) == type_, f"{view}.{name}: expected {type_}, got {cols.get(name)}"


def test_a_run_with_only_a_manifest_is_live_with_no_steps(empty_run: Path) -> None:
    assert rows(empty_run, "SELECT run_id, status, steps_recorded, last_step FROM runs") == [
        {"run_id": "just-started", "status": "live", "steps_recorded": 0, "last_step": None}]


def test_a_root_of_runs_without_steps_or_events(tmp_path: Path) -> None:
    root = tmp_path / "root"
    RunWriter(root / "x" / "a", RunManifest(run_id="a"))
    RunWriter(root / "b", RunManifest(run_id="b"))
    con = connect(root)
    for view in ("steps", "samples", "events"):
        assert con.sql(f"SELECT count(*) FROM {view}").fetchall()[0][0] == 0
    assert sorted(con.sql("SELECT run_id, steps_recorded, events FROM runs").fetchall()) == [("a", 0, 0), ("b", 0, 0)]
    assert set(STEP_COLUMN_TYPES) <= set(con.sql("SELECT * FROM steps").columns)
    assert set(SAMPLE_COLUMN_TYPES) <= set(con.sql("SELECT * FROM samples").columns)


# -- paths --------------------------------------------------------------------------------------

@pytest.mark.parametrize("name", ["it's a run", "run 100%_done", "héllo wörld", "sweep[lr=1e-5]"])
def test_run_paths_with_special_characters(tmp_path: Path, name: str) -> None:
    """Quotes, LIKE wildcards, non-ASCII and glob brackets in a run's path must not change what is read."""
    run = tmp_path / name
    make_run(run, 3, samples_per_step=1, state="closed")
    counts = rlprobe.connect(run).sql(
        "SELECT (SELECT count(*) FROM steps), (SELECT count(*) FROM samples), (SELECT count(*) FROM events), "
        "(SELECT count(*) FROM manifest), (SELECT count(*) FROM runs)").fetchall()[0]
    assert counts == (3, 3, 2, 1, 1), (
        f"a run at {run} reads as (steps, samples, events, manifest, runs) = {counts}: the path is used as a "
        "glob pattern unescaped (sql/v1/sources/*.sql build globs from v1.root())")


def test_a_run_logging_only_some_fields(run_factory: Any) -> None:
    run = run_factory("lr-only", [3, 4, 10], columns=("lr",), components=(), extra=(), state="live")
    got = rows(run, 'SELECT step, lr, reward_mean FROM steps ORDER BY step')
    assert got == [{"step": s, "lr": metric("lr", s), "reward_mean": None} for s in (3, 4, 10)]
    assert not [c for c in columns(run, "steps") if c.startswith(("reward_component.", "extra."))]
    assert rows(run, "SELECT steps_recorded, first_step, last_step FROM runs") == [
        {"steps_recorded": 3, "first_step": 3, "last_step": 10}]
