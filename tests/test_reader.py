"""The Python read API: rlprobe.connect, RunReader, RunView, list_runs, load_manifest, and the
schema-version check, over runs in every state (including one being written while it is read)."""

from __future__ import annotations

import math
import threading
import time
from pathlib import Path

import duckdb
import numpy as np
import pytest

import rlprobe
from rlprobe.errors import BrokenRunWarning, NoStepsYet, NotARecording, RecordingNotFound, RlprobeError, SchemaTooNew
from rlprobe.record.writer import RunWriter
from rlprobe.schemas import Event, RunManifest, SampleRecord, StepRecord
from rlprobe.store import init_script, resolve
from rlprobe.store.engine import open_store

from conftest import T0, component, event, extra_value, make_run, metric, sample_rows, set_schema_version, step_row


# -- connect ------------------------------------------------------------------------------------

def test_connect_gives_a_duckdb_connection_with_the_views(finished_run: Path) -> None:
    con = rlprobe.connect(finished_run)
    assert isinstance(con, duckdb.DuckDBPyConnection)
    assert con.sql("SELECT run_id, count(*) FROM steps GROUP BY ALL").fetchall() == [("finished", 10)]
    assert con.sql("SELECT count(*) FROM v1.samples").fetchall() == [(30,)]


def test_connect_accepts_a_path_string_and_a_file_of_the_run(finished_run: Path) -> None:
    assert rlprobe.connect(str(finished_run)).sql("SELECT count(*) FROM steps").fetchall() == [(10,)]
    assert rlprobe.connect(finished_run / "manifest.json").sql("SELECT count(*) FROM steps").fetchall() == [(10,)]


def test_connect_errors(tmp_path: Path, empty_dir: Path) -> None:
    with pytest.raises(RecordingNotFound, match="no such file"):
        rlprobe.connect(tmp_path / "nope")
    with pytest.raises(NotARecording):
        rlprobe.connect(empty_dir)
    (tmp_path / "loose").mkdir()
    (tmp_path / "loose" / "notes.txt").write_text("hello")
    with pytest.raises(NotARecording):
        rlprobe.connect(tmp_path / "loose")


# -- RunReader ----------------------------------------------------------------------------------

def test_run_reader_manifest(finished_run: Path) -> None:
    m = rlprobe.RunReader(finished_run).manifest
    assert isinstance(m, RunManifest)
    assert (m.run_id, m.schema_version, m.algorithm, m.model_name, m.world_size) == ("finished", 1, "grpo", "tiny/model", 1)
    assert m.trainer_config == {"lr": 1e-6, "beta": 0.04}
    assert m.created_at == "2024-01-01T00:00:00+00:00"


def test_run_reader_steps_rebuild_the_dicts(finished_run: Path) -> None:
    steps = rlprobe.RunReader(finished_run).steps()
    assert [s.step for s in steps] == list(range(10))
    for s in steps:
        assert isinstance(s, StepRecord)
        assert s.reward_mean == metric("reward_mean", s.step)
        assert s.loss == metric("loss", s.step)
        assert s.wall_time == T0 + s.step
        assert s.reward_components == {"format": component("format", s.step), "correct": component("correct", s.step)}
        assert s.extra == {"my_metric": extra_value("my_metric", s.step)}
        assert s.value_loss is None and s.kl_positional is None


def test_run_reader_steps_leave_out_components_a_step_did_not_log(tmp_path: Path) -> None:
    w = RunWriter(tmp_path / "r", RunManifest(run_id="r"))
    w.write_steps([{"step": 0, "reward_component.a": 1.0}, {"step": 1, "reward_component.b": 2.0, "extra.x": 3.0}])
    steps = rlprobe.RunReader(tmp_path / "r").steps()
    assert [(s.reward_components, s.extra) for s in steps] == [({"a": 1.0}, {}), ({"b": 2.0}, {"x": 3.0})]


