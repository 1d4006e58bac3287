"""diff_runs and `rlprobe diff`: what changed in the config, where each metric first diverged,
which prompts are rewarded differently.

Most pairs are recorded here with rlprobe.Recorder from a small numpy model of a run: the same
trends in both runs, each with its own noise (as two seeds of one recipe), and in run B a KL
that takes off at a known step. The synthetic runs of rlprobe.synth are used where their truth
file says what to expect.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from click.testing import CliRunner, Result

from rlprobe import Recorder
from rlprobe.cli import cli
from rlprobe.diff import BadDiffArgument, RunDiff, config_delta, diff_runs
from rlprobe.diff.stats import first_departure
from rlprobe.synth import read_truth, write_run

from conftest import crashed_run, empty_run  # noqa: F401  (fixtures)

CONFIG = {"learning_rate": 1e-6, "beta": 0.04, "generation": {"temperature": 1.0, "top_p": 1.0}, "reward_funcs": ["correct"]}


def invoke(*args: Any) -> Result:
    return CliRunner().invoke(cli, [str(a) for a in args], catch_exceptions=False)


def record(run_dir: Path, *, seed: int, steps: int = 300, blowup_at: int | None = None, config: dict | None = None,
           metrics: tuple[str, ...] = ("reward_mean", "kl_mean", "entropy_mean", "loss"), first_step: int = 0,
           prompts: dict[str, float] | None = None, close: bool = True) -> Recorder:
    """A GRPO-like run: reward rises, entropy falls, KL grows slowly, each with noise from `seed`.
    With blowup_at, KL grows exponentially from that step on. prompts: prompt text -> reward of
    every sample logged for it (one sample per prompt every step)."""
    rng = np.random.default_rng(seed)
    rec = Recorder(run_dir, algorithm="grpo", trainer_config=config if config is not None else CONFIG,
                   capture_env=False, install_handlers=False)
    for step in range(first_step, first_step + steps):
        x = step / 300
        values = {
            "reward_mean": 0.2 + 0.5 * x + 0.03 * rng.standard_normal(),
            "kl_mean": (0.002 + 0.01 * x) * (1 + 0.1 * rng.standard_normal()),
            "entropy_mean": 2.0 - 0.8 * x + 0.02 * rng.standard_normal(),
            "loss": 0.05 * rng.standard_normal(),
            "grad_norm": 1.0 + 0.1 * rng.standard_normal(),
        }
        if blowup_at is not None and step >= blowup_at:
            values["kl_mean"] *= np.exp((step - blowup_at) / 20)
        rec.log_step(step, **{k: float(v) for k, v in values.items() if k in metrics})
        if prompts:
            rec.log_samples(step, [{"prompt_text": p, "completion_text": "...", "reward_total": r}
                                   for p, r in prompts.items()], select=False)
    if close:
        rec.close()
    else:
        assert rec.flush()
    return rec


# -- divergence ------------------------------------------------------------------------------------

def test_a_kl_blowup_is_found_where_it_starts_and_nothing_else_diverges(tmp_path: Path) -> None:
    record(tmp_path / "a", seed=1)
    record(tmp_path / "b", seed=2, blowup_at=150)
    d = diff_runs(tmp_path / "a", tmp_path / "b")
    kl = d.divergence("kl_mean")
    assert kl is not None and kl.direction == "b_higher"
    assert 150 <= kl.first_step <= 170, kl
    assert [v.metric for v in d.divergences] == ["kl_mean"]  # two seeds of one recipe: noise is not divergence
    assert sorted(d.unchanged) == ["entropy_mean", "loss", "reward_mean"] and d.apart_from_start == []
    assert d.first_divergence == kl and kl.peak_step >= 290 and kl.peak_z > kl.z
    assert kl.baseline_steps == (0, 49) and kl.overlap == 300


def test_z_thresh_and_sustain_make_the_test_stricter(tmp_path: Path) -> None:
    record(tmp_path / "a", seed=1)
    record(tmp_path / "b", seed=2, blowup_at=150)
    default = diff_runs(tmp_path / "a", tmp_path / "b").divergence("kl_mean")
    strict = diff_runs(tmp_path / "a", tmp_path / "b", z_thresh=40.0, sustain=20).divergence("kl_mean")
    assert default is not None and strict is not None
    assert strict.first_step > default.first_step
    assert diff_runs(tmp_path / "a", tmp_path / "b", z_thresh=1e6).divergences == []


def test_identical_runs_do_not_diverge(tmp_path: Path) -> None:
    record(tmp_path / "a", seed=7, prompts={"p1": 1.0, "p2": 0.0})
    record(tmp_path / "b", seed=7, prompts={"p1": 1.0, "p2": 0.0})
    d = diff_runs(tmp_path / "a", tmp_path / "b")
    assert d.divergences == [] and d.config_delta == [] and d.only_in_a == d.only_in_b == []
    assert sorted(d.unchanged) == ["entropy_mean", "kl_mean", "loss", "reward_mean"]
    assert d.overlap_steps == 300 and d.shared_prompts == 2 and {g.gap for g in d.prompt_gaps} == {0.0}


def test_a_single_spike_is_not_a_divergence() -> None:
    a = np.zeros(100)
    b = np.random.default_rng(0).normal(0.0, 0.01, 100)
    b[60] = 5.0                       # one bad batch
    assert first_departure(a, b, 4.0, 5).index is None
    b[60:65] = 5.0                    # five in a row: sustained
    assert first_departure(a, b, 4.0, 5).index == 60
    b[62] = -5.0                      # out on both sides is not one sustained departure
    assert first_departure(a, b, 4.0, 5).index is None


def test_healthy_vs_pathological_synth_run_peaks_after_the_true_onset(tmp_path: Path) -> None:
    """rlprobe.synth draws each kind of run (model, config, noise) from its own stream, so a healthy
    and a KL_BLOWUP run of one seed are different runs from step 1: their KLs part early, with
    B's lower. What the diff must still show is the blowup: the largest, B-higher departure of
    kl_mean comes after the onset in synth_truth.json."""
    write_run(tmp_path / "healthy", "healthy", n_steps=300, seed=3)
    write_run(tmp_path / "kl", "KL_BLOWUP", n_steps=300, seed=3)
    onset = read_truth(tmp_path / "kl")["onset_step"]
    d = diff_runs(tmp_path / "healthy", tmp_path / "kl")
    kl = d.divergence("kl_mean")
    assert kl is not None and kl.peak_z > 10 * d.z_thresh
    assert kl.peak_step > onset
    assert d.config_delta and any(c.key == "beta" for c in d.config_delta)


# -- alignment: lengths, metric sets, cadences -----------------------------------------------------

def test_runs_of_different_lengths_and_metric_sets(tmp_path: Path) -> None:
    record(tmp_path / "a", seed=1, steps=100, metrics=("reward_mean", "kl_mean", "loss"))
    record(tmp_path / "b", seed=2, steps=60, first_step=20, metrics=("reward_mean", "kl_mean", "grad_norm"))
    d = diff_runs(tmp_path / "a", tmp_path / "b")
    assert (d.overlap_steps, d.overlap_from, d.overlap_to) == (60, 20, 79)
    assert (d.a.steps, d.b.steps, d.b.first_step) == (100, 60, 20)
    assert d.only_in_a == ["loss"] and d.only_in_b == ["grad_norm"]
    assert sorted(d.unchanged + [v.metric for v in d.divergences]) == ["kl_mean", "reward_mean"]


def test_a_run_without_steps_yet_has_nothing_in_common(tmp_path: Path, empty_run: Path) -> None:  # noqa: F811
    record(tmp_path / "a", seed=1, steps=20)
    d = diff_runs(tmp_path / "a", empty_run)
    assert d.overlap_steps == 0 and d.overlap_from is None and d.divergences == []
    assert d.only_in_a == ["entropy_mean", "kl_mean", "loss", "reward_mean"] and d.only_in_b == []


def test_too_few_common_steps_cannot_be_judged(tmp_path: Path) -> None:
    record(tmp_path / "a", seed=1, steps=50)
    record(tmp_path / "b", seed=2, steps=50, first_step=45)  # 5 common steps
    d = diff_runs(tmp_path / "a", tmp_path / "b")
    assert d.overlap_steps == 5 and d.divergences == [] and d.unchanged == []
    assert sorted(d.too_short) == ["entropy_mean", "kl_mean", "loss", "reward_mean"]


# -- config delta, prompt gaps ---------------------------------------------------------------------

def test_config_delta_lists_only_differences_flattened() -> None:
    a = {"learning_rate": 1e-6, "beta": 0.04, "steps": 100, "generation": {"temperature": 1.0, "top_p": 1.0}, "tags": ["x"]}
    b = {"learning_rate": 1e-5, "beta": 0.04, "steps": 100.0, "generation": {"temperature": 0.7, "top_p": 1.0},
         "tags": ["x"], "seed": 3}
    delta = {c.key: c for c in config_delta(a, b)}
    assert sorted(delta) == ["generation.temperature", "learning_rate", "seed"]  # 100 == 100.0, lists equal
    assert (delta["generation.temperature"].a, delta["generation.temperature"].b) == (1.0, 0.7)
    assert delta["seed"].only_in == "b" and delta["seed"].a is None and delta["learning_rate"].only_in is None


def test_a_gap_there_from_the_start_is_an_offset_not_a_divergence(tmp_path: Path) -> None:
    for name, lr in (("a", 1e-6), ("b", 1e-5)):
        with Recorder(tmp_path / name, capture_env=False, install_handlers=False) as rec:
            for step in range(100):
                rec.log_step(step, lr=lr, reward_min=0.0 if step < 60 or name == "a" else 0.25)
    d = diff_runs(tmp_path / "a", tmp_path / "b")
    assert d.apart_from_start == ["lr"] and d.unchanged == ["lr"]
    rmin = d.divergence("reward_min")  # constant 0 in both at first: any sustained change diverges
    assert rmin is not None and rmin.first_step == 60 and np.isfinite(rmin.z) and rmin.z < 1e4


def test_config_delta_of_two_recordings(tmp_path: Path) -> None:
    record(tmp_path / "a", seed=1, steps=20)
    record(tmp_path / "b", seed=1, steps=20, config={**CONFIG, "beta": 0.0, "generation": {"temperature": 0.7, "top_p": 1.0}})
    d = diff_runs(tmp_path / "a", tmp_path / "b")
    assert [(c.key, c.a, c.b) for c in d.config_delta] == [("beta", 0.04, 0.0), ("generation.temperature", 1.0, 0.7)]


def test_prompt_gaps_are_ranked_by_size_and_only_shared_prompts_count(tmp_path: Path) -> None:
    record(tmp_path / "a", seed=1, steps=20, prompts={"same": 0.5, "worse in b": 1.0, "better in b": 0.0, "only a": 1.0})
    record(tmp_path / "b", seed=1, steps=20, prompts={"same": 0.5, "worse in b": 0.25, "better in b": 0.5, "only b": 0.0})
    d = diff_runs(tmp_path / "a", tmp_path / "b")
    assert [(g.prompt_text, g.gap) for g in d.prompt_gaps] == [("worse in b", -0.75), ("better in b", 0.5), ("same", 0.0)]
    assert d.shared_prompts == 3 and d.prompt_gaps[0].n_a == d.prompt_gaps[0].n_b == 20
    assert len(diff_runs(tmp_path / "a", tmp_path / "b", max_prompt_gaps=1).prompt_gaps) == 1


# -- live, crashed, imported -----------------------------------------------------------------------

def test_a_live_run_against_a_crashed_run(tmp_path: Path, crashed_run: Path) -> None:  # noqa: F811
    rec = record(tmp_path / "live", seed=1, steps=30, close=False)
    try:
        d = diff_runs(tmp_path / "live", crashed_run)
    finally:
        rec.close()
    assert (d.a.status, d.b.status) == ("live", "crashed")
    assert d.overlap_steps == 6 and sorted(d.too_short) == ["entropy_mean", "kl_mean", "loss", "reward_mean"]


def test_an_imported_trainer_state_against_a_recording(tmp_path: Path) -> None:
    record(tmp_path / "rec", seed=1, steps=60)
    history = [{"step": s, "loss": 0.0, "reward": 0.2 + 0.5 * s / 300, "kl": 0.002} for s in range(1, 61)]
    source = tmp_path / "out" / "trainer_state.json"
    source.parent.mkdir()
    source.write_text(json.dumps({"global_step": 60, "logging_steps": 1, "log_history": history}))
    d = diff_runs(source, tmp_path / "rec")
    assert d.a.imported and d.a.run_dir == str(source) and d.overlap_steps == 59
    assert "entropy_mean" in d.only_in_b and "reward_mean" in d.unchanged + [v.metric for v in d.divergences]
    result = invoke("diff", source, tmp_path / "rec", "--json")
    assert result.exit_code == 0 and "imported trainer_state" in result.stderr
    assert RunDiff.model_validate(json.loads(result.stdout)).a.run_dir == str(source)


# -- the CLI ---------------------------------------------------------------------------------------

def test_cli_diff_text_and_json(tmp_path: Path) -> None:
    record(tmp_path / "a", seed=1, prompts={"q": 1.0})
    record(tmp_path / "b", seed=2, blowup_at=150, config={**CONFIG, "beta": 0.0}, prompts={"q": 0.0})
    text = invoke("diff", tmp_path / "a", tmp_path / "b")
    assert text.exit_code == 0 and text.stderr == ""
    assert "config: 1 key differ" in text.stdout and "kl_mean" in text.stdout and "prompt gaps (1 prompts" in text.stdout
    data = json.loads(invoke("diff", tmp_path / "a", tmp_path / "b", "--json", "--sustain", "3").stdout)
    assert data["sustain"] == 3 and data["divergences"][0]["metric"] == "kl_mean"
    assert data["prompt_gaps"] == [json.loads(g.model_dump_json()) for g in diff_runs(tmp_path / "a", tmp_path / "b").prompt_gaps]


@pytest.mark.parametrize("args, needle", [
    (["--sustain", "0"], "--sustain"),
    (["--z-thresh", "-1"], "--z-thresh"),
    (["--z-thresh", "abc"], "--z-thresh"),
    (["--max-prompts", "-2"], "--max-prompts"),
])
def test_cli_bad_arguments_are_one_line_and_exit_2(tmp_path: Path, args: list[str], needle: str) -> None:
    record(tmp_path / "a", seed=1, steps=12)
    result = invoke("diff", tmp_path / "a", tmp_path / "a", *args)
    lines = result.stderr.strip().splitlines()
    assert result.exit_code == 2 and len(lines) == 1 and needle in lines[0], result.stderr
    missing = invoke("diff", tmp_path / "a", tmp_path / "nope")
    assert missing.exit_code == 2 and "no such file" in missing.stderr and len(missing.stderr.strip().splitlines()) == 1


def test_library_refuses_bad_thresholds(tmp_path: Path) -> None:
    record(tmp_path / "a", seed=1, steps=12)
    with pytest.raises(BadDiffArgument):
        diff_runs(tmp_path / "a", tmp_path / "a", sustain=0)
    with pytest.raises(BadDiffArgument):
        diff_runs(tmp_path / "a", tmp_path / "a", z_thresh=float("nan"))
