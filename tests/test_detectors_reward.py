"""The reward detectors on synthetic runs: REWARD_HACK_LENGTH, FORMAT_GAMING, DEGENERATE_GROUPS,
REWARD_STD_DEATH, REWARD_COLLAPSE.

Each pathology is caught near its true onset and ranked first among the warnings of the whole
catalog, and says which kind it is where the catalog asks (all-correct or all-wrong groups,
saturated or collapsed variance); the healthy families, with their traps (legitimate length
growth with rising accuracy, late saturation at the ceiling, easy tasks with most groups
degenerate from the start, short and sparse runs), stay quiet; a run that did not log the
inputs lists the detector as skipped. Runs are made exactly as benchmarks/detectors.py makes
them (to_tables), with seeds from the train range (< 100,000).
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest

from rlprobe.doctor.detectors.reward import component_role
from rlprobe.doctor.engine import diagnose_tables
from rlprobe.doctor.findings import Diagnosis, Finding
from rlprobe.synth import make_run

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))
from detectors import to_tables  # noqa: E402

MINE = ("REWARD_HACK_LENGTH", "FORMAT_GAMING", "DEGENERATE_GROUPS", "REWARD_STD_DEATH", "REWARD_COLLAPSE")


def diagnose(kind: str, n_steps: int, seed: int, config: dict[str, Any] | None = None) -> tuple[Diagnosis, Any]:
    """Generate a synthetic run and diagnose it in memory, with its samples."""
    run = make_run(kind, n_steps=n_steps, seed=seed)
    steps, samples = to_tables(run, f"{kind}|{seed}")
    return diagnose_tables(steps, samples, config)[0], run.truth


def alarms(d: Diagnosis) -> list[Finding]:
    return [f for f in d.findings if f.severity != "info"]


def finding(d: Diagnosis, sig: str) -> Finding | None:
    return next((f for f in d.findings if f.signature_id == sig), None)


# -- pathologies: caught, near the onset, ranked first ----------------------------------------


@pytest.mark.parametrize("sig, n_steps, seed", [
    ("REWARD_HACK_LENGTH", 150, 3),
    ("REWARD_HACK_LENGTH", 800, 4),
    ("FORMAT_GAMING", 150, 1),
    ("FORMAT_GAMING", 800, 2),
    ("DEGENERATE_GROUPS", 150, 1),
    ("DEGENERATE_GROUPS", 800, 2),
    ("REWARD_STD_DEATH", 150, 1),
    ("REWARD_STD_DEATH", 800, 3),
    ("REWARD_COLLAPSE", 150, 1),
    ("REWARD_COLLAPSE", 800, 2),
])
def test_pathology_is_caught_near_its_onset_and_ranked_first(sig: str, n_steps: int, seed: int) -> None:
    d, truth = diagnose(sig, n_steps, seed)
    top = alarms(d)
    assert top, f"nothing fired on {sig} (seed {seed})"
    assert top[0].signature_id == sig, [(f.signature_id, f.severity, f.confidence) for f in top[:3]]
    f = top[0]
    n = truth.n_steps
    assert truth.onset_step - 0.05 * n <= f.first_step <= truth.onset_step + 0.2 * n, (f.first_step, truth.onset_step)
    assert f.evidence and f.suggested_actions and f.explanation
    assert 0.3 <= f.confidence <= 1.0


@pytest.mark.slow
@pytest.mark.parametrize("sig, seed", [(s, k) for s in MINE for k in (5, 6)])
def test_long_runs_are_caught_too(sig: str, seed: int) -> None:
    d, truth = diagnose(sig, 3000, seed)
    top = alarms(d)
    assert top and top[0].signature_id == sig, [(f.signature_id, f.severity, f.confidence) for f in top[:3]]
    assert truth.onset_step - 150 <= top[0].first_step <= truth.onset_step + 600


@pytest.mark.parametrize("seed", [1, 2, 7])
def test_degenerate_groups_say_all_correct_or_all_wrong(seed: int) -> None:
    d, truth = diagnose("DEGENERATE_GROUPS", 600, seed)
    f = finding(d, "DEGENERATE_GROUPS")
    assert f is not None and f.severity != "info"
    assert f.evidence["variant"] == truth.variant  # all_correct | all_wrong
    assert truth.variant.replace("_", "-") in f.explanation


@pytest.mark.parametrize("seed", [1, 3, 4])
def test_reward_std_death_says_saturated_or_collapsed(seed: int) -> None:
    d, truth = diagnose("REWARD_STD_DEATH", 600, seed)
    f = finding(d, "REWARD_STD_DEATH")
    assert f is not None and f.severity != "info"
    assert f.evidence["variant"] == truth.variant  # saturated | collapsed
    assert truth.variant in f.explanation


def test_length_hack_names_the_component_that_pays() -> None:
    d, _ = diagnose("REWARD_HACK_LENGTH", 600, 4)
    f = finding(d, "REWARD_HACK_LENGTH")
    assert f is not None and f.severity != "info"
    assert "did not improve" in f.explanation and "the gain came from" in f.explanation
    assert f.evidence["peak_length_ratio"] >= 1.5
    assert f.links_to_samples  # the longest captured completions while it held


def test_without_components_the_samples_tell_length_hacking_from_reasoning_growth() -> None:
    for kind, seed, loud in [("REWARD_HACK_LENGTH", 0, True), ("REWARD_HACK_LENGTH", 3, True),
                             ("healthy:reasoning_growth", 0, False), ("healthy:reasoning_growth", 7, False)]:
        run = make_run(kind, n_steps=600, seed=seed)
        run.components.clear()  # a run that logs only the total reward
        steps, samples = to_tables(run, "run")
        f = finding(diagnose_tables(steps, samples)[0], "REWARD_HACK_LENGTH")
        if loud:
            assert f is not None and f.severity != "info", (kind, seed)
            assert f.evidence["len_reward_corr_during"] > f.evidence["len_reward_corr_before"] + 0.2
        else:
            assert f is None or f.severity == "info", (kind, seed, f)


@pytest.mark.parametrize("sig, seed", [
    ("ENTROPY_BLOWUP", 1),  # reward falls to ~0 and its variance dies, downstream of the blow-up
    ("ENTROPY_COLLAPSE", 2),  # groups degenerate and variance shrinks, downstream of the collapse
    ("TRUNCATION_STARVE", 3),  # reward falls as completions hit the cap
    ("THROUGHPUT_ROT", 1),  # info-only itself: nothing of ours may raise an alarm instead
])
def test_downstream_symptoms_do_not_outrank_the_root_cause(sig: str, seed: int) -> None:
    d, _ = diagnose(sig, 600, seed)
    top = alarms(d)
    assert not top or top[0].signature_id not in MINE, [(f.signature_id, f.severity, f.confidence) for f in top[:3]]


# -- healthy runs stay quiet ------------------------------------------------------------------


@pytest.mark.parametrize("family, seeds", [
    ("reasoning_growth", (0, 1, 2)),  # length grows 1.5-3.5x, with correctness
    ("late_saturation", (0, 1, 2)),  # reward saturates late, reward_std falls, groups degenerate
    ("easy_task", (0, 1, 2)),  # most groups zero-variance from the start
    ("steady", (0, 1)),
    ("short", (0, 1)),
    ("sparse_logging", (0,)),
    ("ppo", (0,)),
])
def test_healthy_families_stay_quiet(family: str, seeds: tuple[int, ...]) -> None:
    for seed in seeds:
        d, _ = diagnose(f"healthy:{family}", 600, seed)
        loud = [f for f in alarms(d) if f.signature_id in MINE]
        assert not loud, (family, seed, [(f.signature_id, f.severity, f.first_step, f.evidence) for f in loud])


# -- edges ------------------------------------------------------------------------------------


def test_missing_inputs_are_skipped_with_a_reason() -> None:
    steps = pa.table({
        "run_id": ["r"] * 200,
        "step": list(range(1, 201)),
        "loss": [1.0 / (i + 1) for i in range(200)],
    })
    d = diagnose_tables(steps)[0]
    skipped = {s.signature_id: s.reason for s in d.skipped}
    for sig, metric in [
        ("REWARD_HACK_LENGTH", "completion_len_mean"),
        ("DEGENERATE_GROUPS", "zero_variance_group_frac"),
        ("REWARD_STD_DEATH", "reward_std"),
        ("REWARD_COLLAPSE", "reward_mean"),
        ("FORMAT_GAMING", "reward_mean"),
    ]:
        assert metric in skipped[sig], skipped.get(sig)
    assert not [f for f in d.findings if f.signature_id in MINE]


def test_a_very_short_run_is_diagnosed_without_errors_and_only_what_its_points_show() -> None:
    # 12 steps: reward 0.9 -> 1.47, then 0.58-0.96 from step 6 (the collapse's true onset is 5)
    d, truth = diagnose("REWARD_COLLAPSE", 12, 0)
    assert not [s for s in d.skipped if s.reason.startswith("detector error")]
    mine = [f for f in d.findings if f.signature_id in MINE]
    assert [f.signature_id for f in mine] == ["REWARD_COLLAPSE"]
    assert abs(mine[0].first_step - truth.onset_step) <= 1


def test_thresholds_come_from_the_doctor_config() -> None:
    d, _ = diagnose("DEGENERATE_GROUPS", 150, 1, config={"DEGENERATE_GROUPS": {"level_warn": 0.999, "level_critical": 0.9999}})
    assert finding(d, "DEGENERATE_GROUPS") is None


def test_component_roles_follow_common_names() -> None:
    assert [component_role(n) for n in ("format_reward", "strict_format", "xmlcount_reward", "tags")] == ["format"] * 4
    assert [component_role(n) for n in ("accuracy_reward", "math_verify", "answer_match", "correctness")] == ["correct"] * 4
    assert [component_role(n) for n in ("rm_score", "judge", "helpfulness", "reasoning_quality")] == ["other"] * 4
    assert component_role("my_checker", correct_pattern="checker") == "correct"


def _components_run(n: int, fmt: Any, correct: Any) -> pa.Table:
    import numpy as np

    rng = np.random.default_rng(7)
    fmt_v, cor_v = fmt + rng.normal(0, 0.01, n), correct + rng.normal(0, 0.03, n)
    return pa.table({"run_id": ["r"] * n, "step": np.arange(n, dtype=np.int64), "reward_mean": fmt_v + cor_v,
                     "reward_component.xml_format": fmt_v, "reward_component.accuracy": cor_v})


def test_a_format_learned_slowly_while_correctness_keeps_rising_is_not_gaming() -> None:
    """The first 30% of a healthy run: the format climbs 0.42 -> 0.87 over all of it while
    accuracy climbs 0.20 -> 0.41. Over the short stretch where the format sits near its ceiling
    accuracy looks flat (0.328 -> 0.316); against its level when the format was half learned it
    has risen: the two were learned together."""
    from detectors import prefix_tables, setup_of

    kind = "healthy:reasoning_growth"
    run = make_run(kind, n_steps=1000, seed=57, **setup_of(kind, 57, False))
    steps, samples = prefix_tables(*to_tables(run, "r"), 0.3, "r")
    assert finding(diagnose_tables(steps, samples)[0], "FORMAT_GAMING") is None


def test_a_format_taken_up_at_once_while_correctness_stays_flat_is_gaming() -> None:
    import numpy as np

    steps = np.arange(500)
    fmt = 0.1 + 0.8 / (1 + np.exp(-(steps - 200) / 5))
    f = finding(diagnose_tables(_components_run(500, fmt, np.full(500, 0.3)))[0], "FORMAT_GAMING")
    assert f is not None and 190 <= f.first_step <= 215


def test_the_share_a_reward_collapse_quotes_is_of_the_levels_it_names() -> None:
    """Reward 0.5, then 0.2, its last points a little lower still (0.17, within the noise):
    "fell from 0.5 to 0.2, losing 66%" would quote a share of a level it never names."""
    import re

    import numpy as np

    rng = np.random.default_rng(11)
    level = np.concatenate([np.full(150, 0.5), np.full(130, 0.2), np.full(20, 0.17)])
    reward = level + rng.normal(0, 0.04, 300)
    t = pa.table({"run_id": ["r"] * 300, "step": np.arange(300, dtype=np.int64), "reward_mean": reward})
    f = finding(diagnose_tables(t)[0], "REWARD_COLLAPSE")
    assert f is not None
    m = re.search(r"fell from ([0-9.]+) over steps [0-9-]+ to ([0-9.]+)(?: and then ([0-9.]+))?, losing ([0-9]+)% of its height above ([0-9.-]+)",
                  f.explanation)
    assert m, f.explanation
    top, after, then, share, floor = float(m[1]), float(m[2]), m[3], float(m[4]), float(m[5])
    shown = float(then) if then else after
    assert abs((top - shown) / (top - floor) * 100 - share) <= 2, f.explanation