def test_run_reader_samples_with_step_range(finished_run: Path) -> None:
    reader = rlprobe.RunReader(finished_run)
    every = reader.samples()
    assert len(every) == 30 and all(isinstance(s, SampleRecord) for s in every)
    some = reader.samples(step_from=3, step_to=5)
    assert sorted({s.step for s in some}) == [3, 4, 5]
    assert len(some) == 9
    assert [s.step for s in reader.samples(step_from=8)] == [8, 8, 8, 9, 9, 9]
    assert {s.step for s in reader.samples(step_to=0)} == {0}
    first = reader.samples(step_from=2, step_to=2)[0]
    assert first.sample_id == "2-0-0" and first.prompt_text == "prompt 2.0" and first.completion_token_ids == [2, 0, 0]
    assert first.reward_components == {"format": 1.0}
    assert first.truncated is False and first.group_id == "2" and first.capture_reason == "all"


def test_run_reader_samples_of_every_rank(ranked_run: Path) -> None:
    samples = rlprobe.RunReader(ranked_run).samples()
    assert sorted({(s.rank, s.step) for s in samples}) == [(r, s) for r in (0, 1) for s in range(5)]
    assert sum(s.rank == 1 for s in samples) == 15


def test_run_reader_events(finished_run: Path) -> None:
    reader = rlprobe.RunReader(finished_run)
    events = reader.events()
    assert [e.kind for e in events] == ["recorder_open", "checkpoint", "nan_detected", "recorder_close"]
    assert all(isinstance(e, Event) for e in events)
    assert [e.timestamp for e in events] == sorted(e.timestamp for e in events)
    (ckpt,) = reader.events("checkpoint")
    assert ckpt.step == 5 and ckpt.data == {"path": "/ckpt/5"}
    assert reader.events("no_such_kind") == []
    assert reader.events("recorder_open")[0].data == {"pid": 1234}


def test_run_reader_events_merge_ranks_in_time_order(ranked_run: Path) -> None:
    w = RunWriter(ranked_run / "rank-001", RunManifest(run_id="ranked-run"), rank=1)
    w.append_event(event("checkpoint", T0 + 2.5, step=2, rank=1))
    events = rlprobe.RunReader(ranked_run).events()
    assert [e.timestamp for e in events] == sorted(e.timestamp for e in events)
    assert [(e.kind, e.rank) for e in events if e.kind == "checkpoint"] == [("checkpoint", 1)]
    assert {e.rank for e in events} == {0, 1}


def test_run_reader_on_a_live_run_and_a_crashed_run(live_run: Path, crashed_run: Path) -> None:
    assert [s.step for s in rlprobe.RunReader(live_run).steps()] == list(range(7))
    reader = rlprobe.RunReader(crashed_run)
    assert [s.step for s in reader.steps()] == list(range(6))
    (crash,) = reader.events("crash")
    assert crash.message == "RuntimeError: boom" and "Traceback" in crash.data["traceback"]


def test_run_reader_refuses_a_root(nested_root: Path) -> None:
    with pytest.raises(NotARecording, match="folder of runs"):
        rlprobe.RunReader(nested_root)


def test_run_reader_of_a_run_with_a_corrupt_manifest(corrupt_manifest_run: Path) -> None:
    reader = rlprobe.RunReader(corrupt_manifest_run)
    assert reader.manifest is None
    assert len(reader.steps()) == 4
    assert "not valid JSON" in " ".join(reader.store.warnings)


# -- RunView ------------------------------------------------------------------------------------

def test_run_view_series(finished_run: Path) -> None:
    view = rlprobe.RunView.load(finished_run)
    assert len(view) == 10
    assert view.steps.tolist() == list(range(10))
    kl = view.series("kl_mean")
    assert kl.dtype == np.float64 and kl.tolist() == [metric("kl_mean", s) for s in range(10)]
    assert view.component("correct").tolist() == [component("correct", s) for s in range(10)]
    assert view.series("reward_component.format").tolist() == [1.0] * 10
    assert view.extra("my_metric").tolist() == [extra_value("my_metric", s) for s in range(10)]
    assert view.manifest is not None and view.manifest.run_id == "finished"


