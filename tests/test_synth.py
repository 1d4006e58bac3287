"""Synthetic runs: deterministic, varied, well-formed, and each failure really shows in its data."""

from __future__ import annotations

import json
from pathlib import Path
import re
import subprocess
import sys

import numpy as np
import pytest
from click.testing import CliRunner

import rlprobe
from rlprobe.cli import cli
from rlprobe.synth import HEALTHY_FAMILIES, PATHOLOGIES, SIGNATURES, make_run, write_run

KINDS = list(SIGNATURES) + [f"healthy:{f}" for f in HEALTHY_FAMILIES]
DELIBERATE_NAN = {"loss", "grad_norm", "grad_norm_post_clip", "weight_update_ratio"}  # GRAD_PATHOLOGY only


def _med(a: np.ndarray) -> float:
    a = a[np.isfinite(a)]
    return float(np.median(a)) if a.size else float("nan")


def noise_tol(run, name: str) -> float:
    """Three standard errors of a 5-step median of the series before the onset (noise-aware slack)."""
    a = run.series[name] if name in run.series else run.components[name]
    a = a[: run.truth.onset_step - 1]
    a = a[np.isfinite(a)]
    sd = 1.4826 * np.median(np.abs(np.diff(a))) / np.sqrt(2) if a.size > 2 else 0.0
    return 3 * sd / np.sqrt(5)


def at_onset(run, name: str) -> float:
    """Median of a series over the few steps around the onset."""
    a = run.series[name] if name in run.series else run.components[name]
    onset = run.truth.onset_step - 1
    return _med(a[max(0, onset - 3) : onset + 3])


