"""Trackers' own files, written here by the trackers' own libraries, imported and read back.

TensorBoard event files come from tensorboard's writer (what torch's SummaryWriter and HF's
TensorBoardCallback use), W&B runs from `wandb.init(mode="offline")`, MLflow runs from
`mlflow` with a file store and with sqlite. Each test skips when its library is not installed
(`pip install 'rlprobe[trackers]'`; CI installs them).
"""

from __future__ import annotations

import hashlib
import json
import os
import time
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner, Result

import rlprobe
from rlprobe.cli import cli
from rlprobe.errors import SourceUnreadable
from rlprobe.importers import RootReport, as_recording, detect, import_source, is_importable


def invoke(*args: Any) -> Result:
    return CliRunner().invoke(cli, [str(a) for a in args], catch_exceptions=False)


def tree_digest(path: Path) -> dict[str, str]:
    """sha256 of every file below path; symlinks are not followed (W&B links its debug logs to a shared cache)."""
    files = [path] if path.is_file() else sorted(p for p in path.rglob("*") if p.is_file() and not p.is_symlink())
    return {str(p): hashlib.sha256(p.read_bytes()).hexdigest() for p in files}


def steps_of(run_dir: Path, columns: str) -> list[dict[str, Any]]:
    return rlprobe.RunReader(run_dir).query(f"SELECT {columns} FROM steps ORDER BY step").to_pylist()


# What a TRL GRPO run logs, under HF's `train/` namespace.
def grpo_metrics(step: int) -> dict[str, float]:
    return {"train/reward": 0.1 * step, "train/kl": 0.001 * step, "train/entropy": 1.0 - 0.01 * step,
            "train/completions/clipped_ratio": 0.05, "train/frac_reward_zero_std": 0.2,
            "train/rewards/accuracy_reward/mean": 0.1 * step, "train/my_metric": 7.0}


# -- TensorBoard -------------------------------------------------------------------------------------

def write_tb_run(folder: Path, steps: range, *, text_at: int | None = None) -> Path:
    pytest.importorskip("tensorboard")
    from tensorboard.compat.proto import event_pb2, summary_pb2
    from tensorboard.plugins.text.summary_v2 import text_pb
    from tensorboard.summary.writer.event_file_writer import EventFileWriter

    writer = EventFileWriter(str(folder))
    for step in steps:
        values = [summary_pb2.Summary.Value(tag=k, simple_value=v) for k, v in grpo_metrics(step).items()]
        writer.add_event(event_pb2.Event(wall_time=1_700_000_000.0 + step, step=step, summary=summary_pb2.Summary(value=values)))
        if step == text_at:
            writer.add_event(event_pb2.Event(wall_time=1_700_000_000.0 + step, step=step,
                                             summary=text_pb("train/generated_samples", "Sample:\n2+2=4\n\nReward: 1.0")))
    writer.close()
    return folder


def test_tensorboard_run_round_trip(tmp_path: Path) -> None:
    run = write_tb_run(tmp_path / "logs" / "grpo-1", range(1, 11), text_at=10)
    assert detect(run) == "tensorboard" and is_importable(run)
    before = tree_digest(run)

    report = import_source(run, tmp_path / "rec")
    assert (report.kind, report.steps, report.first_step, report.last_step, report.samples) == ("tensorboard", 10, 1, 10, 1)
    assert report.algorithm == "grpo" and report.unmapped == ["train/my_metric"]
    rows = steps_of(tmp_path / "rec", 'step, reward_mean, kl_mean, entropy_mean, max_len_hit_frac, '
                                      '"reward_component.accuracy_reward" AS acc, wall_time')
    assert rows[-1] == pytest.approx({"step": 10, "reward_mean": 1.0, "kl_mean": 0.01, "entropy_mean": 0.9,
                                      "max_len_hit_frac": 0.05, "acc": 1.0, "wall_time": 1_700_000_010.0})
    [sample] = rlprobe.RunReader(tmp_path / "rec").query("SELECT step, completion_text FROM samples").to_pylist()
    assert sample == {"step": 10, "completion_text": "Sample:\n2+2=4\n\nReward: 1.0"}
    assert tree_digest(run) == before


