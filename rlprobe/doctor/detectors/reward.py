"""Signatures of the reward signal: hacking, gaming, and the death of the learning signal.

REWARD_HACK_LENGTH, FORMAT_GAMING, DEGENERATE_GROUPS, REWARD_STD_DEATH and REWARD_COLLAPSE.
See docs/signatures/ for the mechanics of each. Step metrics come from the SQL features
(doctor_features, plus v1.feat_reward_noise and v1.feat_reward_samples from
sql/v1/detectors/reward_*.sql). Reward components are logged under names the doctor cannot
know in advance, so no fixed view can list them: they are binned by one query per run built
here, on the same bins as doctor_binned. Everything is laid on one grid of bins per run so
that series of different metrics line up.
"""

from __future__ import annotations

import math
import re
from typing import Any

import numpy as np

from rlprobe.arrow_numpy import to_numpy
from rlprobe.doctor.catalog import CORRECT_PATTERN, FORMAT_PATTERN
from rlprobe.doctor.context import DetectorContext, MetricFeatures
from rlprobe.doctor.episodes import (
    Episode, baseline_end, confidence, find_episode, held_stretch, hinge_onset, log_level_jumps, make_finding, raw_onset, still_holds,
    sustain_points,
)
from rlprobe.doctor.findings import Finding
from rlprobe.doctor.registry import detects
from rlprobe.doctor.series import (
    Grid, Track, aligned, baseline_window, component_tracks, level_change, memo, metric_track, noise_ratio, on_rows, values_between,
    window,
)
from rlprobe.doctor.stats import (
    Shift, bounded_level_shifts, bounded_noise, ffill, granularity, level_before, level_reached, level_shifts, mann_kendall, nanmedian, point_noise, theil_sen, trailing_mean, trailing_median,
)

# ---------------------------------------------------------------------------------------------
# helpers of the reward signatures
# ---------------------------------------------------------------------------------------------
def component_role(name: str, format_pattern: str = FORMAT_PATTERN, correct_pattern: str = CORRECT_PATTERN) -> str:
    """'format', 'correct' or 'other' (judges, reward models, ...), from the component's name.

    Names are the only thing that says what a component rewards; the conventional ones (TRL's
    examples, open-r1, verl's reward functions) are covered, and the detectors that use roles
    take the two patterns as doctor.toml parameters for other naming schemes. Format words win
    over correctness words ('strict_format_answer' rewards a format).
    """
    if re.search(format_pattern, name, re.I):
        return "format"
    if re.search(correct_pattern, name, re.I):
        return "correct"
    return "other"


def entropy_state(ctx: DetectorContext, grid: Grid, onset: int, lo: int, hi: int, pre: int) -> dict[str, float] | None:
    """Entropy over [lo, hi] against the run's baseline and against the `pre` points before onset."""
    track = metric_track(ctx, grid, "entropy_mean")
    if track is None or not np.isfinite(track.b_median) or track.b_median <= 0:
        return None
    n = len(grid)
    before = nanmedian(track.value[window(onset - pre, onset, n)])
    during = nanmedian(track.value[window(lo, hi + 1, n)])
    level = nanmedian(track.smooth[window(lo, hi + 1, n)])
    if not (np.isfinite(before) and np.isfinite(during) and np.isfinite(level)):
        return None
    return {
        "ratio_to_baseline": level / track.b_median,
        "ratio_to_before": during / before if before > 0 else float("nan"),
        "peak_ratio_to_baseline": float(np.nanmax(track.smooth[window(onset, hi + 1, n)])) / track.b_median,
    }


def correctness_track(ctx: DetectorContext, grid: Grid) -> Track | None:
    """The correctness-like reward component, if the run logs one (the first by name)."""
    for track in component_tracks(ctx, grid):
        if component_role(track.name) == "correct":
            return track
    return None


def direction(ctx: DetectorContext, grid: Grid, lo: int, hi: int, pre: int) -> tuple[str, dict[str, float]]:
    """Did reward (correctness if logged, else reward_mean) go up or down into [lo, hi]?"""
    evidence: dict[str, float] = {}
    verdict = "unknown"
    for track in (correctness_track(ctx, grid), metric_track(ctx, grid, "reward_mean")):
        change = level_change(track, lo, hi, pre)
        if track is None or change is None:
            continue
        key = "reward_mean" if track.name == "reward_mean" else f"reward_component.{track.name}"
        evidence[f"{key}_before"], evidence[f"{key}_during"] = change[0], change[1]
        if verdict == "unknown" and abs(change[2]) >= 1.0:
            verdict = "up" if change[2] > 0 else "down"
    if verdict == "unknown":  # no clear move: where the level sits within the run's own range
        for track in (correctness_track(ctx, grid), metric_track(ctx, grid, "reward_mean")):
            if track is None or not np.isfinite(track.smooth).any():
                continue
            lo_v, hi_v = np.nanpercentile(track.smooth, [2, 98])
            during = nanmedian(track.value[window(lo, hi + 1, len(grid))])
            if hi_v > lo_v and np.isfinite(during):
                verdict = "high" if (during - lo_v) / (hi_v - lo_v) >= 0.5 else "low"
                break
    return verdict, evidence


def reward_at_floor(ctx: DetectorContext, level: float, first_step: int, last_step: int) -> str | None:
    """Why a pinned reward sits at its floor (the words), or None when nothing says so.

    A reward that never rises above 0 is at its floor (accuracy-like rewards are 0 for a wrong
    answer; format penalties are negative). So is one whose completions are all cut at the
    length cap (no answer is ever reached). A binary reward pinned at 1 is at its ceiling
    instead: reward_at_ceiling.
    """
    if level <= 0.0:
        return f"it is {level:.3g}, never above 0"
    for metric, invert in (("max_len_hit_frac", False), ("truncation_rate", False), ("eos_rate", True)):
        feat = ctx.features(metric)
        if feat is None:
            continue
        sel = (feat.step >= first_step) & (feat.step <= last_step)
        v = np.asarray(feat.value, dtype=float)[sel]
        v = v[np.isfinite(v)]
        if len(v) and float(np.median(1.0 - v if invert else v)) >= 0.9:
            return "every completion is cut at the length cap, so no answer is ever reached"
    return None


def reward_at_ceiling(level: float, value: np.ndarray) -> bool:
    """True when a pinned reward sits at the top of a [0, 1] reward (a binary or few-valued one)."""
    v = value[np.isfinite(value)]
    return len(v) > 0 and float(np.max(v)) <= 1.0 + 1e-9 and float(np.min(v)) >= 0.0 and level >= 1.0 - 1e-6


def _pinned(ctx: DetectorContext, p: dict[str, Any]) -> Finding | None:
    """Every rollout earns the same reward from the first logged step on (the run never had a signal)."""
    reward = ctx.features("reward_mean")
    std = ctx.features("reward_std")
    base = std if std is not None else reward
    if base is None or len(base) < 5:
        return None
    rv = np.asarray(reward.value, dtype=float) if reward is not None else np.array([])
    # the level it was pinned at from the start: the opening points and the whole run alike
    level = max(nanmedian(rv[:5]), nanmedian(rv)) if len(rv) else float("nan")
    scale = max(abs(level) if np.isfinite(level) else 0.0,
                float(np.nanpercentile(rv, 95) - np.nanpercentile(rv, 5)) if np.isfinite(rv).sum() >= 3 else 0.0)
    if std is not None:
        # Exactly 0 is no spread whatever the reward; a spread of a few percent of the reward's
        # size (length-penalty crumbs on identical answers) counts as none only for a reward
        # that sits at its floor: near a ceiling it is the few mixed groups of an easy task.
        spread = np.asarray(std.value, dtype=float)
        first_steps = (int(base.step[0]), base.step_at(min(len(base) - 1, 4)))
        at_floor = np.isfinite(level) and reward_at_floor(ctx, level, *first_steps) is not None
        dead = np.isfinite(spread) & ((spread <= 0.0) | ((spread <= p["dead_rel"] * scale) & at_floor))
        how = (f"reward_std stays at about {nanmedian(spread):.2g}, at most {p['dead_rel']:.0%} of the reward's size"
               if at_floor else "reward_std is exactly 0")
    else:
        # no within-step spread logged: a batch mean that does not move at all from step to step
        # means every rollout earned the same; a large batch of a saturated reward moves little
        # too, so this alone is read only together with a reason the reward is at its floor
        noise = point_noise(rv)
        if not np.isfinite(level) or not np.isfinite(noise) or noise > p["dead_rel"] * max(abs(level), 1e-12):
            return None
        dead = np.isfinite(rv)
        how = f"the batch-mean reward moves by only {noise:.2g} from step to step"
    sustain = sustain_points(len(base), p["sustain_frac"], floor=3)
    hit = held_stretch(dead, sustain)
    if hit is None or hit[0] > 1 or not still_holds(dead, hit[1], sustain):
        return None
    # every step, not most: a small batch of a sparse reward has steps where all its rollouts
    # agree and steps where they do not, and a batch mean that jumps between values
    if float(np.mean(dead[np.isfinite(np.asarray(base.value, dtype=float))])) < 0.95:
        return None
    if np.isfinite(level) and np.isfinite(rv).sum() >= 5:
        near = np.abs(rv[np.isfinite(rv)] - level) <= max(p["dead_rel"] * scale, 1e-9)
        if float(np.mean(near)) < 0.9:
            return None
    start, end = hit
    first_step, last_step = base.step_at(start), int(base.step_hi[end])
    opening_end = base.step_at(min(end, start + max(3, sustain) - 1))
    floor_why = None
    if np.isfinite(level) and reward_at_floor(ctx, level, first_step, opening_end) is not None:
        floor_why = reward_at_floor(ctx, level, first_step, last_step)
    evidence: dict[str, Any] = {"variant": "dead_from_start", "reward_mean_level": level}
    if std is not None:
        evidence["reward_std_median"] = nanmedian(np.asarray(std.value, dtype=float))
    for metric in ("grad_norm", "kl_mean"):
        f = ctx.features(metric)
        if f is not None:
            evidence[f"{metric}_median"] = nanmedian(np.asarray(f.value, dtype=float))
    if floor_why is not None:
        severity, verdict = "critical", (f"the reward is pinned at its floor ({floor_why}): the run is starved from the "
                                         "start and every step so far was wasted")
    elif std is None:
        return None
    elif np.isfinite(level) and reward_at_ceiling(level, rv):
        severity, verdict = "info", "the reward is pinned at its ceiling: every rollout already succeeds, there is nothing left to learn"
    else:
        severity, verdict = "warn", f"the reward is pinned at {level:.3g}, at its floor or its ceiling (nothing logged says which)"
    return make_finding(
        ctx, "REWARD_STD_DEATH", Episode(start, end, severity, start), base,
        confidence(1.0, 1.0, end - start + 1, sustain, floor=0.6),
        f"No learning signal from the first logged step: every rollout earns the same reward ({how}, step "
        f"{first_step} to {last_step}), so every advantage is 0; {verdict}.",
        evidence,
        [
            "Read the linked samples and score a few by hand: a reward function that never fires, or completions that never finish, are the usual causes.",
            "If the policy cannot reach any reward yet, start from an SFT checkpoint, add easier prompts, or give partial credit.",
            "If every rollout already succeeds, the data is too easy: stop, or move to harder prompts.",
        ],
        sample_order="step ASC",
    ).model_copy(update={"ongoing": True})


