"""Health states, noise and exact words, by example: runs written as the numbers a trainer logs.

Each test builds a run the way real logs look (sparse points, binary rewards, single-step grad
norms, placeholders) and says what the doctor must and must not conclude from it.
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pytest

from rlprobe.doctor.engine import diagnose_tables
from rlprobe.synth import HEALTHY_FAMILIES, make_run


def table(n: int, step_every: int = 1, **cols: np.ndarray) -> pa.Table:
    steps = np.arange(1, n + 1) * step_every
    data = {"run_id": pa.array(["run"] * n), "step": pa.array(steps, pa.int64())}
    data.update({k: pa.array(np.asarray(v, dtype=float), pa.float64()) for k, v in cols.items()})
    return pa.table(data)


def rng(seed: int) -> np.random.Generator:
    return np.random.default_rng(seed)


def binary_mean(p: np.ndarray, n: int, seed: int) -> np.ndarray:
    """Batch means of n binary rewards at success rates p: multiples of 1/n."""
    return rng(seed).binomial(n, np.clip(p, 0, 1)) / n


def findings(t: pa.Table, **config: dict) -> dict:  # type: ignore[type-arg]
    (d,) = diagnose_tables(t, config=config or None)
    return {f.signature_id: f for f in d.findings}


def loud(found: dict) -> dict:  # type: ignore[type-arg]
    return {k: f for k, f in found.items() if f.severity != "info"}


# -- dead from the first step --------------------------------------------------------------------


def test_a_run_dead_from_its_first_step_is_critical_at_step_1() -> None:
    # every completion cut at the 64-token cap, reward -0.1 (invalid format) with no spread
    n = 40
    t = table(n, step_every=5, reward_mean=np.full(n, -0.1), reward_std=np.zeros(n),
              max_len_hit_frac=np.ones(n), completion_len_mean=np.full(n, 64.0),
              entropy_mean=0.3 + rng(1).normal(0, 0.02, n), grad_norm=np.abs(rng(2).normal(0.3, 0.1, n)))
    found = findings(t)
    ts, rsd = found["TRUNCATION_STARVE"], found["REWARD_STD_DEATH"]
    assert ts.severity == "critical" and ts.first_step == 5 and "from the first logged step" in ts.explanation
    assert rsd.severity == "critical" and rsd.first_step == 5 and "floor" in rsd.explanation
    assert rsd.explained_by == "TRUNCATION_STARVE"


def test_completions_of_a_few_tokens_that_earn_nothing_from_step_1_are_a_completion_collapse() -> None:
    # completions of 2-4 tokens from the first step, reward 0 but for one lucky batch: the policy
    # ends its answer at once (a stop-token or template bug), the root of the dead reward
    n = 26
    r = rng(54)
    reward = np.zeros(n)
    reward[[20, 21]] = 3 / 256
    t = table(n, completion_len_mean=4.0 + r.normal(0, 0.1, n), reward_mean=reward, reward_std=np.where(reward > 0, 0.108, 0.0))
    f = findings(t)["COMPLETION_COLLAPSE"]
    assert f.severity == "critical" and f.first_step == 1 and "From the first logged step" in f.explanation
    # one-word answers that the policy gets right are a task, not a collapse
    t = table(n, completion_len_mean=2.0 + r.normal(0, 0.1, n), reward_mean=binary_mean(np.full(n, 0.6), 64, 55))
    assert "COMPLETION_COLLAPSE" not in loud(findings(t))


def test_a_reward_pinned_at_its_ceiling_from_the_start_is_finished_not_starved() -> None:
    n = 60
    t = table(n, reward_mean=np.ones(n), reward_std=np.zeros(n), zero_variance_group_frac=np.ones(n))
    found = findings(t)
    assert found["REWARD_STD_DEATH"].severity == "info" and "ceiling" in found["REWARD_STD_DEATH"].explanation
    assert not loud(found)


def test_an_easy_task_with_a_little_spread_left_is_quiet() -> None:
    # most groups all-correct from the start: reward 0.95, within-group std 0.02
    n = 300
    t = table(n, reward_mean=binary_mean(np.full(n, 0.95), 128, 3), reward_std=np.abs(rng(4).normal(0.02, 0.005, n)),
              zero_variance_group_frac=np.clip(rng(5).normal(0.9, 0.04, n), 0, 1))
    assert not loud(findings(t))


def test_placeholders_are_not_read_as_a_collapse() -> None:
    # a trainer that writes entropy and KL as 0.0 on every step has not measured them
    n = 200
    t = table(n, reward_mean=binary_mean(np.linspace(0.4, 0.7, n), 20, 6), entropy_mean=np.zeros(n), kl_mean=np.zeros(n))
    (d,) = diagnose_tables(t)
    skipped = {s.signature_id: s.reason for s in d.skipped}
    assert "placeholder" in skipped["ENTROPY_COLLAPSE"] and "placeholder" in skipped["KL_BLOWUP"]
    assert not [f for f in d.findings if f.severity != "info"]


# -- noise ---------------------------------------------------------------------------------------


def test_a_sparse_binary_reward_is_noise_not_a_collapse() -> None:
    # 16 rollouts per step, one success now and then early, none later
    n = 120
    r = np.zeros(n)
    r[[3, 9, 17, 26]] = 1 / 16
    assert "REWARD_COLLAPSE" not in findings(table(n, reward_mean=r))


def test_two_lucky_batches_of_a_dead_sparse_reward_are_not_a_rise_and_a_collapse() -> None:
    # 256 rollouts a step: 0 successes, then 3 on two steps, then 0 again. At a rate of 3 in 256
    # a step's mean has a binomial sd of 0.0067: the wobble is under 2 standard errors.
    n = 26
    r = np.zeros(n)
    r[[20, 21]] = 3 / 256
    found = findings(table(n, reward_mean=r))
    assert "REWARD_COLLAPSE" not in found


def test_a_hard_task_success_rate_wandering_a_few_points_is_not_a_collapse() -> None:
    # 64 rollouts a step on a hard task: the success rate sits at 0.08, climbs to 0.14 and comes
    # back to 0.08, as a watcher sees it half-way. Six points of success rate are 40% of that
    # height and many standard errors, but not a broken policy.
    n = 180
    p = np.select([np.arange(n) < 60, np.arange(n) < 120], [0.08, 0.14], 0.08)
    assert "REWARD_COLLAPSE" not in findings(table(n, reward_mean=binary_mean(p, 64, 21)))


def test_a_hard_task_success_rate_losing_most_of_its_height_is_still_a_collapse() -> None:
    # the same task, but the success rate falls from 0.14 to 0.02 and stays there: the policy
    # lost nearly everything it had learned, however small the height was
    n = 180
    p = np.select([np.arange(n) < 60, np.arange(n) < 120], [0.08, 0.14], 0.02)
    f = findings(table(n, reward_mean=binary_mean(p, 64, 21)))["REWARD_COLLAPSE"]
    assert f.severity == "critical" and 119 <= f.first_step <= 124


def test_the_informative_steps_of_a_mostly_degenerate_run_are_not_grad_spikes() -> None:
    # a batch with reward variance gives grad norm ~0.3, one without (every group degenerate) ~4e-4
    n = 200
    informative = rng(7).random(n) < 0.3
    g = np.where(informative, np.abs(rng(8).normal(0.3, 0.1, n)), np.abs(rng(9).normal(4e-4, 1e-4, n)))
    assert "GRAD_PATHOLOGY" not in findings(table(n, grad_norm=g, reward_mean=binary_mean(np.full(n, 0.4), 16, 10)))


def test_three_violent_grad_spikes_in_a_sparse_log_are_a_gradient_pathology() -> None:
    """53 points logged every 7 steps, grad norm ~0.3 with three spikes of 12-60x at steps 70, 210
    and 329: more than 200 steps apart, but within 100 logged points, the window a dense log gets.
    One such spike alone is never reported."""
    n = 53
    g = 0.3 * np.exp(rng(52).normal(0, 0.15, n))
    spiky = g.copy()
    spiky[[9, 29, 46]] *= [12.0, 60.0, 25.0]
    f = findings(table(n, step_every=7, grad_norm=spiky))["GRAD_PATHOLOGY"]
    assert f.severity == "warn" and f.first_step == 70 and "spikes" in f.explanation
    once = g.copy()
    once[29] *= 60.0
    assert "GRAD_PATHOLOGY" not in findings(table(n, step_every=7, grad_norm=once))


def test_a_loss_that_diverges_by_orders_of_magnitude_is_a_gradient_pathology() -> None:
    n = 100
    loss = rng(11).normal(0, 0.02, n)
    loss[60:] = 10 ** np.linspace(1, 8, 40)
    f = findings(table(n, loss=loss))["GRAD_PATHOLOGY"]
    assert f.severity == "critical" and f.first_step == 61 and "loss diverged" in f.explanation


def test_a_loss_that_climbs_out_of_its_range_over_a_few_steps_is_dated_where_it_left() -> None:
    """|loss| ~0.02, then 1.2 at step 61 (fifty times its typical size, twenty times the largest
    before) and ten times more each step after: the divergence began at 61, not at 62 where it
    first crossed the full bar of a hundred times its typical size."""
    n = 100
    loss = rng(11).normal(0, 0.02, n)
    loss[60:] = -1.2 * 10 ** np.linspace(0, 6, 40)
    f = findings(table(n, loss=loss))["GRAD_PATHOLOGY"]
    assert f.severity == "critical" and f.first_step == 61 and "diverged from step 61" in f.explanation


def test_grad_norm_that_ramps_up_a_hundredfold_inside_the_early_window_is_growth() -> None:
    """1,250 steps: grad norm ~0.07 until step 140, then a 30-step ramp to ~10 that holds. The
    early window (a fifth of the run) holds the ramp, so its median is neither the level before
    nor the level after; the growth is read from the series' own levels and dated at the ramp."""
    n = 1250
    r = rng(51)
    step = np.arange(1, n + 1)
    level = 0.07 * np.exp(np.log(140.0) * np.clip((step - 140) / 30, 0, 1))
    grad = level * np.exp(r.normal(0, 0.25, n))
    f = findings(table(n, grad_norm=grad, reward_mean=0.6 + r.normal(0, 0.05, n)))["GRAD_PATHOLOGY"]
    assert f.severity == "critical" and 135 <= f.first_step <= 150 and "grad norm" in f.explanation


def test_a_value_loss_that_starts_climbing_inside_the_early_window_is_dated_from_the_level_before() -> None:
    """PPO, 1,000 steps: value loss ~0.25 to step 100, then up 16-fold by step 300. The early
    window (the first 200 steps) holds half the climb, so its median is already ~0.5; the climb
    is dated where the loss left the 0.25 it held before (twice that by step ~137), not where it
    doubled the lifted median."""
    n = 1000
    r = rng(61)
    step = np.arange(1, n + 1)
    vl = 0.25 * np.exp(np.log(16.0) * np.clip((step - 100) / 200, 0, 1)) * np.exp(r.normal(0, 0.1, n))
    t = table(n, value_loss=vl, value_explained_variance=0.15 + r.normal(0, 0.03, n), reward_mean=0.5 + r.normal(0, 0.05, n))
    f = findings(t)["VALUE_DIVERGENCE"]
    assert f.severity == "critical" and 120 <= f.first_step <= 150