def test_one_event_per_scalar_imports_to_the_rows_of_one_event_per_step(tmp_path: Path) -> None:
    # HF's TensorBoardCallback and torch's SummaryWriter.add_scalar write one event per scalar;
    # the reader takes a one-value summary on its own path: the same rows, zeros and text included.
    pytest.importorskip("tensorboard")
    from tensorboard.compat.proto import event_pb2, summary_pb2
    from tensorboard.plugins.scalar.summary_v2 import scalar_pb
    from tensorboard.plugins.text.summary_v2 import text_pb
    from tensorboard.summary.writer.event_file_writer import EventFileWriter

    def metrics(step: int) -> dict[str, float]:
        return {**grpo_metrics(step), "train/kl": 0.0 if step == 3 else 0.001 * step}

    write_tb_run(tmp_path / "per_step", range(1, 11), text_at=10)
    writer = EventFileWriter(str(tmp_path / "per_scalar"))
    for step in range(1, 11):
        for i, (tag, value) in enumerate(metrics(step).items()):
            summary = scalar_pb(tag, value) if i == 1 else summary_pb2.Summary(
                value=[summary_pb2.Summary.Value(tag=tag, simple_value=value)])  # a TF2 scalar tensor too
            writer.add_event(event_pb2.Event(wall_time=1_700_000_000.0 + step, step=step, summary=summary))
        if step == 10:
            writer.add_event(event_pb2.Event(wall_time=1_700_000_010.0, step=step,
                                             summary=text_pb("train/generated_samples", "Sample:\n2+2=4\n\nReward: 1.0")))
    writer.close()
    per_step, per_scalar = import_source(tmp_path / "per_step", tmp_path / "a"), import_source(tmp_path / "per_scalar", tmp_path / "b")
    assert (per_scalar.steps, per_scalar.samples, per_scalar.unmapped) == (per_step.steps, per_step.samples, per_step.unmapped)

    def table(rec: Path, name: str) -> list[dict[str, Any]]:
        return [{k: v for k, v in row.items() if k not in ("run_id", "run_dir")}
                for row in rlprobe.RunReader(rec).query(f"SELECT * FROM {name} ORDER BY step").to_pylist()]

    a, b = table(tmp_path / "a", "steps"), table(tmp_path / "b", "steps")
    assert b[2]["kl_mean"] == 0.0 and a[2]["kl_mean"] == pytest.approx(0.003)
    a[2]["kl_mean"] = 0.0
    assert a == b and len(a) == 10
    assert table(tmp_path / "a", "samples") == table(tmp_path / "b", "samples")


def test_a_tensorboard_import_reports_the_bytes_it_has_read(tmp_path: Path) -> None:
    run = write_tb_run(tmp_path / "logs" / "grpo-1", range(1, 11))
    size = sum(f.stat().st_size for f in run.iterdir())
    calls: list[tuple[str, int, int]] = []

    import_source(run, tmp_path / "rec", progress=lambda what, done, total: calls.append((what, done, total)))
    assert {what for what, _, _ in calls} == {"reading grpo-1"} and {total for _, _, total in calls} == {size}
    assert [done for _, done, _ in calls] == sorted(done for _, done, _ in calls) and calls[-1][1] == size


def test_tensorboard_logdir_is_a_root_of_runs(tmp_path: Path) -> None:
    logs = tmp_path / "logs"
    write_tb_run(logs / "a", range(1, 6))
    write_tb_run(logs / "sweep" / "b", range(1, 4))
    (logs / "broken").mkdir()
    (logs / "broken" / "events.out.tfevents.1.host").write_bytes(b"not an event file at all")

    report = import_source(logs, tmp_path / "root")
    assert isinstance(report, RootReport)
    assert [(os.path.relpath(r.run_dir, tmp_path / "root"), r.steps) for r in report.runs] == [("a", 5), ("sweep/b", 3)]
    assert [name for name, _ in report.failed] == ["broken"]  # one broken run never takes the root down
    assert sorted(r["run_dir"].split("/")[-1] for r in rlprobe.list_runs(tmp_path / "root")) == ["a", "b"]
    result = invoke("ls", logs)
    assert result.exit_code == 0 and "sweep/b" in result.output


