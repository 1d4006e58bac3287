"""The policy detectors on synthetic and real runs: KL_BLOWUP, ENTROPY_COLLAPSE, ENTROPY_BLOWUP,
REF_POLICY_DRIFT_ASYMMETRY.

Each pathology is caught near its true onset and ranked first among the warnings of the whole
catalog; the healthy families (with their traps: slow entropy decline, slow KL growth, warm-up
transients, ...) stay quiet; a run that did not log the inputs lists the detector as skipped.
Seeds are from the train range (< 100,000), like the benchmark's tuning split.
"""

from __future__ import annotations

import ast
import random
import re
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pytest

from rlprobe.doctor.engine import diagnose_tables
from rlprobe.doctor.findings import Diagnosis, Finding
from rlprobe.doctor.registry import all_detectors
from rlprobe.record.sampling import SamplingConfig, select
from rlprobe.synth import HEALTHY_FAMILIES, make_run
from shared_data import REALDATA  # ../shared, found from a worktree too

MINE = ("KL_BLOWUP", "ENTROPY_COLLAPSE", "ENTROPY_BLOWUP", "REF_POLICY_DRIFT_ASYMMETRY")
ONLY_MINE = {k: {"enabled": False} for k in all_detectors() if k not in MINE}


def tables(kind: str, n_steps: int, seed: int, samples: bool = False, drop: tuple[str, ...] = ()) -> tuple[pa.Table, pa.Table | None, Any]:
    """A synthetic run as the steps (and samples) views show it (benchmarks/detectors.py's to_tables)."""
    run = make_run(kind, n_steps=n_steps, seed=seed)
    n = len(run.steps)
    cols: dict[str, pa.Array] = {"run_id": pa.array(["run"] * n, pa.string()), "step": pa.array(run.steps, pa.int64())}
    for name, values in run.series.items():
        if name not in drop:
            cols[name] = pa.array(np.asarray(values, dtype=float), pa.float64(), mask=~np.asarray(run.logged(name), dtype=bool))
    for name, values in run.components.items():
        cols[f"reward_component.{name}"] = pa.array(np.asarray(values, dtype=float), pa.float64())
    if run.kl_positional is not None and "kl_positional" not in drop:
        cols["kl_positional"] = pa.array([list(map(float, row)) for row in run.kl_positional], pa.list_(pa.float64()))
    rows: list[dict[str, Any]] = []
    if samples:
        rng = random.Random(seed)
        for step in run.steps[:: max(1, n // 200)]:
            batch = run.samples(int(step))
            for i, reason in select(batch, SamplingConfig(), rng):
                s = dict(batch[i])
                s.pop("reward_components", None)
                s.update(run_id="run", step=int(step), rank=0, sample_id=f"{step}-{i}", capture_reason=reason)
                rows.append(s)
    return pa.table(cols), (pa.Table.from_pylist(rows) if rows else None), run.truth


def diagnose(kind: str, n_steps: int, seed: int, config: dict[str, Any] | None = None, **kw: Any) -> tuple[Diagnosis, Any]:
    steps, samples, truth = tables(kind, n_steps, seed, **kw)
    return diagnose_tables(steps, samples, config)[0], truth


def alarms(d: Diagnosis) -> list[Finding]:
    return [f for f in d.findings if f.severity != "info"]


def finding(d: Diagnosis, sig: str) -> Finding | None:
    return next((f for f in d.findings if f.signature_id == sig), None)


# -- pathologies: caught, near the onset, ranked first ----------------------------------------


@pytest.mark.parametrize("sig, n_steps, seed", [
    ("KL_BLOWUP", 150, 2),  # exponential blow-up in a short run
    ("KL_BLOWUP", 3000, 3),  # a jump
    ("ENTROPY_COLLAPSE", 150, 1),
    ("ENTROPY_COLLAPSE", 3000, 2),
    ("ENTROPY_BLOWUP", 150, 0),
    ("ENTROPY_BLOWUP", 3000, 1),
    ("REF_POLICY_DRIFT_ASYMMETRY", 150, 0),
    ("REF_POLICY_DRIFT_ASYMMETRY", 3000, 0),
])
def test_pathology_is_caught_near_its_onset_and_ranked_first(sig: str, n_steps: int, seed: int) -> None:
    d, truth = diagnose(sig, n_steps, seed, samples=sig == "REF_POLICY_DRIFT_ASYMMETRY")
    top = alarms(d)
    assert top and top[0].signature_id == sig, [(f.signature_id, f.severity, f.confidence) for f in top]
    f = top[0]
    assert abs(f.first_step - truth.onset_step) <= max(15, 0.03 * n_steps), (f.first_step, truth.onset_step)
    assert f.evidence and f.suggested_actions and f.explanation
    assert 0.5 <= f.confidence <= 0.99


def test_kl_blowup_evidence_names_the_break_from_trend() -> None:
    d, truth = diagnose("KL_BLOWUP", 3000, 3, config=ONLY_MINE)
    f = finding(d, "KL_BLOWUP")
    assert f is not None and f.severity == "critical"
    assert f.evidence["peak_excess_over_trend"] > 6
    assert f.evidence["kl_mean_peak"] > 5 * f.evidence["kl_mean_baseline"]


def test_ref_policy_drift_names_the_bucket_and_links_samples() -> None:
    d, truth = diagnose("REF_POLICY_DRIFT_ASYMMETRY", 3000, 0, config=ONLY_MINE, samples=True)
    f = finding(d, "REF_POLICY_DRIFT_ASYMMETRY")
    assert f is not None
    assert f.evidence["dominant_bucket"] in truth.params["buckets"]
    assert f.evidence["top2_share_peak"] >= 0.5 > f.evidence["top2_share_baseline"]
    assert f.links_to_samples


def test_kl_jump_that_comes_with_an_entropy_blowup_is_only_a_symptom() -> None:
    d, truth = diagnose("ENTROPY_BLOWUP", 800, 2)
    kl = finding(d, "KL_BLOWUP")
    assert finding(d, "ENTROPY_BLOWUP").severity == "critical"
    assert kl is None or (kl.explained_by == "ENTROPY_BLOWUP" and "see ENTROPY_BLOWUP" in kl.explanation)
    assert d.findings[0].signature_id == "ENTROPY_BLOWUP"


# -- healthy runs stay quiet ------------------------------------------------------------------


@pytest.mark.parametrize("family", list(HEALTHY_FAMILIES))
def test_healthy_family_stays_quiet(family: str) -> None:
    for seed, n_steps in ((11, 400), (23, 2500)):
        d, _ = diagnose(f"healthy:{family}", n_steps, seed, config=ONLY_MINE)
        loud = [(f.signature_id, f.severity, f.first_step) for f in alarms(d)]
        assert not loud, f"healthy:{family} seed {seed}: {loud}"


# -- edge cases -------------------------------------------------------------------------------


def test_missing_inputs_are_skipped_with_a_reason() -> None:
    d, _ = diagnose("healthy:sparse_logging", 300, 5, drop=("kl_mean", "kl_max", "entropy_mean", "kl_positional"))
    skipped = {s.signature_id: s.reason for s in d.skipped}
    assert "entropy_mean" in skipped["ENTROPY_COLLAPSE"] and "entropy_mean" in skipped["ENTROPY_BLOWUP"]
    assert "kl_mean" in skipped["KL_BLOWUP"]
    assert "kl_positional" in skipped["REF_POLICY_DRIFT_ASYMMETRY"]
    assert not any(f.signature_id in MINE for f in d.findings)


def test_a_very_short_run_is_diagnosed_without_errors() -> None:
    d, _ = diagnose("ENTROPY_BLOWUP", 12, 0)
    assert not [s for s in d.skipped if s.reason.startswith("detector error")]
    assert not [f for f in alarms(d) if f.signature_id in MINE and f.signature_id != "ENTROPY_BLOWUP"]


def test_thresholds_can_be_overridden_from_the_doctor_config() -> None:
    strict = {**ONLY_MINE, "KL_BLOWUP": {"excess_warn": 1000.0, "excess_critical": 2000.0}}
    d, _ = diagnose("KL_BLOWUP", 150, 2, config=strict)
    assert finding(d, "KL_BLOWUP") is None


# -- the real logs ----------------------------------------------------------------------------


_REAL_FIELDS = {
    "entropy": "entropy_mean", "reward": "reward_mean", "reward_std": "reward_std", "loss": "loss", "grad_norm": "grad_norm",
    "completions/clipped_ratio": "truncation_rate", "completions/mean_length": "completion_len_mean",
    "completions/max_length": "completion_len_max", "frac_reward_zero_std": "zero_variance_group_frac",
    "step_time": "step_time_s", "clip_ratio/region_mean": "clip_fraction", "learning_rate": "lr",
}


def real_log(name: str) -> pa.Table:
    """A TRL console log (one dict per logging step, every 5 steps) as a steps table."""
    path = REALDATA / name
    if not path.exists():
        pytest.skip(f"{path} not available")
    rows = [ast.literal_eval(m) for m in re.findall(r"^\{'loss'.*\}$", path.read_text(), flags=re.M)]
    cols: dict[str, pa.Array] = {"run_id": pa.array(["real"] * len(rows)), "step": pa.array([5 * (i + 1) for i in range(len(rows))], pa.int64())}
    for key, field in _REAL_FIELDS.items():
        cols[field] = pa.array([float(r[key]) if key in r else None for r in rows], pa.float64())
    return pa.table(cols)


def test_real_collapse_log_is_an_entropy_blowup_from_step_25() -> None:
    d = diagnose_tables(real_log("grpo_qwen25_7b_gsm8k_lr1e4_collapse_seed43.log"))[0]
    f = finding(d, "ENTROPY_BLOWUP")
    assert f is not None and f.severity == "critical" and f.first_step == 25
    assert f.evidence["peak_ratio_to_before"] > 10


def test_real_healthy_log_is_quiet() -> None:
    d = diagnose_tables(real_log("grpo_qwen25_7b_gsm8k_lr1e4_healthy_seed42.log"))[0]
    assert not [f for f in alarms(d) if f.signature_id in MINE]


def _ramp_run(entropy: np.ndarray) -> pa.Table:
    n = len(entropy)
    rng = np.random.default_rng(3)
    return pa.table({"run_id": ["r"] * n, "step": np.arange(n, dtype=np.int64), "entropy_mean": entropy,
                     "reward_mean": 0.4 + rng.normal(0, 0.03, n), "kl_mean": np.linspace(0.0, 0.03, n)})


def test_an_entropy_blowup_that_ramps_up_over_a_few_dozen_steps_is_one_climb() -> None:
    """Entropy 0.6 -> 5 over ~30 steps of 300: the segmentation cuts the ramp into stages each
    below 2.5x; the climb is one jump, counted from the level before the first stage."""
    steps = np.arange(300)
    rng = np.random.default_rng(0)
    entropy = 0.6 + 4.5 / (1 + np.exp(-(steps - 70) / 6)) + rng.normal(0, 0.02, 300)
    f = finding(diagnose_tables(_ramp_run(entropy))[0], "ENTROPY_BLOWUP")
    assert f is not None and f.severity == "critical" and 50 <= f.first_step <= 70
    assert 0.55 < f.evidence["entropy_before"] < 0.65 and f.evidence["entropy_after"] > 4.5
    assert "8." in f.explanation  # "... (8.5x the level before ...)": the whole climb


def test_entropy_rising_slowly_in_stages_over_the_run_is_not_a_blowup() -> None:
    steps = np.arange(600)
    rng = np.random.default_rng(1)
    entropy = np.exp(np.log(0.3) + np.log(3.0) * np.floor(steps / 120) / 4) + rng.normal(0, 0.005, 600)  # 0.3 -> 0.9 in 5 steps of 120
    assert finding(diagnose_tables(_ramp_run(entropy))[0], "ENTROPY_BLOWUP") is None


def test_an_entropy_collapse_is_judged_against_its_step_to_step_noise_too() -> None:
    """Entropy noisy from step to step falls 0.21 -> 0.017 over 457 steps: against the wide
    spread of its baseline window the fall is under 3 robust z, against its own point-to-point
    noise (in log) it is far beyond it. Before, no finding at all."""
    import sys

    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))
    from detectors import setup_of, to_tables

    run = make_run("ENTROPY_COLLAPSE", n_steps=457, seed=13, **setup_of("ENTROPY_COLLAPSE", 13, False))
    steps, samples = to_tables(run, "r")
    f = finding(diagnose_tables(steps, samples)[0], "ENTROPY_COLLAPSE")
    assert f is not None and f.first_step < 0.5 * 457  # found while the run still had most of its steps to go