def test_a_reward_that_lost_half_its_height_for_a_sixth_of_the_run_and_came_back_is_a_warning() -> None:
    """600 steps at ~1.3, then 0.56 from step 262 to 367, then back to 1.3: 57% of the height for
    a sixth of the run, below drop_critical. Every update in that stretch trained on worse
    rollouts; a dip of a few points or a shallow one stays quiet."""
    n = 600
    r = rng(71)
    i = np.arange(n)
    reward = np.where((i >= 261) & (i < 366), 0.56, 1.3) + r.normal(0, 0.03, n)
    f = findings(table(n, reward_mean=reward))["REWARD_COLLAPSE"]
    assert f.severity == "warn" and f.first_step == 262 and "come back since" in f.explanation
    dip = np.where((i >= 261) & (i < 366), 1.0, 1.3) + r.normal(0, 0.03, n)  # a quarter of the height
    assert "REWARD_COLLAPSE" not in findings(table(n, reward_mean=dip))
    short = np.where((i >= 261) & (i < 281), 0.56, 1.3) + r.normal(0, 0.03, n)  # 20 steps
    assert "REWARD_COLLAPSE" not in findings(table(n, reward_mean=short))


def test_a_mean_length_pinned_at_its_maximum_is_every_completion_at_the_cap() -> None:
    """A console that logs only the mean length: ~950 tokens, then exactly 2048 from step 300 to
    step 850, then ~990 again. A mean at the cap means every completion was cut there; the words
    say it from the mean and claim no share before; a free-length mean never pins."""
    n = 1000
    r = rng(72)
    i = np.arange(n)
    length = np.where((i >= 299) & (i < 850), 2048.0, 950 + r.normal(0, 30, n))
    f = findings(table(n, completion_len_mean=length, reward_mean=0.55 + r.normal(0, 0.05, n)))["TRUNCATION_STARVE"]
    assert f.severity == "warn" and f.first_step == 300 and "exactly 2048 tokens" in f.explanation
    assert "recovered" in f.explanation and "before" not in f.explanation.split(":")[0]
    free = np.minimum(950 + 600 * (i / n) + r.normal(0, 30, n), 2048.0)
    assert "TRUNCATION_STARVE" not in findings(table(n, completion_len_mean=free, reward_mean=0.55 + r.normal(0, 0.05, n)))


def test_kl_rising_from_zero_in_the_first_steps_is_normal() -> None:
    # KL starts at ~0 (the policy is the reference) and climbs as the policy first moves, then settles
    n = 180
    step = np.arange(1, n + 1)
    kl = 0.05 / (1 + np.exp(-(step - 20) / 3)) * np.exp(rng(12).normal(0, 0.3, n)) + 1e-5
    for k in (n, int(0.3 * n), int(0.6 * n)):
        assert "KL_BLOWUP" not in findings(table(k, kl_mean=kl[:k])), k


# -- exact onsets and words --------------------------------------------------------------------


def test_a_collapse_from_a_high_start_is_caught_where_it_first_shows() -> None:
    # 40 points, 5 steps apart: reward ~0.85 with no prior improvement, then ~0.35 from step 100
    n = 40
    p = np.where(np.arange(n) < 19, 0.85, 0.35)
    f = findings(table(n, step_every=5, reward_mean=binary_mean(p, 40, 13)))["REWARD_COLLAPSE"]
    assert f.severity in ("warn", "critical") and 95 <= f.first_step <= 100
    assert "has not recovered" in f.explanation or "partly recovered" in f.explanation


def test_a_collapse_after_a_few_noisy_batches_cut_as_stages_is_read_from_the_level_before_it() -> None:
    """149 PPO updates with 16 rollouts each: reward 0.69, 0.56, 0.82, 0.58 over the first
    fifteen (the segmentation cuts those batches into short levels of their own), then ~0.05 to
    the end. Counted from its first "stage" the level before would be a blip of three points;
    the fall from the level held just before it is still a collapse."""
    n = 149
    r = rng(53)
    head = np.r_[np.full(4, 0.688), np.full(3, 0.556), np.full(3, 0.819), np.full(5, 0.581)] + r.normal(0, 0.02, 15)
    reward = np.r_[head, np.clip(0.056 + r.normal(0, 0.035, n - 15), 0, 1)]
    f = findings(table(n, reward_mean=reward))["REWARD_COLLAPSE"]
    assert f.severity == "critical" and f.first_step == 16 and "has not recovered" in f.explanation


def test_a_plateau_split_by_a_change_within_the_noise_is_one_level_held() -> None:
    # The segmentation may cut a plateau into a long piece and a short one just before a fall;
    # the short piece is not a blip the reward never held: the level was held across both.
    from rlprobe.doctor.stats import Shift, level_before

    shifts = [
        Shift(at=62, before=0.57, after=0.67, end=79, z=11.0, start=29),  # a real rise
        Shift(at=80, before=0.67, after=0.74, end=103, z=7.0, start=62),  # another
        Shift(at=104, before=0.74, after=0.756, end=106, z=0.9, start=80),  # within the noise
        Shift(at=107, before=0.756, after=0.12, end=200, z=-35.0, start=104),  # the fall
    ]
    assert level_before(shifts, 3, min_z=4.0) == (0.756, 80)
    # a fall in stages counts from the level before its first stage
    stages = [Shift(at=50, before=0.8, after=0.6, end=79, z=-9.0, start=10), Shift(at=80, before=0.6, after=0.2, end=120, z=-20.0, start=50)]
    assert level_before(stages, 1, min_z=4.0) == (0.8, 10)
    # and a rise in stages from the level before its first stage
    rise = [Shift(at=48, before=0.0, after=0.2, end=50, z=7.5, start=0), Shift(at=51, before=0.2, after=0.84, end=54, z=18.0, start=48)]
    assert level_before(rise, 1, min_z=4.0) == (0.0, 0)


def test_batches_with_every_group_degenerate_are_not_an_advantage_collapse() -> None:
    # 4 groups a batch on an easy task, two optimizer updates a batch (the batch's reward
    # statistics on every other step): from the middle on most batches have no mixed group at all
    # and log adv_std exactly 0; the other batches keep their advantage scale
    n = 240
    r = rng(21)
    empty = r.random(n) < np.where(np.arange(n) < 100, 0.1, 0.6)
    adv = np.where(empty, 0.0, 0.14 + 0.02 * r.standard_normal(n))
    zero = np.where(empty, 1.0, r.choice([0.25, 0.5, 0.75], n))
    every_other = np.arange(n) % 2 == 0
    t = table(n, adv_std=adv, adv_zero_frac=zero, zero_variance_group_frac=np.where(every_other, zero, np.nan),
              reward_std=np.where(every_other, 0.3 + 0.02 * r.standard_normal(n), np.nan),
              reward_mean=np.where(every_other, binary_mean(np.full(n, 0.8), 32, 22), np.nan))
    assert "ADV_COLLAPSE" not in loud(findings(t))


def test_a_dip_the_run_recovers_from_is_not_a_collapse() -> None:
    n = 50
    p = np.full(n, 0.9)
    p[40:45] = 0.8
    assert "REWARD_COLLAPSE" not in findings(table(n, reward_mean=binary_mean(p, 64, 14)))


def test_a_deep_collapse_held_for_a_third_of_the_run_is_reported_though_it_recovered() -> None:
    # reward ~0.63 falls to ~0.03 from step 22 and climbs back at step 54 of 100: the thirty updates
    # in between trained on broken rollouts. A warning that says it ended, never a critical one.
    n = 100
    p = np.where((np.arange(1, n + 1) >= 22) & (np.arange(1, n + 1) < 54), 0.03, 0.63)
    f = findings(table(n, reward_mean=binary_mean(p, 128, 16)))["REWARD_COLLAPSE"]
    assert f.severity == "warn" and f.ongoing is False and 21 <= f.first_step <= 23
    assert "come back since" in f.explanation and "held there to step 5" in f.explanation
    # a one-point dip of the same depth stays quiet
    p1 = np.where(np.arange(n) == 50, 0.03, 0.63)
    assert "REWARD_COLLAPSE" not in findings(table(n, reward_mean=binary_mean(p1, 128, 16)))


def test_a_truncation_episode_the_run_got_out_of_says_it_ended() -> None:
    n = 40
    trunc = np.full(n, 0.02)
    trunc[18:28] = 0.95
    f = findings(table(n, step_every=5, max_len_hit_frac=trunc, reward_mean=binary_mean(np.full(n, 0.85), 40, 15)))["TRUNCATION_STARVE"]
    assert f.first_step == 95 and f.ongoing is False and f.severity == "warn"
    assert "the run recovered" in f.explanation and "step 140" in f.explanation
    assert "held" in f.explanation  # the reward did not fall: no "earn little or no reward"


def test_a_mild_truncation_episode_the_run_got_out_of_is_a_note() -> None:
    """2-5 of 16 completions cut for three updates early in a 32-update run, then none: it never
    held at the critical share and is over; after the fact it is worth a note, not an alarm."""
    trunc = np.zeros(32)
    trunc[2], trunc[4:10] = 0.0625, [0.0625, 0.3125, 0.1875, 0.125, 0.0625, 0.0625]
    f = findings(table(32, max_len_hit_frac=trunc, reward_mean=binary_mean(np.full(32, 0.25), 16, 3)))["TRUNCATION_STARVE"]
    assert f.severity == "info" and f.ongoing is False and f.evidence["severity_while_it_held"] == "warn"
    assert "the run recovered" in f.explanation


def test_truncation_words_name_the_share_of_each_stretch() -> None:
    # 10-22% cut from step 145, then all of them from step 165 (the late truncation of a real run)
    n = 40
    trunc = np.zeros(n)
    trunc[28:32] = [0.1, 0.125, 0.225, 0.15]
    trunc[32:] = 1.0
    f = findings(table(n, step_every=5, max_len_hit_frac=trunc))["TRUNCATION_STARVE"]
    assert f.severity == "critical" and f.first_step == 145
    assert "100% from step 165" in f.explanation


def test_completions_that_shrink_to_a_few_tokens_are_a_collapse_of_their_own() -> None:
    n = 60
    length = np.where(np.arange(n) < 30, 350.0, 6.0) * np.exp(rng(16).normal(0, 0.05, n))
    reward = binary_mean(np.where(np.arange(n) < 30, 0.6, 0.2), 32, 17)
    f = findings(table(n, completion_len_mean=length, reward_mean=reward))["COMPLETION_COLLAPSE"]
    assert f.severity == "critical" and f.first_step == 31 and "bare answer" in f.explanation
    healthy = np.linspace(300, 200, n) * np.exp(rng(18).normal(0, 0.05, n))
    assert "COMPLETION_COLLAPSE" not in findings(table(n, completion_len_mean=healthy))


# -- live stays calm -----------------------------------------------------------------------------