def test_a_growing_tensorboard_run_is_read_incrementally(tmp_path: Path) -> None:
    pytest.importorskip("tensorboard")
    from tensorboard.compat.proto import event_pb2, summary_pb2
    from tensorboard.summary.writer.event_file_writer import EventFileWriter

    from rlprobe.importers.tensorboard import EventReader

    writer = EventFileWriter(str(tmp_path / "run"))

    def log(step: int) -> None:
        writer.add_event(event_pb2.Event(step=step, summary=summary_pb2.Summary(
            value=[summary_pb2.Summary.Value(tag="train/reward", simple_value=float(step))])))
        writer.flush()

    reader = EventReader(tmp_path / "run")
    log(1), log(2)
    assert [s for s, *_ in reader.read()] == [1, 2]
    log(3)
    assert [s for s, *_ in reader.read()] == [3]  # only what is new
    writer.close()


def test_every_kind_of_tensorboard_value_is_read_as_it_was_written(tmp_path: Path) -> None:
    # The reader takes a summary's simple_values all at once and asks a value its kind only when
    # it reads 0.0 (what a tensor, a histogram or a text reads as simple_value): these summaries
    # mix the kinds, zeros and a tag repeated in one summary.
    pytest.importorskip("tensorboard")
    import numpy as np
    from tensorboard.compat.proto import event_pb2, summary_pb2
    from tensorboard.plugins.histogram.summary_v2 import histogram_pb
    from tensorboard.plugins.scalar.summary_v2 import scalar_pb
    from tensorboard.plugins.text.summary_v2 import text_pb
    from tensorboard.summary.writer.event_file_writer import EventFileWriter

    from rlprobe.importers.tensorboard import EventReader

    def simple(tag: str, v: float) -> Any:
        return summary_pb2.Summary.Value(tag=tag, simple_value=v)

    tf1_histogram = summary_pb2.Summary.Value(tag="train/h1", histo=summary_pb2.HistogramProto(min=1.0, max=2.0, num=2))
    summaries = {
        1: [simple("train/reward", 0.5), simple("train/kl", 0.0)],  # a true 0.0
        2: [simple("train/reward", 0.0), *scalar_pb("train/kl", 0.25).value, *histogram_pb("train/h", np.array([1.0, 2.0])).value,
            tf1_histogram, *text_pb("train/generated_samples", "2+2=4").value],
        3: [*text_pb("train/note", "hello").value, simple("train/note", 1.5)],  # one tag, two kinds
        4: [simple("train/reward", 2.0), *scalar_pb("train/reward", 3.0).value],  # the later value wins
        5: [tf1_histogram],  # nothing readable: no row
    }
    writer = EventFileWriter(str(tmp_path / "run"))
    for step, values in summaries.items():
        writer.add_event(event_pb2.Event(step=step, summary=summary_pb2.Summary(value=values)))
    writer.close()

    assert [(step, scalars, texts) for step, _, scalars, texts in EventReader(tmp_path / "run").read()] == [
        (1, {"train/reward": 0.5, "train/kl": 0.0}, {}),
        (2, {"train/reward": 0.0, "train/kl": 0.25}, {"train/generated_samples": "2+2=4"}),
        (3, {"train/note": 1.5}, {"train/note": "hello"}),
        (4, {"train/reward": 3.0}, {}),
    ]


def test_the_steps_table_is_the_one_the_rows_make(tmp_path: Path) -> None:
    # write_recording builds the steps table from columns; RunWriter.write_steps builds it from
    # one dict per step. Steps with different keys, components, extras, NaN and a derived field:
    # the same table.
    import math

    from rlprobe.importers._common import Entry, Parsed, classify, finish
    from rlprobe.importers.write import _step_rows, _steps_table
    from rlprobe.record.writer import _table
    from rlprobe.schemas import STEP_COLUMN_TYPES

    logged = [
        {"reward": 0.5, "reward_std": 0.0, "kl": 0.1, "rewards/accuracy": 1.0, "my_metric": 3.0},
        {"reward": math.nan, "reward_std": 0.0, "kl": 0.2},
        {"entropy": 1.2, "other": 5.0, "rewards/format": 0.0, "reward_std": 0.0},
        {"reward": 0.7, "kl": 0.3, "rewards/accuracy": 0.0, "my_metric": 4.0, "reward_std": 0.0},
    ]
    parsed = Parsed(kind="jsonl")
    for step, metrics in enumerate(logged, start=1):
        mapped = classify(metrics, parsed)
        assert mapped is not None
        parsed.entries.append(Entry(step=step, mapped=mapped))
    finish(parsed)  # reward_std 0 everywhere: zero_variance_group_frac = 1, derived
    assert {e.mapped.fields.get("zero_variance_group_frac") for e in parsed.entries} == {1.0}

    columns, rows = _steps_table(parsed), _table(_step_rows(parsed), STEP_COLUMN_TYPES)
    assert columns is not None and columns.schema.equals(rows.schema)
    assert repr(columns.to_pylist()) == repr(rows.to_pylist())  # repr: NaN equals NaN
    assert rows.column_names[:3] == ["step", "reward_mean", "reward_std"]