def _std_gone(ctx: DetectorContext, feat: MetricFeatures, p: dict[str, Any]) -> Finding | None:
    """reward_std exactly 0 on (nearly) every step from some point to the end, after it was not.

    Exactly 0 is not a small spread that noise could fake: whether reward_std is the batch's std
    or (TRL) the mean of the groups' stds, every group now gives all its rollouts the same reward,
    so every advantage is 0, even while the batch mean still moves from step to step (different
    prompts, each all-right or all-wrong alike). A grad norm of exactly 0 over the same steps says
    the optimizer no longer moves at all. Where the reward sits says what it means: at the floor
    the run is starved (critical); between, the run is stuck (a warning, critical when the
    gradient is exactly 0 too). At the ceiling the main test decides (saturation is a failure
    only when the policy collapsed with it), and a run that logs the share of zero-variance
    groups has it said by DEGENERATE_GROUPS when the reward is not at its floor.
    """
    v = np.asarray(feat.value, dtype=float)
    ok = np.isfinite(v)
    zero = ok & (v == 0.0)
    sustain = sustain_points(len(feat), p["sustain_frac"], floor=3)
    hit = held_stretch(zero, sustain)
    if hit is None or hit[0] <= 1 or not still_holds(zero, hit[1], sustain):
        return None  # from the first step it is _pinned's (a run that never had a spread)
    start, end = hit
    if float(np.mean(zero[start:][ok[start:]])) < 0.95:
        return None
    before = v[:start][ok[:start]]
    if len(before) < 3 or float(np.mean(before > 0.0)) < 0.8:
        return None  # it was not alive before: exact zeros on and off are a small batch's chance
    first_step, last_step = feat.step_at(start), int(feat.step_hi[end])
    reward = ctx.features("reward_mean")
    rv = np.asarray(reward.value, dtype=float) if reward is not None else np.array([])
    during = rv[(reward.step >= first_step) & (reward.step <= last_step)] if reward is not None else np.array([])
    level = nanmedian(during) if len(during) else float("nan")
    grad = ctx.features("grad_norm")
    grad_dead = False
    if grad is not None and len(grad):
        g = np.asarray(grad.value, dtype=float)[(grad.step >= first_step) & (grad.step <= last_step)]
        g = g[np.isfinite(g)]
        grad_dead = len(g) >= 3 and float(np.mean(g == 0.0)) >= 0.95
    position = float("nan")
    if np.isfinite(rv).sum() >= 5 and np.isfinite(level):
        lo, hi = np.nanpercentile(rv, [2, 98])
        if hi - lo > 0:
            position = (level - lo) / (hi - lo)
    why = reward_at_floor(ctx, level, first_step, last_step) if np.isfinite(level) else None
    if np.isfinite(level) and why is None and (reward_at_ceiling(level, rv) or position >= 0.8):
        return None  # saturated: the main test says whether the policy collapsed with it
    if why is None and ctx.features("zero_variance_group_frac") is not None:
        return None  # each group all-right or all-wrong with the share logged: DEGENERATE_GROUPS says it
    if why is not None or position <= 0.2 or grad_dead:
        severity = "critical"
        verdict = (f"the reward is at its floor ({why})" if why else
                   "the reward is at the bottom of what the run reached" if position <= 0.2 else
                   "the gradient is exactly 0 too (the optimizer no longer moves)") + ": the run has no learning signal left"
    else:
        severity, verdict = "warn", "each prompt's rollouts all right or all wrong alike: the run learns nothing more"
    evidence: dict[str, Any] = {"variant": "std_gone", "reward_std_before": nanmedian(before), "reward_mean_while_held": level,
                                "grad_norm_exactly_zero": grad_dead}
    return make_finding(
        ctx, "REWARD_STD_DEATH", Episode(start, end, severity, start), feat,
        confidence(1.0, 1.0, end - start + 1, sustain, floor=0.6),
        f"From step {first_step} reward_std is exactly 0 on every step (median {nanmedian(before):.3g} before, to step "
        f"{last_step}): every group gives all its rollouts the same reward, so every advantage is 0; {verdict}.",
        evidence,
        [
            "Read the linked samples: identical completions within a group (sampling temperature, a collapsed policy) or a reward that stopped discriminating.",
            "If every prompt is solved, move to harder prompts; if the policy collapsed, roll back before the onset with a lower learning rate.",
            "Use DAPO-style dynamic sampling to drop zero-variance groups, or raise the group size or temperature.",
        ],
        sample_order="step ASC",
    ).model_copy(update={"ongoing": True})


def _mean_still_moves(feat: MetricFeatures, reward: MetricFeatures | None, start: int, end: int, share: float) -> bool:
    """True when the batch-mean reward keeps moving from step to step over feat's points [start, end]
    at least `share` as much as it did before: the groups polarised (each all-right or all-wrong),
    so a within-group std died while rollouts still earn different rewards."""
    if reward is None:
        return False
    rv = np.asarray(reward.value, dtype=float)
    lo_step, hi_step = feat.step_at(start), int(feat.step_hi[end])
    skip = 2 * (feat.step_at(min(end, start + 1)) - lo_step)  # the fall itself is not jitter
    j_during = point_noise(rv[(reward.step > lo_step + skip) & (reward.step <= hi_step)])
    j_before = point_noise(rv[reward.step < lo_step])
    return bool(np.isfinite(j_during) and np.isfinite(j_before) and j_before > 0 and j_during >= share * j_before)