@pytest.mark.slow
@pytest.mark.parametrize("family", list(HEALTHY_FAMILIES))
def test_a_prefix_of_a_healthy_run_raises_nothing_the_whole_run_would_not(family: str) -> None:
    for seed, n_steps in ((21, 400), (22, 1500)):
        run = make_run(f"healthy:{family}", n_steps=n_steps, seed=seed)
        cols = {k: v for k, v in run.series.items() if np.isfinite(np.asarray(v, dtype=float)).any()}
        whole = {k for k, f in loud(findings(table(len(run.steps), **cols))).items()}
        for share in (0.3, 0.6):
            k = int(share * len(run.steps))
            prefix = loud(findings(table(k, **{c: np.asarray(v, dtype=float)[:k] for c, v in cols.items()})))
            assert set(prefix) <= whole, (family, seed, share, {s: f.explanation for s, f in prefix.items()})



def _synth_prefix(kind: str, n_steps: int, seed: int, frac: float) -> pa.Table:
    """The first `frac` of a run of benchmarks/detectors.py's generator, as a watcher sees it."""
    import sys
    from pathlib import Path

    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))
    from detectors import prefix_tables, setup_of, to_tables

    run = make_run(kind, n_steps=n_steps, seed=seed, **setup_of(kind, seed, False))
    steps, samples = to_tables(run, "run")
    return prefix_tables(steps, samples, frac, "run")[0]


def test_a_few_batches_with_every_group_solved_are_chance_on_an_easy_task() -> None:
    """4 groups a batch on an easy task, most of them solved every time: all four are degenerate
    on a large share of the batches, so five such batches in a row at the end of what a watcher
    has seen (60% of the run) are chance, not a run that has stopped learning. The whole run
    raises nothing. Before, a DEGENERATE_GROUPS warning "100% of groups from step 123"."""
    found = findings(_synth_prefix("healthy:easy_task", 212, 135, 0.6))
    assert "DEGENERATE_GROUPS" not in loud(found)


def test_every_group_degenerate_for_longer_than_chance_allows_is_reported() -> None:
    """4 groups a batch, ~70% degenerate, then 30 batches in a row where every group is
    degenerate with the reward mid-range (each prompt all right or all wrong alike): no gradient
    is left, far longer than chance would give."""
    r = rng(10)
    zero = r.binomial(4, 0.7, 200) / 4
    reward = np.clip(0.5 + r.normal(0, 0.1, 200), 0, 1)
    zero[-30:] = 1.0
    reward[-30:] = r.choice([0.25, 0.5, 0.75], 30)
    found = loud(findings(table(200, zero_variance_group_frac=zero, reward_mean=reward)))
    assert "DEGENERATE_GROUPS" in found and found["DEGENERATE_GROUPS"].first_step >= 170


def test_an_easy_task_the_policy_settles_into_early_is_not_a_polarised_batch() -> None:
    """An easy task (4 groups, reward ~0.95) whose degenerate share rises from its first points
    to ~90%: by the reward alone at most 5% of the groups can be all-wrong, so the degenerate
    groups are solved prompts, an easy task's normal state, not a batch split into all-right and
    all-wrong. Before, a critical DEGENERATE_GROUPS on the first 30% of the run (the whole run
    raised nothing)."""
    found = findings(_synth_prefix("healthy:noisy_grad", 1188, 53, 0.3))
    assert "DEGENERATE_GROUPS" not in loud(found)


def test_steps_that_get_much_slower_while_completions_do_not_grow_are_a_warning() -> None:
    """Step time 2.6 s -> 9 s over the second half of the run with completion length flat: the
    system is slowing down (a leak, a fragmenting cache), not the policy. The same slow-down with
    completions growing as fast is a consequence of the length, and a note."""
    n = 120
    r = rng(21)
    slow = 2.6 * np.where(np.arange(n) < 60, 1.0, np.linspace(1.0, 3.5, n)) * (1 + r.normal(0, 0.03, n))
    flat = 400 * (1 + r.normal(0, 0.03, n))
    f = findings(table(n, step_time_s=slow, completion_len_mean=flat))["THROUGHPUT_ROT"]
    assert f.severity == "warn" and "not the length" in f.explanation
    growing = flat * slow / 2.6
    f = findings(table(n, step_time_s=slow, completion_len_mean=growing))["THROUGHPUT_ROT"]
    assert f.severity == "info" and "longer" in f.explanation


def test_a_format_learned_inside_the_early_window_while_correctness_falls_is_format_gaming() -> None:
    """The format reward jumps 0.55 -> 0.97 at steps 25-40 of a 260-step log (the early window is
    mostly after it), and the answer reward falls from 0.33 to 0.2: judged against where each
    stood before the jump, the policy took up the easy reward and its answers got worse."""
    n = 52
    steps_idx = np.arange(n)
    fmt = np.clip(0.55 + 0.42 / (1 + np.exp(-(steps_idx - 6) * 1.5)) + rng(31).normal(0, 0.02, n), 0, 1)
    answer = np.where(steps_idx < 6, 0.33, 0.2) + rng(32).normal(0, 0.04, n)
    t = table(n, step_every=5, reward_mean=fmt + answer, **{"reward_component.format_reward": fmt, "reward_component.answer_reward": answer})
    f = findings(t)["FORMAT_GAMING"]
    assert f.severity in ("warn", "critical") and f.first_step <= 45 and "early in the run" in f.explanation


def test_a_format_taken_up_early_while_correctness_gains_a_little_is_format_gaming() -> None:
    """45 points every 5 steps: the format reward jumps 0.25 -> 1.0 at step 20, and the answer
    reward edges 0.30 -> 0.34. That is measurable, but the reward's gain is the format's: the
    answers paid back a twentieth of it, so the policy took up the easy reward."""
    n = 45
    i = np.arange(n)
    fmt = np.clip(np.where(i < 3, 0.25, 1.0) + rng(41).normal(0, 0.01, n), 0, 1)
    answer = np.where(i < 3, 0.30, 0.34) + rng(42).normal(0, 0.01, n)
    t = table(n, step_every=5, reward_mean=fmt + answer, **{"reward_component.strict_format": fmt, "reward_component.answer_reward": answer})
    f = findings(t)["FORMAT_GAMING"]
    assert f.severity == "warn" and f.first_step <= 25 and "stagnated" in f.explanation
    # answers that paid back half the format's gain were learned with it
    answer = np.where(i < 3, 0.30, 0.68) + rng(42).normal(0, 0.01, n)
    t = table(n, step_every=5, reward_mean=fmt + answer, **{"reward_component.strict_format": fmt, "reward_component.answer_reward": answer})
    assert "FORMAT_GAMING" not in findings(t)


def test_a_format_term_worth_little_of_the_reward_is_not_gamed() -> None:
    """824 steps: a format term weighted 0.1 creeps 0.047 -> 0.083 over the run while accuracy
    holds at 0.40. Its whole gain adds under a tenth of the reward: nothing worth gaming."""
    n = 824
    r = rng(43)
    fmt = np.linspace(0.047, 0.083, n) + r.normal(0, 0.002, n)
    acc = 0.40 + r.normal(0, 0.02, n)
    t = table(n, reward_mean=fmt + acc, **{"reward_component.format": fmt, "reward_component.accuracy": acc})
    assert "FORMAT_GAMING" not in loud(findings(t))


def test_a_slow_shrink_to_a_few_tokens_is_dated_where_it_fell_below_its_share() -> None:
    """132 points every 5 steps: completions at ~850 tokens shrink steadily from step 250 and
    reach a few tokens by step 420. A reader sees the collapse once they stand under 30% of
    their level (about step 365), not when the last of them reach 48 tokens."""
    n = 132
    steps = np.arange(1, n + 1) * 5
    length = np.where(steps < 250, 850.0, np.maximum(850.0 * (1 - (steps - 250) / 175.0), 8.0))
    length = np.maximum(length * (1 + rng(44).normal(0, 0.03, n)), 5.0)
    f = findings(table(n, step_every=5, completion_len_mean=length, reward_mean=0.7 + rng(45).normal(0, 0.02, n)))
    f = f["COMPLETION_COLLAPSE"]
    first_under = int(steps[np.argmax(length <= 0.3 * 850)])
    assert abs(f.first_step - first_under) <= 5 and f.first_step < 400 and f"from step {f.first_step}" in f.explanation


def test_length_hacking_is_dated_at_the_first_logged_point_of_the_growth() -> None:
    """59 points every 2 steps: completions at ~165 tokens jump to 369 at step 16, then 455, 504
    and ~530; a judge score pays for it while correctness holds. The trailing median crosses
    1.5x two points late; the logged point at 2.2x is where the growth shows."""
    n = 59
    r = rng(46)
    steps = np.arange(1, n + 1) * 2
    length = np.where(steps < 16, 165.0, 530.0) * (1 + r.normal(0, 0.02, n))
    length[7:10] = [369.0, 455.0, 504.0]
    judge = np.where(steps < 16, 0.4, 0.75) + r.normal(0, 0.02, n)
    correct = 0.5 + r.normal(0, 0.02, n)
    t = table(n, step_every=2, completion_len_mean=length, reward_mean=judge + correct,
              **{"reward_component.judge_score": judge, "reward_component.correctness": correct})
    f = findings(t)["REWARD_HACK_LENGTH"]
    assert steps[7] == 16 and f.first_step == 16 and f.severity == "critical"


def test_grad_growth_that_starts_as_ever_more_spikes_is_dated_where_they_became_common() -> None:
    """600 steps: grad norm ~0.05; from step 240 a growing share of steps blows up (one in ten
    at first, most by step 400, each larger than the last) until the median goes with them.
    The growth is dated where a quarter of the steps had blown up (about step 265), not where
    the trailing median crossed 6x (about step 300-340)."""
    for seed in (47, 48, 49):
        n = 600
        r = rng(seed)
        steps = np.arange(1, n + 1)
        g = 0.05 * np.exp(r.normal(0, 0.2, n))
        share = np.clip((steps - 240) / 160.0, 0.0, 0.9) + np.where(steps >= 240, 0.1, 0.0)
        blown = r.random(n) < share
        blown[239] = True
        size = (10 + (steps - 240) * 0.5) * np.exp(r.normal(0, 0.5, n))
        g = np.where(blown, 0.05 * size, g)
        f = findings(table(n, grad_norm=g, reward_mean=0.6 + r.normal(0, 0.05, n)))["GRAD_PATHOLOGY"]
        assert f.severity == "critical" and 240 <= f.first_step <= 285, (seed, f.first_step)


def test_spikes_on_a_third_of_the_steps_are_a_burst_though_they_are_the_local_level() -> None:
    """340 points every 2 steps: grad norm ~0.2 until step 340, then a third of the steps jump to
    20-250x while the others sit at ~0.6. With so many, the level a quarter of the nearby steps
    reach is the spikes' own, and no single one stands out from it; against the largest grad
    norms of the early steps they are a burst, dated at its first spike."""
    n = 340
    r = rng(61)
    steps = np.arange(1, n + 1) * 2
    g = np.where(steps < 340, 0.2, 0.6) * np.exp(r.normal(0, 0.3, n))
    burst = (steps >= 340) & (r.random(n) < 0.35)
    burst[169] = True  # step 340
    g = np.where(burst, 0.2 * np.exp(r.uniform(np.log(20), np.log(250), n)), g)
    f = findings(table(n, step_every=2, grad_norm=g, reward_mean=0.6 + r.normal(0, 0.05, n)))["GRAD_PATHOLOGY"]
    assert f.severity == "critical" and f.first_step == 340 and "spikes" in f.explanation
    # the same steps at a twentieth of that size are the run's ordinary spread
    calm = np.where(burst, g / 20.0, g)
    assert "GRAD_PATHOLOGY" not in findings(table(n, step_every=2, grad_norm=calm, reward_mean=0.6 + r.normal(0, 0.05, n)))