def test_a_step_arrow_cannot_hold_is_set_aside_as_before(tmp_path: Path) -> None:
    from rlprobe.importers._common import Entry, Parsed
    from rlprobe.importers.write import write_recording
    from rlprobe.keymap import map_metrics

    parsed = Parsed(kind="jsonl", entries=[Entry(step=s, mapped=map_metrics({"reward": 0.5})) for s in (1, 2**70, 3)])
    write_recording(parsed, tmp_path / "src.jsonl", tmp_path / "rec")
    assert steps_of(tmp_path / "rec", "step, reward_mean") == [{"step": 1, "reward_mean": 0.5}, {"step": 3, "reward_mean": 0.5}]


# -- Weights & Biases ----------------------------------------------------------------------------------

def write_wandb_run(root: Path, steps: range, *, table: bool = True, finish: bool = True) -> Path:
    wandb = pytest.importorskip("wandb")
    os.environ["WANDB_SILENT"] = "true"
    run = wandb.init(mode="offline", dir=str(root), project="rlprobe-test",
                     config={"model_name_or_path": "Qwen/Qwen2.5-0.5B-Instruct", "num_generations": 4})
    for step in steps:
        run.log({**grpo_metrics(step), "train/global_step": step})
    if table:  # TRL's log_completions table
        run.log({"completions": wandb.Table(columns=["step", "prompt", "completion", "accuracy_reward", "advantage"],
                                            data=[[str(steps[-1]), "2+2?", "4", 1.0, 0.5], [str(steps[-1]), "2+2?", "5", 0.0, -0.5]])})
    path = Path(run.dir).parent
    if finish:
        run.finish()
        wandb.teardown()  # stop the writer's service: it appends to the run's debug logs after finish returns
    return path


def test_wandb_offline_run_round_trip(tmp_path: Path) -> None:
    run = write_wandb_run(tmp_path, range(1, 6))
    assert detect(run) == "wandb"
    before = tree_digest(run)

    report = import_source(run, tmp_path / "rec")
    assert (report.kind, report.steps, report.first_step, report.last_step, report.samples) == ("wandb", 5, 1, 5, 2)
    assert "train/global_step" in report.step_rule
    rows = steps_of(tmp_path / "rec", "step, reward_mean, zero_variance_group_frac")
    assert rows[-1] == pytest.approx({"step": 5, "reward_mean": 0.5, "zero_variance_group_frac": 0.2})
    samples = rlprobe.RunReader(tmp_path / "rec").query(
        'SELECT step, completion_text, reward_total, advantage, group_id FROM samples ORDER BY sample_id').to_pylist()
    assert samples == [{"step": 5, "completion_text": "4", "reward_total": 1.0, "advantage": 0.5, "group_id": "5/0"},
                       {"step": 5, "completion_text": "5", "reward_total": 0.0, "advantage": -0.5, "group_id": "5/0"}]
    manifest = rlprobe.load_manifest(tmp_path / "rec")
    assert manifest.model_name == "Qwen/Qwen2.5-0.5B-Instruct" and manifest.trainer_config["num_generations"] == 4
    assert tree_digest(run) == before


def test_a_wandb_folder_is_a_root_and_the_doctor_reads_it(tmp_path: Path) -> None:
    write_wandb_run(tmp_path, range(1, 4), table=False)
    write_wandb_run(tmp_path, range(1, 7), table=False)
    report = import_source(tmp_path / "wandb", tmp_path / "root")
    assert isinstance(report, RootReport) and sorted(r.steps for r in report.runs) == [3, 6]
    result = invoke("doctor", tmp_path / "wandb", "--json")
    assert result.exit_code in (0, 1), result.output
    diagnoses = json.loads(result.stdout)
    assert sorted(d["run_dir"].split(" :: ")[-1][:12] for d in diagnoses) == sorted(
        p.name[:12] for p in (tmp_path / "wandb").glob("offline-run-*"))


