"""`rlprobe import`: runs rlprobe never recorded become normal, closed recordings.

Each source is built here, small and readable: a trainer_state.json with new and old TRL key
names, TRL's completions parquet, verl-style JSONL and CSV, a console log the way the HF
Trainer prints one. The real logs in ../shared/realdata (two GRPO runs, one healthy, one that
collapses) are imported and diagnosed when present.
"""

from __future__ import annotations

import hashlib
import json
import math
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from click.testing import CliRunner, Result

import rlprobe
from rlprobe.cli import cli
from rlprobe.errors import ImportRefused, SourceUnreadable
from rlprobe.importers import FORMATS, as_recording, detect, import_source, is_importable
from shared_data import REALDATA  # ../shared, found from a worktree too

COLLAPSE_LOG = REALDATA / "grpo_qwen25_7b_gsm8k_lr1e4_collapse_seed43.log"
HEALTHY_LOG = REALDATA / "grpo_qwen25_7b_gsm8k_lr1e4_healthy_seed42.log"


def invoke(*args: Any) -> Result:
    return CliRunner().invoke(cli, [str(a) for a in args], catch_exceptions=False)


def tree_digest(path: Path) -> dict[str, str]:
    """sha256 of every file below path (or of path itself): what 'left untouched' means."""
    files = [path] if path.is_file() else sorted(p for p in path.rglob("*") if p.is_file())
    return {str(p): hashlib.sha256(p.read_bytes()).hexdigest() for p in files}


def steps_of(run_dir: Path, columns: str = "*") -> list[dict[str, Any]]:
    return rlprobe.RunReader(run_dir).query(f"SELECT {columns} FROM steps ORDER BY step").to_pylist()


def imported_event(run_dir: Path) -> dict[str, Any]:
    [event] = rlprobe.RunReader(run_dir).events(kind="imported")
    return event.data


# -- sources, as a user has them -------------------------------------------------------------------


def write_trainer_state(folder: Path) -> Path:
    """A GRPO trainer_state.json: new TRL names at step 1, old names at step 2, an eval entry, the totals."""
    history = [
        {"step": 1, "epoch": 0.01, "loss": 0.01, "grad_norm": 0.5, "learning_rate": 1e-6, "reward": 0.25,
         "reward_std": 0.2, "kl": 0.001, "entropy": 1.5, "completions/mean_length": 120.0,
         "completions/clipped_ratio": 0.0, "frac_reward_zero_std": 0.1,
         "rewards/accuracy_reward/mean": 0.2, "rewards/format_reward/mean": 0.05, "my_metric": 7.0},
        {"step": 2, "epoch": 0.02, "loss": 0.02, "reward": 0.5, "kl": 0.002, "completion_length": 130.0,
         "rewards/accuracy_reward": 0.4, "rewards/format_reward": 0.1, "objective/entropy": 1.4},
        {"step": 2, "epoch": 0.02, "eval_loss": 0.3, "eval_reward": 0.45, "eval_runtime": 3.2},
        {"step": 2, "epoch": 0.02, "train_runtime": 60.0, "train_samples_per_second": 1.0,
         "train_steps_per_second": 0.03, "total_flos": 0.0, "train_loss": 0.015},
    ]
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / "trainer_state.json"
    path.write_text(json.dumps({"global_step": 2, "logging_steps": 1, "max_steps": 2, "log_history": history}))
    return path


def write_completions(folder: Path, step: int) -> Path:
    """TRL GRPOTrainer's log_completions table: 2 prompts x 2 completions, a column per reward function."""
    (folder / "completions").mkdir(parents=True, exist_ok=True)
    path = folder / "completions" / f"completions_{step:05d}.parquet"
    pq.write_table(pa.table({
        "step": [str(step)] * 4,  # TRL wrote the step as a string in some versions
        "prompt": ["2+2?", "2+2?", "3+3?", "3+3?"],
        "completion": ["4", "5", "6", "six"],
        "accuracy_reward": [1.0, 0.0, 1.0, 0.0],
        "format_reward": [0.5, 0.5, 0.5, 0.0],
        "advantage": [0.7, -0.7, 0.7, -0.7],
    }), path)
    return path


VERL_ROWS = [
    {"training/global_step": s, "actor/entropy": 1.0 - 0.1 * s, "critic/score/mean": 0.1 * s,
     "response_length/mean": 200.0 + s, "actor/pg_clipfrac": 0.01, "perf/throughput": 1000.0}
    for s in (1, 2, 3)
]