def test_kl_that_ran_away_from_the_first_steps_and_came_back_is_a_warning_that_says_so() -> None:
    """25 PPO updates: KL 0.02, 0.2, 2, then 13-20 nats on updates 4-14, then ~0.05 again. For
    eleven updates the policy was far from the reference; that it came back does not undo them."""
    n = 25
    r = rng(48)
    kl = np.where(np.arange(n) < 14, 15.0, 0.05) * np.exp(r.normal(0, 0.1, n))
    kl[:3] = [0.0225, 0.217, 2.02]
    f = findings(table(n, kl_mean=kl, reward_mean=0.35 + r.normal(0, 0.02, n)))["KL_BLOWUP"]
    assert f.severity == "warn" and f.ongoing is False and f.first_step == 3
    assert "held there to step 14" in f.explanation and "come back since" in f.explanation
    # a blip of two updates is not an episode
    kl = np.full(n, 0.05) * np.exp(r.normal(0, 0.1, n))
    kl[:5] = [0.0225, 0.217, 2.02, 13.0, 0.06]
    assert "KL_BLOWUP" not in findings(table(n, kl_mean=kl, reward_mean=0.35 + r.normal(0, 0.02, n)))


def test_a_creep_that_reaches_twice_the_early_step_time_by_the_end_is_a_warning() -> None:
    """Step time creeping 55 s -> 135 s over 314 points with completion length flat: its median over
    the stretch is under 2x, the level it reached is 2.3x, and every step still to come costs that."""
    n = 314
    r = rng(53)
    slow = 55.0 * np.linspace(1.0, 2.45, n) * (1 + r.normal(0, 0.06, n))
    flat = 200 * (1 + r.normal(0, 0.02, n))
    f = findings(table(n, step_time_s=slow, completion_len_mean=flat))["THROUGHPUT_ROT"]
    assert f.severity == "warn" and f.evidence["ratio_while_high"] < 2.0 and "not the length" in f.explanation


def test_a_slow_down_in_the_last_points_of_a_sparse_log_is_seen_before_the_smoother_catches_up() -> None:
    """31 points at a stride of 7: step time 90 s, then 160-205 s on the last five points with
    completion length flat. Every raw point of that stretch sits above 1.5x; the smoothed series,
    a few points behind, does not yet, and it must not delay what the raw points already show."""
    n = 31
    r = rng(54)
    t = 90.0 * (1 + r.normal(0, 0.02, n))
    t[-6:] = [140.0, 163.0, 186.0, 205.0, 204.0, 201.0]
    flat = 300 * (1 + r.normal(0, 0.02, n))
    f = findings(table(n, step_every=7, step_time_s=t, completion_len_mean=flat))["THROUGHPUT_ROT"]
    assert f.severity == "warn" and f.first_step in (182, 189) and "not the length" in f.explanation


def test_a_slow_down_inside_the_early_window_is_measured_from_the_steps_before_it() -> None:
    """Step time 130 s, then 320 s from step 260 of 2000 (inside the early window, whose median
    the jump lifts) with completion length flat: 2.5x, a warning quoting the level before it."""
    n = 2000
    r = rng(41)
    slow = np.where(np.arange(1, n + 1) < 260, 130.0, 320.0) * (1 + r.normal(0, 0.1, n))
    flat = 320 * (1 + r.normal(0, 0.1, n))
    f = findings(table(n, step_time_s=slow, completion_len_mean=flat))["THROUGHPUT_ROT"]
    assert f.severity == "warn" and 255 <= f.first_step <= 265
    assert f.evidence["step_time_s_baseline"] < 140 and "not the length" in f.explanation


def test_a_step_up_inside_the_early_window_measured_from_the_opening_is_dated_where_it_happened() -> None:
    """1647 steps: 2.8 s a step, then 7 s from step 152 (a tenth of the run in, inside the early
    window), length flat. Against the run's opening the slow-down is dated at the step up, not
    at the middle of the early window."""
    n = 1647
    r = rng(47)
    slow = np.where(np.arange(1, n + 1) < 152, 2.8, 7.0) * (1 + r.normal(0, 0.08, n))
    flat = 450 * (1 + r.normal(0, 0.06, n))
    f = findings(table(n, step_time_s=slow, completion_len_mean=flat))["THROUGHPUT_ROT"]
    assert f.severity == "warn" and 148 <= f.first_step <= 154, f.first_step


def test_a_format_at_its_ceiling_from_the_third_logged_point_on_is_judged_against_the_first_two() -> None:
    """30 points, 5 steps apart: format 0.5 at the first two points, 1.0 from the third on; the
    answer rate (a rate over 256 rollouts) sits at 0.33 before and ~0.27 after. The run's first
    two points are where it started: a level held, not a blip."""
    n = 30
    idx = np.arange(n)
    fmt = np.where(idx < 2, binary_mean(np.full(n, 0.5), 256, 35), 1.0)
    answer = binary_mean(np.where(idx < 2, 0.33, 0.27), 256, 36)
    t = table(n, step_every=5, reward_mean=fmt + answer, **{"reward_component.format_rate": fmt, "reward_component.accuracy": answer})
    f = findings(t)["FORMAT_GAMING"]
    assert f.severity == "warn" and f.first_step <= 15 and "stagnated" in f.explanation
    # the same jump with the answers improving after it is a format learned with the task
    better = binary_mean(np.where(idx < 2, 0.33, 0.5), 256, 36)
    t = table(n, step_every=5, reward_mean=fmt + better, **{"reward_component.format_rate": fmt, "reward_component.accuracy": better})
    assert "FORMAT_GAMING" not in loud(findings(t))


def test_a_format_term_worth_two_that_pins_at_its_ceiling_early_is_judged_on_its_own_scale() -> None:
    """60 points every 2 steps: a format term worth 2 (a strict template scored 0-2) at 0.25-0.75
    for the first 6 points, then at exactly 2.0 on almost every point; the answer rate over 8
    rollouts wanders around 0.3 throughout. Pinned at its ceiling, the format has no
    point-to-point noise, yet its rise is read on its own scale; with the answers improving after
    the jump it is a format learned with the task."""
    n = 60
    idx = np.arange(n)
    r = rng(51)
    fmt = np.where(idx < 6, r.choice([0.25, 0.5, 0.75], n), np.where(r.random(n) < 0.9, 2.0, 1.75))
    answer = binary_mean(np.full(n, 0.3), 8, 52)
    t = table(n, step_every=2, reward_mean=fmt + answer, **{"reward_component.strict_format": fmt, "reward_component.correctness": answer})
    f = findings(t)["FORMAT_GAMING"]
    assert f.first_step <= 16 and "strict_format" in f.explanation
    better = binary_mean(np.where(idx < 6, 0.3, 0.7), 8, 52)
    t = table(n, step_every=2, reward_mean=fmt + better, **{"reward_component.strict_format": fmt, "reward_component.correctness": better})
    assert "FORMAT_GAMING" not in loud(findings(t))


def test_a_format_learned_early_while_correctness_rises_is_not_format_gaming() -> None:
    n = 52
    steps_idx = np.arange(n)
    fmt = np.clip(0.55 + 0.42 / (1 + np.exp(-(steps_idx - 6) * 1.5)) + rng(33).normal(0, 0.02, n), 0, 1)
    answer = 0.2 + 0.3 * steps_idx / n + rng(34).normal(0, 0.04, n)
    t = table(n, step_every=5, reward_mean=fmt + answer, **{"reward_component.format_reward": fmt, "reward_component.answer_reward": answer})
    assert "FORMAT_GAMING" not in loud(findings(t))


def test_correctness_that_rose_with_the_format_and_fell_much_later_is_not_said_to_have_fallen() -> None:
    """The format reward climbs 0.72 -> 0.96 over the first 40 of 250 steps while accuracy edges
    up 0.38 -> 0.42; at step 90 accuracy drops to 0.2 (the format long at its ceiling). Gaming
    trades correctness for format as the format rises: the later fall has another cause, and
    "accuracy fell" would not be true of the climb."""
    n = 250
    i = np.arange(n)
    r = rng(52)
    fmt = np.clip(0.72 + 0.24 / (1 + np.exp(-(i - 20) / 4)) + r.normal(0, 0.015, n), 0, 1)
    acc = np.where(i < 90, 0.38 + 0.04 * np.minimum(i, 40) / 40, 0.2) + r.normal(0, 0.02, n)
    t = table(n, reward_mean=0.5 * (fmt + acc), **{"reward_component.tags": 0.5 * fmt, "reward_component.accuracy": 0.5 * acc})
    f = findings(t).get("FORMAT_GAMING")
    assert f is None or (f.severity != "critical" and "fell" not in f.explanation)


def test_degenerate_groups_that_the_reward_says_are_solved_prompts_are_saturation() -> None:
    """Zero-variance groups 30% -> ~97% while the reward climbs to ~0.95: at most 5% of the groups
    can be all-wrong, so the degenerate ones are solved prompts: the run saturated (info)."""
    n = 300
    r = rng(35)
    up = 1 / (1 + np.exp(-(np.arange(n) - 150) / 10))
    zero = np.clip(0.3 + 0.67 * up + r.normal(0, 0.03, n), 0, 1)
    reward = np.clip(0.45 + 0.5 * up + r.normal(0, 0.03, n), 0, 1)
    found = findings(table(n, zero_variance_group_frac=zero, reward_mean=reward, reward_std=0.3 * (1 - up) + 0.02))
    assert "DEGENERATE_GROUPS" not in loud(found)
    assert found["DEGENERATE_GROUPS"].severity == "info" and "solved prompts" in found["DEGENERATE_GROUPS"].explanation


def test_a_batch_the_reward_proves_polarised_is_degenerate_groups_without_jitter() -> None:
    """Zero-variance groups 30% -> 85% at reward ~0.6 (a [0, 1] reward): at least 45% of the
    groups are solved and at least 25% always failed, whatever the batch mean's jitter says."""
    n = 45
    r = rng(36)
    up = np.arange(n) >= 30
    zero = np.where(up, 0.85, 0.3) + r.normal(0, 0.03, n)
    reward = np.where(up, 0.6, 0.4) + r.normal(0, 0.01, n)
    found = loud(findings(table(n, step_every=8, zero_variance_group_frac=np.clip(zero, 0, 1), reward_mean=reward)))
    assert "DEGENERATE_GROUPS" in found and 240 <= found["DEGENERATE_GROUPS"].first_step <= 260


# -- onsets read off the logged values, not their trailing median ------------------------------


def test_an_entropy_collapse_is_dated_at_the_first_point_below_the_line_not_where_the_median_crosses() -> None:
    """Entropy 0.34 on steps 2-12, 0.30 at 14, 0.13 at 16, 0.0105 from 18 (a 25-point log every 2
    steps): the trailing median crosses a fifth of the early level at step 22, the values at 18."""
    entropy = np.r_[np.full(6, 0.34), [0.30, 0.132], np.full(17, 0.0105)] * (1 + rng(41).normal(0, 0.01, 25))
    f = findings(table(25, step_every=2, entropy_mean=entropy))["ENTROPY_COLLAPSE"]
    assert f.first_step == 18


