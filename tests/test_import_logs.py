"""Trainers' console logs, built here the way each trainer prints them, and how their steps are numbered.

XTuner's RL trainer prints blocks per rollout; an HF Trainer console log without
`logging_steps` gets its numbering from what the log does print at the end (a final
global_step, the progress bar), never from the tqdm counter next to a dict.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

import rlprobe
from rlprobe.cli import cli
from rlprobe.errors import SourceUnreadable
from rlprobe.importers import detect, import_source


def steps_of(run_dir: Path, columns: str) -> list[dict[str, Any]]:
    return rlprobe.RunReader(run_dir).query(f"SELECT {columns} FROM steps ORDER BY step").to_pylist()


# -- XTuner -----------------------------------------------------------------------------------------

def xtuner_rollout(n: int, reward: float, entropy: float, grad_norms: list[float], skipped: int = 0) -> list[str]:
    head = f"[XTuner][RANK 0][2025-12-26 18:30:27][INFO]"
    lines = [
        f"{head}[RLTrainer] Prepared 8192 training data batches",
        f"{head}[RLTrainer] Rollout {n} data statistics:",
        "  - batch_size          : 8192",
        f"  - rewards/mean        : {reward:.4f}",
        "  - rewards/min         : 0",
        "  - rewards/max         : 1",
        "  - advantages/mean     : -0.1796887069940567",
        "  - response_len/mean   : 18985.8778",
        "  - response_len/max    : 32768",
        f"{head}[TrainingWorker] Rollout {n}: avg entropy: {entropy:.4f}, avg rollout entropy: {entropy - 0.001:.4f}",
        " rollout mismatch metrics:",
        "{",
        '    "mismatch/mismatch_kl": 0.0005350366700440645,',
        '    "mismatch/mismatch_logprob_abs_diff": 0.015495740808546543',
        "}",
    ]
    for i, g in enumerate(grad_norms):
        if i < skipped:
            lines.append(f"{head.replace('INFO', 'WARNING')}[TrainingWorker] Gradient norm {g} exceeds the threshold 0.9, "
                         "skipping optimizer step.")
        lines.append(f"{head}[TrainingWorker] Rollout {n} Step {12 * i}: total_loss=-0.0908, reduced_llm_loss=-0.0908, "
                     f"consumed_tokens=362753.0000, max_ratio={1 + i}.0000, loss=-0.0058, grad_norm={g:.4f}")
    lines += [
        f"{head}[RLTrainer] Rollout {n} training finished and timing listed: ",
        "  - generation               : 3259.97s",
        "  - training                 : 1352.96s",
        "  - Total                    : 4985.70s",
    ]
    return lines


def write_xtuner_log(path: Path) -> Path:
    model = ["[XTuner][RANK 0][2025-12-26 17:21:38][INFO][TrainingWorker] FSDPQwen2Dense(",
             "  (norm): FSDPRMSNorm((3584,), eps=1e-06)", ")"]
    lines = model + xtuner_rollout(1, 0.5039, 0.7321, [0.05, 0.07]) + xtuner_rollout(2, 0.4962, 1.15, [1.2, 1.5, 0.3], skipped=2)
    lines.append("[XTuner][RANK 0][2025-12-27 00:18:02][INFO][RLTrainer] Evaluate idx 2 scores {'accuracy': 0.41354166666666664}")
    lines.append("[XTuner][RANK 0][2025-12-27 00:18:02][INFO][RLTrainer] Rollout 3 data stat")  # cut off while rollout 3 ran
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def test_xtuner_log_is_one_step_per_rollout(tmp_path: Path) -> None:
    source = write_xtuner_log(tmp_path / "show.txt")
    assert detect(source) == "xtuner"
    report = import_source(source, tmp_path / "run")

    assert (report.kind, report.steps, report.first_step, report.last_step) == ("xtuner", 2, 1, 2)
    rows = steps_of(tmp_path / "run", 'step, reward_mean, reward_min, entropy_mean, adv_mean, completion_len_mean, '
                                      'completion_len_max, logprob_mismatch, grad_norm, step_time_s, generation_time_s, '
                                      '"extra.grad_norm/max" AS grad_max, "extra.skipped_optimizer_steps" AS skipped, '
                                      '"extra.max_ratio/max" AS ratio_max, "extra.eval/accuracy" AS eval_acc')
    assert rows[0] == pytest.approx({
        "step": 1, "reward_mean": 0.5039, "reward_min": 0.0, "entropy_mean": 0.7321, "adv_mean": -0.1796887069940567,
        "completion_len_mean": 18985.8778, "completion_len_max": 32768.0, "logprob_mismatch": 0.015495740808546543,
        "grad_norm": 0.06, "step_time_s": 4985.7, "generation_time_s": 3259.97, "grad_max": 0.07, "skipped": 0.0,
        "ratio_max": 2.0, "eval_acc": None}, nan_ok=False)
    # Rollout 2: the grad norm of its three optimizer steps (two of them skipped), and its evaluation.
    assert rows[1]["grad_norm"] == pytest.approx(1.0) and rows[1]["grad_max"] == 1.5 and rows[1]["skipped"] == 2.0
    assert rows[1]["eval_acc"] == pytest.approx(0.41354166666666664)
    assert "'Rollout N data statistics'" in report.step_rule


def test_an_xtuner_rollout_without_its_statistics_is_left_out(tmp_path: Path) -> None:
    lines = xtuner_rollout(1, 0.5, 0.7, [0.1]) + [line for line in xtuner_rollout(2, 0.5, 0.7, [0.1])
                                                     if "data statistics" not in line and not line.startswith("  - ")]
    (tmp_path / "x.log").write_text("\n".join(lines) + "\n")
    report = import_source(tmp_path / "x.log", tmp_path / "run")
    assert report.steps == 1 and report.skipped == {"rollouts without their data statistics block": 1}


# -- OpenRLHF -----------------------------------------------------------------------------------------

def openrlhf_bar(done: int, status: str | None) -> str:
    rate = "?it/s" if done == 0 else "16.66s/it"
    return f"Episode [1/1]:  {done * 100 // 40:>2}%|#         | {done}/40 [00:{done:02d}<10:49, {rate}" + (f", {status}]" if status else "]")


def test_openrlhf_console_log_reads_the_episode_bar_status(tmp_path: Path) -> None:
    statuses = [f"policy_loss={0.01 * i:.3g}, actor_lr=5e-07, ppo_clip_ratio=0.02, ppo_kl=0.001, kl={0.001 * i:.3g}, "
                f"reward={0.1 * i:.3g}, return=0.4, response_length={400 + i}, total_length=600, response_clip_ratio=0.1, "
                f"critic_loss=0.3, values=0.2, critic_lr=9e-06" for i in range(1, 4)]
    segments = [openrlhf_bar(0, None)]
    for i, status in enumerate(statuses):
        segments += [openrlhf_bar(i, status), openrlhf_bar(i + 1, status)]  # set_postfix redraws, then update() again
        segments.append("Train epoch [1/1]: 100%|##########| 4/4 [00:03<00:00,  1.20it/s, act_loss=0.01, reward=0.4]")
    (tmp_path / "openrlhf.log").write_text("\r".join(segments) + "\n")

    report = import_source(tmp_path / "openrlhf.log", tmp_path / "run")
    assert (report.steps, report.first_step, report.last_step, report.algorithm) == (3, 1, 3, "ppo")
    assert "OpenRLHF's Episode progress bar" in report.step_rule
    assert steps_of(tmp_path / "run", "step, reward_mean, kl_mean, loss, clip_fraction, max_len_hit_frac, value_loss")[2] == \
        pytest.approx({"step": 3, "reward_mean": 0.3, "kl_mean": 0.003, "loss": 0.03, "clip_fraction": 0.02,
                       "max_len_hit_frac": 0.1, "value_loss": 0.3})


# -- metric lines: a step counter, then key=value / key: value pairs -------------------------------

def test_a_loops_metric_lines_import_among_bars_messages_and_a_traceback(tmp_path: Path) -> None:
    lines = [
        "Spawning workers...",
        "\rLoading dataset:   0%|          | 0/500 [00:00<?, ? examples/s]\rLoading dataset: 100%|##########| 500/500",
        "  Worker: ({'node': 0/1, 'gpu': 0/4}, 'rank 0/4 ready on cuda:0')",  # a tuple holding a dict: no metrics
        "Run: 500 prompts, 16 prompts/step, 4 steps total",  # a `key: value` line without a step counter
    ]
    for step in range(4):
        lines.append(f"step:{step} | pg_loss={0.1 * step:.4f} | kl_divergence={0.001 * step:.4f} | mean_reward={0.2 + 0.1 * step:.4f}"
                     f" | grad_norm={1.5 + step:.4f} | step_time_seconds={60.0 + step:.2f} | samples_per_sec=4.2 | epoch=0")
        if step == 1:
            lines.append("Checkpoint saved: /ckpt/step_2")
    lines += ["Traceback (most recent call last):", "  File \"train.py\", line 9, in <module>", "ValueError: boom"]
    (tmp_path / "train.log").write_text("\n".join(lines) + "\n")

    assert detect(tmp_path / "train.log") == "console"
    report = import_source(tmp_path / "train.log", tmp_path / "run")
    assert (report.steps, report.first_step, report.last_step) == (4, 0, 3)
    assert "step counter of each metric line" in report.step_rule
    assert steps_of(tmp_path / "run", "step, loss, kl_mean, reward_mean, grad_norm, step_time_s")[3] == pytest.approx(
        {"step": 3, "loss": 0.3, "kl_mean": 0.003, "reward_mean": 0.5, "grad_norm": 4.5, "step_time_s": 63.0})
    assert report.unmapped == ["samples_per_sec", "epoch"]


@pytest.mark.parametrize("line, step", [
    ("step:7 | loss=0.5 | reward=0.25", 7),
    ("step=7, loss=0.5, reward=0.25", 7),
    ("Step 7: loss: 0.5, reward: 0.25", 7),
    ("2026-01-02 10:00:00,123 INFO train: [Step 7/200] loss=0.5 reward=0.25", 7),  # a prefix, a count of a total
    ("INFO:__main__:iter 7 loss=0.5; reward=0.25", 7),
    ("Epoch 1 | Iteration 7 | loss: 0.5 | reward: 0.25", 7),
    ("global_step=7 loss=np.float64(0.5) reward=0.25 note=ok", 7),
])
def test_metric_lines_in_the_spellings_loops_print(tmp_path: Path, line: str, step: int) -> None:
    (tmp_path / "out.txt").write_text("starting\n" + line + "\n")
    report = import_source(tmp_path / "out.txt", tmp_path / "run")
    assert steps_of(tmp_path / "run", "step, loss, reward_mean") == [{"step": step, "loss": 0.5, "reward_mean": 0.25}]
    assert report.unmapped == []


def test_verl_lines_keep_their_prefix_out_of_the_metrics(tmp_path: Path) -> None:
    source = tmp_path / "verl.out"
    source.write_text("(TaskRunner pid=4242) step:3 - actor/pg_loss:np.float64(-0.01) - actor/kl_loss:0.002 - "
                      "critic/score/mean:0.7 - timing_s/step:412.5 - val-core/math/acc/mean@4:0.61\n")
    report = import_source(source, tmp_path / "run")
    assert steps_of(tmp_path / "run", "step, loss, kl_mean, reward_mean, step_time_s") == [
        {"step": 3, "loss": -0.01, "kl_mean": 0.002, "reward_mean": 0.7, "step_time_s": 412.5}]
    assert report.unmapped == ["val-core/math/acc/mean@4"]  # ray's (pid=...) prefix is not a metric


def test_lines_that_only_look_like_metric_lines_are_not_read(tmp_path: Path) -> None:
    source = tmp_path / "noise.log"
    source.write_text("\n".join([
        "Namespace(lr=1e-05, step=0, kl_coef=0.1, model='qwen')",  # one number after the counter
        "[INFO] [Rank 0] step=10, skipped=0, lr=[1e-06], mom=[(0.9, 0.95)]",  # DeepSpeed: lists are no numbers
        "Checkpoint saved: /ckpt/step_20",
        "Epoch 1 | Step 5 | loss 0.3 | reward 0.5",  # pairs without = or :
        " 12%|#         | 5/40 [01:23<09:43, step=5, loss=0.1, reward=0.5]",  # a progress bar's postfix
        "step 3 | tokens=12 | workers=4",  # no known metric
    ]) + "\n")
    with pytest.raises(SourceUnreadable, match="unknown format"):
        import_source(source, tmp_path / "run")


# -- rows that are no training step -----------------------------------------------------------------

def test_an_evaluation_before_training_is_not_a_step(tmp_path: Path) -> None:
    rows = [{"iteration": 0, "accuracy": 0.8, "prm_mean": 0.9, "n_scored": 150}]  # evaluation, under bare names
    rows += [{"iteration": i, "loss": 0.01, "mean_reward": 0.5 + i / 10, "std_reward": 0.2, "iter_time_s": 120.0}
             for i in (1, 2)]
    rows += [{"iteration": 3, "loss": 0.01, "mean_reward": 0.8, "std_reward": 0.2, "accuracy": 0.82}]
    (tmp_path / "m.jsonl").write_text("\n".join(json.dumps(r) for r in rows) + "\n")
    report = import_source(tmp_path / "m.jsonl", tmp_path / "run")
    assert (report.steps, report.first_step) == (3, 1)
    assert report.skipped == {"rows before training with no training field (an evaluation before training)": 1}
    assert steps_of(tmp_path / "run", "step, reward_mean, reward_std, step_time_s")[0] == pytest.approx(
        {"step": 1, "reward_mean": 0.6, "reward_std": 0.2, "step_time_s": 120.0})

    # A source no row of which maps a field keeps its rows, as extras.
    (tmp_path / "x.jsonl").write_text("\n".join(json.dumps({"step": s, "my_score": 0.1 * s}) for s in (0, 1)) + "\n")
    assert import_source(tmp_path / "x.jsonl", tmp_path / "x").steps == 2


@pytest.mark.parametrize("evaluation", [
    {"step": 0, "eval_reward": 0.55, "eval_perplexity": 4.5},
    {"step": 0, "test/env/all/reward/total": 0.61, "test/env/all/by_group/frac_mixed": 0.2},
    {"step": 0, "val-core/math/acc/mean@4": 0.7, "val-aux/math/reward/mean@4": 0.7},
])
def test_evaluation_rows_are_left_out_and_their_keys_stay_extras(tmp_path: Path, evaluation: dict[str, Any]) -> None:
    rows = [evaluation, {"step": 1, "train_reward": 0.7, "train_reward_std": 0.38, "train_loss": 0.2, "eval_reward": 0.6,
                         "test/env/all/reward/total": 0.6}]
    (tmp_path / "m.jsonl").write_text("\n".join(json.dumps(r) for r in rows) + "\n")
    report = import_source(tmp_path / "m.jsonl", tmp_path / "run")
    assert (report.steps, report.skipped) == (1, {"eval": 1})
    assert steps_of(tmp_path / "run", "step, reward_mean, reward_std, loss") == [
        {"step": 1, "reward_mean": 0.7, "reward_std": 0.38, "loss": 0.2}]  # train_loss of a step is no totals dict
    assert report.unmapped == ["eval_reward", "test/env/all/reward/total"]


def test_a_follower_leaves_out_the_evaluation_before_training_as_the_import_does(tmp_path: Path) -> None:
    from rlprobe.importers.follow import SourceFollower

    source = tmp_path / "m.jsonl"
    source.write_text(json.dumps({"iteration": 0, "accuracy": 0.8}) + "\n")
    follower = SourceFollower(source, "jsonl")
    assert follower.poll() == []  # no row has mapped a training field yet: it waits
    with open(source, "a") as fh:
        fh.write(json.dumps({"iteration": 1, "mean_reward": 0.5}) + "\n" + json.dumps({"iteration": 2, "mean_reward": 0.6}) + "\n")
    assert [e.step for e in follower.poll()] == [1, 2]
    assert follower.close() == []
    assert follower.parsed.skipped == {"rows before training with no training field (an evaluation before training)": 1}

    lone = tmp_path / "lone.jsonl"
    lone.write_text(json.dumps({"step": 0, "my_score": 0.8}) + "\n")
    follower = SourceFollower(lone, "jsonl")
    assert follower.poll() == [] and [e.step for e in follower.close()] == [0]  # nothing ever trained: kept


def test_a_follower_reads_metric_lines_as_the_import_does(tmp_path: Path) -> None:
    from rlprobe.importers.follow import SourceFollower

    source = tmp_path / "train.log"
    source.write_text("booting\nstep:0 | loss=0.5 | mean_reward=0.1\nstep:1 | loss=0.4 | mean_")
    follower = SourceFollower(source, "console")
    assert [e.step for e in follower.poll()] == [0]
    with open(source, "a") as fh:
        fh.write("reward=0.2\n")
    assert [(e.step, e.mapped.fields) for e in follower.poll()] == [(1, {"loss": 0.4, "reward_mean": 0.2})]


# -- HF console logs: logging_steps from what the log prints --------------------------------------

def trainer_dict(i: int) -> str:
    return "{'loss': 0.01, 'grad_norm': 0.5, 'learning_rate': 1e-06, 'reward': %s, 'epoch': 0.01}" % (0.1 * i)


def bar(n: int, total: int) -> str:
    return f"  {100 * n // total:>3}%|#         | {n}/{total} [00:{n:02d}<00:10,  1.20s/it]"


def console_log(path: Path, dicts: int, every: int, total: int, *, lag: int = 0, end: list[str] | None = None,
                upto: int | None = None) -> Path:
    """A Trainer's stdout and stderr in one file: the bar (stderr) runs `lag` steps ahead of the dicts (stdout).

    The job ran to step `upto` (default: total); stdout is flushed at a normal exit only.
    """
    last = upto or total
    due = [s for s in range(every, last + 1, every)][:dicts]  # the steps the Trainer logged
    out: list[str] = ["Loading checkpoint shards: 100%|##########| 4/4 [00:03<00:00,  1.2it/s]"]
    for step in range(1, last + 1):
        out.append("\r" + bar(step, total))
        out += [trainer_dict(i + 1) for i, s in enumerate(due) if s + lag == step]
    if end:  # a finished job flushes what stdout still held
        out += [trainer_dict(i + 1) for i, s in enumerate(due) if s + lag > last]
        out += end
    path.write_text("\n".join(out) + "\n", encoding="utf-8")
    return path


TOTALS = "{'train_runtime': 900.0, 'train_samples_per_second': 1.0, 'train_steps_per_second': 0.111, 'train_loss': 0.01, 'epoch': 1.0}"


def test_a_finished_run_numbers_its_entries_from_the_final_global_step(tmp_path: Path) -> None:
    source = console_log(tmp_path / "a.log", dicts=20, every=5, total=100, lag=23,
                         end=[TOTALS, "wandb: Run summary:", "wandb:          train/global_step 100"])
    report = import_source(source, tmp_path / "run")
    assert [r["step"] for r in steps_of(tmp_path / "run", "step")] == list(range(5, 101, 5))
    assert "logging_steps=5 inferred" in report.step_rule and "the final global_step" in report.step_rule


def test_a_finished_run_without_a_printed_total_uses_the_progress_bar(tmp_path: Path) -> None:
    report = import_source(console_log(tmp_path / "a.log", dicts=10, every=10, total=100, end=[TOTALS]), tmp_path / "run")
    assert (report.first_step, report.last_step) == (10, 100)
    assert "progress bar's total" in report.step_rule


def test_a_run_cut_short_uses_the_last_count_of_its_progress_bar(tmp_path: Path) -> None:
    # Killed at step 89 of 100; stdout, 7 steps behind the bar, lost the entry of step 85.
    source = console_log(tmp_path / "a.log", dicts=17, every=5, total=100, lag=7, upto=89)
    report = import_source(source, tmp_path / "run")
    assert (report.steps, report.first_step, report.last_step) == (16, 5, 80)
    assert "stopped at step 89 of 100" in report.step_rule


def test_with_nothing_printed_to_go_by_entries_count_from_one(tmp_path: Path) -> None:
    source = tmp_path / "a.log"
    source.write_text("\n".join(trainer_dict(i) for i in range(1, 4)) + "\n")
    report = import_source(source, tmp_path / "run")
    assert (report.first_step, report.last_step) == (1, 3) and "--step-every" in report.step_rule


# -- run-level derivations, end to end -------------------------------------------------------------

def test_a_ppo_run_that_never_emits_eos_gets_eos_rate_zero(tmp_path: Path) -> None:
    rows = [{"step": s, "objective/scores": -0.1, "loss/value_avg": 9.0, "val/num_eos_tokens": 0} for s in range(1, 4)]
    (tmp_path / "t.json").write_text(json.dumps(rows))
    report = import_source(tmp_path / "t.json", tmp_path / "run")
    assert report.derived == ["eos_rate"] and report.algorithm == "ppo"
    assert "value function" in report.algorithm_rule
    assert [r["eos_rate"] for r in steps_of(tmp_path / "run", "eos_rate")] == [0.0, 0.0, 0.0]
    assert rlprobe.load_manifest(tmp_path / "run").algorithm == "ppo"


def test_an_explicit_algorithm_wins_over_the_inferred_one(tmp_path: Path) -> None:
    (tmp_path / "t.jsonl").write_text(json.dumps({"step": 1, "reward": 0.2, "frac_reward_zero_std": 0.5}) + "\n")
    report = import_source(tmp_path / "t.jsonl", tmp_path / "run", algorithm="rloo")
    assert (report.algorithm, report.algorithm_rule) == ("rloo", "")


def test_an_xtuner_log_with_no_rollout_is_refused(tmp_path: Path) -> None:
    source = tmp_path / "x.txt"
    source.write_text("[XTuner][RANK 0][2025-12-26 18:30:27][INFO][RLTrainer] Rollout 1 data statistics:\n")
    with pytest.raises(SourceUnreadable, match="no metric dicts found as xtuner"):
        import_source(source, tmp_path / "run")
    assert not (tmp_path / "run").exists()


def test_degenerate_groups_of_two_binary_rewards_from_an_older_trl_log(tmp_path: Path) -> None:
    """TRL < 0.18 logs no frac_reward_zero_std; told the groups hold 2 binary rewards, the import derives it."""
    stds = [0.0, 0.7071067811865476 / 4, 0.7071067811865476 / 2, 0.7071067811865476]  # 0, 1, 2, 4 mixed groups of 4
    source = tmp_path / "train.log"
    source.write_text("logging_steps=1\n" + "\n".join(
        repr({"loss": 0.01, "reward": 0.5, "reward_std": s, "rewards/correct": 0.5, "completion_length": 100.0, "kl": 0.01})
        for s in stds) + "\n")
    result = CliRunner().invoke(cli, ["import", str(source), str(tmp_path / "run"), "--group-size", "2", "--binary-rewards", "--json"])
    report = json.loads(result.stdout)
    assert report["derived"] == ["zero_variance_group_frac"] and report["algorithm"] == "grpo"
    assert [r["zero_variance_group_frac"] for r in steps_of(tmp_path / "run", "zero_variance_group_frac")] == \
        pytest.approx([1.0, 0.75, 0.5, 0.0])
    plain = import_source(source, tmp_path / "plain")  # not told: nothing derived
    assert plain.derived == [] and "zero_variance_group_frac" not in plain.fields