def test_an_entropy_collapse_inside_the_early_window_is_judged_against_the_level_before_it() -> None:
    """Entropy holds 0.13 for the first 9% of a 3,000-step run, then falls to 0.015 and stays:
    the early window (5-20% of the run) is mostly after the fall, so against it nothing moved.
    Against the level it held before the fall, entropy lost nine tenths of it."""
    n = 3000
    rng = np.random.default_rng(5)
    steps = np.arange(n)
    entropy = 0.015 + 0.115 / (1 + np.exp((steps - 280) / 8)) + rng.normal(0, 0.0015, n)
    f = finding(diagnose_tables(_ramp_run(np.abs(entropy)))[0], "ENTROPY_COLLAPSE")
    assert f is not None and f.severity in ("warn", "critical")
    assert 260 <= f.first_step <= 320
    assert "the level it held before the fall" in f.explanation
    assert 0.12 < f.evidence["entropy_baseline"] < 0.14



def test_a_kl_jump_in_the_first_eighth_of_the_run_is_a_blowup_from_the_jump() -> None:
    """KL grows like the step (0.002 -> 0.018 over 47 steps), jumps ninefold at step 55 and keeps
    climbing to ~6 nats by step 457. The jump sits inside the first third of the run, whose level
    the trend is settled against; the trend before it is still trusted over its 40-odd points."""
    n = 457
    steps = np.arange(1, n + 1)
    rng = np.random.default_rng(9)
    kl = np.where(steps < 55, 0.00038 * steps, 0.16 * (steps / 55.0) ** 1.8) * np.exp(rng.normal(0, 0.15, n))
    t = pa.table({"run_id": ["r"] * n, "step": steps.astype(np.int64), "kl_mean": kl,
                  "entropy_mean": 0.35 + rng.normal(0, 0.02, n), "reward_mean": 0.5 + rng.normal(0, 0.03, n)})
    f = finding(diagnose_tables(t)[0], "KL_BLOWUP")
    assert f is not None and f.severity == "critical" and 50 <= f.first_step <= 60