def test_a_collapse_already_under_way_in_the_early_window_is_dated_against_the_level_before_it() -> None:
    """Entropy 0.217 on steps 1-7, then 0.17, 0.13, 0.11, 0.083, 0.063, 0.036 (a fifth of 0.217
    first at step 13), 0.011 from 14 on, of 66: the early window's median (0.17) is already part of
    the way down, so the line is a fifth of the level held before the fall, crossed at 13."""
    entropy = np.r_[np.full(7, 0.217), [0.171, 0.133, 0.114, 0.083, 0.063, 0.036], np.full(53, 0.0108)]
    entropy = entropy * (1 + rng(48).normal(0, 0.01, 66))
    f = findings(table(66, entropy_mean=entropy))["ENTROPY_COLLAPSE"]
    assert f.first_step == 13 and f.severity == "critical" and "the level it held before the fall (0.21" in f.explanation


def test_entropy_back_at_the_level_the_model_started_at_after_a_blow_up_is_not_a_collapse() -> None:
    """22 PPO updates: entropy 0.47 at the first, ~3.4 over the next twelve (the early window),
    ~0.5 after. Against the window it fell to 15%, but it is back where the model started."""
    n = 22
    r = rng(49)
    ent = np.r_[0.469, 3.4 * np.exp(r.normal(0, 0.05, 12)), 0.5 * np.exp(r.normal(0, 0.06, 9))]
    assert "ENTROPY_COLLAPSE" not in findings(table(n, entropy_mean=ent, reward_mean=0.5 + r.normal(0, 0.08, n)))


def test_an_entropy_collapse_under_way_from_the_first_logged_point_counts_from_the_opening_entropy() -> None:
    """Entropy 0.34 -> 0.022 over the first 9 points (every 5 steps) of a 1,270-point log, then
    flat: inside the run's first 1%, long before any early window. The model's entropy at its
    first logged points is the level it came in with."""
    n = 1270
    entropy = np.r_[[0.338, 0.339, 0.312, 0.284, 0.24, 0.2, 0.14, 0.088, 0.067, 0.043], np.full(n - 10, 0.022)]
    entropy = entropy * (1 + rng(49).normal(0, 0.05, n))
    f = findings(table(n, step_every=5, entropy_mean=entropy))["ENTROPY_COLLAPSE"]
    assert f.severity == "critical" and f.first_step <= 45
    # healthy sharpening in the same stretch (2x) is not a collapse
    gentle = np.r_[np.linspace(0.34, 0.17, 10), np.full(n - 10, 0.17)] * (1 + rng(49).normal(0, 0.05, n))
    assert "ENTROPY_COLLAPSE" not in loud(findings(table(n, step_every=5, entropy_mean=gentle)))


def test_an_advantage_fall_already_under_way_in_the_early_window_is_dated_where_it_crosses() -> None:
    """adv_std ~0.95 for 4 points, then 0.76, 0.59, 0.38, 0.2, 0.058 (step 9), 0.0048 on, while the
    groups keep their reward spread: dated at step 9 against the level before, not later against
    the early window's median that the fall already pulled down."""
    n = 66
    r = rng(50)
    adv = np.r_[[0.953, 0.945, 0.953, 0.908, 0.765, 0.589, 0.381, 0.196, 0.0577], np.full(n - 9, 0.0048)] * (1 + r.normal(0, 0.01, n))
    found = findings(table(n, adv_std=adv, reward_std=0.45 + r.normal(0, 0.03, n), group_reward_std_mean=0.4 + r.normal(0, 0.03, n),
                           zero_variance_group_frac=np.clip(0.2 + r.normal(0, 0.03, n), 0, 1), reward_mean=0.4 + r.normal(0, 0.05, n)))
    f = found["ADV_COLLAPSE"]
    assert f.first_step == 9 and "the level it held before the fall" in f.explanation


def test_a_loop_that_takes_hold_in_the_first_points_is_judged_against_the_first_point() -> None:
    """46 points every 2 steps: repetition 0.02 at step 2, 0.16 at step 4, ~0.35 from step 6 on to
    the end: no level before it but the model's own first point. Dated as the main test dates a
    loop, at the first point already at rate_warn (0.15) and rise_min above the level before:
    step 4. A rate that starts and stays at its opening level is not a loop, however it wobbles."""
    n = 46
    r = rng(51)
    rep = np.r_[[0.021, 0.156], np.clip(0.35 + r.normal(0, 0.04, n - 2), 0, 1)]
    f = findings(table(n, step_every=2, repetition_rate=rep))["REPETITION_SPIRAL"]
    assert f.severity == "critical" and f.first_step == 4
    flat = np.clip(0.03 + r.normal(0, 0.01, n), 0, 1)
    assert "REPETITION_SPIRAL" not in loud(findings(table(n, step_every=2, repetition_rate=flat)))


def test_clipping_that_holds_from_the_first_logged_step_is_dated_there() -> None:
    clip = 0.6 + rng(42).normal(0, 0.06, 600)
    f = findings(table(600, step_every=10, clip_fraction=clip))["CLIP_SATURATION"]
    assert f.severity == "critical" and f.first_step == 10


def test_a_value_loss_on_its_way_up_is_dated_where_it_left_its_early_level() -> None:
    """Value loss ~0.3 for 400 steps, then doubling every few steps: it crosses 4x its early
    level at step 411 but had left it (2x) at step 403."""
    n = 440
    loss = 0.3 * (1 + rng(43).normal(0, 0.08, n))
    loss[398:] *= 1.12 ** np.arange(n - 398)
    f = findings(table(n, value_loss=loss))["VALUE_DIVERGENCE"]
    assert 400 <= f.first_step <= 406


def test_advantages_far_below_the_rewards_spread_from_the_first_step_are_an_advantage_collapse() -> None:
    """adv_std 0.0065 on every step while the groups' rewards spread 0.45 and no group is
    degenerate: whether or not it divides by the group std, GRPO's advantages cannot be 70x
    smaller than that. The run's own early level cannot show it: nothing ever changed."""
    n = 78
    r = rng(44)
    found = findings(table(n, adv_std=0.00654 * (1 + r.normal(0, 0.001, n)), reward_std=0.45 + r.normal(0, 0.05, n),
                           group_reward_std_mean=0.45 + r.normal(0, 0.05, n), zero_variance_group_frac=np.zeros(n),
                           reward_mean=0.33 + r.normal(0, 0.1, n)))
    f = found["ADV_COLLAPSE"]
    assert f.severity == "critical" and f.first_step == 1 and "From the first logged step" in f.explanation


def test_advantages_a_fifth_of_what_the_rewards_spread_gives_from_the_first_step_are_a_warning() -> None:
    """GRPO, 16 rollouts a group: adv_std 0.042 on every step while the groups' rewards spread
    0.35 and an eighth of the groups are degenerate: 12% of the least the advantages can be,
    whether or not they are divided by the group std."""
    n = 545
    r = rng(45)
    found = findings(table(n, step_every=2, adv_std=0.042 * (1 + r.normal(0, 0.04, n)), reward_std=0.49 + r.normal(0, 0.01, n),
                           group_reward_std_mean=0.35 + r.normal(0, 0.04, n), zero_variance_group_frac=np.clip(0.125 + r.normal(0, 0.06, n), 0, 1),
                           reward_mean=0.39 + r.normal(0, 0.06, n)))
    f = found["ADV_COLLAPSE"]
    assert f.severity == "warn" and f.first_step == 2 and "From the first logged step" in f.explanation


def test_group_relative_advantages_that_fall_after_the_first_few_steps_are_a_collapse() -> None:
    """DAPO, 104 steps: adv_std ~0.85 on steps 1-4, then ~0.008 from step 5 on, while the rewards
    keep their spread. PPO's advantages may settle in the first steps while its value head
    learns; group-relative ones have nothing to settle, so four points are a level held."""
    n = 104
    r = rng(46)
    adv = np.where(np.arange(1, n + 1) < 5, 0.85, 0.008) * (1 + r.normal(0, 0.03, n))
    found = findings(table(n, adv_std=adv, reward_std=0.49 + r.normal(0, 0.01, n), zero_variance_group_frac=np.clip(0.15 + r.normal(0, 0.05, n), 0, 1),
                           reward_mean=0.57 + r.normal(0, 0.05, n)))
    f = found["ADV_COLLAPSE"]
    assert f.severity == "critical" and f.first_step == 5 and "the level it held before the fall" in f.explanation


def test_advantages_divided_by_the_group_std_then_scaled_down_are_small_from_the_start() -> None:
    """GRPO with a continuous reward: the within-group std wanders 0.08-0.16, adv_std sits at
    0.035 on every step. Steady while the spread moves, the advantages were divided by the group
    std, so their scale should be about 1: a scale bug, though 0.035 is not far below 0.12."""
    n = 70
    r = rng(48)
    within = 0.12 * np.exp(r.normal(0, 0.15, n))
    found = findings(table(n, adv_std=0.0353 * (1 + r.normal(0, 0.0005, n)), reward_std=within + 0.005, group_reward_std_mean=within,
                           zero_variance_group_frac=np.zeros(n), reward_mean=0.56 + r.normal(0, 0.03, n)))
    f = found["ADV_COLLAPSE"]
    assert f.first_step == 1 and "held steady" in f.explanation
    # without the division the advantages move with the spread, and 0.3x of it is no collapse
    found = findings(table(n, adv_std=0.3 * within, reward_std=within + 0.005, group_reward_std_mean=within,
                           zero_variance_group_frac=np.zeros(n), reward_mean=0.56 + r.normal(0, 0.03, n)))
    assert "ADV_COLLAPSE" not in loud(found)


def test_healthy_group_normalised_advantages_are_not_small_from_the_start() -> None:
    n = 78
    r = rng(45)
    found = findings(table(n, adv_std=0.9 + r.normal(0, 0.02, n), reward_std=0.45 + r.normal(0, 0.05, n),
                           group_reward_std_mean=0.4 + r.normal(0, 0.05, n), zero_variance_group_frac=np.clip(0.2 + r.normal(0, 0.05, n), 0, 1),
                           reward_mean=0.33 + r.normal(0, 0.1, n)))
    assert "ADV_COLLAPSE" not in loud(found)


def test_a_kl_jump_in_a_short_log_is_dated_at_the_jump() -> None:
    """KL 0.015 -> 0.041 over steps 1-5, 0.54 at step 6, then 0.5-0.7 to step 26: a thirteenfold
    jump of the level in one step, four points into a 26-point log."""
    kl = np.r_[[0.0148, 0.0231, 0.0317, 0.034, 0.041], 0.6 + rng(46).normal(0, 0.05, 21)]
    f = findings(table(26, kl_mean=kl, entropy_mean=1.05 + rng(47).normal(0, 0.02, 26)))["KL_BLOWUP"]
    assert f.severity == "critical" and f.first_step == 6


def test_a_short_stretch_of_luck_in_a_sparse_one_prompt_reward_is_not_a_collapse() -> None:
    """One prompt of 6 rollouts per step and a sparse binary reward (the generator's healthy
    reasoning_growth run, seed 171): a step's mean is 0 on most steps and jumps to 1/3-2/3 when
    the prompt is an easy one, so a dozen steps that happen to hold a few easy prompts are no
    level the reward held. The median difference of such a series is 0; its root mean square
    difference sees the jumps. Before, a critical REWARD_COLLAPSE "from 0.333 over steps 124-135
    to 0"."""
    assert "REWARD_COLLAPSE" not in loud(findings(_synth_prefix("healthy:reasoning_growth", 221, 171, 1.0)))


