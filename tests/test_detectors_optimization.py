"""The optimization detectors, by example: synthetic failures they must catch, ranked first and
dated near the true onset, healthy runs they must leave alone, and the edges (missing inputs,
very short runs, a symptom reported under its root cause, doctor.toml overrides).

Every run here is built by rlprobe.synth with a train-split seed (< 100,000) and diagnosed in
memory as benchmarks/detectors.py does it, without the per-sample text (these detectors read
step series only); all runs of the module share one doctor pass, so the file stays fast.

Ranking is checked among this module's signatures, with the other modules' detectors disabled
(they are tested in their own files): whether another module's detector outranks the true
signature is what benchmarks/detectors.py measures across the whole catalog (`outranked_by`).
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pyarrow as pa
import pytest

from rlprobe.doctor.engine import diagnose_tables
from rlprobe.doctor.findings import Diagnosis
from rlprobe.doctor.registry import all_detectors
from rlprobe.synth import HEALTHY_FAMILIES, SynthRun, make_run

MINE = ("CLIP_SATURATION", "ADV_COLLAPSE", "VALUE_DIVERGENCE", "GRAD_PATHOLOGY", "STALE_ROLLOUTS", "TRAIN_INFERENCE_MISMATCH")

# (signature, seed, n_steps): a short and a long run of every signature, several seeds so the
# variants (GRAD_PATHOLOGY nan|spikes|growth, STALE_ROLLOUTS rising|jump, ...) all appear.
PATHOLOGICAL = [
    (sig, seed, n)
    for sig in MINE
    for seed, n in ((0, 150), (1, 150), (3, 150), (0, 3000), (2, 3000))
]
VARIANTS = {
    "ADV_COLLAPSE": ("scaled", "zeroed"),
    "GRAD_PATHOLOGY": ("nan", "spikes", "growth"),
    "STALE_ROLLOUTS": ("rising", "jump"),
    "TRAIN_INFERENCE_MISMATCH": ("drift", "jump"),
}


def first_seed_of(sig: str, variant: str, n: int) -> int:
    """The smallest train seed whose run of sig comes out as this variant (the generator draws it)."""
    return next(seed for seed in range(200) if make_run(sig, n_steps=n, seed=seed).truth.variant == variant)


# and one 400-step run of every variant, found by seed rather than assumed
PATHOLOGICAL += [(sig, first_seed_of(sig, variant, 400), 400) for sig, variants in VARIANTS.items() for variant in variants]
HEALTHY = [(f"healthy:{family}", seed, 400) for family in HEALTHY_FAMILIES for seed in (0, 1)]
ONLY_MINE = {sig: {"enabled": False} for sig in all_detectors() if sig not in MINE}


def steps_table(run: SynthRun, run_id: str) -> pa.Table:
    """A SynthRun's step series as the steps view shows them (benchmarks/detectors.py's to_tables)."""
    n = len(run.steps)
    cols: dict[str, pa.Array] = {"run_id": pa.array([run_id] * n, pa.string()), "step": pa.array(run.steps, pa.int64())}
    for name, values in run.series.items():
        cols[name] = pa.array(np.asarray(values, dtype=float), pa.float64(), mask=~np.asarray(run.logged(name), dtype=bool))
    for name, values in run.components.items():
        cols[f"reward_component.{name}"] = pa.array(np.asarray(values, dtype=float), pa.float64())
    if run.kl_positional is not None:
        cols["kl_positional"] = pa.array([list(map(float, row)) for row in run.kl_positional], pa.list_(pa.float64()))
    return pa.table(cols)


@pytest.fixture(scope="module")
def diagnosed() -> dict[tuple[str, int, int], tuple[Any, Diagnosis]]:
    """Every run of this module, diagnosed in one batch: {(kind, seed, n): (truth, diagnosis)}."""
    steps, truths = [], {}
    for kind, seed, n in PATHOLOGICAL + HEALTHY:
        run = make_run(kind, n_steps=n, seed=seed)
        run_id = f"{kind}|{seed}|{n}"
        steps.append(steps_table(run, run_id))
        truths[run_id] = ((kind, seed, n), run.truth)
    out = {}
    for d in diagnose_tables(pa.concat_tables(steps, promote_options="permissive"), config=ONLY_MINE):
        key, truth = truths[d.run_id]
        out[key] = (truth, d)
    return out


def alarms(d: Diagnosis, only: tuple[str, ...] | None = None) -> list:
    """The warn/critical findings in rank order (of the given signatures only, if given)."""
    return [f for f in d.findings if f.severity in ("warn", "critical") and (only is None or f.signature_id in only)]


@pytest.mark.parametrize("sig, seed, n", PATHOLOGICAL, ids=lambda v: str(v))
def test_each_failure_is_caught_ranked_first_near_its_onset(diagnosed, sig, seed, n):
    truth, d = diagnosed[(sig, seed, n)]
    top = alarms(d, MINE)
    assert top, f"{sig} seed {seed} ({truth.variant}): nothing found"
    assert top[0].signature_id == sig, f"{sig} ({truth.variant}) outranked: {[(f.signature_id, f.severity, f.confidence) for f in top]}"
    finding = top[0]
    onset, length = truth.onset_step, truth.n_steps
    # dated from just before the true onset to at most halfway through what is left of the run
    assert onset - max(5, 0.05 * length) <= finding.first_step <= onset + 0.5 * (length - onset), (truth.variant, onset, finding.first_step)
    assert finding.evidence and finding.suggested_actions and finding.explanation
    assert 0.35 <= finding.confidence <= 0.99


@pytest.mark.parametrize("family, seed, n", HEALTHY, ids=lambda v: str(v))
def test_healthy_runs_raise_no_optimization_alarm(diagnosed, family, seed, n):
    _, d = diagnosed[(family, seed, n)]
    assert [(f.signature_id, f.severity, f.first_step) for f in alarms(d, MINE)] == []


def test_nan_gradients_are_critical_and_dated_to_the_first_bad_step(diagnosed):
    truth, d = diagnosed[("GRAD_PATHOLOGY", first_seed_of("GRAD_PATHOLOGY", "nan", 400), 400)]
    (finding,) = [f for f in d.findings if f.signature_id == "GRAD_PATHOLOGY"]
    assert finding.severity == "critical" and finding.confidence >= 0.7  # HaltPolicy may stop here
    assert finding.first_step == truth.onset_step == finding.evidence["first_nonfinite_step"]
    assert finding.evidence["nonfinite_steps"] >= 3


def test_repeated_spikes_are_told_from_a_healthy_runs_rare_single_spike(diagnosed):
    truth, d = diagnosed[("GRAD_PATHOLOGY", first_seed_of("GRAD_PATHOLOGY", "spikes", 400), 400)]
    (finding,) = [f for f in d.findings if f.signature_id == "GRAD_PATHOLOGY"]
    assert finding.evidence["kinds"] == "spikes" and finding.evidence["grad_spike_events"] >= 3
    for seed in (0, 1):  # noisy_grad: heavy tails and one or two isolated 8-40x spikes
        _, healthy = diagnosed[("healthy:noisy_grad", seed, 400)]
        assert not [f for f in healthy.findings if f.signature_id == "GRAD_PATHOLOGY"]


# -- hand-made runs: the edges ------------------------------------------------------------------


def table(n: int, **series: np.ndarray) -> pa.Table:
    cols: dict[str, Any] = {"run_id": pa.array(["r"] * n), "step": pa.array(np.arange(1, n + 1), pa.int64())}
    cols.update({k: pa.array(np.asarray(v, dtype=float)) for k, v in series.items()})
    return pa.table(cols)


def noisy(n: int, level: float, sd: float, seed: int) -> np.ndarray:
    return level * np.exp(np.random.default_rng(seed).normal(0.0, sd, n))


def test_detectors_without_their_inputs_are_skipped_with_the_reason():
    n = 200
    (d,) = diagnose_tables(table(n, reward_mean=noisy(n, 0.5, 0.05, 1), loss=noisy(n, 0.1, 0.1, 2)))
    skipped = {s.signature_id: s.reason for s in d.skipped}
    assert skipped["STALE_ROLLOUTS"] == "needs batch_age, which this run did not log"
    assert skipped["TRAIN_INFERENCE_MISMATCH"] == "needs logprob_mismatch, which this run did not log"
    assert "clip_fraction, ratio_p95" in skipped["CLIP_SATURATION"] and "logged none" in skipped["CLIP_SATURATION"]
    assert "adv_std" in skipped["ADV_COLLAPSE"] and "value_loss" in skipped["VALUE_DIVERGENCE"]
    assert "GRAD_PATHOLOGY" not in skipped  # the loss is one of its inputs: it ran, and found nothing
    assert not [f for f in d.findings if f.signature_id in MINE]


def test_a_very_short_run_with_one_nan_loss_gets_a_warning_not_a_halt():
    n = 30
    loss = noisy(n, 0.1, 0.1, 3)
    loss[19] = np.nan
    nan_count = np.zeros(n)
    nan_count[19] = 12
    (d,) = diagnose_tables(table(n, loss=loss, nan_count=nan_count, inf_count=np.zeros(n), grad_norm=noisy(n, 0.5, 0.2, 4)))
    (finding,) = [f for f in d.findings if f.signature_id == "GRAD_PATHOLOGY"]
    assert finding.severity == "warn" and finding.first_step == 20
    assert finding.evidence["nonfinite_loss_steps"] == 1


def test_clipping_caused_by_stale_rollouts_is_reported_under_its_cause():
    n, onset = 600, 300
    step = np.arange(n)
    age = np.where(step < onset, 1.0, 7.0) + np.random.default_rng(5).normal(0, 0.1, n)
    clip = np.where(step < onset, 0.05, 0.3) * noisy(n, 1.0, 0.1, 6)
    (d,) = diagnose_tables(table(n, batch_age=age, clip_fraction=clip, reward_mean=noisy(n, 0.5, 0.05, 7)))
    top = alarms(d, MINE)[0]
    assert top.signature_id == "STALE_ROLLOUTS" and abs(top.first_step - onset) <= 10
    assert top.evidence["clip_fraction_during"] > 0.25 and top.evidence["corr_age_clip"] > 0.8
    (clipping,) = [f for f in d.findings if f.signature_id == "CLIP_SATURATION"]
    assert clipping.explained_by == "STALE_ROLLOUTS" and clipping.evidence["explained_by"] == "STALE_ROLLOUTS"
    order = [f.signature_id for f in d.findings]
    assert order.index("STALE_ROLLOUTS") < order.index("CLIP_SATURATION")


def test_growth_of_the_grad_norm_is_not_mistaken_for_a_one_off_burst():
    n = 500
    burst = noisy(n, 1.0, 0.2, 8)
    burst[300:306] *= 15  # a bad batch: a few steps of huge gradients, then back to normal
    growth = noisy(n, 1.0, 0.2, 9) * np.exp(np.clip(np.arange(n) - 250, 0, None) / 60.0)
    (quiet, loud) = diagnose_tables(pa.concat_tables([
        table(n, grad_norm=burst).set_column(0, "run_id", pa.array(["a-burst"] * n)),
        table(n, grad_norm=growth).set_column(0, "run_id", pa.array(["b-growth"] * n)),
    ]))
    assert not [f for f in quiet.findings if f.signature_id == "GRAD_PATHOLOGY"]
    (finding,) = [f for f in loud.findings if f.signature_id == "GRAD_PATHOLOGY"]
    assert finding.severity == "critical" and "growth" in finding.evidence["kinds"]
    assert 250 <= finding.first_step <= 300


def test_doctor_toml_thresholds_apply():
    steps = steps_table(make_run("CLIP_SATURATION", n_steps=400, seed=4), "clip")
    (default,) = diagnose_tables(steps, config=ONLY_MINE)
    assert alarms(default, MINE)[0].signature_id == "CLIP_SATURATION"
    (relaxed,) = diagnose_tables(steps, config={**ONLY_MINE, "CLIP_SATURATION": {"clip_warn": 0.9, "clip_critical": 0.95}})
    assert not [f for f in relaxed.findings if f.signature_id == "CLIP_SATURATION"]


def test_clipping_is_estimated_from_ratio_p95_when_clip_fraction_is_not_logged():
    n, onset = 400, 200
    step = np.arange(n)
    p95 = np.where(step < onset, 1.12, 1.5) * noisy(n, 1.0, 0.01, 10)  # |log r| sd ~0.07, then ~0.25
    (d,) = diagnose_tables(table(n, ratio_p95=p95), config=ONLY_MINE)
    (finding,) = [f for f in d.findings if f.signature_id == "CLIP_SATURATION"]
    assert finding.severity == "warn" and abs(finding.first_step - onset) <= 10
    assert finding.evidence["clip_fraction_source"] == "implied from ratio_p95"
    assert 0.3 < finding.evidence["clip_fraction_during"] < 0.6 and finding.evidence["clip_fraction_before"] < 0.02


def test_an_advantage_collapse_inside_the_early_window_is_judged_against_the_level_before_it():
    """adv_std holds ~0.9 for the first 10% of a 2,000-step run, then falls to ~0.027 while the
    reward keeps its spread: the early window (5-20% of the run) is mostly after the fall, so
    against it nothing moved; against the level it held before, it lost 97% of its scale."""
    n = 2000
    rng = np.random.default_rng(7)
    adv = np.where(np.arange(n) < 200, 0.9, 0.027) * (1 + rng.normal(0, 0.05, n))
    steps = pa.table({
        "run_id": ["r"] * n, "step": np.arange(1, n + 1, dtype=np.int64), "adv_std": adv,
        "reward_std": 0.33 + rng.normal(0, 0.02, n), "reward_mean": 0.45 + rng.normal(0, 0.05, n),
        "zero_variance_group_frac": rng.binomial(16, 0.15, n) / 16,
    })
    (d,) = diagnose_tables(steps)
    f = next((f for f in d.findings if f.signature_id == "ADV_COLLAPSE"), None)
    assert f is not None and f.severity in ("warn", "critical") and 195 <= f.first_step <= 230
    assert "the level it held before the fall" in f.explanation and "kept its variance" in f.explanation
    assert 0.85 < f.evidence["adv_std_baseline"] < 0.95


def test_advantages_that_fall_with_the_rewards_variance_are_not_an_advantage_collapse():
    n = 2000
    rng = np.random.default_rng(8)
    low = np.arange(n) >= 200
    steps = pa.table({
        "run_id": ["r"] * n, "step": np.arange(1, n + 1, dtype=np.int64),
        "adv_std": np.where(low, 0.03, 0.9) * (1 + rng.normal(0, 0.05, n)),
        "reward_std": np.where(low, 0.012, 0.33) * (1 + rng.normal(0, 0.05, n)),
        "reward_mean": 0.45 + rng.normal(0, 0.05, n),
    })
    (d,) = diagnose_tables(steps)
    assert not [f for f in d.findings if f.signature_id == "ADV_COLLAPSE" and f.severity != "info"]