def write_console_log(path: Path) -> Path:
    """What a TRL job's stdout looks like: warnings, tqdm bars, prefixed dicts, string values, totals."""
    dicts = [
        "{'loss': '0.0126', 'grad_norm': 0.5, 'learning_rate': 9e-05, 'reward': '0.95', 'entropy': 0.15, "
        "'completions/clipped_ratio': 0.0, 'rewards/reward_fn/mean': 0.95, 'epoch': 0.0}",
        "{'loss': 0.0, 'grad_norm': nan, 'learning_rate': 8e-05, 'reward': 0.5, 'entropy': 0.3, "
        "'completions/clipped_ratio': 0.5, 'rewards/reward_fn/mean': 0.5, 'epoch': 0.01}",
        "{'loss': 0.0, 'grad_norm': 0.1, 'learning_rate': 7e-05, 'reward': 0.0, 'entropy': 4.6, "
        "'completions/clipped_ratio': 1.0, 'rewards/reward_fn/mean': 0.0, 'epoch': 0.02}",
    ]
    lines = [
        "UserWarning: TRL currently supports vLLM versions from 0.10.2 to 0.17.1.",
        "loading configuration file config.json from cache at /home/u/.cache/huggingface/hub/"
        "models--Qwen--Qwen2.5-0.5B-Instruct/snapshots/abc/config.json",
        "Updated tokens: {'bos_token_id': None, 'pad_token_id': 151643}.",
        "  0%|          | 0/6 [00:00<?, ?it/s]\r 17%|█▋        | 1/6 [00:03<00:15,  3.17s/it]\r 33%|███▎      | 2/6",
        dicts[0],
        "\r 50%|█████     | 3/6 [00:09<00:09,  3.30s/it]" + dicts[1],  # a dict right after a redrawn bar
        "{'loss': 0.0, 'grad_norm': 0.1, 'learning_rate': 7.5e-05, 'rew",  # cut off mid-print: malformed
        "2026-04-04 19:39:51,691 [INFO] train: " + dicts[2],  # a logging prefix
        "{'train_runtime': 910.3, 'train_samples_per_second': 1.758, 'train_steps_per_second': 0.22, "
        "'train_loss': 0.0016, 'epoch': 0.05}",
        "[rank0]: Warning: destroy_process_group() was not called before program exit",
    ]
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


# -- trainer_state.json ----------------------------------------------------------------------------


def test_trainer_state_maps_new_and_old_trl_names(tmp_path: Path) -> None:
    source = write_trainer_state(tmp_path)
    report = import_source(source, tmp_path / "run", algorithm="grpo")

    assert (report.kind, report.steps, report.first_step, report.last_step) == ("trainer_state", 2, 1, 2)
    assert report.skipped == {"eval": 1, "summary": 1}  # neither is a training step
    rows = steps_of(tmp_path / "run", 'step, reward_mean, kl_mean, entropy_mean, completion_len_mean, '
                                      '"reward_component.accuracy_reward" AS acc, "extra.my_metric" AS mine')
    assert rows == [
        {"step": 1, "reward_mean": 0.25, "kl_mean": 0.001, "entropy_mean": 1.5, "completion_len_mean": 120.0, "acc": 0.2, "mine": 7.0},
        {"step": 2, "reward_mean": 0.5, "kl_mean": 0.002, "entropy_mean": 1.4, "completion_len_mean": 130.0, "acc": 0.4, "mine": None},
    ]
    manifest = rlprobe.load_manifest(tmp_path / "run")
    assert manifest.algorithm == "grpo"
    assert manifest.trainer_config["logging_steps"] == 1 and "log_history" not in manifest.trainer_config


def test_imported_run_is_closed_and_says_where_it_came_from(tmp_path: Path) -> None:
    source = write_trainer_state(tmp_path / "out")
    report = import_source(source, tmp_path / "run")

    [run] = rlprobe.list_runs(tmp_path / "run")
    assert (run["status"], run["steps_recorded"], run["last_step"]) == ("closed", 2, 2)
    event = imported_event(tmp_path / "run")
    assert event["source"] == str(source.resolve()) and event["kind"] == "trainer_state"
    assert (event["steps"], event["samples"]) == (2, 0)
    assert event["unmapped"] == ["epoch", "my_metric"] == report.unmapped