def test_grad_norm_spikes_in_a_30_point_log_are_judged_against_that_many_points() -> None:
    """Grad norm ~0.5 with a factor-of-4 spread from step to step, and spikes of 15, 137, 90 and
    42 in a 31-step console log: against a 4.5-sigma bar made for runs of thousands of steps
    they were two events; with 31 points, 3.4 sigma is already a 1-in-100 event."""
    g = np.array([0.49, 0.47, 0.72, 0.61, 0.63, 0.92, 0.42, 0.55, 0.33, 0.38, 0.37, 0.37, 0.43, 0.27, 0.54, 15.07,
                  0.36, 0.66, 0.77, 1.11, 1.11, 12.06, 0.66, 137.5, 89.8, 1.08, 1.16, 0.70, 42.5, 1.63, 0.73])
    f = findings(table(31, grad_norm=g))["GRAD_PATHOLOGY"]
    assert f.severity in ("warn", "critical") and f.first_step == 16 and "spikes" in f.explanation


def test_one_spike_in_a_short_noisy_log_is_not_a_gradient_pathology() -> None:
    g = np.exp(np.log(0.5) + rng(51).normal(0, 0.5, 31))
    g[15] = 30.0
    assert "GRAD_PATHOLOGY" not in loud(findings(table(31, grad_norm=g)))


def test_reward_std_exactly_zero_from_some_step_on_is_a_run_without_signal() -> None:
    """A TRL console log: reward_std (the mean of the groups' stds) ~0.11 for 630 points, then
    exactly 0 on every step to the end while the batch mean still moves between 0.59 and 0.66
    (different prompts, each all-right or all-wrong alike) and the grad norm is exactly 0. No
    zero-variance share is logged, so only reward_std can say it."""
    n = 918
    r = rng(52)
    std = np.where(np.arange(n) < 632, 0.11 + r.normal(0, 0.005, n), 0.0)
    grad = np.where(np.arange(n) < 632, np.abs(0.4 + r.normal(0, 0.2, n)), 0.0)
    f = findings(table(n, step_every=4, reward_std=std, reward_mean=0.62 + r.normal(0, 0.02, n), grad_norm=grad))["REWARD_STD_DEATH"]
    assert f.severity == "critical" and f.first_step == 2532 and "exactly 0" in f.explanation


def test_reward_std_that_is_zero_on_and_off_in_small_batches_is_not_gone() -> None:
    n = 200
    r = rng(53)
    std = np.where(r.random(n) < 0.4, 0.0, 0.3 + r.normal(0, 0.05, n))
    assert "REWARD_STD_DEATH" not in loud(findings(table(n, reward_std=std, reward_mean=0.4 + r.normal(0, 0.1, n))))


def test_length_hacking_that_took_off_inside_the_early_window_is_judged_from_the_level_before() -> None:
    """Completions 300 -> 1,280 tokens between steps 60 and 150 of 1,560 (the early window, 5-20%
    of the run, is mostly after the rise), the reward-model component 0.35 -> 0.66 with them and
    correctness flat at ~0.23: against the early window nothing grew; against the length before
    the rise it grew 4x and only the length-loving component paid for it."""
    n = 312
    r = rng(54)
    up = 1 / (1 + np.exp(-(np.arange(n) - 20) / 3.0))
    length = 300 + 980 * up + r.normal(0, 15, n)
    helpful = 0.35 + 0.31 * up + r.normal(0, 0.01, n)
    correct = 0.23 + r.normal(0, 0.02, n)
    t = table(n, step_every=5, completion_len_mean=length, reward_mean=helpful + correct,
              **{"reward_component.correctness": correct, "reward_component.helpfulness_rm": helpful})
    f = findings(t)["REWARD_HACK_LENGTH"]
    assert f.severity in ("warn", "critical") and f.first_step <= 110 and "before the rise" in f.explanation


def test_repetition_that_took_off_inside_the_early_window_is_a_spiral() -> None:
    """repetition_rate 0.03 -> 0.45 around step 15 of 200 (inside the early window, so that
    window's median is already high): judged from the level before the rise it is a spiral that
    held to the end; a run whose rate stays at 0.03 is quiet."""
    n = 200
    r = rng(61)
    up = 1 / (1 + np.exp(-(np.arange(n) - 15) / 1.5))
    rate = np.clip(0.03 + 0.42 * up + r.normal(0, 0.02, n), 0, 1)
    f = findings(table(n, repetition_rate=rate))["REPETITION_SPIRAL"]
    assert f.severity in ("warn", "critical") and 10 <= f.first_step <= 25
    flat = np.clip(0.03 + r.normal(0, 0.02, n), 0, 1)
    assert "REPETITION_SPIRAL" not in findings(table(n, repetition_rate=flat))


def _warmup_lr(n: int, warmup: int, peak: float = 1e-5) -> np.ndarray:
    i = np.arange(n)
    return np.where(i < warmup, peak * (i + 1) / warmup, peak * (1 - 0.7 * (i - warmup) / n))


def test_kl_climbing_while_the_learning_rate_warms_up_is_not_a_blowup() -> None:
    """lr ramps over 10 steps; KL stays ~0.002 while the rate is tiny, climbs to 0.14 as it
    reaches its peak, then holds: the policy's first move, shaped by the schedule. Judged on
    the first 24 and 48 steps, as a live watcher sees them."""
    n = 48
    r = rng(71)
    ramp = 1 / (1 + np.exp(-(np.arange(n) - 10) / 1.5))
    kl = (0.002 + 0.14 * ramp) * np.exp(r.normal(0, 0.1, n))
    for m in (24, 48):
        t = table(m, kl_mean=kl[:m], lr=_warmup_lr(n, 10)[:m], reward_mean=0.6 + r.normal(0, 0.05, m))
        assert "KL_BLOWUP" not in findings(t), m


def test_kl_that_breaks_away_after_the_warm_up_is_still_a_blowup() -> None:
    """The same warm-up, then KL grows like sqrt(step) to step 120 and multiplies 30x over the
    next 40 steps: the trend after the warm-up is the yardstick, and the break is caught."""
    n = 200
    r = rng(72)
    i = np.arange(n)
    kl = 0.03 * np.sqrt(i + 1) * np.exp(np.clip(i - 120, 0, None) / 12.0) * np.exp(r.normal(0, 0.08, n))
    t = table(n, kl_mean=kl, lr=_warmup_lr(n, 10), reward_mean=0.6 + r.normal(0, 0.05, n))
    f = findings(t)["KL_BLOWUP"]
    assert f.severity == "critical" and 115 <= f.first_step <= 150


def test_truncation_whose_latest_points_are_back_under_the_line_has_ended() -> None:
    """A 10-step log of 16 completions a step: 5, 3 and 2 of 16 cut at steps 6-8, then 1 of 16
    again. The stretch reaches within two points of the end, but the latest points are back at
    the early share: it ended (a note), it is not an ongoing warning."""
    trunc = np.array([0, 0, 1, 0, 1, 5, 3, 2, 1, 1]) / 16
    reward = np.array([0.19, 0.12, 0.33, 0.37, 0.2, 0.07, 0.17, 0.14, 0.09, 0.36])
    f = findings(table(10, truncation_rate=trunc, reward_mean=reward))["TRUNCATION_STARVE"]
    assert f.severity == "info" and f.ongoing is False


def _saturating_run(n: int, seed: int, grad_after: float, kl_after_slope: float) -> pa.Table:
    """A proxy reward in [0, 1] rising to 0.996 by step 25 with its within-group spread going
    from 0.4 to ~2e-4; grad_norm ~12 while it learns and grad_after once saturated; KL 0.005
    -> 0.6 by step 30, then rising at kl_after_slope per step."""
    r = rng(seed)
    i = np.arange(n)
    up = 1 / (1 + np.exp(-(i - 12) / 3.0))
    reward = 0.6 + 0.396 * up + r.normal(0, 0.01, n) * (1 - up)
    std = 0.4 * (1 - up) + 2e-4 * np.exp(r.normal(0, 0.2, n))
    grad = np.where(i < 25, 12.0, grad_after) * np.exp(r.normal(0, 0.1, n))
    kl = (0.005 + 0.6 * up + kl_after_slope * np.clip(i - 30, 0, None)) * np.exp(r.normal(0, 0.05, n))
    return table(n, reward_mean=np.clip(reward, 0, 1), reward_std=std, grad_norm=grad, kl_mean=kl)


def test_a_saturated_reward_whose_updates_keep_their_size_is_drift_on_noise() -> None:
    """Saturated at the ceiling with the spread 2,000x smaller, yet grad_norm stays at 7 and KL
    climbs 0.6 -> 1.1: std-normalised advantages are pushing the policy on the reward's noise."""
    f = findings(_saturating_run(80, 81, grad_after=7.0, kl_after_slope=0.01))["REWARD_STD_DEATH"]
    assert f.severity == "warn" and f.first_step <= 30 and "still being pushed" in f.explanation


def test_a_saturated_reward_whose_updates_fade_has_finished() -> None:
    """The same saturation with grad_norm falling to 0.5 and KL flat: the run finished (info)."""
    f = findings(_saturating_run(80, 82, grad_after=0.5, kl_after_slope=0.0))["REWARD_STD_DEATH"]
    assert f.severity == "info" and "still being pushed" not in f.explanation


def test_a_kl_jump_late_in_a_long_warm_up_is_still_a_blowup() -> None:
    """A 200-step warm-up of 600 steps: KL grows like t^2 with the ramp (1e-4 -> 0.004), then
    multiplies 25x within a dozen steps at step 170, before the rate peaks. The warm-up's first
    half is skipped, not the whole warm-up: the jump breaks away from the trend it had by then."""
    n = 600
    r = rng(73)
    i = np.arange(1, n + 1)
    kl = 0.004 * (i / 160) ** 2 * np.where(i >= 170, 25.0 * (1 + (i - 170) / 400), 1.0) * np.exp(r.normal(0, 0.08, n))
    t = table(n, kl_mean=kl, lr=_warmup_lr(n, 200), reward_mean=0.6 + r.normal(0, 0.05, n))
    f = findings(t)["KL_BLOWUP"]
    assert f.severity in ("warn", "critical") and 150 <= f.first_step <= 190


def test_entropy_back_from_a_blowup_is_not_a_collapse() -> None:
    """41 points: entropy ~0.68, blown up to ~7.4 for 13 points, then back at ~0.5 (0.75x where
    it was before the blow-up). The blow-up is reported as ended; the way back down is not
    "entropy fell to 7% of its level"."""
    r = rng(91)
    ent = np.concatenate([np.linspace(0.72, 0.65, 6), [1.8], np.full(13, 7.4), [4.2], np.full(20, 0.51)])
    ent = ent * np.exp(r.normal(0, 0.015, len(ent)))
    found = findings(table(len(ent), step_every=10, entropy_mean=ent))
    assert "ENTROPY_COLLAPSE" not in found
    assert found["ENTROPY_BLOWUP"].severity == "warn" and found["ENTROPY_BLOWUP"].ongoing is False


