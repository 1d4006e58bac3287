"""Forensics: rank a run's captured samples, find the ones that drove an update, show a step.

The runs here are recorded with rlprobe.Recorder, every sample logged (select=False) with values
chosen so the expected order can be written down: sample i of step s has reward i, advantage
i - 1.5, completion length 10 * (4 - i) and so on. Each test reads like the call a user makes.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner, Result

from rlprobe import Recorder
from rlprobe.cli import cli
from rlprobe.forensics import BadForensicsArgument, StepNotRecorded, query_samples, show_step, spike_drivers

from conftest import crashed_run, empty_run, ranked_run  # noqa: F401  (fixtures)

STEPS = 20
PER_STEP = 4


def invoke(*args: Any) -> Result:
    return CliRunner().invoke(cli, [str(a) for a in args], catch_exceptions=False)


def one_line(result: Result) -> str:
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in result.stderr, result.stderr
    return lines[0]


def sample(step: int, i: int) -> dict[str, Any]:
    """Sample i of a step: every sort key is a simple function of i (and of step for kl)."""
    return {
        "sample_id": f"s{step:02d}-{i}",
        "prompt_text": f"question {i}",
        "completion_text": f"answer {i} at step {step}: " + "words " * 30,
        "reward_total": float(i),
        "advantage": i - 1.5,
        "kl_contribution": 0.01 * step + 0.001 * i,
        "completion_len": 10 * (PER_STEP - i),
        "logprob_mean": -0.1 * (i + 1),
        "group_id": f"g{step}",
    }


def record(run_dir: Path, steps: int = STEPS, close: bool = True) -> Recorder:
    """A run with a step series, all samples of each step, and a checkpoint event at step 10."""
    rec = Recorder(run_dir, algorithm="grpo", capture_env=False, install_handlers=False)
    for step in range(steps):
        rec.log_step(step, reward_mean=1.5, kl_mean=0.01 * step, entropy_mean=2.0 - 0.05 * step, loss=0.1)
        rec.log_samples(step, [sample(step, i) for i in range(PER_STEP)], select=False)
        if step == 10:
            rec.log_event("checkpoint", step=step, path="ckpt/10")
    if close:
        rec.close()
    else:
        assert rec.flush()
    return rec


@pytest.fixture
def run(tmp_path: Path) -> Path:
    record(tmp_path / "run")
    return tmp_path / "run"


# -- query_samples --------------------------------------------------------------------------------

@pytest.mark.parametrize("sort, column, best", [
    ("reward", "reward_total", 3.0),
    ("advantage", "advantage", 1.5),
    ("kl", "kl_contribution", 0.01 * 19 + 0.003),
    ("length", "completion_len", 40),
    ("logprob", "logprob_mean", -0.1),
])
def test_every_sort_key_ranks_its_column_highest_first(run: Path, sort: str, column: str, best: float) -> None:
    rows = query_samples(run, sort=sort, k=8).to_pylist()
    values = [r[column] for r in rows]
    assert values == sorted(values, reverse=True)
    assert values[0] == pytest.approx(best)
    assert all(r["sort_value"] == pytest.approx(r[column]) for r in rows)
    assert rows[0]["matched"] == STEPS * PER_STEP


def test_ascending_and_ties_break_on_step_then_sample_id(run: Path) -> None:
    # reward 0.0 is shared by sample 0 of every step: the tie keeps step order
    rows = query_samples(run, sort="reward", ascending=True, k=5).to_pylist()
    assert [r["sample_id"] for r in rows] == ["s00-0", "s01-0", "s02-0", "s03-0", "s04-0"]
    rows = query_samples(run, sort="reward", k=3).to_pylist()
    assert [r["sample_id"] for r in rows] == ["s00-3", "s01-3", "s02-3"]


def test_step_range_is_inclusive_and_k_limits(run: Path) -> None:
    rows = query_samples(run, sort="kl", step_from=5, step_to=7, k=100).to_pylist()
    assert {r["step"] for r in rows} == {5, 6, 7}
    assert len(rows) == 3 * PER_STEP and rows[0]["matched"] == 12
    assert rows[0]["step"] == 7  # kl grows with step
    assert query_samples(run, step_from=18).num_rows == 2 * PER_STEP
    assert query_samples(run, step_from=50).num_rows == 0


def test_missing_and_nan_values_rank_last_in_both_directions(tmp_path: Path) -> None:
    with Recorder(tmp_path / "gaps", capture_env=False, install_handlers=False) as rec:
        rec.log_step(0, loss=1.0)
        rec.log_samples(0, [{"sample_id": "none", "prompt_text": "p"},
                            {"sample_id": "nan", "reward_total": float("nan")},
                            {"sample_id": "low", "reward_total": -1.0},
                            {"sample_id": "high", "reward_total": 2.0}], select=False)
    down = [r["sample_id"] for r in query_samples(tmp_path / "gaps").to_pylist()]
    up = [r["sample_id"] for r in query_samples(tmp_path / "gaps", ascending=True).to_pylist()]
    assert down[:2] == ["high", "low"] and up[:2] == ["low", "high"]
    assert set(down[2:]) == set(up[2:]) == {"none", "nan"}


def test_a_runs_root_ranks_every_runs_samples_together(tmp_path: Path) -> None:
    record(tmp_path / "root" / "a", steps=3)
    record(tmp_path / "root" / "b", steps=5)
    rows = query_samples(tmp_path / "root", sort="kl", k=4).to_pylist()
    assert [r["step"] for r in rows] == [4, 4, 4, 4]  # only run b reaches step 4
    assert rows[0]["matched"] == 8 * PER_STEP


def test_bad_arguments_are_refused(run: Path) -> None:
    with pytest.raises(BadForensicsArgument, match="sort key"):
        query_samples(run, sort="loss")
    with pytest.raises(BadForensicsArgument, match="-k"):
        query_samples(run, k=0)
    with pytest.raises(BadForensicsArgument, match="after"):
        query_samples(run, step_from=5, step_to=4)


# -- spike_drivers --------------------------------------------------------------------------------

def test_spike_drivers_rank_by_absolute_advantage_within_the_window(run: Path) -> None:
    rows = spike_drivers(run, step=10, window=2, k=6).to_pylist()
    assert {r["step"] for r in rows} <= set(range(8, 13))
    assert [abs(r["advantage"]) for r in rows] == [1.5] * 6  # samples 0 and 3: the largest |advantage|
    assert rows[0]["step"] == 10  # equal weight: nearest the spike first
    assert {r["advantage"] for r in rows} == {1.5, -1.5}  # pushed up and pushed down both count
    assert rows[0]["matched"] == 5 * PER_STEP and rows[0]["with_advantage"] == 5 * PER_STEP
    total_weight = 5 * (1.5 + 0.5 + 0.5 + 1.5)
    assert rows[0]["weight_share"] == pytest.approx(1.5 / total_weight)
    assert [r["step_offset"] for r in rows] == [r["step"] - 10 for r in rows]


def test_spike_drivers_window_zero_is_the_step_alone(run: Path) -> None:
    rows = spike_drivers(run, step=3, window=0, k=10).to_pylist()
    assert {r["step"] for r in rows} == {3} and len(rows) == PER_STEP
    assert sum(r["weight_share"] for r in rows) == pytest.approx(1.0)


# -- show_step ------------------------------------------------------------------------------------

def test_show_step_has_metrics_window_events_and_samples(run: Path) -> None:
    d = show_step(run, 10, window=2, max_samples=3)
    assert d.metrics["kl_mean"] == pytest.approx(0.1) and "value_loss" not in d.metrics  # only what was logged
    assert [r["step"] for r in d.window] == [8, 9, 10, 11, 12]
    assert set(d.metric_names) == {"reward_mean", "kl_mean", "entropy_mean", "loss"}
    assert [(e["kind"], e["data"]["path"]) for e in d.events] == [("checkpoint", "ckpt/10")]
    assert [s["sample_id"] for s in d.samples] == ["s10-3", "s10-2", "s10-1"]  # best reward first
    assert d.samples_at_step == PER_STEP and d.status == "closed"


def test_show_step_reads_the_samples_once_and_counts_them_without_showing_any(run: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from rlprobe.store import sample_files

    listed: list[str] = []
    bound = sample_files.bound

    def counting(con: Any, sql: str) -> Any:
        if sample_files.reads_samples(sql):
            listed.append(sql)
        return bound(con, sql)

    monkeypatch.setattr(sample_files, "bound", counting)
    # the ranking's count is the step's count: every read of the samples opens every shard
    assert show_step(run, 10, max_samples=2).samples_at_step == PER_STEP and len(listed) == 1
    none_shown = show_step(run, 10, max_samples=0)
    assert none_shown.samples == [] and none_shown.samples_at_step == PER_STEP


def test_show_a_step_that_was_not_recorded_names_the_nearest(tmp_path: Path) -> None:
    with Recorder(tmp_path / "sparse", capture_env=False, install_handlers=False) as rec:
        for step in (0, 10, 20):
            rec.log_step(step, loss=1.0)
    with pytest.raises(StepNotRecorded, match="step 15 was not recorded.*nearest recorded: 10 and 20"):
        show_step(tmp_path / "sparse", 15)
    with pytest.raises(StepNotRecorded, match="nearest recorded: 20 "):
        show_step(tmp_path / "sparse", 99)


# -- live, crashed, imported ----------------------------------------------------------------------

def test_a_live_run_is_read_while_recording_and_a_relogged_step_shows_once(tmp_path: Path) -> None:
    rec = record(tmp_path / "live", steps=6, close=False)
    try:
        rec.log_step(5, reward_mean=1.5, kl_mean=0.5, loss=0.1)  # step 5 again: the later write wins
        assert rec.flush()
        d = show_step(tmp_path / "live", 5, window=1)
        assert d.status == "live" and d.metrics["kl_mean"] == 0.5
        assert [r["step"] for r in d.window] == [4, 5]
        assert query_samples(tmp_path / "live", sort="kl", k=1).to_pylist()[0]["step"] == 5
        assert spike_drivers(tmp_path / "live", 5).num_rows == 8
    finally:
        rec.close()


def test_a_crashed_run_is_read_like_any_other(crashed_run: Path) -> None:  # noqa: F811
    d = show_step(crashed_run, 3, window=1)
    assert d.status == "crashed" and [r["step"] for r in d.window] == [2, 3, 4]
    assert d.samples_at_step == 1
    assert query_samples(crashed_run, k=100).num_rows == 6


def write_trainer_state(folder: Path) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    history = [{"step": s, "loss": 1.0 / s, "reward": 0.1 * s, "kl": 0.01 * s} for s in range(1, 13)]
    path = folder / "trainer_state.json"
    path.write_text(json.dumps({"global_step": 12, "logging_steps": 1, "log_history": history}))
    return path


def test_an_imported_source_is_shown_without_importing_it_first(tmp_path: Path) -> None:
    source = write_trainer_state(tmp_path / "out")
    d = show_step(source, 6, window=1)
    assert d.metrics["reward_mean"] == pytest.approx(0.6) and d.metrics["kl_mean"] == pytest.approx(0.06)
    assert d.samples == [] and d.samples_at_step == 0
    result = invoke("show", source, "--step", 6, "--window", 1)
    assert result.exit_code == 0, result.output
    assert "imported trainer_state" in result.stderr and "no samples captured at step 6" in result.stdout
    assert invoke("samples", source).exit_code == 0
    assert not list(tmp_path.glob("out/*.parquet"))  # the source folder is only read


def test_a_run_that_has_just_started(empty_run: Path) -> None:  # noqa: F811
    with pytest.raises(StepNotRecorded, match="no steps recorded yet"):
        show_step(empty_run, 0)
    assert query_samples(empty_run).num_rows == 0 and spike_drivers(empty_run, 0).num_rows == 0


def test_samples_of_every_rank_are_ranked_together(ranked_run: Path) -> None:  # noqa: F811
    rows = query_samples(ranked_run, sort="reward", step_from=4, step_to=4, k=10).to_pylist()
    assert [(r["rank"], r["reward_total"]) for r in rows] == [(1, 0.2), (0, 0.1), (1, 0.1), (0, 0.0), (1, 0.0)]


# -- the CLI --------------------------------------------------------------------------------------

def test_cli_samples_table_cuts_text_full_and_json_do_not(run: Path) -> None:
    table = invoke("samples", run, "--sort", "length", "--around", 10, "--window", 1, "-k", 2)
    assert table.exit_code == 0, table.output
    assert "…" in table.stdout and "words words" in table.stdout
    assert "top 2 of 12 captured samples in steps 9..11 by completion_len" in table.stderr
    full = invoke("samples", run, "--sort", "length", "--around", 10, "--window", 1, "-k", 2, "--full")
    assert sample(9, 0)["completion_text"].rstrip() in full.stdout
    rows = json.loads(invoke("samples", run, "--sort", "length", "--from", 9, "--to", 11, "-k", 2, "--json").stdout)
    assert [r["sample_id"] for r in rows] == ["s09-0", "s10-0"]
    assert rows[0]["completion_text"] == sample(9, 0)["completion_text"]


def test_cli_spikes_and_show_json(run: Path) -> None:
    rows = json.loads(invoke("spikes", run, "--step", 10, "--window", 0, "-k", 2, "--json").stdout)
    assert [r["sample_id"] for r in rows] == ["s10-0", "s10-3"] and rows[0]["advantage"] == -1.5
    shown = json.loads(invoke("show", run, "--step", 10, "--max-samples", 1, "--json").stdout)
    assert shown["step"] == 10 and len(shown["samples"]) == 1 and shown["samples_at_step"] == PER_STEP
    assert shown["samples"][0]["completion_text"] == sample(10, 3)["completion_text"]
    text = invoke("show", run, "--step", 10)
    assert text.exit_code == 0 and "checkpoint" in text.stdout
    assert text.stderr == ""  # no progress bar when stderr is not a terminal


@pytest.mark.parametrize("args, needle", [
    (["samples", "{run}", "--around", "5", "--from", "1"], "use one"),
    (["samples", "{run}", "--window", "3"], "--window needs --around"),
    (["samples", "{run}", "--from", "9", "--to", "2"], "after"),
    (["samples", "{run}", "--sort", "loss"], "--sort"),
    (["samples", "{run}", "-k", "0"], "-k"),
    (["spikes", "{run}"], "--step"),
    (["spikes", "{run}", "--step", "3", "--window", "-1"], "--window"),
    (["show", "{run}", "--step", "99"], "step 99 was not recorded"),
    (["show", "{run}/nope", "--step", "1"], "no such file"),
    (["show", "{root}", "--step", "1"], "folder of runs"),
])
def test_cli_bad_arguments_are_one_line_and_exit_2(run: Path, args: list[str], needle: str) -> None:
    result = invoke(*[a.format(run=run, root=run.parent) for a in args])
    assert result.exit_code == 2
    assert needle.lower() in one_line(result).lower()
    assert result.stdout == ""