def _std_drop(feat: MetricFeatures, reward: MetricFeatures | None, p: dict[str, Any]) -> tuple[Episode, float, np.ndarray, int] | None:
    """reward_std falling from one level to a small fraction of it and staying there, read point by
    point: (episode, the level before, the ratio to it per point, sustain), or None.

    A within-group std (TRL's reward_std) also dies when the batch polarises (each prompt
    all-right or all-wrong: DEGENERATE_GROUPS), but then the batch-mean reward keeps moving from
    step to step as much as it did; when every rollout earns the same reward it stops moving.
    """
    value = np.asarray(feat.value, dtype=float)
    n = len(value)
    noise = point_noise(value)
    if not np.isfinite(noise) or noise <= 0:
        noise = max(1e-9, 0.01 * float(np.nanmax(np.abs(value))) if np.isfinite(value).any() else 1e-9)
    sustain = sustain_points(n, p["sustain_frac"], floor=3)
    # the plainest death: reward_std exactly 0 from some step to the end, after it had a spread
    zero = np.isfinite(value) & (value == 0.0)
    hit = held_stretch(zero, sustain)
    while hit is not None:
        start, end = hit
        earlier = value[:start][np.isfinite(value[:start])]
        if (still_holds(zero, end, sustain) and float(np.mean(zero[start:][np.isfinite(value[start:])])) >= 0.95
                and len(earlier) >= sustain and float(np.mean(earlier > 0)) >= 0.5):
            if not _mean_still_moves(feat, reward, start, end, p["jitter_max"]):
                before = float(np.median(earlier[earlier > 0]))
                return Episode(start, end, "critical", start), before, np.where(np.isfinite(value), value / before, 1.0), sustain
            break
        hit = held_stretch(zero, sustain, not_before=end + 1)
    shifts = level_shifts(value, noise, min_size=3, lookback=max(8, n // 3))
    for j, shift in enumerate(shifts):
        # a death in stages counts from the level before its first stage
        before, held_from = level_before(shifts, j, 4.0)
        if before <= 0 or shift.after > p["ratio_warn"] * before or shift.z > -4.0:
            continue
        if shift.at - held_from < sustain:
            continue  # the level before is a blip of a few points, not a spread the rewards had
        ratio = value / before
        dead = np.isfinite(value) & (ratio <= 2.0 * p["ratio_warn"])
        hit = held_stretch(dead, sustain, not_before=max(0, shift.at - 2))
        if hit is None or not still_holds(dead, hit[1], sustain):
            continue
        start, end = hit
        if float(np.mean(dead[start:][np.isfinite(value[start:])])) < 0.9:
            continue  # spread comes back on a tenth of the steps or more: not dead
        if _mean_still_moves(feat, reward, start, end, p["jitter_max"]):
            continue  # polarised groups, not one reward for every rollout
        severity = "critical" if shift.after <= p["ratio_critical"] * before else "warn"
        return Episode(start, end, severity, start), float(before), np.where(np.isfinite(ratio), ratio, 1.0), sustain
    return None


@detects("REWARD_STD_DEATH")
def reward_std_death(ctx: DetectorContext, p: dict[str, Any]) -> Finding | None:
    """Reward variance dies: every rollout earns the same reward, so there is nothing to learn from.

    Group-relative methods (GRPO, RLOO, DAPO) score a rollout against the other rollouts of its
    prompt; PPO's advantages also need rewards that differ. When the policy collapses onto one
    behaviour (entropy falls with it), every rollout earns the same reward: saturated at the
    ceiling (the task is solved or one answer always passes) or collapsed at the floor (the
    policy settled on an output that always fails). Advantages are then zero, the gradient
    carries no reward signal, and further steps only drift under the KL/entropy terms.

    reward_std must fall far below its own early level, and the batch-mean reward must stop
    jittering (v1.feat_reward_noise): when trainers log reward_std as the mean within-group std
    (TRL), a polarised batch (DEGENERATE_GROUPS) has a dead reward_std too but a lively mean.
    A saturated run counts as a failure only when the policy visibly collapsed with it (entropy
    fell at the onset, or the captured samples started repeating each other); otherwise it may
    have simply finished learning what its data can teach, and the finding is info.

    A run whose rewards never had a spread (reward_std at most dead_rel of the reward's size, or
    0, from the first logged step to the last; without reward_std, a batch mean that does not
    move at all) never had a learning signal: critical when the reward is at its floor (never
    above 0, or every completion cut at the length cap), info when a [0, 1] reward is pinned
    at 1 (nothing left to learn), a warning when nothing says which.
    """
    pinned = _pinned(ctx, p)
    if pinned is not None:
        return pinned
    feat = ctx.features("reward_std")
    if feat is None or len(feat) < 8:
        return None
    return _std_dies(ctx, feat, p) or _std_gone(ctx, feat, p) or _polarised_std(ctx, feat, p)


def _std_dies(ctx: DetectorContext, feat: MetricFeatures, p: dict[str, Any]) -> Finding | None:
    """reward_std falls far below its early level while the batch-mean reward stops jittering."""
    grid = Grid.of(ctx)
    jitter = noise_ratio(ctx, grid, "reward_mean")
    lively = on_rows(grid, feat, jitter) >= p["jitter_max"] if jitter is not None else np.zeros(len(feat), dtype=bool)
    found = _std_drop(feat, ctx.features("reward_mean"), p)
    if found is None:
        if len(feat) < 10 or not np.isfinite(feat.b_median) or feat.b_median <= 0:
            return None
        sustain = sustain_points(len(feat), p["sustain_frac"])
        ratio = np.where(np.isfinite(feat.ratio), feat.ratio, 1.0)
        dead = (ratio < p["ratio_warn"]) & (feat.z < -2) & ~lively  # z: a noisy baseline cannot fake a death
        episode = find_episode(
            feat, warn=dead, critical=dead & (ratio < p["ratio_critical"]), sustain=sustain,
            refine_with=feat.smooth, not_before=baseline_end(len(feat)) // 2,
        )
        if episode is None or _mean_still_moves(feat, ctx.features("reward_mean"), episode.start, episode.end, p["jitter_max"]):
            return None
        std_before = float(feat.b_median)
    else:
        episode, std_before, ratio, sustain = found
    g_on = int(grid.index_of(feat.step[episode.onset : episode.onset + 1])[0])
    g_start = int(grid.index_of(feat.step[episode.start : episode.start + 1])[0])
    g_end = int(grid.index_of(feat.step[episode.end : episode.end + 1])[0])
    pre = max(3, 2 * sustain)
    way, moves = direction(ctx, grid, g_on, g_end, pre)
    # up into the death, or sitting at the top of its own range: saturated; down, or at the bottom: collapsed
    variant = {"up": "saturated", "high": "saturated", "down": "collapsed", "low": "collapsed"}.get(way, "pinned")
    lowest = float(np.min(ratio[episode.start : episode.end + 1]))
    evidence: dict[str, Any] = {
        "variant": variant,
        "lowest_ratio_to_baseline": lowest,
        "reward_std_baseline": std_before,
        "reward_std_now": float(feat.smooth[-1]),
        **moves,
    }
    if jitter is not None:
        evidence["reward_mean_jitter_ratio"] = nanmedian(jitter[window(g_start, g_end + 1, len(grid))])
    ent = entropy_state(ctx, grid, g_on, g_start, min(g_end, g_start + pre), pre)
    severity = episode.severity
    note = ""
    if ent is not None:
        evidence["entropy_ratio_to_baseline"] = ent["ratio_to_baseline"]
        evidence["entropy_ratio_to_before"] = ent["ratio_to_before"]
    # a collapse onto one behaviour: entropy fell with the variance, or the captured samples
    # started repeating each other (distinct completions per step, v1.feat_reward_samples)
    stats = sample_stats(ctx, grid)
    distinct = sample_median(stats, "distinct_share", 0, g_on - 1), sample_median(stats, "distinct_share", g_start, g_end)
    if distinct[0] is not None and distinct[1] is not None:
        evidence["distinct_completions_before"], evidence["distinct_completions_during"] = distinct
    repeating = distinct[0] is not None and distinct[1] is not None and distinct[1] <= p["distinct_max"] < distinct[0]
    narrowed = ent is not None and ent["ratio_to_before"] < p["entropy_drop"]
    if variant == "collapsed":
        severity = "critical"  # every rollout earns the same low reward: starved, nothing left to learn from
    if variant != "collapsed" and severity != "info" and not (repeating or narrowed):
        severity = "info"
        note = " Neither entropy nor the samples show the policy collapsing: the run may simply have finished learning what this data can teach."
    signal = "advantages are ~0 and the policy gets no learning signal"
    pushed = _still_pushed(ctx, feat, episode, lowest, pre, p) if variant == "saturated" else None
    if pushed is not None:
        # the std fell, the push did not: the advantages were rescaled, not zeroed
        severity, signal = "warn", "the reward has nothing left to teach"
        evidence.update(pushed)
        note = (f" Yet the policy is still being pushed: grad_norm {pushed['grad_norm_while_dead']:.3g} "
                f"(vs {pushed['grad_norm_before']:.3g} before)"
                + (f" and KL to the reference {pushed['kl_at_onset']:.3g} -> {pushed['kl_now']:.3g}" if "kl_now" in pushed else "")
                + ". Rewards within a group now differ by less than a hundredth of their early spread, and per-group std "
                "normalisation scales those differences back up to full-size advantages: the policy drifts on the "
                "reward's noise, and nothing it learns now is paid for by the reward.")
    wording = {
        "saturated": "saturated at the ceiling (every rollout earns the top reward)",
        "collapsed": "collapsed (every rollout earns the same low reward)",
        "pinned": "pinned (every rollout earns the same reward)",
    }[variant]
    strength = p["ratio_warn"] / max(lowest, 1e-3) - 1.0
    share = f"{lowest:.0%}" if lowest >= 0.01 or lowest == 0 else f"{lowest:.2%}"
    return make_finding(
        ctx, "REWARD_STD_DEATH", Episode(episode.start, episode.end, severity, episode.onset), feat,
        confidence(strength, 2.0, episode.end - episode.start + 1, sustain),
        f"Reward variance died: reward_std fell to {share} of its early level and the reward is {wording}; "
        f"{signal}.{note}",
        evidence,
        [
            "Saturated: stop, or move to harder prompts (filter out prompts every rollout solves).",
            "Collapsed: roll back to before the onset and lower the learning rate; check the reward function on the linked samples.",
            "Raise the sampling temperature or add an entropy bonus so rollouts of a prompt differ again.",
            "Filter zero-variance groups (DAPO's dynamic sampling) so batches keep a learning signal.",
        ],
        sample_order="step DESC",
    )


def _polarised_std(ctx: DetectorContext, feat: MetricFeatures, p: dict[str, Any]) -> Finding | None:
    """reward_std died while the batch-mean reward keeps moving, in a run that does not log the
    share of zero-variance groups: the rollouts of each prompt earn one reward (all right or all
    wrong alike) and prompts differ, so every advantage is ~0.

    That is a polarised batch, which DEGENERATE_GROUPS says from the share; without the share
    it cannot run, and nothing else would say it."""
    if ctx.features("zero_variance_group_frac") is not None:
        return None
    reward = ctx.features("reward_mean")
    found = _std_drop(feat, None, p)
    if found is None or not _mean_still_moves(feat, reward, found[0].start, found[0].end, p["jitter_max"]):
        return None
    episode, before, ratio, sustain = found
    first_step, last_step = episode.steps(feat)
    rv = np.asarray(reward.value, dtype=float) if reward is not None else np.array([])
    level = nanmedian(rv[(reward.step >= first_step) & (reward.step <= last_step)]) if reward is not None else float("nan")
    why = reward_at_floor(ctx, level, first_step, last_step) if np.isfinite(level) else None
    lowest = float(np.min(ratio[episode.start : episode.end + 1]))
    severity = "critical" if why is not None else "warn"
    share = f"{lowest:.0%}" if lowest >= 0.01 or lowest == 0 else f"{lowest:.2%}"
    verdict = f"the reward is at its floor ({why})" if why else "the run learns nothing more from these prompts"
    return make_finding(
        ctx, "REWARD_STD_DEATH", Episode(episode.start, episode.end, severity, episode.onset), feat,
        confidence(p["ratio_warn"] / max(lowest, 1e-3) - 1.0, 2.0, episode.end - episode.start + 1, sustain),
        f"From step {first_step} reward_std fell to {share} of its level before ({before:.3g}) while the batch-mean "
        f"reward keeps moving from step to step: each prompt's rollouts earn the same reward (all right or all wrong "
        f"alike) and only the prompts differ, so every advantage is ~0; {verdict}.",
        {"variant": "polarised", "reward_std_before": before, "lowest_ratio_to_baseline": lowest,
         "reward_mean_while_held": level},
        [
            "Read the linked samples: identical completions within a group (sampling temperature, a collapsed policy) or a reward that stopped discriminating.",
            "Log the share of zero-variance groups (TRL's frac_reward_zero_std) so the doctor can tell all-correct from all-wrong groups.",
            "Use DAPO-style dynamic sampling to drop zero-variance groups, or raise the group size or temperature.",
        ],
        sample_order="step DESC",
    ).model_copy(update={"ongoing": True})


def _still_pushed(ctx: DetectorContext, feat: MetricFeatures, episode: Episode, lowest: float, pre: int,
                  p: dict[str, Any]) -> dict[str, float] | None:
    """Evidence that a saturated run's policy is still being moved as hard as while it learned.

    When rewards within a group differ only by noise, advantages that are divided by the
    group's std (GRPO) keep their full size: the updates do not shrink with the spread, and
    the policy drifts on the reward's noise (a proxy reward's 1e-4 wobble, say). Without that
    normalisation, or with rewards that are exactly equal, the gradient falls with the spread.
    So: the spread fell a hundredfold (push_ratio_max) or more but is not 0 (on 90% of the
    dead stretch's points or more: binary rewards are exactly equal or not at all), grad_norm over the dead stretch
    stayed at push_grad_min (half) of its level just before it or more, and KL to the
    reference, where logged, kept rising over the stretch (Mann-Kendall p < 0.01, by
    push_kl_rise, 1.3x, or more). None otherwise.
    """
    if lowest > p["push_ratio_max"]:
        return None
    first, last = episode.steps(feat)
    # tiny but not zero: rewards that are exactly equal give advantages of exactly 0 (0 / eps),
    # and nothing is left to scale up; any update then comes from other terms of the loss
    spread = values_between(feat, first, last)
    if len(spread) == 0 or float(np.mean(spread > 0)) < 0.9:
        return None
    grad = ctx.features("grad_norm")
    on = feat.step_at(episode.onset)
    before_lo = feat.step_at(max(0, episode.onset - pre))
    g_before = nanmedian(values_between(grad, before_lo, on - 1))
    g_during = nanmedian(values_between(grad, first, last))
    if not (np.isfinite(g_before) and np.isfinite(g_during)) or g_before <= 0 or g_during < p["push_grad_min"] * g_before:
        return None
    out = {"grad_norm_before": g_before, "grad_norm_while_dead": g_during}
    kl = ctx.features("kl_mean")
    if kl is not None:
        k = values_between(kl, first, last)
        if len(k) < 6:
            return None
        head, tail = nanmedian(k[: max(3, len(k) // 5)]), nanmedian(k[-max(3, len(k) // 5):])
        if mann_kendall(k).p_increasing >= 0.01 or not (head > 0 and tail >= p["push_kl_rise"] * head):
            return None  # the KL penalty (or nothing at all) holds the policy where it is
        out.update(kl_at_onset=head, kl_now=tail)
    return out


def within_share(ctx: DetectorContext, grid: Grid) -> np.ndarray | None:
    """group_reward_std_mean / reward_std over its early level: how much of the spread is within groups.

    When a trainer logs reward_std over the whole batch, a polarised batch keeps its batch
    spread while the within-group spread dies, so this falls. When reward_std is itself the
    mean within-group std (TRL) the two track each other and this stays ~1: no evidence.
    """
    g, r = metric_track(ctx, grid, "group_reward_std_mean"), metric_track(ctx, grid, "reward_std")
    if g is None or r is None:
        return None
    with np.errstate(invalid="ignore", divide="ignore"):
        share = trailing_median(np.where(r.value > 0, g.value / r.value, np.nan))
    base = nanmedian(share[baseline_window(share)])
    if not np.isfinite(base) or base <= 0 or not np.isfinite(r.b_median) or r.b_median <= 0:
        return None
    # only where the batch keeps its spread: a dead reward_std makes the ratio 0/0
    alive = r.smooth / r.b_median >= 0.3
    return np.where(alive, ffill(share / base), np.nan)


def _beyond_chance(before: np.ndarray, held: int, p_max: float = 0.01) -> int:
    """How many batches in a row must have every group degenerate before that is a state of the
    run and not chance, given the share of degenerate groups before them.

    With G groups a batch (the share moves in steps of 1/G) each degenerate with probability q,
    every group is degenerate in a batch with probability q**G: an easy task with 4 groups a
    batch, 80% of them solved every time, has all four degenerate on 41% of its batches, and
    a run of four such batches is common. A stretch counts once its chance, (q**G)**length, is
    below p_max. Without points before it (a run degenerate from its first step) there is no
    chance level to weigh it against: 0.
    """
    v = np.asarray(before, dtype=float)
    v = v[np.isfinite(v)]
    if len(v) < 3:
        return 0
    q = min(max(float(np.mean(v)), 0.0), 1.0)
    # a share that sat at one value before (0.75 on every batch) has no granularity of its own;
    # with the 100% it reaches, it does
    groups = granularity(v) or granularity(np.concatenate([v, [1.0]])) or 0
    if groups <= 0 or q <= 0.0:
        return 0
    p_all = q ** groups
    if p_all >= 1.0:
        return held + 1  # always degenerate before: nothing has changed
    if p_all <= 0.0:
        return 1  # so rare before (it underflows) that one such batch is beyond chance
    return int(math.ceil(math.log(p_max) / math.log(p_all)))


def _every_group_degenerate(ctx: DetectorContext, feat: MetricFeatures, p: dict[str, Any]) -> Finding | None:
    """(Nearly) every group degenerate on every step of a stretch that lasts to the end: no group
    gives any gradient, so the run has no learning signal at all, whatever the reward is."""
    value = np.asarray(feat.value, dtype=float)
    ok = np.isfinite(value)
    sustain = sustain_points(len(feat), p["sustain_frac"], floor=3)
    high = ok & (value >= p["every_min"])
    hit = held_stretch(high, sustain)
    if hit is None or not still_holds(high, hit[1], sustain):
        return None
    start, end = hit
    if float(np.mean(high[start:][ok[start:]])) < 0.95:
        return None  # most steps, not every one: a small batch with an informative group now and then
    if end - start + 1 < _beyond_chance(value[:start], high[start : end + 1].sum()):
        return None
    first_step, last_step = feat.step_at(start), int(feat.step_hi[end])
    held = nanmedian(value[start : end + 1])
    reward = ctx.features("reward_mean")
    rv = np.asarray(reward.value, dtype=float)[(reward.step >= first_step) & (reward.step <= last_step)] if reward is not None else np.array([])
    level = nanmedian(rv) if len(rv) else float("nan")
    since = "from the first logged step" if start <= 1 else f"from step {first_step}"
    evidence: dict[str, Any] = {"variant": "every_group", "zero_variance_group_frac_while_held": held,
                                "reward_mean_while_held": level}
    # where the reward sits in the range the run itself reached: at the top every prompt is
    # solved (finished), at the bottom none is (starved), between them each prompt's rollouts
    # are all right or all wrong (stuck)
    position = float("nan")
    if reward is not None and np.isfinite(level):
        allv = np.asarray(reward.value, dtype=float)
        allv = allv[np.isfinite(allv)]
        lo, hi = (np.percentile(allv, [2, 98]) if len(allv) >= 5 else (np.nan, np.nan))
        if np.isfinite(hi - lo) and hi - lo > 0:
            position = (level - lo) / (hi - lo)
    why = reward_at_floor(ctx, level, first_step, last_step) if np.isfinite(level) else None
    if np.isfinite(level) and (reward_at_ceiling(level, np.asarray(reward.value, dtype=float)) or position >= 0.8) and why is None:
        severity, verdict = "info", "at the top of the reward it reached: every prompt is solved, the data has nothing left to teach"
    elif why is not None or position <= 0.2:
        severity = "critical"
        verdict = (f"all-wrong ({why})" if why else "at the bottom of the reward it reached, all-wrong") + \
            ": no group gives any gradient, so the run has no learning signal at all"
    else:
        severity = "warn"
        verdict = ("each prompt's rollouts all right or all wrong alike: no group gives any gradient, so the run "
                   "learns nothing more")
    return make_finding(
        ctx, "DEGENERATE_GROUPS", Episode(start, end, severity, start), feat,
        confidence(1.0, 1.0, end - start + 1, sustain, floor=0.6),
        f"{held:.0%} of GRPO groups have zero reward variance {since} (to step {last_step}), {verdict}.",
        evidence,
        [
            "Check the reward on the linked samples: a reward that never fires (a parser that never matches, a wrong answer key) looks like this.",
            "Start from a checkpoint that can solve some prompts (SFT), add easier (or, if all are solved, harder) prompts, so groups hold mixed outcomes.",
            "Raise the group size or the sampling temperature so the rollouts of a prompt differ.",
            "Use DAPO-style dynamic sampling: drop zero-variance groups and resample until the batch is full.",
        ],
        sample_order="step ASC",
    ).model_copy(update={"ongoing": True})


def _mostly_solved(reward: MetricFeatures, first_step: int, last_step: int, degenerate: float, share: float = 0.75) -> bool:
    """True when at least `share` of the degenerate groups must be all-correct, by the reward alone.

    For a reward in [0, 1], a batch whose groups are a share z degenerate has at most 1 - r of
    its groups all-wrong at mean reward r (an all-wrong group earns 0, every other group at most
    1). Reward 0.95 with 88% of groups degenerate leaves at most 5% all-wrong: the degenerate
    groups are the prompts the policy solves, which is where an easy task sits, not a polarised
    batch. Rewards outside [0, 1] say nothing: False.

    The reward is the stretch's mean, not its median: the bound counts groups, and the groups of
    a stretch add up over its steps. Steps at 0.9 on most points and at 0.2 on some (80% of
    their groups all-wrong) are not a solved task, though their median is 0.9.
    """
    v = np.asarray(reward.value, dtype=float)
    v = v[np.isfinite(v)]
    if len(v) == 0 or float(np.min(v)) < 0.0 or float(np.max(v)) > 1.0 + 1e-9 or degenerate <= 0:
        return False
    held = np.asarray(reward.value, dtype=float)[(reward.step >= first_step) & (reward.step <= last_step)]
    held = held[np.isfinite(held)]
    if len(held) == 0:
        return False
    r = float(np.mean(held))
    all_wrong_max = min(degenerate, 1.0 - r)
    return all_wrong_max <= (1.0 - share) * degenerate


def _unit_reward(ctx: DetectorContext) -> MetricFeatures | None:
    """reward_mean's features when every logged value lies in [0, 1] (a rate of successes, whose
    mean bounds the kinds of degenerate groups), else None."""
    reward = ctx.features("reward_mean")
    if reward is None or not len(reward):
        return None
    v = np.asarray(reward.value, dtype=float)
    v = v[np.isfinite(v)]
    if len(v) == 0 or float(np.min(v)) < 0.0 or float(np.max(v)) > 1.0 + 1e-9:
        return None
    return reward


def _both_kinds(ctx: DetectorContext, feat: MetricFeatures, degenerate: np.ndarray, least: float = 0.1) -> np.ndarray | None:
    """Per row of feat: True where the reward alone proves that at least `least` of the groups
    are all-right and at least `least` all-wrong (a polarised batch), or None when the reward is
    not in [0, 1].

    With a share z of degenerate groups and batch-mean reward r in [0, 1], all-right groups
    are at least r - (1 - z) (the mixed groups earn at most their share) and all-wrong groups at
    least z - r (the all-right ones earn at most r). Reward 0.63 with 85% degenerate groups:
    at least 48% solved and at least 22% always failed.
    """
    if _unit_reward(ctx) is None:
        return None
    r = aligned(ctx, "reward_mean", feat.step)
    if r is None:
        return None
    z = np.asarray(degenerate, dtype=float)
    return np.isfinite(z) & (r - (1.0 - z) >= least) & (z - r >= least)


def _early_rise(ctx: DetectorContext, feat: MetricFeatures, p: dict[str, Any], closure: float = 0.0) -> Finding | None:
    """A rise of the zero-variance share judged against the level before the rise, not the early
    window: one that happened inside the early window (so that window's level is not the run's
    early level), or, with `closure` (the share of the groups still mixed before that must have
    gone degenerate), one the trailing mean of the main test has not caught up with by the last
    logged points (a sparse log of 20 points whose last five polarised)."""
    value = np.asarray(feat.value, dtype=float)
    n = len(value)
    sustain = sustain_points(n, p["sustain_frac"], floor=3)
    shifts = bounded_level_shifts(value)
    for j, shift in enumerate(shifts):
        if shift.before > p["baseline_max"] or shift.after < p["level_warn"] or shift.z < 4.0:
            continue
        held_from = level_before(shifts, j, 4.0)[1]
        if held_from > 0 and shift.at - held_from < sustain:
            # the level before is a blip of a few points, not a level the run held; from the first
            # logged point it is the model as it came in, a level by construction
            continue
        high = np.isfinite(value) & (value >= 0.5 * (shift.before + p["level_warn"]))
        hit = held_stretch(high, sustain, not_before=max(0, shift.at - 2))
        if hit is None or not still_holds(high, hit[1], sustain):
            continue
        start, end = hit
        # a share of groups: the level is its mean over the stretch (a median of a share that
        # moves in steps of 1/groups can read 100% while a seventh of the groups still learn)
        during = float(np.nanmean(value[start : end + 1]))
        if during < p["level_warn"] or (during - shift.before) < closure * (1.0 - shift.before):
            continue
        reward = ctx.features("reward_mean")
        split = _both_kinds(ctx, feat, value)
        proven = split is not None and float(np.mean(split[start : end + 1])) >= 0.5
        if reward is not None and not proven and not _mean_still_moves(feat, reward, start, end, p["jitter_min"] * 0.5):
            continue  # every rollout earns the same reward: REWARD_STD_DEATH's picture
        if reward is not None and _mostly_solved(reward, feat.step_at(start), int(feat.step_hi[end]), during):
            continue  # an easy task the policy settled into within its first points: its normal state
        severity = "critical" if during >= p["level_critical"] else "warn"
        return make_finding(
            ctx, "DEGENERATE_GROUPS", Episode(start, end, severity, start), feat,
            confidence((during - p["level_warn"]) / max(1.0 - p["level_warn"], 1e-6), 0.4, end - start + 1, sustain),
            f"{during:.0%} of GRPO groups have zero reward variance from step {feat.step_at(start)} (before: "
            f"{shift.before:.0%}): those groups give no gradient and the effective batch has shrunk to the few mixed groups.",
            {"variant": "early_rise", "zero_variance_group_frac_before": shift.before,
             "zero_variance_group_frac_during": during},
            [
                "All-correct: the prompts have become too easy; filter solved prompts or move to harder data (curriculum).",
                "All-wrong: the prompts are too hard or the reward never fires; check the reward on the linked samples, add easier prompts.",
                "Use DAPO-style dynamic sampling: drop zero-variance groups and resample until the batch is full.",
            ],
            sample_order="step DESC",
        ).model_copy(update={"ongoing": True})
    return None


def _all_wrong_from_start(ctx: DetectorContext, feat: MetricFeatures, p: dict[str, Any]) -> Finding | None:
    """Nearly every group degenerate from the first logged step, with the reward at its floor."""
    value = np.asarray(feat.value, dtype=float)
    ok = np.isfinite(value)
    sustain = sustain_points(len(feat), p["sustain_frac"], floor=3)
    high = ok & (value >= p["level_critical"])
    hit = held_stretch(high, sustain)
    if hit is None or hit[0] > 1 or not still_holds(high, hit[1], sustain):
        return None
    start, end = hit
    if float(np.mean(high[ok])) < 0.95:
        return None  # most steps, not every one: a small batch with an informative group now and then
    first_step, last_step = feat.step_at(start), int(feat.step_hi[end])
    reward = ctx.features("reward_mean")
    level = float("nan")
    if reward is not None:
        rv = np.asarray(reward.value, dtype=float)
        level = max(nanmedian(rv[: max(3, sustain)]), nanmedian(rv))
    # all-wrong from the start: the reward at its floor over the opening points and over the whole stretch
    opening_end = feat.step_at(min(end, start + max(3, sustain) - 1))
    why = None
    if np.isfinite(level) and reward_at_floor(ctx, level, first_step, opening_end) is not None:
        why = reward_at_floor(ctx, level, first_step, last_step)
    if why is None:
        return None  # all-correct, or nothing says all-wrong: an easy task, not a failure
    held = nanmedian(value[start : end + 1])
    return make_finding(
        ctx, "DEGENERATE_GROUPS", Episode(start, end, "critical", start), feat,
        confidence(1.0, 1.0, end - start + 1, sustain, floor=0.6),
        f"{held:.0%} of GRPO groups have zero reward variance from the first logged step (step {first_step} to "
        f"{last_step}), all-wrong ({why}): those groups give no gradient, so the run has had almost no learning signal.",
        {"variant": "all_wrong_from_start", "zero_variance_group_frac_median": held, "reward_mean_level": level},
        [
            "Check the reward on the linked samples: a reward that never fires (a parser that never matches, a wrong answer key) looks like this.",
            "Start from a checkpoint that can solve some prompts (SFT), or add easier prompts, so groups hold mixed outcomes.",
            "Raise the group size or the sampling temperature so some rollouts of a prompt succeed.",
        ],
        sample_order="step ASC",
    ).model_copy(update={"ongoing": True})


@detects("DEGENERATE_GROUPS")
def degenerate_groups(ctx: DetectorContext, p: dict[str, Any]) -> Finding | None:
    """Most GRPO groups have zero reward variance: each prompt is all-correct or all-wrong.

    GRPO's advantage is a rollout's reward minus its group's mean (over the group's std). A
    group whose G rollouts all earn the same reward contributes exactly zero gradient. When
    the policy becomes confident per prompt (prompts it always solves, prompts it always fails)
    the batch polarises: most groups are degenerate, the effective batch shrinks to the few
    mixed groups, updates get noisy and learning stalls, while the batch as a whole still holds
    both good and bad rollouts. All-correct groups mean the data is too easy for the policy;
    all-wrong groups mean it is too hard (or the reward never fires).

    Most of the groups that still gave signal early must have gone degenerate (an easy task
    starts with most groups degenerate; that is its normal state, and stays silent), and the
    batch must still hold reward variance across groups: the batch-mean reward keeps jittering
    (or, without it, reward_std over the batch stays while the within-group std dies). Without
    that, every rollout earns the same reward and the finding is REWARD_STD_DEATH's; with
    entropy collapsed or blown up, ENTROPY_COLLAPSE / ENTROPY_BLOWUP is the cause.
    """
    feat = ctx.features("zero_variance_group_frac")
    if feat is None or len(feat) < 5:
        return None
    every = _every_group_degenerate(ctx, feat, p)
    found = _polarised(ctx, feat, p)
    if found is None or (every is not None and every.first_step is not None and found.first_step is not None
                         and every.first_step < found.first_step):
        return every
    if every is not None and every.severity == "critical" and found.severity != "critical":
        found = found.model_copy(update={
            "severity": "critical",
            "explanation": found.explanation + f" From step {every.first_step} every group is degenerate: no learning signal is left.",
        })
    return found


def _polarised(ctx: DetectorContext, feat: MetricFeatures, p: dict[str, Any]) -> Finding | None:
    """Most of the groups that gave signal early have gone degenerate while the batch keeps its variance."""
    if len(feat) < 10 or not np.isfinite(feat.b_median):
        return None
    if feat.b_median > p["baseline_max"]:
        # most groups were degenerate over the early window: an easy task's normal state, unless
        # the early window already holds the rise (an early onset), or they are all-wrong (the
        # reward at its floor), which is a run with no signal at all
        return _early_rise(ctx, feat, p) or _all_wrong_from_start(ctx, feat, p)
    grid = Grid.of(ctx)
    sustain = sustain_points(len(feat), p["sustain_frac"])
    # A fraction has natural units: an absolute level and rise. With 4 groups a batch's fraction
    # moves in quarters, so the level is a trailing mean over the sustain window, which a
    # regime shift holds and a run of noisy batches does not.
    k = max(5, sustain)
    level = trailing_mean(np.where(np.isfinite(feat.value), feat.value, np.nan), k)
    # ... and the rise must stand out of the early batch-to-batch spread of such a mean
    significant = (level - feat.b_median) >= p["rise_z"] * feat.scale / math.sqrt(k)
    # most of the groups that still gave signal early must have gone degenerate (closure); a
    # smaller share will do when the batch mean shows the polarisation strongly
    closure = (level - feat.b_median) / max(1.0 - feat.b_median, 1e-6)
    high = (level >= p["level_warn"]) & (closure >= p["closure_floor"]) & significant
    jitter = noise_ratio(ctx, grid, "reward_mean")
    share = within_share(ctx, grid) if jitter is None else None
    polar = np.zeros(len(feat), dtype=bool)
    confirmable = jitter is not None or share is not None
    if jitter is not None:
        lively = on_rows(grid, feat, jitter)
        polar |= np.where(closure >= p["closure_min"], lively >= p["jitter_min"], lively >= p["jitter_strong"])
    elif share is not None:
        polar |= (on_rows(grid, feat, share) <= p["within_share_max"]) & (closure >= p["closure_min"])
    split = _both_kinds(ctx, feat, level)
    if split is not None:
        # the reward itself proves the batch holds both all-right and all-wrong groups
        polar |= split
        confirmable = True
    mask = high & polar if confirmable else high & (closure >= p["closure_min"])
    episode = find_episode(
        feat, warn=mask, critical=mask & (level >= p["level_critical"]), sustain=sustain,
        refine_with=feat.smooth, not_before=baseline_end(len(feat)) // 2,
    )
    if episode is None:
        # the trailing mean crosses sustain points after the batches did, and one batch under the
        # line breaks its stretch: read the levels instead, with most mixed groups lost
        return _early_rise(ctx, feat, p, closure=p["closure_floor"])
    # the level is a trailing mean, which crosses a few points after the batches did: the onset
    # is the first logged point of the unbroken run of batches at level_warn leading into it
    raw = np.asarray(feat.value, dtype=float)
    onset = min(episode.onset, episode.start)
    while onset > baseline_end(len(feat)) // 2 and np.isfinite(raw[onset - 1]) and raw[onset - 1] >= p["level_warn"]:
        onset -= 1
    episode = Episode(episode.start, episode.end, episode.severity, onset)
    g_on, g_start, g_end = (int(grid.index_of(feat.step[k : k + 1])[0]) for k in (episode.onset, episode.start, episode.end))
    pre = max(3, 2 * sustain)
    way, moves = direction(ctx, grid, g_on, g_end, pre)
    kind = {"up": "all-correct", "high": "all-correct", "down": "all-wrong", "low": "all-wrong"}.get(way, "all-correct or all-wrong")
    peak = float(np.nanmax(level[episode.start : episode.end + 1]))
    evidence: dict[str, Any] = {
        "variant": kind.replace("-", "_").replace(" ", "_"),
        "zero_variance_group_frac_peak": peak,
        "zero_variance_group_frac_baseline": feat.b_median,
        "share_of_mixed_groups_lost": (peak - feat.b_median) / max(1.0 - feat.b_median, 1e-6),
        "zero_variance_group_frac_now": float(level[-1]),
        **moves,
    }
    if jitter is not None:
        # the trailing 11-point jitter is noisy point by point; over the whole episode it must hold
        held_jitter = nanmedian(jitter[window(g_start, g_end + 1, len(grid))])
        evidence["reward_mean_jitter_ratio"] = held_jitter
        held_closure = float(np.nanmax(closure[episode.start : episode.end + 1]))
        proven = split is not None and float(np.mean(split[episode.start : episode.end + 1])) >= 0.5
        if not proven and not held_jitter >= (p["jitter_min"] if held_closure >= p["closure_min"] else p["jitter_strong"]):
            return None
    if share is not None:
        evidence["within_group_share_ratio"] = nanmedian(share[window(g_start, g_end + 1, len(grid))])
    severity = episode.severity if confirmable else "info"
    note = "" if confirmable else " (The run logs nothing that tells polarised groups from a saturated batch.)"
    reward = ctx.features("reward_mean")
    first_step, last_step = episode.steps(feat)
    if reward is not None and _mostly_solved(reward, first_step, last_step, peak):
        # saturated, not polarised: the degenerate groups are the prompts the policy now solves
        severity = "info"
        note = (" By the reward alone at least three quarters of them are solved prompts: the policy has learned this "
                "data, and only harder prompts can teach it more.")
        evidence["variant"] = "all_correct"
    ent = entropy_state(ctx, grid, g_on, g_start, g_end, pre)
    if ent is not None:
        evidence["entropy_ratio_to_baseline"] = ent["ratio_to_baseline"]
    strength = (peak - p["level_warn"]) / max(1.0 - p["level_warn"], 1e-6)
    left = (", and where it peaked no group was mixed: no learning signal was left" if peak >= p["every_min"]
            else " and the effective batch has shrunk to the few mixed groups")
    return make_finding(
        ctx, "DEGENERATE_GROUPS", Episode(episode.start, episode.end, severity, episode.onset), feat,
        confidence(strength, 0.4, episode.end - episode.start + 1, sustain),
        f"{peak:.0%} of GRPO groups have zero reward variance (early level {feat.b_median:.0%}), mostly {kind}: "
        f"those groups give no gradient{left}.{note}",
        evidence,
        [
            "All-correct: the prompts have become too easy; filter solved prompts or move to harder data (curriculum).",
            "All-wrong: the prompts are too hard or the reward never fires; check the reward on the linked samples, add easier prompts.",
            "Use DAPO-style dynamic sampling: drop zero-variance groups and resample until the batch is full.",
            "Raise the group size or the sampling temperature so groups are more likely to hold mixed outcomes.",
        ],
        sample_order="step DESC",
    )








def reward_floor(ctx: DetectorContext, value: np.ndarray) -> float:
    """The lowest reward a rollout can plausibly get: reward_min's lowest value if logged, else 0
    for a reward that never went below 0 (accuracy-like rewards), else the lowest batch mean."""
    low = ctx.features("reward_min")
    if low is not None and np.isfinite(low.vmin).any():
        return float(np.nanmin(low.vmin))
    v = value[np.isfinite(value)]
    if len(v) == 0:
        return 0.0
    return 0.0 if float(np.min(v)) >= 0.0 else float(np.min(v))


def _fall_z(value: np.ndarray, shifts: list[Shift], j: int, min_z: float, ramp: int, noise: float) -> tuple[float, int]:
    """How many standard errors a fall ending with shifts[j] took, counting the stages it came in,
    and the index where its first stage began.

    A reward that slides down over a few dozen steps is cut by the segmentation into stages,
    each under min_z standard errors on its own (0.69 -> 0.49 -> 0.31, -3.6 each) though the
    whole fall is ten. Falling stages with at most a ramp's length between them (5% of the run,
    at least the sustain stretch), and the small wobbles between them (under min_z), are one
    fall: its size is the median of the stretch before the first stage against the median
    after the last, in standard errors of the two medians under the series' noise."""
    first, k = j, j
    while k > 0:
        prev = shifts[k - 1]
        if shifts[k].at - prev.at > ramp:
            break
        if prev.after < prev.before:
            first = k - 1
        elif abs(prev.z) >= min_z:
            break
        k -= 1
    if first == j:
        return -shifts[j].z, shifts[j].at
    before = value[shifts[first].start : shifts[first].at]
    after = value[shifts[j].at : shifts[j].end + 1]
    before, after = before[np.isfinite(before)], after[np.isfinite(after)]
    if not len(before) or not len(after):
        return -shifts[j].z, shifts[j].at
    se = 1.25 * noise * math.sqrt(1.0 / len(before) + 1.0 / len(after))
    return max(-shifts[j].z, float(np.median(before) - np.median(after)) / se), shifts[first].at


@detects("REWARD_COLLAPSE")
def reward_collapse(ctx: DetectorContext, p: dict[str, Any]) -> Finding | None:
    """The reward's level falls far and stays down: the policy broke.

    A policy that earned a reward can lose it within a few updates: one oversized step (a loss
    or gradient spike, a learning rate too high for the current curvature, a stale or corrupted
    batch) moves it to where it writes worse answers, and on-policy RL then trains on those
    worse rollouts, so it rarely finds its way back. Runs that start high (an instruct model on
    an easy task) collapse the same way without any improvement first.

    The test works on levels, not on single points: the reward series is cut into segments of
    constant level (binary segmentation under the series' own noise, with a binomial floor
    when the reward is a batch mean of a few-valued reward), and a fall from one segment to
    the next must (1) be at least min_drop_noise standard errors of the two levels, (2) lose
    at least drop_warn of the reward's height above its floor (reward_min, else 0 for a reward
    that is never negative), and (3) not come back: the last points stay nearer the fallen
    level than the old one. A dip the run recovers from is not a collapse, unless it took at
    least drop_critical of the height and held for a twentieth of the run (twice the sustain
    stretch, at least 5 points): that one is a warning that says when it ended. The onset is
    the first logged point where the reward sat below the midpoint of the two levels and kept
    doing so. Critical at drop_critical. Causes the catalog links (an entropy blow-up,
    truncation, a gradient pathology, ...) rank above it and it says so.
    """
    feat = ctx.features("reward_mean")
    if feat is None or len(feat) < 8:
        return None
    value = np.asarray(feat.value, dtype=float)
    ok = np.isfinite(value)
    if ok.sum() < 8:
        return None
    n = len(value)
    noise = bounded_noise(value)
    if not np.isfinite(noise) or noise <= 0:
        return None
    floor = reward_floor(ctx, value)
    sustain = sustain_points(n, p["sustain_frac"], floor=int(p["min_points"]))
    tail = value[max(0, n - max(3, sustain)) :]
    final = nanmedian(tail)
    opening = nanmedian(value[: max(3, int(0.05 * n))])
    shifts = level_shifts(value, noise, min_size=int(p["min_points"]), lookback=max(8, n // 3))
    # A success rate (a mean of n outcomes of 0 or 1) has a known range. On a hard task its level
    # sits a few points above 0 and wanders by a third of itself as batches draw easier or harder
    # prompts (0.14 -> 0.08 -> 0.13): a share of that height is no measure of a broken policy, so
    # a fall must also take min_fall_range of the range, unless it took most of the height.
    lo_v, hi_v = float(np.nanmin(value)), float(np.nanmax(value))
    success_rate = lo_v >= 0.0 and hi_v <= 1.0 and granularity(value[ok]) is not None
    came_back: tuple[int, int, float, float, float, int, float] | None = None
    ramp = max(sustain, int(math.ceil(0.05 * n)))
    for j, shift in enumerate(shifts):
        drop = shift.before - shift.after
        height = shift.before - floor
        if drop <= 0 or height <= 0:
            continue
        z, fell_at = _fall_z(value, shifts, j, p["min_drop_noise"], ramp, noise)
        if z < p["min_drop_noise"]:
            continue
        # the level it held before (a fall in stages counts from the first stage's level) and the
        # level it ended at (a fall that continues counts to its bottom)
        top, top_lo = level_before(shifts, j, p["min_drop_noise"])
        top_lo = min(top_lo, fell_at)  # the stretch that held the level ends where the fall began
        if fell_at - top_lo < sustain:
            # the level before its first stage is a blip of a few points, not a level the reward
            # held (a noisy batch cut as a stage of its own): the last stage alone, from the level
            # held just before it, may still be the fall
            top, top_lo, fell_at, z = shift.before, shift.start, shift.at, -shift.z
            if fell_at - top_lo < sustain or z < p["min_drop_noise"]:
                continue
        height = top - floor
        if (top - shift.after) / height < p["drop_warn"]:
            continue
        if success_rate and top - shift.after < p["min_fall_range"] and (top - shift.after) / height < p["drop_critical"]:
            continue
        mid = top - 0.5 * (top - shift.after)
        below = ok & (value <= mid)
        hit = held_stretch(below, sustain, not_before=max(0, fell_at - 2))
        if hit is None:
            continue
        start, end = hit
        if final >= top - 0.3 * (top - shift.after):
            # it came back (most of the way). A dip of a few points is noise or one hard batch; a
            # fall that took most of the reward and held for a twentieth of the run is a collapse
            # the run happened to climb out of: every update in it trained on broken rollouts.
            # A shallower fall (recovered_share, half the height) counts when it held for
            # recovered_hold_frac of the run: a hard batch or a harder stretch of prompts costs
            # a few points, not a tenth of the updates.
            held = end - start + 1
            share = (top - shift.after) / height
            long_enough = ((share >= p["drop_critical"] and held >= max(2 * sustain, 5))
                           or (share >= p["recovered_share"] and held >= max(math.ceil(p["recovered_hold_frac"] * n), 2 * sustain, 5)))
            if came_back is None and long_enough and end < n - sustain:
                came_back = (start, end, top, shift.after, z, top_lo, height)
            continue
        # the fall counts to its bottom only where the words show one (a further fall beyond the
        # noise): "fell from 0.07 to 0.047, losing 56%" would quote a share of a lower level unsaid
        bottom = final if final < shift.after - 2.0 * noise else shift.after
        share = (top - bottom) / height
        end = n - 1 if final <= mid else end
        severity = "critical" if share >= p["drop_critical"] else "warn"
        since = (f"and has not recovered (last points: {final:.3g})" if final <= shift.after + 0.25 * (top - shift.after)
                 else f"and has only partly recovered (last points: {final:.3g})")
        return _collapse_finding(ctx, feat, p, Episode(start, end, severity, start), top, top_lo, fell_at, shift.after,
                                 bottom, share, z, noise, floor, final, opening, since, ongoing=True)
    if came_back is not None:
        start, end, top, after, z, top_lo, height = came_back
        since = (f"and held there to step {feat.step_at(end)}; it has come back since (last points: {final:.3g}). "
                 "The updates in between trained on those worse rollouts")
        return _collapse_finding(ctx, feat, p, Episode(start, end, "warn", start), top, top_lo, start, after,
                                 after, (top - after) / height, z, noise, floor, final, opening, since, ongoing=False)
    return None


def _collapse_finding(ctx: DetectorContext, feat: MetricFeatures, p: dict[str, Any], episode: Episode, top: float,
                      top_lo: int, fell_at: int, after: float, bottom: float, share: float, z: float, noise: float,
                      floor: float, final: float, opening: float, since: str, ongoing: bool) -> Finding:
    """The REWARD_COLLAPSE finding for one fall: its levels, its words, and whether it still holds."""
    first_step = feat.step_at(episode.start)
    sustain = sustain_points(len(feat), p["sustain_frac"], floor=int(p["min_points"]))
    evidence: dict[str, Any] = {
        "reward_before": top,
        "reward_after": after,
        "reward_final": final,
        "reward_floor": floor,
        "share_of_height_lost": share,
        "drop_in_standard_errors": z,
        "reward_noise_per_point": noise,
        "reward_opening": opening,
    }
    improved = f" (after improving from {opening:.3g})" if top - opening > 2.0 * noise else ""
    strength = share / p["drop_warn"] - 1.0
    return make_finding(
        ctx, "REWARD_COLLAPSE", episode, feat,
        confidence(strength, 0.6, episode.end - episode.start + 1, sustain, floor=0.45),
        f"Reward collapsed from step {first_step}: its level fell from {top:.3g} over steps {feat.step_at(top_lo)}-"
        f"{feat.step_at(max(0, fell_at - 1))}{improved} to {after:.3g}"
        + (f" and then {bottom:.3g}" if bottom < after else "")
        + f", losing {share:.0%} of its height above {floor:.3g} ({z:.0f} standard errors), {since}.",
        evidence,
        [
            "Roll back to the last checkpoint before the onset and resume with a lower learning rate." if ongoing else
            "Check that the checkpoints you keep come from after the recovery, and watch for a second fall.",
            "Look for a loss or grad-norm spike, or a bad batch, just before the onset; tighten gradient clipping.",
            "Compare the linked samples from after the onset with earlier ones to see what broke.",
        ],
        sample_order="step ASC",
    ).model_copy(update={"ongoing": ongoing})


def slope(track: Track, lo: int, hi: int) -> float:
    """Theil-Sen slope of a track over grid points [lo, hi) per point (NaN if too few points)."""
    idx = np.arange(max(0, lo), max(0, min(len(track.value), hi)))
    idx = idx[np.isfinite(track.value[idx])]
    if len(idx) < 6:
        return float("nan")
    if len(idx) > 200:  # thin evenly: Theil-Sen is O(n^2) and 200 points are plenty
        idx = idx[np.linspace(0, len(idx) - 1, 200).astype(int)]
    return theil_sen(idx.astype(float), track.value[idx])[0]


def still_improving(track: Track, lo: int, hi: int, pre: int, rise_max: float, stall: float) -> tuple[bool, tuple[float, float, float] | None]:
    """Did a component keep improving over [lo, hi] (after `pre` points of before-window)?

    Improving means: its level rose by more than rise_max baseline scales (over the whole
    stretch, or over its last third), and it is not merely finishing a rise that had begun
    before: its slope during the stretch is more than `stall` times its slope before lo.
    """
    change = level_change(track, lo, hi, pre)
    late = (lo + 2 * hi) // 3
    change_late = level_change(track, late, hi, pre + late - lo)
    if change is None or change_late is None:
        return False, change
    if max(change[2], change_late[2]) <= rise_max:
        return False, change
    before = slope(track, lo - max(pre, (hi - lo) // 2), lo)
    after = slope(track, lo, hi + 1)
    if np.isfinite(before) and np.isfinite(after) and before > 0 and after <= stall * before:
        return False, change
    return True, change


def component_weights(reward: Track | None, tracks: list[Track]) -> dict[str, float]:
    """Each component's weight in the total reward, by least squares of reward_mean on them.

    Trainers log the components unweighted and reward_mean as their weighted sum; the weights
    say how much a component's change moves the total. Unit weights when the fit is poor.
    """
    unit = {t.name: 1.0 for t in tracks}
    if reward is None or not tracks:
        return unit
    X = np.column_stack([t.value for t in tracks] + [np.ones(len(reward.value))])
    y = reward.value
    ok = np.isfinite(X).all(axis=1) & np.isfinite(y)
    if ok.sum() < 3 * X.shape[1]:
        return unit
    coef, *_ = np.linalg.lstsq(X[ok], y[ok], rcond=None)
    resid = y[ok] - X[ok] @ coef
    total = float(np.sum((y[ok] - y[ok].mean()) ** 2))
    if total <= 0 or 1.0 - float(resid @ resid) / total < 0.9:
        return unit
    return {t.name: float(c) for t, c in zip(tracks, coef)}


def sample_stats(ctx: DetectorContext, grid: Grid) -> dict[str, np.ndarray] | None:
    """v1.feat_reward_samples on the grid: grid index, reward_sd, len_reward_corr, distinct_share."""
    cache = memo(ctx)
    if "samples" not in cache:
        cache["samples"] = None
        if ctx.has_samples:
            table = ctx.query(
                "SELECT step, reward_sd, len_reward_corr, distinct_share FROM v1.feat_reward_samples "
                "WHERE run_id = ? ORDER BY step"
            )
            if table.num_rows:
                out = {name: to_numpy(table.column(name)).astype(float) for name in table.column_names}
                out["idx"] = grid.index_of(out.pop("step"))
                cache["samples"] = out
    return cache["samples"]


def sample_median(stats: dict[str, np.ndarray] | None, column: str, lo: int, hi: int, at_least: int = 5) -> float | None:
    """Median of a v1.feat_reward_samples column over captured steps in grid range [lo, hi]."""
    if stats is None:
        return None
    v = stats[column]
    sel = v[(stats["idx"] >= lo) & (stats["idx"] <= hi) & np.isfinite(v)]
    return float(np.median(sel)) if len(sel) >= at_least else None


def length_coupling(ctx: DetectorContext, grid: Grid, before: tuple[int, int], during: tuple[int, int]) -> tuple[float, float] | None:
    """Median within-step correlation of rollout length and reward, before and during (grid ranges)."""
    stats = sample_stats(ctx, grid)
    b, d = sample_median(stats, "len_reward_corr", *before), sample_median(stats, "len_reward_corr", *during)
    return None if b is None or d is None else (b, d)




@detects("REWARD_HACK_LENGTH")
def reward_hack_length(ctx: DetectorContext, p: dict[str, Any]) -> Finding | None:
    """Reward rises because completions get longer, not better.

    A learned reward model or LLM judge that (like most) prefers longer, more elaborate
    answers pays for length itself; so does any reward with a per-token term. The policy
    follows the cheapest gradient: it pads, restates, adds caveats and fake reasoning, and the
    reward climbs while the answers get no more correct. In recorded data: completion length
    grows well above its own early level, the total reward rises with it, and the correctness
    component (a verifier, exact match) stays flat or falls while a judge/quality component
    carries the gain. Reasoning RL also grows length (longer chains of thought), but there
    correctness rises with it; that is the distinction the detector draws.

    Without a correctness component, the captured samples decide: if within a batch the longer
    rollouts now earn the higher rewards (v1.feat_reward_samples), the reward pays for
    length; otherwise the data cannot tell hacking from reasoning growth and it is info.
    """
    feat = ctx.features("completion_len_mean")
    if feat is None or len(feat) < 10 or not np.isfinite(feat.b_median) or feat.b_median <= 0:
        return None
    grid = Grid.of(ctx)
    sustain = sustain_points(len(feat), p["sustain_frac"])
    ratio = np.where(np.isfinite(feat.ratio), feat.ratio, 1.0)
    grow = (ratio >= p["ratio_warn"]) & (feat.z > 3)
    episode = find_episode(
        feat, warn=grow, critical=grow & (ratio >= p["ratio_critical"]), sustain=sustain,
        refine_with=feat.smooth, not_before=baseline_end(len(feat)) // 2,
    )
    if episode is None:
        # a short or sparse log: the smoothed ratio lags a few points behind a growth that the
        # logged points already show, so read them as they are (a few points confirm it)
        raw = np.asarray(feat.value, dtype=float) / feat.b_median
        raw_grow = np.isfinite(raw) & (raw >= p["ratio_warn"]) & (np.nan_to_num(feat.z_raw) > 3)
        short_sustain = sustain_points(len(feat), p["sustain_frac"], floor=3)
        hit = held_stretch(raw_grow, short_sustain, not_before=baseline_end(len(feat)) // 2)
        if hit is not None:
            start, end = hit
            crit = float(np.nanmedian(raw[start : end + 1])) >= p["ratio_critical"]
            episode = Episode(start, end, "critical" if crit else "warn", start)
            ratio = np.where(np.isfinite(raw), raw, 1.0)
            sustain = short_sustain
    if episode is None:
        # The early window cannot be the yardstick when the length grew inside it (a rise in the
        # first tenth of the run): read the rise from the length's own levels, against the level
        # it held before (a rise in stages close together is one rise), still holding at the end.
        short_sustain = sustain_points(len(feat), p["sustain_frac"], floor=3)
        rises = [j for j in log_level_jumps(feat.value, p["ratio_warn"], 4.0, min(8, short_sustain))
                 if j.ongoing and j.start >= short_sustain]
        if not rises:
            return None
        jump = rises[0]
        episode = Episode(jump.start, jump.end, "critical" if jump.after >= p["ratio_critical"] * jump.before else "warn", jump.start)
        ratio = np.where(np.isfinite(feat.value), np.asarray(feat.value, dtype=float) / jump.before, 1.0)
        # a jump in stages is dated at its first logged point already at ratio_warn of the level
        # before (163 -> 369 -> 455 -> 504 tokens: the growth shows at 369)
        episode = raw_onset(episode, ratio >= p["ratio_warn"], floor=short_sustain)
        sustain, early_rise = short_sustain, jump.before
    else:
        episode = hinge_onset(episode, feat.smooth, baseline_end(len(feat)), sustain)
        # the smoothed ratio confirms; the logged points already at ratio_warn date it (a jump
        # 163 -> 369 -> 455 tokens crosses on the trailing median two points late)
        raw = np.asarray(feat.value, dtype=float) / feat.b_median
        raw_grow = np.isfinite(raw) & (raw >= p["ratio_warn"]) & (np.nan_to_num(feat.z_raw) > 3)
        episode = raw_onset(episode, raw_grow, floor=baseline_end(len(feat)) // 2)
        early_rise = None
    g_on, g_start, g_end = (int(grid.index_of(feat.step[k : k + 1])[0]) for k in (episode.onset, episode.start, episode.end))
    pre = max(5, 2 * sustain, g_start - g_on)
    reward = metric_track(ctx, grid, "reward_mean")
    r_change = level_change(reward, g_start, g_end, pre)
    if r_change is None or r_change[2] < -0.5:
        return None  # length grew while reward fell: not hacking (see TRUNCATION_STARVE, REPETITION_SPIRAL)
    peak = float(np.max(ratio[episode.start : episode.end + 1]))
    evidence: dict[str, Any] = {
        "peak_length_ratio": peak,
        "completion_len_baseline": feat.b_median if early_rise is None else early_rise,
        "completion_len_now": float(feat.smooth[-1]),
        "reward_mean_before": r_change[0],
        "reward_mean_during": r_change[1],
    }
    tracks = component_tracks(ctx, grid)
    role = {t.name: component_role(t.name, p["format_pattern"], p["correct_pattern"]) for t in tracks}
    correct = [t for t in tracks if role[t.name] == "correct"]
    weights = component_weights(reward, tracks)
    for t in correct:
        rising, change = still_improving(t, g_start, g_end, pre, p["correct_rise_max"], p["stall_ratio"])
        if change is not None:
            evidence[f"reward_component.{t.name}_before"] = change[0]
            evidence[f"reward_component.{t.name}_during"] = change[1]
            # correctness paying for at least half of the reward's rise is legitimate too
            gained = weights.get(t.name, 1.0) * (change[1] - change[0])
            rising |= r_change[1] > r_change[0] and gained > 0 and gained >= p["correct_share_max"] * (r_change[1] - r_change[0])
        if rising:
            return None  # correctness rose with length: legitimate (reasoning) growth
    payers = []
    for t in tracks:
        change = level_change(t, g_start, g_end, pre)
        if role[t.name] != "correct" and change is not None and change[2] > 1.0:
            payers.append(t.name)
            evidence[f"reward_component.{t.name}_before"] = change[0]
            evidence[f"reward_component.{t.name}_during"] = change[1]
    b_lo = baseline_window(reward.value) if reward is not None else np.array([], dtype=int)
    coupling = length_coupling(
        ctx, grid, (int(b_lo[0]), int(b_lo[-1])) if len(b_lo) else (0, g_on), (g_start, g_end)
    )
    coupled = False
    if coupling is not None:
        evidence["len_reward_corr_before"], evidence["len_reward_corr_during"] = coupling
        coupled = coupling[1] >= p["coupling_min"] and coupling[1] - coupling[0] >= p["coupling_rise"]
    if not payers and not coupled and r_change[2] < p["reward_rise_min"]:
        return None  # nothing that pays rose with the length
    severity = episode.severity
    if correct:
        verdict = f" while {', '.join(t.name for t in correct)} did not improve"
        verdict += f"; the gain came from {', '.join(payers)}" if payers else ""
    elif coupled:
        verdict = " and, within each batch, the longer rollouts earn the higher rewards"
    else:
        severity = "info"
        verdict = " (no correctness component or sample says whether answers got better, so this may be legitimate reasoning growth)"
    strength = peak / p["ratio_warn"] - 1.0
    return make_finding(
        ctx, "REWARD_HACK_LENGTH", Episode(episode.start, episode.end, severity, episode.onset), feat,
        confidence(strength, 0.5, episode.end - episode.start + 1, sustain),
        f"Completions grew to {peak:.1f}x {'their early length' if early_rise is None else 'the length they had before the rise'} "
        "and the reward rose with them "
        f"({r_change[0]:.3g} -> {r_change[1]:.3g}){verdict}: the policy is being paid for length.",
        evidence,
        [
            "Read the linked samples: padding, restated questions and filler reasoning confirm it.",
            "Add a length penalty or normalise the judge/reward-model score for length; cap max_completion_length.",
            "Weight the verifiable correctness reward more, or drop the component that pays for length.",
            "Use a loss that does not favour long sequences (Dr. GRPO's constant normaliser rather than per-sequence length).",
        ],
        sample_order="completion_len DESC NULLS LAST",
    )


def _worth_gaming(ctx: DetectorContext, gain: float, p: dict[str, Any]) -> bool:
    """Whether a format term's gain adds at least min_reward_share of the reward's early level
    (True when the reward's level says nothing: not logged, or not positive)."""
    reward = ctx.features("reward_mean")
    if reward is None or not np.isfinite(reward.b_median) or reward.b_median <= 0 or not np.isfinite(gain):
        return True
    return gain >= p["min_reward_share"] * float(reward.b_median)


def _early_format_rise(ctx: DetectorContext, grid: Grid, formats: list[Track], others: list[Track],
                       p: dict[str, Any]) -> Finding | None:
    """FORMAT_GAMING when the format's rise happened inside the early window (so that window's
    level is not the level before it): the rise is read from the component's own levels
    (binary segmentation under its noise, a rise in stages counted from before its first
    stage), and correctness is compared over the same stretches: its median before the rise
    against its median while the format stays up. None when no format rose that way, or
    correctness rose with it."""
    n = len(grid)
    sustain = sustain_points(n, p["sustain_frac"], floor=3)
    for c in formats:
        shifts = bounded_level_shifts(c.value)
        if not shifts:
            continue
        top = float(np.nanpercentile(c.smooth, 98))
        for j, shift in enumerate(shifts):
            if shift.z < p["rise_z"] or shift.at >= baseline_end(n):
                continue  # later rises are the main test's; this one is for the early window only
            before, lo = level_before(shifts, j, 4.0)
            # the level the climb reached: through the rising stages that follow it closely
            reached, last = level_reached(shifts, j, max(sustain, int(math.ceil(0.05 * n))))
            span = top - before
            # the level before must be one the run held, not a blip of a few points; the run's first
            # points are where it started, so two of them that agree are already its opening level
            held_before = 2 if lo == 0 else 3
            if shift.at - lo < held_before or not np.isfinite(span) or span <= 0:
                continue
            if reached < top - p["near_ceiling"] * span or reached - before < p["min_rise_share"] * abs(reached):
                continue
            filled = ffill(c.value)  # a sparse log leaves grid bins empty between its points
            high = np.isfinite(filled) & (filled >= before + 0.5 * (reached - before))
            hit = held_stretch(high, sustain, not_before=max(0, shift.at - 2))
            if hit is None or not still_holds(high, hit[1], sustain):
                continue
            start, end = hit
            f_during = nanmedian(c.value[start : end + 1])
            if not _worth_gaming(ctx, f_during - before, p):
                continue
            evidence: dict[str, Any] = {"gamed_component": c.name, f"reward_component.{c.name}_before": before,
                                        f"reward_component.{c.name}_during": f_during}
            worst_fall, learned = 0.0, False
            for o in others:
                # correctness before the format rose is all of it the run logged before the rise
                # (the format's own level-before may start at its previous stage, a point or two
                # in a sparse log: too few to say anything of correctness)
                o_before = nanmedian(o.value[: shift.at])
                o_during = nanmedian(o.value[start : end + 1])
                o_noise = bounded_noise(o.value)
                k_before = int(np.isfinite(o.value[: shift.at]).sum())
                k_during = int(np.isfinite(o.value[start : end + 1]).sum())
                if not (np.isfinite(o_before) and np.isfinite(o_during) and np.isfinite(o_noise)) or min(k_before, k_during) < held_before:
                    learned = True  # nothing says how correctness moved: no claim
                    break
                # the change in standard errors of the two medians (the noise of a point, at least
                # its binomial floor where the component is a rate)
                se = 1.25 * max(o_noise, 1e-12) * math.sqrt(1.0 / k_before + 1.0 / k_during)
                change = (o_during - o_before) / se
                # learned together: correctness rose beyond its noise and paid back at least
                # learn_share of what the format's rise added to the reward (components add up to
                # the reward, so their gains share its units). 0.32 -> 0.36 while the format
                # went 0.28 -> 0.99 is measurable, but the reward's gain is the format's.
                if change > p["correct_rise_max"] and o_during - o_before >= p["learn_share"] * (f_during - before):
                    learned = True
                    break
                # nor while the format climbed and first held its new level (over at least five
                # logged points: a sparse log's `sustain` bins may hold two). Gaming trades
                # correctness for format as the format rises; correctness that rose with it, or
                # held, and fell only later with the format long at its ceiling fell for another
                # reason (a diverging loss, a collapse: their own findings), so the critical
                # "fell" needs correctness down at the climb as well
                at_climb = np.flatnonzero(np.isfinite(o.value[start : end + 1])) + start
                reach = max(start, shifts[last].at) + sustain
                k_climb = max(int((at_climb <= reach).sum()), min(5, len(at_climb)))
                climb = o.value[at_climb[:k_climb]]
                if k_climb >= held_before:
                    o_climb = nanmedian(climb)
                    change_climb = (o_climb - o_before) / (1.25 * max(o_noise, 1e-12) * math.sqrt(1.0 / k_before + 1.0 / k_climb))
                    if change_climb > p["correct_rise_max"] and o_climb - o_before >= p["learn_share"] * (f_during - before):
                        learned = True
                        break
                    change = max(change, change_climb)
                evidence[f"reward_component.{o.name}_before"] = o_before
                evidence[f"reward_component.{o.name}_during"] = o_during
                worst_fall = min(worst_fall, change)
            if learned:
                continue
            severity = "critical" if worst_fall <= -p["rise_z"] else "warn"
            trend = "fell" if severity == "critical" else "stagnated"
            feats = grid.as_features(c.name, c.value, c.smooth)
            episode = Episode(start, end, severity, max(lo, min(start, shift.at)))
            return make_finding(
                ctx, "FORMAT_GAMING", episode, feats,
                confidence(shift.z / p["rise_z"] - 1.0 + max(0.0, -worst_fall) / p["rise_z"], 1.0, end - start + 1, sustain),
                f"The format reward '{c.name}' jumped to its ceiling early in the run ({before:.3g} -> {f_during:.3g}) while "
                f"{', '.join(o.name for o in others)} {trend} against where {'it' if len(others) == 1 else 'they'} stood before "
                "the jump: the policy is collecting the easy format reward instead of getting answers right.",
                evidence,
                [
                    "Lower the weight of the format component, or make it a gate (format only pays when the answer is correct).",
                    "Read the linked samples: well-formed completions with wrong or empty answers confirm it.",
                    "Check that the correctness reward parses the answer the way the format now presents it.",
                ],
                sample_order="step DESC",
            )
    return None


@detects("FORMAT_GAMING")
def format_gaming(ctx: DetectorContext, p: dict[str, Any]) -> Finding | None:
    """A format component pins at its ceiling while the correctness components stagnate or fall.

    Rewards for RL on reasoning tasks are usually a sum: a verifier for the answer plus cheap
    shaping terms for the format (<think>/<answer> tags, a strict template, XML counts). The
    format terms are far easier to satisfy, so once the policy finds how to satisfy them every
    time it collects their full weight on every rollout; if that is worth more than the slow
    progress on correctness, the policy settles there: answers in perfect format that are no
    more correct than before (or less, when the format crowds out the reasoning).

    A healthy run learns its format early and keeps improving correctness afterwards. The
    detector needs a format component (by name, see `format_pattern`) that jumps after the
    baseline window to near its ceiling, with most of its rise happening after the baseline and
    the rise at least min_rise_share (a fifth) of the level it reaches (a format reward already
    near its ceiling from the start has nothing left to take up),
    while no correctness component (by name, see `correct_pattern`; else the other
    components) improves over the same stretch, nor stands higher over it than where a format
    learned slowly had reached half its height. Needs reward components; without at least
    one format and one other component it stays silent.
    """
    grid = Grid.of(ctx)
    tracks = component_tracks(ctx, grid)
    role = {t.name: component_role(t.name, p["format_pattern"], p["correct_pattern"]) for t in tracks}
    formats = [t for t in tracks if role[t.name] == "format"]
    others = [t for t in tracks if role[t.name] == "correct"] or [t for t in tracks if role[t.name] == "other"]
    if not formats or not others:
        return None
    n = len(grid)
    sustain = sustain_points(n, p["sustain_frac"])
    best: tuple[Episode, Track, MetricFeatures, float] | None = None
    for c in formats:
        opening = nanmedian(c.value[: max(3, int(0.05 * n))])
        top = float(np.nanpercentile(c.smooth, 98))
        span = top - min(opening, c.b_median)
        if not np.isfinite(span) or span <= 0:
            continue
        z = (c.smooth - c.b_median) / c.scale
        gained = (c.smooth - c.b_median) / span
        mask = (z >= p["rise_z"]) & (gained >= p["late_share"]) & (c.smooth >= top - p["near_ceiling"] * span)
        mask &= np.isfinite(c.smooth)
        feats = grid.as_features(c.name, c.value, c.smooth)
        episode = find_episode(feats, warn=mask, critical=mask, sustain=sustain, refine_with=ffill(c.value), not_before=baseline_end(n))
        if episode is None:
            continue
        during = nanmedian(c.value[episode.start : episode.end + 1])
        if not during - c.b_median >= p["min_rise_share"] * max(abs(during), 1e-9):
            continue  # near its ceiling already (0.91 -> 0.92): a format learned before, not taken up now
        if best is None or episode.onset < best[0].onset:
            best = (episode, c, feats, float(np.nanmax(z[episode.start : episode.end + 1])))
    if best is None:
        early = _early_format_rise(ctx, grid, formats, others, p)
        return early
    episode, c, feats, peak_z = best
    g_on, g_start, g_end = episode.onset, episode.start, episode.end
    pre = max(5, 2 * sustain, g_start - g_on)
    c_change = level_change(c, g_start, g_end, pre)
    evidence: dict[str, Any] = {
        "gamed_component": c.name,
        f"reward_component.{c.name}_before": c_change[0] if c_change else float("nan"),
        f"reward_component.{c.name}_during": c_change[1] if c_change else float("nan"),
        "rise_in_baseline_scales": peak_z,
    }
    # where the format's rise reached half its height: at the jump itself for a format taken up
    # at once, much earlier for one learned slowly over the run
    half = c.b_median + 0.5 * (nanmedian(c.value[g_start : g_end + 1]) - c.b_median)
    below = np.flatnonzero(np.isfinite(c.smooth[:g_start]) & (c.smooth[:g_start] < half))
    rise_at = int(below[-1]) + 1 if len(below) else g_start
    slow = rise_at < g_start - pre  # learned over a long stretch, not taken up at once
    # the format's gain must be worth something to the policy: a term whose whole rise adds
    # under min_reward_share of the reward (0.047 -> 0.083 on a reward of 0.46) pays too little
    # to crowd out correctness, whatever correctness does meanwhile
    # its whole rise, from where it started (the stretch just before the pin may be mid-ramp)
    start_level = min(nanmedian(c.value[: max(3, int(0.05 * n))]), float(c.b_median))
    if np.isfinite(start_level) and start_level < evidence[f"reward_component.{c.name}_before"]:
        evidence[f"reward_component.{c.name}_before"] = start_level  # the words quote the whole rise
    if not _worth_gaming(ctx, nanmedian(c.value[g_start : g_end + 1]) - start_level, p):
        return None
    worst_fall = 0.0
    for o in others:
        rising, change = still_improving(o, g_start, g_end, pre, p["correct_rise_max"], p["stall_ratio"])
        if rising:
            return None  # correctness kept improving: the format was learned alongside it
        if slow:
            # correctness over the pinned stretch against its level when the format was half
            # learned: risen by more than correct_rise_max scales, the two were learned together
            then = nanmedian(o.value[max(0, rise_at - pre) : rise_at])
            now = nanmedian(o.value[g_start : g_end + 1])
            if np.isfinite(then) and np.isfinite(now) and o.scale > 0 and (now - then) / o.scale > p["correct_rise_max"]:
                return None
        if change is not None:
            evidence[f"reward_component.{o.name}_before"] = change[0]
            evidence[f"reward_component.{o.name}_during"] = change[1]
            worst_fall = min(worst_fall, change[2])
    severity = "critical" if worst_fall <= -p["fall_critical"] else "warn"
    names = ", ".join(o.name for o in others)
    trend = "fell" if worst_fall <= -p["fall_critical"] else "stagnated"
    strength = peak_z / p["rise_z"] - 1.0 + max(0.0, -worst_fall) / p["fall_critical"]
    return make_finding(
        ctx, "FORMAT_GAMING", Episode(episode.start, episode.end, severity, episode.onset), feats,
        confidence(strength, 1.0, episode.end - episode.start + 1, sustain),
        f"The format reward '{c.name}' {'rose' if slow else 'jumped'} to its ceiling ({evidence[f'reward_component.{c.name}_before']:.3g} -> "
        f"{evidence[f'reward_component.{c.name}_during']:.3g}) while {names} {trend}: the policy is collecting "
        "the easy format reward instead of getting answers right.",
        evidence,
        [
            "Lower the weight of the format component, or make it a gate (format only pays when the answer is correct).",
            "Read the linked samples: well-formed completions with wrong or empty answers confirm it.",
            "Check that the correctness reward parses the answer the way the format now presents it.",
        ],
        sample_order="step DESC",
    )