# -- failures that began inside the early window --------------------------------------------------


def test_a_value_loss_that_blew_up_at_step_3_is_judged_from_the_first_steps() -> None:
    """PPO, 20 points: value loss 0.6 on the first two steps, then ~20 and climbing. The early
    window holds the blow-up, so only the run's opening points can be the yardstick."""
    n = 20
    r = rng(101)
    vl = np.concatenate([[0.68, 0.57], np.linspace(19, 26, n - 2)]) * np.exp(r.normal(0, 0.05, n))
    t = table(n, value_loss=vl, reward_mean=0.7 + r.normal(0, 0.1, n))
    f = findings(t)["VALUE_DIVERGENCE"]
    assert f.severity == "warn" and f.first_step == 3 and "first logged steps" in f.explanation and f.ongoing
    # a value head that starts at its worst and improves stays quiet
    t = table(n, value_loss=np.linspace(20, 2, n) * np.exp(r.normal(0, 0.05, n)), reward_mean=0.7 + r.normal(0, 0.1, n))
    assert "VALUE_DIVERGENCE" not in findings(t)


def test_kl_that_runs_away_from_the_first_steps_is_a_blowup() -> None:
    """49 points, no warm-up: KL 0.02 at step 1 doubles every step to ~15 by step 11 and stays
    there. There is no trend before the break to depart from; a hundred-fold rise faster than
    the square of the step is the escape itself."""
    n = 49
    r = rng(102)
    i = np.arange(n)
    kl = np.minimum(0.02 * 2.0 ** i, 15.0) * np.exp(r.normal(0, 0.1, n))
    f = findings(table(n, kl_mean=kl, reward_mean=0.8 + r.normal(0, 0.1, n)))["KL_BLOWUP"]
    assert f.severity in ("warn", "critical") and 4 <= f.first_step <= 6 and "ran away from the first steps" in f.explanation


def test_kl_that_climbs_from_its_floor_at_most_linearly_is_not_a_runaway() -> None:
    """KL measurable at 0.002 from step 2, growing linearly to 0.2 by step 100 (100x, but over
    100x the steps): healthy drift of a run without a KL penalty."""
    n = 100
    r = rng(103)
    kl = 0.002 * np.arange(1, n + 1) * np.exp(r.normal(0, 0.1, n))
    assert "KL_BLOWUP" not in findings(table(n, kl_mean=kl, reward_mean=0.6 + r.normal(0, 0.05, n)))


def test_completions_of_a_few_tokens_with_a_near_zero_continuous_reward_are_a_collapse() -> None:
    """A reward model's score of ~2e-4 on 3-token completions from the first step: nothing is
    earned, though the reward is never exactly 0."""
    n = 28
    r = rng(104)
    t = table(n, completion_len_mean=2.8 + r.normal(0, 0.05, n), reward_mean=2.4e-4 * np.exp(r.normal(0, 0.1, n)))
    f = findings(t)["COMPLETION_COLLAPSE"]
    assert f.severity == "critical" and f.first_step == 1 and "stays at 0" in f.explanation


def test_a_metric_logged_twice_per_batch_keeps_its_noise() -> None:
    """Two optimizer updates per rollout batch: every reward value is logged on two steps in a
    row. Its noise is that of the distinct values, not zero."""
    from rlprobe.doctor.stats import diff_noise

    r = rng(105)
    distinct = 0.5 + r.normal(0, 0.05, 60)
    twice = np.repeat(distinct, 2)
    assert diff_noise(twice) == pytest.approx(diff_noise(distinct), rel=0.05)
    # a reward pinned at 0 repeats because it is pinned: those zeros are not copies
    sparse = np.zeros(120)
    sparse[[30, 31, 77]] = 1 / 16
    assert diff_noise(sparse) == 0.0


def test_a_format_reward_learned_at_step_13_in_a_log_repeated_per_update_is_gaming() -> None:
    """Each point logged twice (two updates per batch); the format component jumps from 0.4 to
    its ceiling 2.0 at step 13 of 140 while the answer reward falls from 0.35 to 0.2."""
    n = 70
    r = rng(106)
    fmt = np.where(np.arange(n) < 6, 0.4, 1.97) + r.normal(0, 0.02, n)
    ans = np.where(np.arange(n) < 6, 0.35, 0.2) + r.normal(0, 0.03, n)
    t = table(2 * n, **{"reward_component.format": np.repeat(fmt, 2), "reward_component.answer": np.repeat(ans, 2),
                        "reward_mean": np.repeat(fmt + ans, 2)})
    f = findings(t)["FORMAT_GAMING"]
    assert f.severity in ("warn", "critical") and f.first_step <= 14


def test_a_loss_that_was_never_finite_is_a_gradient_pathology_from_step_1() -> None:
    """The trainer printed 'nan' for loss, grad_norm and entropy on every step. Non-finite values
    are what GRAD_PATHOLOGY looks for; ENTROPY_COLLAPSE has no number to read and says so."""
    n = 40
    r = rng(107)
    t = table(n, loss=np.full(n, np.nan), grad_norm=np.full(n, np.nan), entropy_mean=np.full(n, np.nan),
              reward_mean=0.5 + r.normal(0, 0.05, n))
    (d,) = diagnose_tables(t)
    f = {x.signature_id: x for x in d.findings}["GRAD_PATHOLOGY"]
    assert f.severity == "critical" and f.first_step == 1
    reasons = {s.signature_id: s.reason for s in d.skipped}
    assert "entropy_mean" in reasons["ENTROPY_COLLAPSE"]


def test_a_step_time_that_steps_up_once_and_holds_is_a_slow_down() -> None:
    """72 points every 10 steps: step time ~65 s to step 130, then ~170 s for the rest of the run
    while completion length does not move. No trend over the plateau; the level moved by many
    times its noise and stayed."""
    n = 72
    r = rng(108)
    i = np.arange(n)
    st = np.where(i < 13, 65.0, 170.0) * np.exp(r.normal(0, 0.05, n))
    t = table(n, step_every=10, step_time_s=st, completion_len_mean=220 + r.normal(0, 5, n), reward_mean=1.0 + r.normal(0, 0.1, n))
    f = findings(t)["THROUGHPUT_ROT"]
    assert f.severity == "warn" and 130 <= f.first_step <= 150
    # noise around one level is not a slow-down
    t = table(n, step_every=10, step_time_s=65.0 * np.exp(r.normal(0, 0.05, n)), completion_len_mean=220 + r.normal(0, 5, n))
    assert "THROUGHPUT_ROT" not in findings(t)


def test_a_reward_that_slides_down_in_stages_is_one_collapse() -> None:
    """393 steps: reward ~0.68 (means over 16 prompts, so each step also wobbles with the prompts
    drawn) to step 200, then down over 37 steps to ~0.32 and held. The segmentation cuts such a
    slide into stages that are each small against the noise; together they are one fall, and
    every one of ten such runs is caught."""
    n = 393
    i = np.arange(n)
    for seed in range(200, 210):
        p = np.interp(i, [0, 200, 237, n], [0.68, 0.68, 0.32, 0.33]) + rng(seed).normal(0, 0.09, n)
        f = findings(table(n, reward_mean=np.round(np.clip(p, 0, 1) * 80) / 80)).get("REWARD_COLLAPSE")
        assert f is not None and f.severity in ("warn", "critical") and 200 <= f.first_step <= 240, seed


def test_a_mismatch_jump_in_a_sparse_log_is_dated_where_it_left_its_level() -> None:
    """Logged every 10 steps: the log-prob gap 0.008, 0.013, then 0.04 at step 30 (3x), 0.08, 0.14
    and ~0.19 from there. Half-way in log to the new level is step 40; the gap had already
    left its level at step 30, and that is where a reader dates it."""
    r = rng(110)
    gap = np.concatenate([[0.008, 0.013, 0.04, 0.084, 0.138, 0.179], np.full(30, 0.193)]) * np.exp(r.normal(0, 0.03, 36))
    f = findings(table(36, step_every=10, logprob_mismatch=gap, reward_mean=0.4 + r.normal(0, 0.03, 36)))["TRAIN_INFERENCE_MISMATCH"]
    assert f.first_step == 30


def test_step_time_that_creeps_up_from_the_first_step_is_measured_from_the_opening() -> None:
    """1,800 steps: step time grows linearly from 124 s to 555 s from the first step, completion
    length flat. The early window is already on the creep; the opening is what a step cost."""
    n = 1800
    r = rng(111)
    st = np.linspace(124, 555, n) * np.exp(r.normal(0, 0.05, n))
    t = table(n, step_time_s=st, completion_len_mean=85 + r.normal(0, 4, n), reward_mean=0.5 + r.normal(0, 0.05, n))
    f = findings(t)["THROUGHPUT_ROT"]
    assert f.severity == "warn" and f.first_step <= 400 and f.evidence["step_time_s_baseline"] < 150


def test_a_change_inside_a_bin_of_a_long_run_is_dated_at_its_logged_step() -> None:
    """9,740 steps logged every 5 (bins of 10 steps, two logged points each): the reward
    function returns 0 for every rollout from step 3220, the second point of the bin 3215-3220.
    The bin's mean sits between the levels; the logged steps say when it happened."""
    n = 1948
    r = rng(112)
    steps = np.arange(1, n + 1) * 5
    alive = steps < 3220
    t = table(n, step_every=5, reward_mean=np.where(alive, 0.5 + r.normal(0, 0.05, n), 0.0),
              reward_std=np.where(alive, 0.3 + r.normal(0, 0.03, n), 0.0))
    f = findings(t)["REWARD_STD_DEATH"]
    assert f.severity == "critical" and f.first_step == 3220


def test_a_blow_up_whose_first_step_shares_a_bin_is_dated_where_it_passed_the_threshold() -> None:
    """1,684 steps (bins of two): entropy 0.38 to step 427, then a ramp 1.37, 2.4, 3.2, ... to ~7.
    Step 428 is 3.6x the level before, past the blow-up's 2.5x, though nearer the old level than
    the new one: it is the first step where the condition holds, and the finding starts there."""
    n = 1684
    r = rng(114)
    steps = np.arange(1, n + 1)
    ramp = np.array([1.37, 2.37, 3.22, 4.06, 5.16, 5.74, 6.44, 6.76])
    e = 0.38 + r.normal(0, 0.01, n)
    e[427:] = 7.0 + r.normal(0, 0.1, n - 427)
    e[427:427 + len(ramp)] = ramp
    f = findings(table(n, entropy_mean=e))["ENTROPY_BLOWUP"]
    assert steps[427] == 428 and f.first_step == 428 and "from step 428" in f.explanation


def test_a_grad_norm_that_jumps_for_good_in_the_first_steps_is_growth() -> None:
    """1,700 steps: grad norm ~1 for the first 13 steps, then ~14 (log-normal, wide) for the rest
    of the run. The early window is already on the new level; the jump is read from the levels."""
    n = 1700
    r = rng(113)
    i = np.arange(n)
    g = np.where(i < 13, 1.0, 14.0) * np.exp(r.normal(0, 0.6, n))
    f = findings(table(n, grad_norm=g, reward_mean=0.6 + r.normal(0, 0.1, n)))["GRAD_PATHOLOGY"]
    assert f.severity in ("warn", "critical") and 12 <= f.first_step <= 16 and "early in the run" in f.explanation
    # the same spread around one level from the first step is not growth
    f = findings(table(n, grad_norm=14.0 * np.exp(r.normal(0, 0.6, n)), reward_mean=0.6 + r.normal(0, 0.1, n)))
    assert "GRAD_PATHOLOGY" not in loud(f)