def before_after(run, name: str) -> tuple[float, float, float]:
    """Median of a series early in the run, just before the onset, and over the last 15%."""
    a = run.series[name] if name in run.series else run.components[name]
    onset, n = run.truth.onset_step - 1, len(run.steps)
    early = _med(a[: max(5, n // 10)])
    before = _med(a[max(0, onset - max(5, onset // 10)) : onset])
    late = _med(a[int(0.85 * n) :])
    return early, before, late


# -- the catalog ----------------------------------------------------------------------------
def test_catalog_names_every_signature_once():
    assert len(SIGNATURES) == 19 and len(set(SIGNATURES)) == 19
    assert list(PATHOLOGIES) == list(SIGNATURES)
    assert {"steady", "reasoning_growth", "warmup_transient", "noisy_grad", "late_saturation", "easy_task",
            "sparse_logging", "short", "ppo"} <= set(HEALTHY_FAMILIES)


def test_unknown_kind_names_the_valid_ones():
    with pytest.raises(ValueError, match="KL_BLOWUP"):
        make_run("NOT_A_THING")
    with pytest.raises(ValueError, match="steady"):
        make_run("healthy:nope")


# -- determinism and variety ------------------------------------------------------------------
def test_same_seed_same_run():
    a, b = make_run("entropy_collapse", n_steps=300, seed=7), make_run("ENTROPY_COLLAPSE", n_steps=300, seed=7)
    assert a.truth == b.truth
    assert a.series.keys() == b.series.keys()
    for name in a.series:
        np.testing.assert_array_equal(a.series[name], b.series[name])
    assert a.samples(200) == b.samples(200)


def test_healthy_draws_a_family_from_the_seed():
    families = {make_run("healthy", n_steps=120, seed=s).truth.family for s in range(30)}
    assert len(families) >= 6
    drawn = make_run("healthy", n_steps=200, seed=3)
    named = make_run(f"healthy:{drawn.truth.family}", n_steps=200, seed=3)
    np.testing.assert_array_equal(drawn.series["reward_mean"], named.series["reward_mean"])


def test_seeds_differ_in_onset_magnitude_noise_and_fields():
    runs = [make_run("KL_BLOWUP", n_steps=500, seed=s) for s in range(12)]
    assert len({r.truth.onset_step for r in runs}) >= 8
    assert len({round(r.truth.magnitude, 6) for r in runs}) == 12
    assert len({round(r.truth.noise, 6) for r in runs}) == 12
    assert len({r.truth.fields_logged for r in runs}) >= 6
    onsets = np.array([r.truth.onset_step for r in runs])
    assert onsets.min() >= 15 and onsets.max() <= 0.75 * 500


@pytest.mark.parametrize("kind", KINDS)
def test_every_kind_generates_at_every_length(kind):
    for n in (60, 500, 3000):
        run = make_run(kind, n_steps=n, seed=11)
        t = run.truth
        assert run.steps[0] == 1 and len(run.steps) == t.n_steps
        assert t.n_steps == n or (t.family == "short" and 25 <= t.n_steps <= min(n, 99))
        assert (t.onset_step is None) == (t.pathology is None)
        if t.onset_step is not None:
            assert 3 <= t.onset_step < t.n_steps
        for name, values in run.series.items():
            assert values.dtype == np.float64 and len(values) == t.n_steps
            logged = run.logged(name)
            assert logged.any(), name
            if not (t.pathology == "GRAD_PATHOLOGY" and name in DELIBERATE_NAN):
                assert np.isfinite(values[logged]).all(), (name, n)
            assert np.isnan(values[~logged]).all()
        for values in run.components.values():
            assert np.isfinite(values).all()
        if run.kl_positional is not None:
            assert run.kl_positional.shape == (t.n_steps, 8)
        assert set(t.fields_logged) >= set(run.series)


# -- each failure shows in its main input, after its onset --------------------------------------
def _kl_blowup(r):
    _, before, late = before_after(r, "kl_mean")
    return late / before > 3 and before_after(r, "kl_max")[2] > late


def _entropy_collapse(r):
    early, _, late = before_after(r, "entropy_mean")
    return late / early < 0.2


def _hack(r):
    _, lb, la = before_after(r, "completion_len_mean")
    _, rb, ra = before_after(r, "reward_mean")
    correct = r.trainer_config["reward_funcs"][0]
    ca = before_after(r, correct)[2]
    return la / lb > 1.5 and ra > rb and ca <= at_onset(r, correct) + 0.05 + noise_tol(r, correct)


def _format(r):
    correct, fmt = r.trainer_config["reward_funcs"][:2]
    _, fb, fa = before_after(r, fmt)
    ca = before_after(r, correct)[2]
    return fa >= 0.95 and fb < 0.9 and ca <= at_onset(r, correct) + 0.05 + noise_tol(r, correct)


def _clip(r):
    _, before, late = before_after(r, "clip_fraction")
    return late >= 0.2 and before <= 0.15 and before_after(r, "ratio_p95")[2] > before_after(r, "ratio_p95")[1]


def _degenerate(r):
    _, before, late = before_after(r, "zero_variance_group_frac")
    _, gb, ga = before_after(r, "group_reward_std_mean")
    return late >= 0.75 and late - before >= 0.3 and ga < 0.3 * gb


def _adv(r):
    _, sb, sa = before_after(r, "adv_std")
    _, rb, ra = before_after(r, "reward_std")
    return sa < 0.1 * sb and before_after(r, "adv_zero_frac")[2] > 0.5 and ra > 0.5 * rb


def _value(r):
    _, vb, va = before_after(r, "value_loss")
    return before_after(r, "value_explained_variance")[2] < 0 and va / vb > 3


def _grad(r):
    onset = r.truth.onset_step - 1
    g, nans = r.series["grad_norm"], r.series["nan_count"] + r.series["inf_count"]
    if r.truth.variant == "nan":
        return nans[onset:].sum() > 0 and nans[:onset].sum() == 0 and np.isnan(r.series["loss"][onset:]).any()
    base = _med(g[:onset])
    if r.truth.variant == "spikes":
        return (g[onset:] > 10 * base).sum() >= 3
    return _med(g[int(0.9 * len(g)) :]) > 10 * base


def _trunc(r):
    _, before, late = before_after(r, "truncation_rate")
    return late >= 0.25 and before <= 0.05 and before_after(r, "eos_rate")[2] <= 0.75


def _repetition(r):
    _, before, late = before_after(r, "repetition_rate")
    return late >= 0.2 and late >= 3 * before


def _std_death(r):
    _, before, late = before_after(r, "reward_std")
    return late < 0.2 * before


def _drift(r):
    kp = r.kl_positional
    rows = np.flatnonzero(np.isfinite(kp[:, 0]) & (np.nansum(kp, axis=1) > 0))
    share = np.sort(kp[rows] / kp[rows].sum(axis=1, keepdims=True), axis=1)[:, -2:].sum(axis=1)
    onset = r.truth.onset_step - 1
    return np.median(share[rows >= 0.85 * len(r.steps)]) >= 0.55 and np.median(share[rows < onset]) <= 0.45


def _throughput(r):
    _, before, late = before_after(r, "step_time_s")
    return late / before >= 1.3


def _blowup(r):
    _, before, _ = before_after(r, "entropy_mean")
    onset = r.truth.onset_step - 1
    return np.nanmax(r.series["entropy_mean"][onset:]) >= 2.5 * before


def _stale(r):
    _, before, late = before_after(r, "batch_age")
    return late >= 2.5 and before <= 2.0


def _mismatch(r):
    _, before, late = before_after(r, "logprob_mismatch")
    return late >= 0.02 and before <= 0.015


def _reward_collapse(r):
    early, before, late = before_after(r, "reward_mean")
    return before > early - noise_tol(r, "reward_mean") and before - late >= 0.4 * (before - min(early, late))


def _completion_collapse(r):
    _, before, late = before_after(r, "completion_len_mean")
    return late <= 0.3 * before and late <= 20


MAIN_SIGNAL = {
    "KL_BLOWUP": _kl_blowup, "ENTROPY_COLLAPSE": _entropy_collapse, "REWARD_HACK_LENGTH": _hack,
    "FORMAT_GAMING": _format, "CLIP_SATURATION": _clip, "DEGENERATE_GROUPS": _degenerate, "ADV_COLLAPSE": _adv,
    "VALUE_DIVERGENCE": _value, "GRAD_PATHOLOGY": _grad, "TRUNCATION_STARVE": _trunc, "REPETITION_SPIRAL": _repetition,
    "REWARD_STD_DEATH": _std_death, "REF_POLICY_DRIFT_ASYMMETRY": _drift, "THROUGHPUT_ROT": _throughput,
    "ENTROPY_BLOWUP": _blowup, "STALE_ROLLOUTS": _stale, "TRAIN_INFERENCE_MISMATCH": _mismatch,
    "REWARD_COLLAPSE": _reward_collapse, "COMPLETION_COLLAPSE": _completion_collapse,
}


def test_every_signature_has_a_main_signal_check():
    assert set(MAIN_SIGNAL) == set(SIGNATURES)


@pytest.mark.parametrize("sig", SIGNATURES)
def test_main_input_changes_after_onset(sig):
    failures = []
    for seed in range(6):
        for n in (200, 1000):
            run = make_run(sig, n_steps=n, seed=seed)
            if not MAIN_SIGNAL[sig](run):
                failures.append((seed, n, run.truth.variant))
    assert not failures, failures


def test_healthy_traps_stay_within_natural_ranges():
    for family in HEALTHY_FAMILIES:
        for seed in range(4):
            run = make_run(f"healthy:{family}", n_steps=600, seed=seed)
            s = run.series
            if "entropy_mean" in s:  # natural decline, not collapse; transients, not blow-ups
                ent = s["entropy_mean"]
                early = _med(ent[: max(5, len(ent) // 10)])
                assert _med(ent[-max(5, len(ent) // 10) :]) / early > 0.2, (family, seed)
            if "clip_fraction" in s:
                assert _med(s["clip_fraction"][len(s["clip_fraction"]) // 5 :]) < 0.15
            if "batch_age" in s:
                assert np.nanmax(s["batch_age"]) < 3
            if "logprob_mismatch" in s:
                assert _med(s["logprob_mismatch"]) < 0.015
            if "value_explained_variance" in s:
                ev = s["value_explained_variance"]
                assert _med(ev[len(ev) // 3 :]) > 0.2
            assert all(np.isfinite(v[run.logged(k)]).all() for k, v in s.items())


def test_easy_task_is_mostly_zero_variance_from_the_start():
    run = make_run("healthy:easy_task", n_steps=300, seed=2)
    assert _med(run.series["zero_variance_group_frac"][:30]) >= 0.3
    assert _med(run.series["reward_mean"]) > 0.6


def test_short_family_is_short():
    assert make_run("healthy:short", n_steps=3000, seed=5).truth.n_steps < 100


def test_value_divergence_forces_ppo_and_degenerate_groups_forces_grpo():
    assert make_run("VALUE_DIVERGENCE", n_steps=200, seed=0, algorithm="grpo").truth.algorithm == "ppo"
    assert make_run("DEGENERATE_GROUPS", n_steps=200, seed=0, algorithm="ppo").truth.algorithm == "grpo"
    ppo = make_run("healthy:ppo", n_steps=200, seed=0)
    assert "value_loss" in ppo.series and "zero_variance_group_frac" not in ppo.series


# -- samples -----------------------------------------------------------------------------------
def test_grpo_samples_come_in_groups_sharing_a_prompt():
    run = make_run("healthy:steady", n_steps=100, seed=1, algorithm="grpo")
    samples = run.samples(50)
    groups: dict[str, list[dict]] = {}
    for s in samples:
        groups.setdefault(s["group_id"], []).append(s)
    assert all(len(g) == run.truth.group_size for g in groups.values())
    assert all(len({s["prompt_text"] for s in g}) == 1 for g in groups.values())
    assert {"prompt_text", "completion_text", "reward_total", "reward_components", "advantage", "logprob_mean",
            "kl_contribution", "completion_len", "truncated", "group_id"} <= set(samples[0])
    assert any(re.search(r"\d", s["completion_text"]) for s in samples)


def test_sample_text_shows_the_failure():
    late = lambda run: run.samples(int(0.97 * run.truth.n_steps))  # noqa: E731
    loops = late(make_run("REPETITION_SPIRAL", n_steps=300, seed=2))
    assert any(max(Counter_ngrams(s["completion_text"]).values()) >= 6 for s in loops)
    soup = late(make_run("ENTROPY_BLOWUP", n_steps=300, seed=2))
    assert sum(s["truncated"] for s in soup) >= len(soup) // 2
    assert any(not s["completion_text"].isascii() for s in soup)
    hack = [s for st in range(280, 300) for s in make_run("REWARD_HACK_LENGTH", n_steps=300, seed=2).samples(st)]
    lengths, rewards = np.array([s["completion_len"] for s in hack]), np.array([s["reward_total"] for s in hack])
    assert np.corrcoef(np.log(lengths), rewards)[0, 1] > 0.2
    run = make_run("DEGENERATE_GROUPS", n_steps=300, seed=2)
    groups: dict[str, set[float]] = {}
    for s in late(run):
        groups.setdefault(s["group_id"], set()).add(s["reward_total"])
    assert sum(len(v) == 1 for v in groups.values()) >= len(groups) // 2


def Counter_ngrams(text: str, n: int = 4) -> dict[tuple[str, ...], int]:
    words = text.split()
    counts: dict[tuple[str, ...], int] = {}
    for i in range(len(words) - n + 1):
        key = tuple(words[i : i + n])
        counts[key] = counts.get(key, 0) + 1
    return counts or {(): 0}


# -- recording ---------------------------------------------------------------------------------
def test_write_run_records_a_readable_run_and_keeps_truth_outside(tmp_path):
    run_dir = tmp_path / "run"
    truth = write_run(run_dir, "KL_BLOWUP", n_steps=120, seed=4, samples_every=2)
    con = rlprobe.connect(str(run_dir))
    assert con.sql("SELECT count(*), min(step), max(step) FROM steps").fetchall()[0] == (120, 1, 120)
    n_samples = con.sql("SELECT count(*) FROM samples").fetchall()[0][0]
    assert 0 < n_samples <= 60 * 8
    assert con.sql("SELECT algorithm FROM manifest").fetchall()[0][0] == truth.algorithm
    kinds = {k for (k,) in con.sql("SELECT DISTINCT kind FROM events").fetchall()}
    assert {"train_begin", "train_end"} <= kinds
    kl = [v for (v,) in con.sql("SELECT kl_mean FROM steps ORDER BY step").fetchall()]
    assert kl[-1] > kl[truth.onset_step - 2]
    saved = json.loads((run_dir / "synth_truth.json").read_text())
    assert saved["pathology"] == "KL_BLOWUP" and saved["onset_step"] == truth.onset_step
    manifest = (run_dir / "manifest.json").read_text()
    assert "KL_BLOWUP" not in manifest and "onset" not in manifest
    with pytest.raises(FileExistsError):
        write_run(run_dir, "KL_BLOWUP", n_steps=120, seed=4)


def test_write_run_records_nan_losses_and_nan_events(tmp_path):
    seed = next(s for s in range(50) if make_run("GRAD_PATHOLOGY", n_steps=80, seed=s).truth.variant == "nan")
    truth = write_run(tmp_path / "nan", "GRAD_PATHOLOGY", n_steps=80, seed=seed, samples_every=0)
    con = rlprobe.connect(str(tmp_path / "nan"))
    assert con.sql("SELECT count(*) FROM steps WHERE isnan(loss)").fetchall()[0][0] > 0
    first = con.sql("SELECT min(step) FROM events WHERE kind = 'nan_detected'").fetchall()[0][0]
    assert first == truth.onset_step


# -- the command -------------------------------------------------------------------------------
def test_cli_synth_writes_a_run(tmp_path):
    result = CliRunner().invoke(cli, ["synth", str(tmp_path / "r"), "--pathology", "entropy_blowup", "--n-steps", "80", "--seed", "3"])
    assert result.exit_code == 0, result.output
    assert "ENTROPY_BLOWUP" in result.output
    assert json.loads((tmp_path / "r" / "synth_truth.json").read_text())["n_steps"] == 80


def test_cli_synth_list_and_bad_name():
    listed = CliRunner().invoke(cli, ["synth", "--list"])
    assert listed.exit_code == 0
    assert all(name in listed.output for name in SIGNATURES)
    assert all(f"healthy:{f}" in listed.output for f in HEALTHY_FAMILIES)
    bad = CliRunner().invoke(cli, ["synth", "somewhere", "--pathology", "NOPE"])
    assert bad.exit_code == 2
    assert "KL_BLOWUP" in bad.output


def test_synth_stays_on_the_write_side():
    code = "import sys, rlprobe.synth; bad = {'torch', 'duckdb', 'rlprobe.store'} & set(sys.modules); print(sorted(bad))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"


# -- what real logs look like: options and variants on request ------------------------------------
from rlprobe.synth import EXTRA_VARIANTS, Options, draw_setup  # noqa: E402


def test_plain_options_are_the_run_the_seed_always_gave():
    plain, explicit = make_run("KL_BLOWUP", n_steps=300, seed=5), make_run("KL_BLOWUP", n_steps=300, seed=5, options=Options())
    assert plain.truth == explicit.truth
    for name in plain.series:
        np.testing.assert_array_equal(plain.series[name], explicit.series[name])
    assert plain.truth.params["logging_steps"] == 1 and plain.truth.params["options"] == {}
    assert plain.truth.fit == ("KL_BLOWUP",) and plain.truth.end_step is None


@pytest.mark.parametrize("seed", range(6))
def test_sparse_logging_has_20_to_60_points_at_a_stride_of_5_to_10(seed):
    run = make_run("healthy:steady", n_steps=3000, seed=seed, options={"logging": "sparse"})
    stride, points = run.truth.params["logging_steps"], len(run.steps)
    assert 5 <= stride <= 10 and 20 <= points <= 60
    np.testing.assert_array_equal(run.steps, stride * np.arange(1, points + 1))  # first point at the stride
    assert run.truth.n_steps == stride * points and run.trainer_config["logging_steps"] == stride


def test_a_sparse_log_is_the_dense_run_thinned_as_hf_logs_it():
    # the same seed and length: rewards are window means, grad_norm and lr the logged step's value
    dense = make_run("healthy:steady", n_steps=200, seed=3)
    sparse = make_run("healthy:steady", n_steps=200, seed=3, options={"logging": "sparse", "logging_steps": 5, "points": 40})
    window = lambda a: a.reshape(40, 5).mean(axis=1)  # noqa: E731
    np.testing.assert_allclose(sparse.series["reward_mean"], window(dense.series["reward_mean"]))
    for name in ("grad_norm", "lr"):
        if name in dense.series:
            np.testing.assert_array_equal(sparse.series[name], dense.series[name][4::5])
    np.testing.assert_allclose(sparse.series["loss"], window(dense.series["loss"]))  # HF Trainer: window mean
    step_loss = make_run("healthy:steady", n_steps=200, seed=3, options=["logging=sparse", "logging_steps=5", "points=40", "loss=step"])
    np.testing.assert_array_equal(step_loss.series["loss"], dense.series["loss"][4::5])


def test_sparse_onsets_are_logged_points_that_show_the_failure():
    for sig in ("ENTROPY_BLOWUP", "GRAD_PATHOLOGY", "REWARD_COLLAPSE", "TRUNCATION_STARVE"):
        for seed in range(4):
            run = make_run(sig, n_steps=300, seed=seed, options={"logging": "sparse"})
            assert run.truth.onset_step in set(run.steps.tolist()), (sig, seed)
    # a grad-norm spike is one step's value: the onset is a logged step whose grad_norm spikes
    seed = next(s for s in range(50) if make_run("GRAD_PATHOLOGY", n_steps=300, seed=s).truth.variant == "spikes")
    run = make_run("GRAD_PATHOLOGY", n_steps=300, seed=seed, options={"logging": "sparse"})
    i = list(run.steps).index(run.truth.onset_step)
    assert run.series["grad_norm"][i] > 10 * _med(run.series["grad_norm"][:i])


@pytest.mark.parametrize("group_size", [2, 3, 4, 5, 8, 16])
def test_binary_rewards_are_multiples_of_one_over_group_size_times_prompts(group_size):
    run = make_run("healthy:steady", n_steps=200, seed=group_size, group_size=group_size, options={"reward": "binary"})
    p = run.truth.params
    if run.truth.algorithm == "grpo":
        assert run.truth.group_size == group_size
        assert p["batch_size"] == group_size * p["prompts"] <= 128
    quantum = p["reward_quantum"]
    assert quantum == 1 / p["batch_size"]
    k = run.series["reward_mean"] / quantum
    np.testing.assert_allclose(k, np.round(k), atol=1e-9)
    if "zero_variance_group_frac" in run.series:  # a share of the prompts
        z = run.series["zero_variance_group_frac"] * p["prompts"]
        np.testing.assert_allclose(z, np.round(z), atol=1e-9)


def test_reward_std_is_the_group_or_the_batch_std_and_truth_says_which():
    kw = dict(n_steps=200, seed=4, algorithm="grpo", group_size=4)
    group = make_run("healthy:steady", options={"reward": "binary", "reward_std": "group"}, **kw)
    batch = make_run("healthy:steady", options={"reward": "binary", "reward_std": "batch"}, **kw)
    assert group.truth.params["reward_std_kind"] == "group" and batch.truth.params["reward_std_kind"] == "batch"
    np.testing.assert_array_equal(group.series["reward_std"], group.series["group_reward_std_mean"])
    # the batch std also counts the spread between prompts, so it is the larger of the two
    assert np.median(batch.series["reward_std"]) > np.median(group.series["reward_std"])
    assert make_run("healthy:steady", n_steps=100, seed=1).truth.params["reward_std_kind"] in ("group", "batch")


def test_sparse_rewards_mostly_miss_and_sometimes_hit():
    run = make_run("healthy:steady", n_steps=300, seed=2, group_size=16, options={"reward": "sparse", "prompts": 2})
    r = run.series["reward_mean"]
    assert run.truth.params["batch_size"] == 32
    assert np.median(r) <= 0.1 and (r == 0).mean() >= 0.2 and (r > 0).any()


@pytest.mark.parametrize("sig", ["TRUNCATION_STARVE", "REWARD_STD_DEATH", "DEGENERATE_GROUPS"])
@pytest.mark.parametrize("logging", ["dense", "sparse"])
def test_a_dead_start_run_is_dead_from_its_first_logged_step(sig, logging):
    for seed in range(4):
        run = make_run(sig, n_steps=300, seed=seed, variant="dead_start", options={"logging": logging})
        t, s = run.truth, run.series
        assert t.variant == "dead_start" and t.onset_step == run.steps[0], (sig, seed)
        assert sig in t.fit and "ADV_COLLAPSE" in t.fit
        if sig != "DEGENERATE_GROUPS" or t.params["reward_template"] == "binary":  # reward pinned at its floor
            np.testing.assert_allclose(s["reward_mean"], t.params["reward_floor"], atol=1e-12)
            assert (s["reward_std"] == 0).all() and "REWARD_STD_DEATH" in t.fit
        if "zero_variance_group_frac" in s:
            assert (s["zero_variance_group_frac"] == 1).all() and (s["group_reward_std_mean"] == 0).all()
        if t.algorithm == "grpo":  # no advantage, no gradient: the policy never moves
            for name in ("grad_norm", "kl_mean", "clip_fraction"):
                if name in s:
                    assert (s[name] == 0).all(), (sig, seed, name)
        if sig == "TRUNCATION_STARVE":
            assert (s["completion_len_mean"] == t.params["cap"]).all() and (s["truncation_rate"] == 1).all()


def test_a_dead_degenerate_run_may_keep_a_batch_spread_between_prompts():
    runs = [make_run("DEGENERATE_GROUPS", n_steps=200, seed=s, variant="dead_start", options={"reward_std": "batch"}) for s in range(12)]
    formatted = [r for r in runs if r.truth.params["reward_template"] == "format"]
    assert formatted
    for run in formatted:  # every group degenerate, yet prompts differ: the batch std is not zero
        assert (run.series["zero_variance_group_frac"] == 1).all()
        assert (run.series["reward_std"] > 0).any() and "REWARD_STD_DEATH" not in run.truth.fit


def test_two_updates_per_batch_alternate_grad_norm_and_log_rewards_every_other_step():
    run = make_run("healthy:steady", n_steps=200, seed=6, options={"updates": 2})
    g = run.series["grad_norm"]
    assert (g[1::2] <= 0.02 * g[0::2]).all()
    assert np.isfinite(run.series["reward_mean"][0::2]).all() and np.isnan(run.series["reward_mean"][1::2]).all()
    assert run.logged("entropy_mean").all() and run.trainer_config["num_iterations"] == 2
    sick = make_run("REWARD_COLLAPSE", n_steps=200, seed=6, options={"updates": 2})
    assert sick.truth.onset_step % 2 == 1  # the reward is first seen fallen at a step that logs it


def test_placeholders_are_exactly_zero_on_every_step():
    run = make_run("healthy:steady", n_steps=150, seed=1, options={"placeholders": "entropy_mean,kl_mean,loss"})
    for name in ("entropy_mean", "kl_mean", "loss"):
        assert (run.series[name] == 0).all()
    assert "kl_max" not in run.series and run.kl_positional is None
    with pytest.raises(ValueError, match="entropy_mean"):  # a failure keeps the field it shows in
        make_run("ENTROPY_COLLAPSE", n_steps=150, seed=1, options={"placeholders": "entropy_mean"})


@pytest.mark.parametrize("seed", range(5))
def test_easy_tasks_have_60_to_90_percent_zero_variance_groups_from_the_start(seed):
    run = make_run("healthy:steady", n_steps=400, seed=seed, options={"task": "easy", "reward": "binary"}, group_size=8)
    z = run.series["zero_variance_group_frac"]
    assert 0.5 <= _med(z[:40]) <= 0.95 and 0.6 <= run.truth.params["zero_variance_target"] <= 0.9
    assert _med(run.series["reward_mean"]) >= 0.75


def test_saturating_tasks_reach_their_ceiling_early():
    run = make_run("healthy:steady", n_steps=400, seed=3, options={"task": "saturating", "reward": "binary"})
    r = run.series["reward_mean"]
    assert _med(r[:20]) < 0.6 and _med(r[len(r) // 2 :]) >= 0.85
    assert _med(run.series["zero_variance_group_frac"][len(r) // 2 :]) >= 0.5


@pytest.mark.parametrize("seed", range(4))
def test_a_healthy_one_step_spike_is_back_to_normal_the_next_step(seed):
    run = make_run("healthy:steady", n_steps=300, seed=seed, options={"spike": "kl_grad"})
    j = list(run.steps).index(run.truth.params["spike_step"])
    kl, g = run.series["kl_mean"], run.series["grad_norm"]
    assert kl[j] >= 20 * _med(kl) and g[j] >= 100 * _med(g)
    assert kl[j + 1] <= 3 * _med(kl) and g[j + 1] <= 5 * _med(g)


def test_an_unexploited_length_bias_is_in_the_samples_from_step_one():
    run = make_run("healthy:steady", n_steps=300, seed=1, options={"length_bias": "unexploited"})
    batch = [s for step in range(1, 30) for s in run.samples(step)]
    lengths, rewards = np.array([s["completion_len"] for s in batch]), np.array([s["reward_total"] for s in batch])
    assert np.corrcoef(np.log(lengths), rewards)[0, 1] > 0.15
    assert run.truth.params["reward_template"] == "judge" and run.truth.onset_step is None


def test_a_length_bias_from_step_one_is_exploited_from_the_onset_on():
    run = make_run("REWARD_HACK_LENGTH", n_steps=400, seed=2, variant="bias_from_start")
    t = run.truth
    early = [s for step in range(1, 20) for s in run.samples(step)]
    lengths, rewards = np.array([s["completion_len"] for s in early]), np.array([s["reward_total"] for s in early])
    assert np.corrcoef(np.log(lengths), rewards)[0, 1] > 0.15  # the bias is there from the start
    length = run.series["completion_len_mean"]
    start = t.params["exploitation_start"]
    assert start <= t.onset_step  # the onset is where longer completions show, not where they began
    assert _med(length[t.onset_step - 1 : t.onset_step + 4]) > 1.05 * _med(length[max(0, start - 10) : start])
    assert _med(length[-20:]) > 1.5 * _med(length[: start - 1])


@pytest.mark.parametrize("seed", range(5))
def test_a_transient_truncation_episode_ends_and_the_run_recovers(seed):
    run = make_run("TRUNCATION_STARVE", n_steps=400, seed=seed, variant="transient")
    t, trunc = run.truth, run.series["truncation_rate"]
    o, e = t.onset_step - 1, t.end_step - 1
    assert 10 <= e - o <= 80 and set(t.fit) == {"TRUNCATION_STARVE", "ENTROPY_BLOWUP"}
    assert _med(trunc[o : e + 1]) >= 0.6 and _med(trunc[: max(1, o - 10)]) <= 0.1
    assert _med(trunc[e + 15 :]) <= 0.1  # it got out by itself


def test_a_transient_entropy_blowup_ends():
    run = make_run("ENTROPY_BLOWUP", n_steps=400, seed=3, variant="transient")
    t, h = run.truth, run.series["entropy_mean"]
    o, e = t.onset_step - 1, t.end_step - 1
    assert _med(h[o : e + 1]) >= 2.5 * _med(h[max(0, o - 20) : o]) and _med(h[e + 20 :]) <= 1.5 * _med(h[max(0, o - 20) : o])


@pytest.mark.parametrize("seed", range(4))
def test_a_diverging_loss_goes_from_about_0_02_to_thousands_and_more(seed):
    run = make_run("GRAD_PATHOLOGY", n_steps=300, seed=seed, variant="loss_divergence")
    t, loss = run.truth, run.series["loss"]
    o = t.onset_step - 1
    assert np.abs(loss[:o]).max() < 1 and loss[o] > 10 * np.abs(loss[:o]).max() and loss[-1] >= 1e3
    if t.params["grad_shape"] == "clipped":
        assert (run.series["grad_norm"][o:] == run.trainer_config["max_grad_norm"]).all()


@pytest.mark.parametrize("seed", range(4))
def test_completion_collapse_shrinks_completions_to_a_few_tokens(seed):
    run = make_run("COMPLETION_COLLAPSE", n_steps=300, seed=seed)
    t, length = run.truth, run.series["completion_len_mean"]
    o = t.onset_step - 1
    assert length[o] <= 0.6 * _med(length[max(0, o - 15) : max(1, o - 5)]) and _med(length[-20:]) <= 20
    texts = [s["completion_text"] for s in run.samples(t.n_steps)]
    assert max(len(x) for x in texts) <= 60  # a bare answer or nothing
    if t.variant == "bare_answer_easy":
        _, before, late = before_after(run, "reward_mean")
        assert late >= before - 0.15


def test_variants_and_options_that_do_not_fit_say_so():
    with pytest.raises(ValueError, match="dead_start"):
        make_run("KL_BLOWUP", variant="dead_start")
    with pytest.raises(ValueError, match="unknown option"):
        make_run("healthy", options={"sparse": True})
    with pytest.raises(ValueError, match="judge or format"):
        make_run("FORMAT_GAMING", options={"reward": "binary"})
    with pytest.raises(ValueError, match="healthy runs only"):
        make_run("KL_BLOWUP", options={"task": "easy"})
    with pytest.raises(ValueError, match="KEY=VALUE"):
        make_run("healthy", options=["logging"])


def test_drawn_setups_are_deterministic_valid_and_varied():
    kinds = list(SIGNATURES) + [f"healthy:{f}" for f in HEALTHY_FAMILIES]
    seen: dict[str, set] = {"logging": set(), "reward": set()}
    for kind in kinds:
        for seed in range(12):
            setup = draw_setup(kind, seed)
            assert setup == draw_setup(kind, seed)
            run = make_run(kind, n_steps=300, seed=seed, **setup)  # every drawn setup makes a run
            o = setup["options"]
            seen["logging"].add(o.logging)
            seen["reward"].add(o.reward)
            if run.truth.onset_step is not None:
                assert run.truth.onset_step in set(run.steps.tolist())
    assert seen["logging"] == {"dense", "sparse"} and seen["reward"] == {"default", "binary", "sparse"}
    drawn = {(sig, draw_setup(sig, seed)["variant"]) for sig in EXTRA_VARIANTS for seed in range(60)}
    assert {(sig, v) for sig, vs in EXTRA_VARIANTS.items() for v in vs} <= drawn


def test_healthy_prefixes_are_the_first_logged_steps(tmp_path):
    import importlib.util

    spec = importlib.util.spec_from_file_location("bench_detectors", Path(__file__).parent.parent / "benchmarks" / "detectors.py")
    bench = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(bench)
    run = make_run("healthy:steady", n_steps=400, seed=2, options={"logging": "sparse", "logging_steps": 10, "points": 40})
    steps, samples = bench.to_tables(run, "r")
    head, tail = bench.prefix_tables(steps, samples, 0.3, "r|p30")
    assert head.num_rows == 12 and head["step"].to_pylist() == list(range(10, 130, 10))
    assert set(head["run_id"].to_pylist()) == {"r|p30"} and max(tail["step"].to_pylist()) <= 120


def test_cli_synth_takes_variants_and_options(tmp_path):
    out = CliRunner().invoke(cli, ["synth", str(tmp_path / "d"), "--pathology", "TRUNCATION_STARVE", "--variant", "dead_start",
                                   "--option", "logging=sparse", "--option", "logging_steps=5", "--n-steps", "200", "--samples-every", "0"])
    assert out.exit_code == 0, out.output
    assert "dead_start" in out.output and "onset at step 5" in out.output and "logging=sparse" in out.output
    truth = json.loads((tmp_path / "d" / "synth_truth.json").read_text())
    assert truth["params"]["logging_steps"] == 5 and "REWARD_STD_DEATH" in truth["fit"]
    con = rlprobe.connect(str(tmp_path / "d"))
    assert con.sql("SELECT min(step), count(*), max(reward_std) FROM steps").fetchall()[0] == (5, 40, 0.0)
    bad = CliRunner().invoke(cli, ["synth", str(tmp_path / "b"), "--option", "reward=nope"])
    assert bad.exit_code == 2 and "binary" in bad.output
    drawn = CliRunner().invoke(cli, ["synth", str(tmp_path / "x"), "--pathology", "healthy:steady", "--draw-options",
                                     "--n-steps", "100", "--samples-every", "0"])
    assert drawn.exit_code == 0, drawn.output


def test_truncation_with_answers_before_the_cap_keeps_its_reward():
    run = make_run("TRUNCATION_STARVE", n_steps=400, seed=0, variant="answers_before_cap")
    t, s = run.truth, run.series
    o = t.onset_step - 1
    assert s["truncation_rate"][o] >= 0.4 and _med(s["truncation_rate"][-30:]) >= 0.85
    assert _med(s["reward_mean"][-30:]) >= 0.6 * _med(s["reward_mean"][max(0, o - 30) : o])


@pytest.mark.parametrize("sig", ["KL_BLOWUP", "ENTROPY_BLOWUP", "COMPLETION_COLLAPSE", "REWARD_COLLAPSE"])
def test_early_onsets_fall_in_the_first_fifth_of_the_run(sig):
    for seed in range(4):
        run = make_run(sig, n_steps=400, seed=seed, options={"onset": "early"})
        assert 3 <= run.truth.onset_step <= 0.25 * 400, (sig, seed, run.truth.onset_step)
        assert MAIN_SIGNAL[sig](run) or sig == "REWARD_COLLAPSE", (sig, seed)


def test_the_second_update_of_a_batch_without_signal_has_no_gradient_either():
    make = lambda seed: make_run("healthy:steady", n_steps=300, seed=seed, group_size=4,  # noqa: E731
                                 options={"updates": 2, "task": "easy", "reward": "binary"})
    run = next(r for r in map(make, range(40)) if r.truth.params["beta"] == 0)  # no KL term: no signal, no gradient
    g = run.series["grad_norm"]
    dead = np.flatnonzero(g[0::2] == 0)
    assert dead.size  # an easy task with small groups: some batches are all-right
    assert (g[1::2][dead[dead < len(g[1::2])]] == 0).all()