def test_run_view_names_and_has(finished_run: Path) -> None:
    view = rlprobe.RunView.load(finished_run)
    assert set(view.names) == {"reward_mean", "kl_mean", "entropy_mean", "loss", "wall_time",
                               "reward_component.format", "reward_component.correct", "extra.my_metric"}
    assert view.has("kl_mean") and view.has("reward_component.format")
    assert not view.has("value_loss") and not view.has("no_such_metric")
    assert sorted(view.components) == ["correct", "format"]


def test_run_view_known_field_never_logged_is_all_nan(finished_run: Path) -> None:
    view = rlprobe.RunView.load(finished_run)
    for name in ("value_loss", "batch_age", "logprob_mismatch"):
        series = view.series(name)
        assert series.shape == (10,) and np.isnan(series).all(), name
    assert np.isnan(view.component("never_logged")).all()


def test_run_view_unknown_name_is_a_key_error(finished_run: Path) -> None:
    view = rlprobe.RunView.load(finished_run)
    with pytest.raises(KeyError, match="kl_meen"):
        view.series("kl_meen")


def test_run_view_keeps_nan_values(tmp_path: Path) -> None:
    w = RunWriter(tmp_path / "r", RunManifest(run_id="r"))
    w.write_steps([{"step": 0, "loss": 1.0}, {"step": 1, "loss": float("nan")}, {"step": 2, "loss": float("inf")}])
    loss = rlprobe.RunView.load(tmp_path / "r").series("loss")
    assert loss[0] == 1.0 and math.isnan(loss[1]) and loss[2] == math.inf


def test_run_view_without_steps(empty_run: Path) -> None:
    with pytest.raises(NoStepsYet):
        rlprobe.RunView.load(empty_run)


def test_run_view_samples_and_ranks(ranked_run: Path) -> None:
    view = rlprobe.RunView.load(ranked_run)
    assert view.steps.tolist() == list(range(5))
    assert not view.has("grad_norm")  # rank 1's metric
    assert view.samples.num_rows == 25
    assert sorted(set(view.samples.column("rank").to_pylist())) == [0, 1]


def test_run_view_of_a_live_run(live_run: Path) -> None:
    view = rlprobe.RunReader(live_run).view()
    assert view.steps.tolist() == list(range(7))
    assert view.series("reward_mean").tolist() == [metric("reward_mean", s) for s in range(7)]


# -- list_runs, load_manifest -------------------------------------------------------------------

def test_list_runs(nested_root: Path) -> None:
    runs = rlprobe.list_runs(nested_root)
    assert [r["run_id"] for r in runs] == ["run0", "run1", "run2"]  # by created_at
    by_id = {r["run_id"]: r for r in runs}
    assert by_id["run1"]["status"] == "closed" and by_id["run1"]["steps_recorded"] == 5 and by_id["run1"]["last_step"] == 4
    assert by_id["run2"]["status"] == "live" and by_id["run2"]["run_dir"] == str((nested_root / "b" / "c" / "run2").resolve())
    assert by_id["run0"]["status"] == "crashed"


def test_list_runs_of_one_run(finished_run: Path) -> None:
    (run,) = rlprobe.list_runs(finished_run)
    assert run["run_id"] == "finished" and run["steps_recorded"] == 10 and run["status"] == "closed"


def test_load_manifest(finished_run: Path, corrupt_manifest_run: Path) -> None:
    m = rlprobe.load_manifest(finished_run)
    assert isinstance(m, RunManifest) and m.run_id == "finished" and m.trainer_config["beta"] == 0.04
    with pytest.raises(RlprobeError):
        rlprobe.load_manifest(corrupt_manifest_run)