def test_a_format_term_pinned_at_its_weight_is_judged_by_the_share_that_earns_it() -> None:
    """A format term worth 0.5 sits at exactly 0.5 on most steps once every rollout earns it. A
    mean of 16 outcomes cannot sit at the same value below 1 step after step; its noise is that
    of the share of rollouts that earn the term (near all of them), scaled back to the weight,
    not the noise of a coin at 0.5."""
    from rlprobe.doctor.stats import bounded_noise

    r = rng(115)
    share = np.concatenate([r.binomial(16, 0.65, 9) / 16, np.minimum(1.0, r.binomial(16, 0.995, 64) / 16)])
    term = 0.5 * share
    assert bounded_noise(term) == pytest.approx(0.5 * bounded_noise(share))
    assert bounded_noise(term) < 0.5 * 0.125  # a coin at 0.5 over 16 rollouts, scaled to the weight


def test_every_group_degenerate_with_rewards_that_swing_is_not_a_solved_task() -> None:
    """35 points every 5 steps, 4 prompts x 6 rollouts: from step 125 every group is degenerate
    (a sampler that returns one completion per prompt) while the batch reward swings 0.2-0.95.
    Its median, 0.8, would pass for a solved task; its mean says at least 30% of the groups over
    the stretch are all-wrong. No learning signal is left: a loud finding, not a note. (Mostly
    all-correct it is: at least 69% of the groups.)"""
    n = 35
    r = rng(117)
    steps = np.arange(n) * 5
    late = steps >= 125
    zvf = np.where(late, 1.0, np.where(r.random(n) < 0.15, 0.25, 0.0))
    reward = np.where(late, np.array([0.45, 0.9, 0.45, 0.7, 0.2, 0.95, 0.4, 0.95, 0.9, 0.9] * 4)[:n],
                      np.clip(0.65 + r.normal(0, 0.12, n), 0, 1))
    t = table(n, step_every=5, zero_variance_group_frac=zvf, reward_mean=reward,
              reward_std=0.48 + r.normal(0, 0.02, n), entropy_mean=0.2 + r.normal(0, 0.005, n))
    f = findings(t)["DEGENERATE_GROUPS"]
    assert f.severity in ("warn", "critical") and 120 <= f.first_step <= 130
    assert "mostly all-correct" in f.explanation and f.evidence["variant"] == "all_correct"
    assert "no group was mixed" in f.explanation and "solved" not in f.explanation


def test_a_mismatch_that_jumps_fourfold_to_under_a_hundredth_of_a_nat_is_a_mismatch() -> None:
    """2,000 steps: the log-prob gap ~0.002 nats/token (a healthy engine) to step 31, then ~0.009
    for good. Four times the level before and more than five times what a healthy engine shows:
    the update is off-policy by that much (warn), though the gap is under 0.01 nats."""
    n = 2000
    r = rng(118)
    gap = np.where(np.arange(n) < 31, 0.002, 0.009) * np.exp(r.normal(0, 0.07, n))
    f = findings(table(n, logprob_mismatch=gap, reward_mean=0.5 + r.normal(0, 0.05, n)))["TRAIN_INFERENCE_MISMATCH"]
    assert f.severity == "warn" and 31 <= f.first_step <= 33
    # the same gap at a healthy engine's level all along is quiet
    f = findings(table(n, logprob_mismatch=0.009 * np.exp(r.normal(0, 0.07, n)), reward_mean=0.5 + r.normal(0, 0.05, n)))
    assert "TRAIN_INFERENCE_MISMATCH" not in f


def test_a_change_of_level_in_a_sparse_series_on_a_grid_of_steps_is_at_a_logged_point() -> None:
    """A series logged every 10 steps, placed on a grid of single steps (NaN between its points):
    the change the segmentation finds is dated at a logged point, never at an empty step."""
    from rlprobe.doctor.stats import level_shifts

    r = rng(120)
    v = np.full(271, np.nan)
    v[::10] = np.concatenate([np.full(8, 0.2), np.full(20, 0.5)]) + r.normal(0, 0.01, 28)
    shifts = level_shifts(v, 0.01, min_size=3)
    assert shifts and all(np.isfinite(v[s.at]) for s in shifts)



def test_entropy_that_blows_up_from_the_second_point_and_comes_back_is_a_blowup_that_ended() -> None:
    """22 points: entropy 0.47 at step 1 (the model as it came in), ~3.3 from step 2 to 13, back
    to ~0.5 from step 14. No segment of 3 points comes before the rise; the fall back to the
    opening level shows it. A warning that says it ended."""
    r = rng(122)
    e = np.concatenate([[0.47], 3.3 * np.exp(r.normal(0, 0.05, 12)), 0.5 * np.exp(r.normal(0, 0.05, 9))])
    f = findings(table(22, entropy_mean=e, reward_mean=0.5 + r.normal(0, 0.08, 22)))["ENTROPY_BLOWUP"]
    assert f.severity == "warn" and f.first_step == 2 and f.last_step == 13 and "fallen back since" in f.explanation
    # entropy high from the first point that settles 7x lower is a warm start settling, not a blow-up
    e = np.concatenate([3.3 * np.exp(r.normal(0, 0.05, 13)), 0.5 * np.exp(r.normal(0, 0.05, 9))])
    assert "ENTROPY_BLOWUP" not in findings(table(22, entropy_mean=e, reward_mean=0.5 + r.normal(0, 0.08, 22)))
    # a first point below a level the run then leaves for good is not a blow-up that came back
    e = np.concatenate([[0.47], 3.3 * np.exp(r.normal(0, 0.05, 12)), 1.3 * np.exp(r.normal(0, 0.05, 9))])
    assert "ENTROPY_BLOWUP" not in findings(table(22, entropy_mean=e, reward_mean=0.5 + r.normal(0, 0.08, 22)))


def test_a_within_group_std_that_dies_under_a_moving_mean_is_said_without_the_share_logged() -> None:
    """A TRL log (reward_std is the mean of the groups' stds; no frac_reward_zero_std): reward_std
    ~0.37 to step 57, then 0 or a single mixed group's 0.006-0.07 on every step, while the batch
    mean keeps swinging between 0.3 and 1.1 as prompts differ. Each prompt's rollouts earn one
    reward; nothing else in the run can say so, so REWARD_STD_DEATH does (a warning: the reward
    is not at its floor). With the share logged, DEGENERATE_GROUPS says it instead."""
    n = 290
    r = rng(123)
    i = np.arange(n)
    std = np.where(i < 57, 0.37 + r.normal(0, 0.05, n), np.where(r.random(n) < 0.3, 0.0625, 0.0))
    reward = np.where(i < 57, 0.75 + r.normal(0, 0.1, n), r.choice([0.275, 0.55, 0.8, 1.05], n))
    f = findings(table(n, reward_std=std, reward_mean=reward))["REWARD_STD_DEATH"]
    assert f.severity == "warn" and f.first_step == 58 and f.evidence["variant"] == "polarised"
    assert "all right or all wrong alike" in f.explanation
    zvf = np.where(i < 57, 0.1, np.where(std > 0, 0.75, 1.0))
    found = findings(table(n, reward_std=std, reward_mean=reward, zero_variance_group_frac=zvf))
    assert "REWARD_STD_DEATH" not in loud(found) and "DEGENERATE_GROUPS" in loud(found)


def test_an_entropy_blow_up_of_fifteen_steps_in_a_long_run_is_found_and_said_to_be_over() -> None:
    """4,000 steps: entropy ~0.5 (noise 0.04), then 0.5 -> 4.5 for 15 steps at step 2522 and back.
    Fifteen steps are three of the doctor's bins, far fewer than 2% of the run; a blow-up of nine
    times the level does not need more to be one. It is a warning that says the run came back."""
    n = 4000
    r = rng(115)
    e = 0.5 + r.normal(0, 0.04, n)
    e[2521:2536] = 4.5 + r.normal(0, 0.4, 15)
    f = findings(table(n, entropy_mean=e))["ENTROPY_BLOWUP"]
    assert f.severity == "warn" and 2516 <= f.first_step <= 2522 and f.ongoing is False
    # a 400-step run logged every 9 steps: a blow-up of 18 steps is two logged points
    e9 = 0.6 + r.normal(0, 0.02, 45)
    e9[[24, 25, 26]] = [2.8, 2.9, 1.2]
    f = findings(table(45, step_every=9, entropy_mean=e9))["ENTROPY_BLOWUP"]
    assert f.first_step == 225 and f.ongoing is False
    # one point is not a blow-up: it may be a logging glitch
    e9[[25, 26]] = 0.6
    assert "ENTROPY_BLOWUP" not in findings(table(45, step_every=9, entropy_mean=e9))


def test_groups_that_polarise_in_the_last_points_of_a_short_log_are_degenerate() -> None:
    """A 20-point log (every 9 steps, 36 groups a batch): a fifth of the groups degenerate for 14
    points, then 36%, 58%, 81%, 92%, 69%, 89% while the reward sits at 0.55-0.63. Most of the mixed
    groups are gone in the last five points; a trailing mean of five has not caught up by the end,
    the levels have. The reward proves both kinds: at least 38% all-right, 22% all-wrong."""
    zero = np.array([6, 6, 8, 5, 7, 8, 11, 7, 6, 7, 4, 7, 5, 8, 13, 21, 29, 33, 25, 32]) / 36
    reward = np.array([0.40, 0.47, 0.47, 0.35, 0.37, 0.47, 0.44, 0.34, 0.35, 0.42,
                       0.34, 0.40, 0.37, 0.63, 0.54, 0.61, 0.53, 0.59, 0.56, 0.53])
    f = findings(table(20, step_every=9, zero_variance_group_frac=zero, reward_mean=reward))["DEGENERATE_GROUPS"]
    assert f.severity == "warn" and f.first_step == 144 and "before: 19%" in f.explanation
    # the same share rising half as far (to ~50%) is not most of the groups
    half = np.where(np.arange(20) >= 15, 0.5, zero)
    assert "DEGENERATE_GROUPS" not in loud(findings(table(20, step_every=9, zero_variance_group_frac=half, reward_mean=reward)))


def test_every_group_degenerate_after_a_share_too_small_to_happen_by_chance_is_judged() -> None:
    """256 groups a batch, one of them degenerate on one batch of 40, then every group degenerate
    to the end: the chance of a whole batch degenerate before, (1/10240)^256, underflows to 0. A
    run that could not have got there by chance is judged, not an error."""
    zero = np.zeros(80)
    zero[5] = 1 / 256
    zero[40:] = 1.0
    (d,) = diagnose_tables(table(80, zero_variance_group_frac=zero, reward_mean=np.where(np.arange(80) < 40, 0.5, 0.0)))
    assert not [s for s in d.skipped if s.reason.startswith("detector error")]
    assert "DEGENERATE_GROUPS" in {f.signature_id for f in d.findings}