def test_a_wandb_run_still_being_written_is_refused(tmp_path: Path) -> None:
    run = write_wandb_run(tmp_path, range(1, 3), table=False, finish=False)
    [log] = run.glob("run-*.wandb")
    # Its last records may not be flushed yet; what counts is that the log has no exit record and is fresh.
    deadline = time.time() + 10
    while log.stat().st_size == 0 and time.time() < deadline:
        time.sleep(0.1)
    with pytest.raises(SourceUnreadable, match="still being written"):
        import_source(run, tmp_path / "rec")
    assert not (tmp_path / "rec").exists()
    import wandb

    wandb.finish()
    wandb.teardown()


def test_a_wandb_log_cut_mid_record_imports_what_is_whole_and_says_so(tmp_path: Path) -> None:
    """A crashed run's .wandb (or a copy cut short): wandb-core's reader stops at the cut record and says so."""
    import shutil

    run = write_wandb_run(tmp_path / "w", range(1, 21), table=False)
    cut_run = tmp_path / "copy" / run.name
    shutil.copytree(run, cut_run, symlinks=True)
    [log] = cut_run.glob("run-*.wandb")
    log.write_bytes(log.read_bytes()[: log.stat().st_size * 6 // 10])  # mid-record: its exit record is gone too
    hour_ago = time.time() - 3600  # a crashed run's log, not one still being written
    os.utime(log, (hour_ago, hour_ago))
    before = tree_digest(cut_run)

    result = invoke("import", cut_run, tmp_path / "rec")
    assert result.exit_code == 0, result.output
    [line] = [line for line in result.stderr.splitlines() if line.startswith("torn: ")]
    assert str(log) in line and "its last record is incomplete" in line and "incomplete .wandb file" in line
    assert "no exit record" not in result.stdout  # the torn line says it, once
    steps = [r["step"] for r in steps_of(tmp_path / "rec", "step")]
    assert 1 < len(steps) < 20 and steps == list(range(1, len(steps) + 1))
    assert "(torn: " in invoke("doctor", cut_run).stderr
    assert tree_digest(cut_run) == before

    whole = invoke("import", run, tmp_path / "rec2")  # the whole log: nothing to say
    assert whole.exit_code == 0 and "torn" not in whole.stderr


def test_a_file_named_like_a_wandb_log_that_is_not_one(tmp_path: Path) -> None:
    pytest.importorskip("wandb")
    folder = tmp_path / "wandb" / "offline-run-20260101_000000-abcd1234"
    folder.mkdir(parents=True)
    (folder / "run-abcd1234.wandb").write_bytes(b"garbage, not a transaction log")
    result = invoke("import", folder, tmp_path / "rec")
    assert result.exit_code == 2 and "not a readable W&B run" in result.stderr
    assert result.stderr.strip().count("\n") == 0
    assert not (tmp_path / "rec").exists()


# -- MLflow ------------------------------------------------------------------------------------------

def write_mlflow_runs(uri: str, runs: int = 2, steps: int = 5) -> None:
    os.environ["MLFLOW_ALLOW_FILE_STORE"] = "true"  # MLflow 3 writes file stores only when asked to
    mlflow = pytest.importorskip("mlflow")
    mlflow.set_tracking_uri(uri)
    mlflow.set_experiment("grpo")
    for r in range(runs):
        with mlflow.start_run(run_name=f"seed{r}"):
            mlflow.log_params({"learning_rate": 1e-6, "model_name_or_path": "Qwen/Qwen2.5-0.5B-Instruct"})
            for step in range(1, steps + 1):
                mlflow.log_metrics({"reward": 0.1 * step + r, "kl": 0.01 * step, "policy_entropy_mean": 1.0,
                                    "completion_length_mean": 100.0 + step}, step=step)
    mlflow.set_tracking_uri("")


@pytest.mark.parametrize("store", ["file", "sqlite"])
def test_mlflow_store_round_trip(tmp_path: Path, store: str) -> None:
    path = tmp_path / ("mlruns" if store == "file" else "mlflow.db")
    write_mlflow_runs(path.as_uri() if store == "file" else f"sqlite:///{path}")
    assert detect(path) == "mlflow"
    before = tree_digest(path)

    report = import_source(path, tmp_path / "root")
    assert isinstance(report, RootReport)
    assert sorted(os.path.relpath(r.run_dir, tmp_path / "root") for r in report.runs) == ["grpo/seed0", "grpo/seed1"]
    seed1 = next(r for r in report.runs if r.run_dir.endswith("seed1"))
    assert (seed1.steps, seed1.first_step, seed1.last_step) == (5, 1, 5)
    assert steps_of(Path(seed1.run_dir), "step, reward_mean, kl_mean, entropy_mean, completion_len_mean")[0] == pytest.approx(
        {"step": 1, "reward_mean": 1.1, "kl_mean": 0.01, "entropy_mean": 1.0, "completion_len_mean": 101.0})
    assert rlprobe.load_manifest(Path(seed1.run_dir)).trainer_config["learning_rate"] == "1e-06"
    assert tree_digest(path) == before  # MLflow writes when it opens a store: a copy was read


def test_one_mlflow_run_folder_is_one_recording(tmp_path: Path) -> None:
    write_mlflow_runs((tmp_path / "mlruns").as_uri(), runs=1)
    [run] = [p for p in (tmp_path / "mlruns").glob("*/*") if (p / "metrics").is_dir()]
    report = import_source(run, tmp_path / "rec")
    assert not isinstance(report, RootReport) and report.steps == 5


def test_an_empty_tracker_folder_is_one_line_and_exit_2(tmp_path: Path) -> None:
    write_mlflow_runs((tmp_path / "mlruns").as_uri(), runs=0)  # an experiment, no run yet
    result = invoke("import", tmp_path / "mlruns", tmp_path / "root")
    assert result.exit_code == 2 and "no run in it" in result.stderr and result.stderr.strip().count("\n") == 0
    assert not (tmp_path / "root").exists()


def test_a_runs_root_is_read_as_is_not_imported(tmp_path: Path) -> None:
    write_tb_run(tmp_path / "logs" / "a", range(1, 4))
    import_source(tmp_path / "logs", tmp_path / "root")
    assert not is_importable(tmp_path / "root") and not is_importable(tmp_path / "root" / "a")
    with as_recording(tmp_path / "root") as rec:
        assert rec.report is None and rec.path == tmp_path / "root"


def test_a_torn_event_file_imports_what_is_whole_and_says_what_is_not(tmp_path: Path) -> None:
    """The last record cut mid-write (a live writer's, or a truncated copy): the rest imports, and the import says so."""
    pytest.importorskip("tensorboard")
    torch_tb = pytest.importorskip("torch.utils.tensorboard")
    writer = torch_tb.SummaryWriter(str(tmp_path / "tb"))
    for step in range(1, 21):  # what HF's TensorBoardCallback writes: one scalar event per tag
        writer.add_scalar("train/reward", 0.05 * step, step)
        writer.add_scalar("train/kl", 0.001 * step, step)
    writer.close()
    [events] = list((tmp_path / "tb").iterdir())
    whole = events.read_bytes()
    events.write_bytes(whole[:-7])  # the last record (step 20's kl) loses its last 7 bytes

    result = invoke("import", tmp_path / "tb", tmp_path / "rec")
    assert result.exit_code == 0 and "torn: " not in result.stdout  # a warning about the source: on stderr
    [line] = [line for line in result.stderr.splitlines() if line.startswith("torn: ")]
    record = json.loads(invoke("import", tmp_path / "tb", tmp_path / "rec2", "--json").stdout)["torn"]
    [torn] = record
    assert torn["file"] == str(events) and torn["cut"] is True and torn["records"] == 40  # the file header + 39 scalars
    assert str(events) in line and f"its last {torn['tail_bytes']} bytes are not a whole record" in line
    assert 0 < torn["tail_bytes"] < 64 and "cut mid-record" in line
    assert steps_of(tmp_path / "rec", "step, kl_mean")[-1] == {"step": 20, "kl_mean": None}  # step 20's reward is in
    assert "(torn: " in invoke("doctor", tmp_path / "tb").stderr

    corrupt = bytearray(whole)
    corrupt[len(whole) // 2] ^= 0xFF  # a record in the middle fails its checksum: the rest of the file is not read
    events.write_bytes(bytes(corrupt))
    [torn] = json.loads(invoke("import", tmp_path / "tb", tmp_path / "rec3", "--json").stdout)["torn"]
    assert torn["cut"] is False and torn["tail_bytes"] > 100 and torn["records"] < 40