def test_storage_module_names_the_same_api() -> None:
    import rlprobe.storage as storage

    assert storage.RunReader is rlprobe.RunReader and storage.RunView is rlprobe.RunView
    assert storage.list_runs is rlprobe.list_runs and storage.load_manifest is rlprobe.load_manifest
    assert storage.RunWriter is RunWriter


# -- reading while the writer appends -------------------------------------------------------------

def test_reader_sees_every_flushed_row_while_the_writer_appends(tmp_path: Path) -> None:
    run = tmp_path / "growing"
    w = make_run(run, 0, state="live")
    reader = rlprobe.RunReader(run)
    con = rlprobe.connect(run)
    written = 0
    for flush in range(12):
        w.write_steps([step_row(s) for s in range(written, written + 3)])
        w.write_samples(sample_rows(written, 2))
        w.append_event(event("checkpoint", T0 + written, step=written))
        written += 3
        steps = reader.steps()
        assert [s.step for s in steps] == list(range(written)), f"after flush {flush}"
        assert len(reader.samples()) == 2 * (flush + 1)
        assert len(reader.events("checkpoint")) == flush + 1
        assert con.sql("SELECT count(*), max(step) FROM steps").fetchall() == [(written, written - 1)]
        assert con.sql("SELECT steps_recorded, status FROM runs").fetchall() == [(written, "live")]
        assert rlprobe.RunView.from_store(reader.store).steps.tolist() == list(range(written))
    w.compact()
    w.append_event(event("recorder_close", T0 + 100))
    assert [s.step for s in reader.steps()] == list(range(written))
    assert con.sql("SELECT steps_recorded, status FROM runs").fetchall() == [(written, "closed")]


def test_a_long_lived_reader_follows_resume_and_compaction_cycles(tmp_path: Path) -> None:
    run = tmp_path / "resumed"
    make_run(run, 2, state="closed")
    con = rlprobe.connect(run)
    n = 2
    for cycle in range(5):
        w = RunWriter(run, RunManifest(run_id="ignored"))  # resume: steps.parquet becomes a part
        w.write_steps([{**step_row(n), f"extra.cycle{cycle}": 1.0}])
        n += 1
        assert con.sql("SELECT count(*), sum(reward_mean) FROM steps").fetchall() == [
            (n, sum(metric("reward_mean", s) for s in range(n)))]
        w.compact()
        assert con.sql("SELECT count(*), count(DISTINCT step) FROM steps").fetchall() == [(n, n)]
    assert con.sql('SELECT count("extra.cycle4") FROM steps').fetchall() == [(1,)]
    assert con.sql("SELECT run_id FROM manifest").fetchall() == [("resumed",)]  # a resume never rewrites


@pytest.mark.slow
def test_reader_never_sees_a_compaction_half_done(tmp_path: Path) -> None:
    """Compaction is readable at every instant: a query racing it sees each step exactly once.

    A thread queries a runs root while the main thread repeatedly builds 3 parts in one run and
    compacts them at a random moment of the query; every query must count exactly 3 steps (not 0:
    the parts dropped before the compacted file is seen, nor 6: both read). Other folders in the
    root, as in any real runs root, make each query take long enough to be caught mid-way.
    Bounded: stops at the first wrong count or after a few seconds.
    """
    import random

    root = tmp_path / "runs"
    run = root / "racing"
    make_run(run, 0, state="live")
    for i in range(300):
        (root / "old" / f"folder-{i:03d}").mkdir(parents=True)
    store = open_store(root)
    began = time.perf_counter()
    store.rows("SELECT count(*) FROM steps")
    query_s = time.perf_counter() - began
    lock = threading.Lock()
    state = {"reading": False, "done": False}
    wrong: list[int] = []
    errors: list[str] = []
    queries = [0]

    def reader() -> None:
        while not state["done"] and not wrong:
            with lock:
                if state["reading"]:
                    try:
                        n = store.rows("SELECT count(*) FROM steps")[2][0][0]
                        queries[0] += 1
                        if n != 3:
                            wrong.append(n)
                    except RlprobeError as exc:
                        errors.append(str(exc))
            time.sleep(0.0002)

    thread = threading.Thread(target=reader, daemon=True)
    thread.start()
    rng = random.Random(0)
    deadline = time.monotonic() + 8.0
    trials = 0
    try:
        while time.monotonic() < deadline and not wrong and not errors:
            with lock:  # reset between trials, while no query runs
                (run / "steps.parquet").unlink(missing_ok=True)
                w = RunWriter(run, RunManifest(run_id="racing"))
                for s in range(3):
                    w.write_steps([step_row(s)])
                state["reading"] = True
            time.sleep(rng.uniform(0, 1.5 * query_s))
            w.compact()
            time.sleep(0.003)
            with lock:
                state["reading"] = False
            trials += 1
    finally:
        state["done"] = True
        thread.join(10)
    assert not errors, f"queries failed while compaction ran: {errors[:3]}"
    assert not wrong, (
        f"a query racing compaction counted {wrong} steps instead of 3 (after {trials} compactions, "
        f"{queries[0]} queries): v1.src_steps lists the files twice, in read_parquet and in the glob() "
        "that decides whether steps.parquet exists, and the two can see different instants"
    )