def test_output_dir_with_checkpoints_and_completions(tmp_path: Path) -> None:
    out = tmp_path / "out"
    (out / "checkpoint-1").mkdir(parents=True)
    (out / "checkpoint-2").mkdir()
    (out / "checkpoint-1" / "trainer_state.json").write_text(json.dumps({"log_history": [{"step": 1, "loss": 1.0}]}))
    write_trainer_state(out / "checkpoint-2")  # the newest checkpoint has the longest history
    write_completions(out, step=1)

    assert detect(out) == "trainer_state" and is_importable(out)
    report = import_source(out, tmp_path / "run")
    assert (report.steps, report.samples) == (2, 4)

    samples = rlprobe.RunReader(tmp_path / "run").query(
        'SELECT step, completion_text, reward_total, advantage, group_id, "reward_component.format_reward" AS fmt '
        "FROM samples ORDER BY sample_id").to_pylist()
    assert samples[0] == {"step": 1, "completion_text": "4", "reward_total": 1.5, "advantage": 0.7, "group_id": "1/0", "fmt": 0.5}
    assert [s["group_id"] for s in samples] == ["1/0", "1/0", "1/1", "1/1"]  # one group per prompt


# -- JSONL, CSV ------------------------------------------------------------------------------------


def test_verl_jsonl_uses_its_step_column_and_skips_a_malformed_line(tmp_path: Path) -> None:
    source = tmp_path / "metrics.jsonl"
    lines = [json.dumps(r) for r in VERL_ROWS]
    lines.insert(1, '{"training/global_step": 9, "actor/entropy": ')  # torn by a crash
    source.write_text("\n".join(lines) + "\n")

    report = import_source(source, tmp_path / "run")
    assert report.bad_lines == [2]
    assert report.unmapped == ["perf/throughput"]
    assert steps_of(tmp_path / "run", "step, entropy_mean, reward_mean, completion_len_mean, clip_fraction")[-1] == {
        "step": 3, "entropy_mean": pytest.approx(0.7), "reward_mean": pytest.approx(0.3),
        "completion_len_mean": 203.0, "clip_fraction": 0.01}
    assert imported_event(tmp_path / "run")["bad_lines"] == [2]


def test_verl_file_logger_lines_nest_the_metrics_under_data(tmp_path: Path) -> None:
    source = tmp_path / "verl.jsonl"
    source.write_text("\n".join(json.dumps({"step": r["training/global_step"], "data": r}) for r in VERL_ROWS) + "\n")
    report = import_source(source, tmp_path / "run")
    assert (report.steps, report.unmapped) == (3, ["perf/throughput"])
    assert steps_of(tmp_path / "run", "step, reward_mean")[0] == {"step": 1, "reward_mean": 0.1}


def test_csv_without_a_step_column_numbers_rows_by_step_every(tmp_path: Path) -> None:
    source = tmp_path / "metrics.csv"
    header = ["actor/entropy", "critic/score/mean", "response_length/mean"]
    source.write_text(",".join(header) + "\n" + "\n".join(
        f"{r['actor/entropy']},{r['critic/score/mean']},{r['response_length/mean']}" for r in VERL_ROWS) + "\n")

    report = import_source(source, tmp_path / "run", step_every=10)
    assert [r["step"] for r in steps_of(tmp_path / "run", "step")] == [10, 20, 30]
    assert "10*(i+1)" in report.step_rule


# -- console logs ----------------------------------------------------------------------------------


def test_console_log_reads_the_printed_dicts(tmp_path: Path) -> None:
    source = write_console_log(tmp_path / "train.log")
    report = import_source(source, tmp_path / "run", step_every=5)

    assert (report.kind, report.steps, report.first_step, report.last_step) == ("console", 3, 5, 15)
    assert report.bad_lines == [7]  # the dict cut off mid-print
    assert report.skipped == {"other dicts": 1, "summary": 1}  # the tokenizer dict, the totals
    assert report.model_name == "Qwen/Qwen2.5-0.5B-Instruct"  # from the HF cache path
    rows = steps_of(tmp_path / "run", "step, loss, reward_mean, entropy_mean, max_len_hit_frac, grad_norm")
    assert rows[0] == {"step": 5, "loss": 0.0126, "reward_mean": 0.95, "entropy_mean": 0.15, "max_len_hit_frac": 0.0, "grad_norm": 0.5}
    assert math.isnan(rows[1]["grad_norm"])  # NaN is evidence, kept as a value
    assert rows[2]["entropy_mean"] == 4.6


def test_console_log_without_logging_steps_counts_entries_from_one(tmp_path: Path) -> None:
    report = import_source(write_console_log(tmp_path / "train.log"), tmp_path / "run")
    assert (report.first_step, report.last_step) == (1, 3)
    assert "--step-every" in report.step_rule  # the report says how to fix the numbering


def test_verl_console_lines_carry_their_step(tmp_path: Path) -> None:
    source = tmp_path / "verl.out"
    source.write_text(
        "(main_task pid=1) step:1 - actor/entropy:np.float64(1.2) - critic/score/mean:0.1 - response_length/mean:300.0\n"
        "(main_task pid=1) step:2 - actor/entropy:np.float64(1.1) - critic/score/mean:0.2 - response_length/mean:310.0\n")
    assert detect(source) == "console"
    import_source(source, tmp_path / "run")
    assert steps_of(tmp_path / "run", "step, entropy_mean, reward_mean") == [
        {"step": 1, "entropy_mean": 1.2, "reward_mean": 0.1}, {"step": 2, "entropy_mean": 1.1, "reward_mean": 0.2}]


def test_detect_names_every_kind(tmp_path: Path) -> None:
    write_trainer_state(tmp_path / "out")
    jsonl = tmp_path / "m.txt"  # no telling suffix: sniffed from the first line
    jsonl.write_text(json.dumps(VERL_ROWS[0]) + "\n")
    csv_file = tmp_path / "m.dat"
    csv_file.write_text("step,reward,entropy\n1,0.5,1.0\n")
    assert detect(tmp_path / "out") == detect(tmp_path / "out" / "trainer_state.json") == "trainer_state"
    assert detect(write_completions(tmp_path / "c", 1)) == detect(tmp_path / "c") == "trl_completions"
    assert (detect(jsonl), detect(csv_file), detect(write_console_log(tmp_path / "x.log"))) == ("jsonl", "csv", "console")


# -- never touching the source, never overwriting --------------------------------------------------


def test_sources_are_left_byte_identical(tmp_path: Path) -> None:
    out = tmp_path / "out"
    write_trainer_state(out)
    write_completions(out, step=1)
    log = write_console_log(tmp_path / "train.log")
    before = {**tree_digest(out), **tree_digest(log)}

    import_source(out, tmp_path / "a")
    import_source(log, tmp_path / "b")
    assert invoke("doctor", log).exit_code in (0, 1)
    assert {**tree_digest(out), **tree_digest(log)} == before
    assert sorted(p.name for p in out.iterdir()) == ["completions", "trainer_state.json"]


def test_refuses_to_overwrite_or_to_write_into_the_source(tmp_path: Path) -> None:
    out = tmp_path / "out"
    write_trainer_state(out)
    import_source(out, tmp_path / "run")
    kept = tree_digest(tmp_path / "run")

    with pytest.raises(ImportRefused, match="already exists"):
        import_source(out, tmp_path / "run")
    with pytest.raises(ImportRefused, match="inside SOURCE"):
        import_source(out, out / "rlprobe")
    with pytest.raises(ImportRefused, match="same path"):
        import_source(out, out)
    assert tree_digest(tmp_path / "run") == kept
    assert not (out / "rlprobe").exists()

    result = invoke("import", out, tmp_path / "run")
    assert result.exit_code == 2
    assert result.stderr.strip().count("\n") == 0 and "never overwrites" in result.stderr


def test_errors_are_one_line(tmp_path: Path) -> None:
    garbage = tmp_path / "notes.txt"
    garbage.write_text("nothing to see here\n")
    only_bad = tmp_path / "bad.jsonl"
    only_bad.write_text('{"loss": \n{"loss": 0.1\n')

    with pytest.raises(SourceUnreadable, match="unknown format"):
        import_source(garbage, tmp_path / "a")
    with pytest.raises(SourceUnreadable, match="no metric dicts found.*2 malformed lines, first at line 1"):
        import_source(only_bad, tmp_path / "b")
    with pytest.raises(SourceUnreadable, match="no such file"):
        import_source(tmp_path / "missing.log", tmp_path / "c")
    assert not (tmp_path / "a").exists() and not (tmp_path / "b").exists()
    assert [p.name for p in tmp_path.iterdir() if p.name.startswith(".")] == []  # no temporary left behind


# -- the CLI ---------------------------------------------------------------------------------------