# -- schema versions ----------------------------------------------------------------------------

def _assert_upgrade_message(exc: BaseException) -> None:
    text = str(exc)
    assert "v2" in text and "v1" in text and "upgrade" in text, text
    assert "\n" not in text.strip(), f"not one line: {text!r}"


@pytest.mark.parametrize("opener", [
    rlprobe.connect, rlprobe.RunReader, rlprobe.RunView.load, rlprobe.list_runs, rlprobe.load_manifest,
], ids=["connect", "RunReader", "RunView.load", "list_runs", "load_manifest"])
def test_a_newer_schema_version_is_refused(newer_schema_run: Path, opener: object) -> None:
    with pytest.raises(SchemaTooNew) as info:
        opener(newer_schema_run)  # type: ignore[operator]
    _assert_upgrade_message(info.value)


def test_a_newer_run_in_a_root_is_refused_by_name_in_strict_mode(nested_root: Path) -> None:
    set_schema_version(nested_root / "b" / "c" / "run2", 2)
    with pytest.raises(SchemaTooNew) as info:
        rlprobe.list_runs(nested_root, strict=True)
    _assert_upgrade_message(info.value)
    assert "run2" in str(info.value)


def test_a_newer_run_in_a_root_is_listed_as_broken_and_the_others_are_read(nested_root: Path) -> None:
    set_schema_version(nested_root / "b" / "c" / "run2", 2)
    with pytest.warns(BrokenRunWarning, match="run2.*upgrade"):
        runs = {r["run_dir"].rsplit("/", 1)[-1]: r for r in rlprobe.list_runs(nested_root)}
    assert runs["run2"]["status"] == "broken" and "v2" in runs["run2"]["error"]
    assert all(r["status"] != "broken" for name, r in runs.items() if name != "run2")


def test_the_current_schema_version_is_read(finished_run: Path) -> None:
    set_schema_version(finished_run, 1)
    assert rlprobe.RunReader(finished_run).manifest.schema_version == 1  # type: ignore[union-attr]


@pytest.mark.parametrize("view", ["steps", "samples", "events", "runs", "manifest"])
def test_a_plain_duckdb_session_refuses_a_newer_recording(tmp_path: Path, view: str) -> None:
    run = tmp_path / "newer"
    make_run(run, 3, samples_per_step=1, state="closed")
    set_schema_version(run, 2)
    con = duckdb.connect()
    con.execute(init_script(resolve(run)))
    with pytest.raises(duckdb.Error) as info:
        con.sql(f"SELECT * FROM {view}").fetchall()
    assert "upgrade" in str(info.value) and "v2" in str(info.value)
    with pytest.raises(duckdb.Error, match="upgrade"):
        con.sql(f"SELECT run_id FROM {view}").fetchall()