def test_cli_import_prints_a_summary_and_the_unmapped_keys(tmp_path: Path) -> None:
    source = tmp_path / "metrics.jsonl"
    source.write_text("\n".join(json.dumps({**r, "my/metric": 1.0}) for r in VERL_ROWS) + "\n")

    result = invoke("import", source, tmp_path / "run", "--algorithm", "ppo")
    assert result.exit_code == 0, result.output
    assert "3 steps (steps 1..3)" in result.output
    assert "known keys without a field (1, kept as extra.<key>; docs/import.md says why): perf/throughput" in result.output
    assert "unmapped keys (1, kept as extra.<key>): my/metric" in result.output

    query = invoke("query", tmp_path / "run", 'SELECT max("extra.perf/throughput") AS t, max(entropy_mean) AS e FROM steps', "--json")
    assert json.loads(query.output) == [{"t": 1000.0, "e": 0.9}]
    status = invoke("query", tmp_path / "run", "SELECT status, algorithm FROM runs", "--json")
    assert json.loads(status.output) == [{"status": "closed", "algorithm": "ppo"}]


def test_doctor_reads_a_source_directly(tmp_path: Path) -> None:
    """Round trip: a recording exported to CSV and diagnosed from the CSV finds what the recording shows."""
    assert invoke("synth", tmp_path / "synth", "--pathology", "ENTROPY_COLLAPSE", "--n-steps", "300", "--seed", "1").exit_code == 0
    csv_text = invoke("query", tmp_path / "synth", "SELECT * FROM steps ORDER BY step", "--csv").output
    (tmp_path / "steps.csv").write_text(csv_text)

    direct = invoke("doctor", tmp_path / "synth", "--json")
    via_csv = invoke("doctor", tmp_path / "steps.csv", "--json")
    assert via_csv.exit_code == direct.exit_code == 1  # a critical finding: the CI gate trips
    assert "imported csv" in via_csv.stderr
    found = json.loads(via_csv.stdout)
    assert [f["signature_id"] for f in found["findings"]] == [f["signature_id"] for f in json.loads(direct.stdout)["findings"]]
    assert found["run_dir"] == str(tmp_path / "steps.csv")  # the source, not a temporary folder


def test_as_recording_removes_its_temporary_import(tmp_path: Path) -> None:
    log = write_console_log(tmp_path / "train.log")
    with as_recording(log, step_every=5) as rec:
        assert rec.report is not None and rlprobe.list_runs(rec.path)[0]["last_step"] == 15
        temporary = rec.path
    assert not temporary.exists()
    with as_recording(tmp_path / "synth-not-a-source") as rec:  # not importable: passed through as is
        assert rec.report is None


def test_cli_format_choices_match_the_library() -> None:
    from rlprobe.cli.imports import _FORMATS

    assert _FORMATS == FORMATS


# -- real logs -------------------------------------------------------------------------------------

real = pytest.mark.skipif(not COLLAPSE_LOG.exists() or not HEALTHY_LOG.exists(), reason="../shared/realdata not present")


@real
@pytest.mark.parametrize("log", [COLLAPSE_LOG, HEALTHY_LOG], ids=["collapse", "healthy"])
def test_real_trl_console_logs_import(tmp_path: Path, log: Path) -> None:
    report = import_source(log, tmp_path / "run")
    # No step numbers in the log: logging_steps=5 follows from 40 entries of a completed 200-step run.
    assert (report.steps, report.first_step, report.last_step) == (40, 5, 200)
    assert {"entropy_mean", "reward_mean", "max_len_hit_frac", "clip_fraction"} <= set(report.fields)
    assert report.model_name == "Qwen/Qwen2.5-7B-Instruct"
    steps = [r["step"] for r in steps_of(tmp_path / "run", "step")]
    assert steps == list(range(5, 201, 5))


@real
def test_doctor_on_real_logs(tmp_path: Path) -> None:
    """Collapse: healthy ~20 steps, then entropy 0.2 -> 4.6, length to the cap, reward to 0."""
    from rlprobe.doctor import diagnose

    with as_recording(COLLAPSE_LOG) as rec:
        collapse = diagnose(rec.path)
    with as_recording(HEALTHY_LOG) as rec:
        healthy = diagnose(rec.path)
    expected = {"ENTROPY_BLOWUP", "REWARD_COLLAPSE", "TRUNCATION_STARVE"}
    assert any(f.signature_id in expected and f.severity in ("warn", "critical") for f in collapse)
    assert not [f for f in healthy if f.severity == "critical"]
