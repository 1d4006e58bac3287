"""Signatures of the optimization itself: clipping, advantages, the value head, gradients, and
the off-policy gap between the rollouts and the policy being trained. See docs/signatures/.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from rlprobe.arrow_numpy import to_numpy
from rlprobe.doctor.context import DetectorContext, MetricFeatures
from rlprobe.doctor.episodes import (
    Episode, back_to_departure, baseline_end, confidence, find_episode, held_stretch, level_falls, log_level_jumps, make_finding, raw_onset,
    still_holds, sustain_points,
)
from rlprobe.doctor.findings import SEVERITY_ORDER, Finding, Severity
from rlprobe.doctor.registry import detects
from rlprobe.doctor.series import aligned, baseline_window, before_after, level_at_steps, usable
from rlprobe.doctor.stats import mann_kendall, nanmedian, normal_sf, prefix_quantiles, trailing_median


# ---------------------------------------------------------------------------------------------
# CLIP_SATURATION
# ---------------------------------------------------------------------------------------------
def _implied_clip_fraction(ratio_p95: np.ndarray, eps: float) -> np.ndarray:
    """Share of tokens outside [1-eps, 1+eps] if log-ratios were centred normal with this p95."""
    sigma = np.log(np.maximum(ratio_p95, 1.0 + 1e-9)) / 1.6449
    z = math.log(1.0 + eps) / sigma
    return np.array([2.0 * normal_sf(float(v)) for v in z])


@detects("CLIP_SATURATION")
def clip_saturation(ctx: DetectorContext, p: dict[str, Any]) -> Finding | None:
    """The PPO/GRPO ratio clip is engaged on a large, sustained share of tokens.

    The clipped surrogate min(r*A, clip(r, 1-eps, 1+eps)*A) passes no gradient for a token whose
    ratio r = pi/pi_old has left the trust region in the direction of its advantage. A few
    percent of clipped tokens is normal; when a fifth or more stay clipped, the update is too
    large for the data (learning rate, too many epochs or minibatches per rollout, a too-small
    eps) or the rollouts are off-policy: most of the batch stops contributing, updates lurch and
    KL climbs. Clipping that rises together with rollout staleness or a train/inference
    log-prob gap is reported as a symptom of those (info), not as a root cause.
    """
    feat = ctx.features("clip_fraction")
    implied = False
    if usable(feat):
        level = np.asarray(feat.smooth, dtype=float)
    else:
        feat = ctx.features("ratio_p95")
        if not usable(feat):
            return None
        implied = True
        level = _implied_clip_fraction(np.nan_to_num(feat.smooth, nan=1.0), p["clip_eps"])
    level = np.nan_to_num(level, nan=0.0)
    sustain = sustain_points(len(feat), p["sustain_frac"])
    episode = find_episode(
        feat,
        warn=level >= p["clip_warn"],
        critical=level >= p["clip_critical"],
        sustain=sustain,
        refine_with=level,
        not_before=baseline_end(len(feat)) // 2,
    )
    if episode is None:
        return None
    raw = np.asarray(feat.value, dtype=float)
    if implied:
        raw = _implied_clip_fraction(np.nan_to_num(raw, nan=1.0), p["clip_eps"])
    # an absolute share: clipping that holds from the first logged point is dated there
    episode = raw_onset(episode, np.nan_to_num(raw, nan=0.0) >= p["clip_warn"])
    held = level[episode.start : episode.end + 1]
    typical = float(np.median(held))
    first_step, last_step = episode.steps(feat)
    early = float(np.median(level[: max(1, episode.onset)])) if episode.onset > 0 else float("nan")
    evidence: dict[str, Any] = {
        "clip_fraction_before": early,
        "clip_fraction_during": typical,
        "clip_fraction_peak": float(np.max(held)),
        "steps_saturated": int(feat.step_hi[episode.end] - feat.step[episode.start] + 1),
    }
    if implied:
        evidence["clip_fraction_source"] = "implied from ratio_p95"
    for metric in ("ratio_p95", "ratio_mean", "kl_mean"):
        if metric == "ratio_p95" and implied:
            continue
        pair = before_after(ctx, metric, first_step, last_step)
        if pair is not None:
            evidence[f"{metric}_before"], evidence[f"{metric}_during"] = pair
    strength = typical / p["clip_warn"] - 1.0
    return make_finding(
        ctx, "CLIP_SATURATION", episode, feat,
        confidence(strength, 0.8, episode.end - episode.start + 1, sustain),
        f"The ratio clip was engaged on {typical:.0%} of tokens for "
        f"{evidence['steps_saturated']} steps (before: {early:.1%}): most of each batch passes no gradient "
        "and the updates are larger than the trust region allows.",
        evidence,
        [
            "Lower the learning rate, or the number of PPO epochs / minibatches per rollout batch.",
            "Check the rollouts are on-policy: batch_age and logprob_mismatch, if logged (see STALE_ROLLOUTS, TRAIN_INFERENCE_MISMATCH).",
            "If KL climbs with it, raise the KL coefficient; consider a smaller or asymmetric clip (DAPO clip-higher) only after that.",
        ],
    )


# ---------------------------------------------------------------------------------------------
# ADV_COLLAPSE
# ---------------------------------------------------------------------------------------------
def _reward_variance_ratio(ctx: DetectorContext, steps: np.ndarray) -> tuple[np.ndarray | None, list[str]]:
    """How far the reward's own variance fell, relative to its early level, on the given steps.

    The most collapsed of the available measures: within-group std (what GRPO normalises by),
    the share of groups with any variance at all, and the batch reward std. If rewards lost their
    variance, advantages collapsing is expected (DEGENERATE_GROUPS, REWARD_STD_DEATH), not a bug.
    """
    ratios, used = [], []
    for metric in ("group_reward_std_mean", "reward_std"):
        feat = ctx.features(metric)
        if feat is not None and len(feat) and np.isfinite(feat.b_median) and feat.b_median > 0:
            r = aligned(ctx, metric, steps)
            if r is not None:
                ratios.append(np.maximum(r, 0.0) / feat.b_median)
                used.append(metric)
    zvf = ctx.features("zero_variance_group_frac")
    if zvf is not None and len(zvf) and np.isfinite(zvf.b_median) and zvf.b_median < 0.999:
        z = aligned(ctx, "zero_variance_group_frac", steps)
        if z is not None:
            ratios.append(np.sqrt(np.clip(1.0 - z, 0.0, 1.0) / (1.0 - zvf.b_median)))
            used.append("zero_variance_group_frac")
    if not ratios:
        return None, used
    return np.min(np.vstack(ratios), axis=0), used


def _adv_fall(ctx: DetectorContext, feat: MetricFeatures, kept: np.ndarray, p: dict[str, Any]
              ) -> tuple[Episode, float, float | None, list[str]] | None:
    """A fall of adv_std to ratio_warn of the level just before it that the reward's variance
    does not explain: (episode, level before, reward-variance ratio across the fall or None when
    no such series is logged, the measures used), or None.

    Batches in which every group is degenerate are left out of the series (`kept`): they have no
    advantages at all, which is the rewards' doing. The reward's variance is compared over the
    same stretches (its median before the fall and while it holds): a fall of the advantage
    scale unexplained_factor times deeper than that one is the advantage computation's.
    """
    n = len(feat)
    # PPO's advantages may start large and settle in the first steps, while its value head learns
    # the returns; group-relative advantages (GRPO, RLOO, DAPO: the run logs the share of
    # zero-variance groups or the within-group std) are the rewards' own spread, normalised, from
    # the first step: there is nothing to settle, and the run's first points are a level held
    group_relative = ctx.features("group_reward_std_mean") is not None or ctx.features("zero_variance_group_frac") is not None
    falls = level_falls(kept, p["ratio_warn"], 4.0, min(8, sustain_points(n, p["sustain_frac"], floor=3)),
                        **({"warmup": 0.0, "opening": 3} if group_relative else {}))
    if not falls:
        return None
    fall = falls[0]
    first_step, last_step = feat.step_at(fall.start), int(feat.step_hi[fall.end])
    ratios, used = [], []
    for metric in ("group_reward_std_mean", "reward_std", "zero_variance_group_frac"):
        other = ctx.features(metric)
        if other is None or not len(other):
            continue
        v = np.asarray(other.value, dtype=float)
        before = nanmedian(v[other.step < first_step])
        during = nanmedian(v[(other.step >= first_step) & (other.step <= last_step)])
        if not (np.isfinite(before) and np.isfinite(during)):
            continue
        if metric == "zero_variance_group_frac":
            if before >= 0.999:
                continue
            ratios.append(math.sqrt(max(0.0, 1.0 - during) / (1.0 - before)))
        elif before > 0:
            ratios.append(max(during, 0.0) / before)
        else:
            continue
        used.append(metric)
    rv = min(ratios) if ratios else None
    drop = fall.after / fall.before
    if rv is not None and not drop * p["unexplained_factor"] < rv:
        return None  # the rewards lost their variance too: DEGENERATE_GROUPS / REWARD_STD_DEATH
    severity = "critical" if drop < p["ratio_critical"] and rv is not None else "warn"
    return Episode(fall.start, fall.end, severity, fall.start), fall.before, rv, used


def _divides_by_group_std(adv: np.ndarray, spread: np.ndarray) -> bool:
    """Whether advantages were divided by their group's reward std: adv_std (per mixed group) then
    stays put while the within-group std moves from batch to batch (in log, a quarter of its
    spread or less, over at least 10 points where the spread moved by 5% or more); without the
    division it moves with the spread."""
    with np.errstate(invalid="ignore", divide="ignore"):
        la, ls = np.log(np.asarray(adv, dtype=float)), np.log(np.asarray(spread, dtype=float))
    ok = np.isfinite(la) & np.isfinite(ls)
    if ok.sum() < 10:
        return False
    s_spread = float(np.std(ls[ok]))
    return s_spread >= 0.05 and float(np.std(la[ok])) <= 0.25 * s_spread


def _adv_small_from_start(ctx: DetectorContext, feat: MetricFeatures, kept: np.ndarray, p: dict[str, Any]) -> Finding | None:
    """Advantages far smaller than the rewards' own spread allows, from the first logged step.

    In group-relative RL (GRPO, RLOO, DAPO: the run logs the share of zero-variance groups or
    the within-group reward std) a rollout's advantage is its reward minus its group's mean,
    divided by the group's std or not. Either way the batch's advantage std is at least about
    the smaller of 1 and the within-group reward std, times sqrt(share of mixed groups): a
    degenerate group's advantages are 0, every other group's have its reward spread or unit
    spread. When adv_std stays put while the within-group std moves, the advantages were divided
    by it, and the floor is the unit spread alone. That floor is a lower bound under either
    convention (within sqrt((G-1)/G) for a group std taken with one degree of freedom less), so
    an adv_std at floor_ratio_warn (a fifth) of it or less on (nearly) every step from the first is a
    computation that throws the signal away (a wrong normaliser, a scale bug), which no
    comparison with the run's own early level can see. Critical below ratio_critical.
    """
    within = ctx.features("group_reward_std_mean")
    zvf = ctx.features("zero_variance_group_frac")
    if within is None and zvf is None:
        return None  # not recognisably group-relative: PPO's advantages have no such floor
    spread = aligned(ctx, "group_reward_std_mean" if within is not None else "reward_std", feat.step, "value")
    if spread is None:
        return None
    mixed = aligned(ctx, "zero_variance_group_frac", feat.step, "value") if zvf is not None else None
    share = np.sqrt(np.clip(1.0 - np.nan_to_num(mixed, nan=0.0), 0.0, 1.0)) if mixed is not None else np.ones(len(feat))
    with np.errstate(invalid="ignore", divide="ignore"):
        normalised = _divides_by_group_std(kept / share, spread)
    expected = share * (1.0 if normalised else np.minimum(1.0, np.maximum(spread, 0.0)))
    with np.errstate(invalid="ignore", divide="ignore"):
        ratio = np.where(expected > 1e-9, kept / expected, np.nan)
    ok = np.isfinite(ratio)
    n = len(feat)
    sustain = sustain_points(n, p["sustain_frac"], floor=3)
    small = ok & (ratio < p["floor_ratio_warn"])
    hit = held_stretch(small, sustain)
    if hit is None or hit[0] > 1 or not still_holds(small, hit[1], sustain) or float(np.mean(small[ok])) < 0.95:
        return None
    start, end = hit
    held = float(np.nanmedian(ratio[start : end + 1]))
    severity: Severity = "critical" if held < p["ratio_critical"] else "warn"
    adv_level = float(np.nanmedian(kept[start : end + 1]))
    spread_level = float(np.nanmedian(spread[start : end + 1]))
    what = "within-group reward std" if within is not None else "reward std"
    against = (f"against a {what} of {spread_level:.3g}" if not normalised else
               f"held steady while the {what} moved, as dividing by the group's std makes it, against the unit scale "
               "that division gives")
    return make_finding(
        ctx, "ADV_COLLAPSE", Episode(start, end, severity, start), feat,
        confidence(p["ratio_warn"] / max(held, 1e-6) - 1.0, 4.0, end - start + 1, sustain),
        f"From the first logged step the advantages are {held:.1%} of what the rewards' spread gives (adv_std "
        f"{adv_level:.3g} {against}): the advantage computation throws the reward "
        "signal away, and the policy gradient has almost none of it.",
        {"variant": "from_start", "adv_std_during": adv_level, f"{'group_reward_std_mean' if within is not None else 'reward_std'}_during": spread_level,
         "adv_std_ratio_to_expected": held},
        [
            "Check the advantage computation: normalisation (divide by std + eps), reward scaling, advantage clipping or masking.",
            "Inspect the linked samples: completions with different rewards but near-zero advantages confirm it.",
        ],
        sample_order="abs(advantage) ASC NULLS LAST, reward_total DESC NULLS LAST",
    ).model_copy(update={"ongoing": True})


@detects("ADV_COLLAPSE")
def adv_collapse(ctx: DetectorContext, p: dict[str, Any]) -> Finding | None:
    """Advantage magnitude collapses across the whole batch while rewards keep their variance.

    The policy gradient is the advantage-weighted score function: with advantages near zero
    there is no learning signal, whatever the rewards say. When the rewards themselves lose
    their variance (every completion in a group scores the same) that is DEGENERATE_GROUPS or
    REWARD_STD_DEATH; this signature is the other case, where the reward still separates good
    from bad completions but the advantage computation throws it away: a normaliser dividing
    by a huge or wrong std, a value baseline that copies the returns, a reward scale bug, an
    advantage clip or mask that zeroes most tokens. The test is relative to the run's own early
    advantage scale and requires the fall to be several times larger than any fall in reward
    variance.
    """
    primary = ctx.features("adv_std")
    use_std = usable(primary) and np.isfinite(primary.b_median) and primary.b_median > 0
    if not use_std:
        primary = ctx.features("adv_zero_frac")
        if not usable(primary):
            return None
    feat: MetricFeatures = primary
    n = len(feat)
    sustain = sustain_points(n, p["sustain_frac"])
    reward_ratio, explainers = _reward_variance_ratio(ctx, feat.step)
    verified = reward_ratio is not None
    rv = reward_ratio if reward_ratio is not None else np.ones(n)

    warn = np.zeros(n, dtype=bool)
    critical = np.zeros(n, dtype=bool)
    refine = None
    adv_ratio = None
    adv_kept = np.asarray(feat.value, dtype=float)
    zero = aligned(ctx, "adv_zero_frac", feat.step)
    zvf = aligned(ctx, "zero_variance_group_frac", feat.step)
    if use_std:
        adv_ratio = np.nan_to_num(feat.ratio, nan=1.0)
        # A batch in which every group is degenerate has no advantages at all (adv_std exactly
        # 0): that is the batch's rewards (DEGENERATE_GROUPS), not the advantage scale. With
        # few groups per batch an easy task has many such batches, and a smoothed adv_std
        # through them would read as a collapse: the scale is judged on the other batches.
        empty = np.zeros(n, dtype=bool)
        for share in (zero, zvf):
            if share is not None:
                empty |= np.nan_to_num(share, nan=0.0) >= 0.999
        empty &= np.asarray(feat.value, dtype=float) == 0.0
        adv_kept = np.where(empty, np.nan, np.asarray(feat.value, dtype=float))
        if empty.any():
            kept = np.where(empty, np.nan, np.asarray(feat.value, dtype=float))
            adv_ratio = np.nan_to_num(trailing_median(kept) / feat.b_median, nan=1.0)
        unexplained = adv_ratio * p["unexplained_factor"] < rv
        warn |= (adv_ratio < p["ratio_warn"]) & unexplained
        critical |= (adv_ratio < p["ratio_critical"]) & unexplained
        refine = np.log(np.maximum(np.nan_to_num(feat.smooth, nan=feat.b_median), 1e-12))
    zero_feat = ctx.features("adv_zero_frac")
    # zero advantages are only unexplained where the groups still have reward variance: with the
    # zero-variance share logged that is checked directly; without it, the share of zero
    # advantages is used only when there is no adv_std to go by, and cannot be verified
    if zero is not None and zero_feat is not None and (zvf is not None or not use_std):
        zero_bad = (zero >= p["zero_frac_warn"]) & (zero - zero_feat.b_median >= p["zero_frac_rise"])
        if zvf is not None:
            zero_bad &= zero - zvf >= p["zero_frac_rise"]
        else:
            verified = False
        warn |= zero_bad
        critical |= zero_bad & (zero >= 0.95) & (adv_ratio < p["ratio_warn"] if adv_ratio is not None else True)
        if refine is None:
            refine = zero
    if not verified:
        critical[:] = False  # without a reward-variance series the collapse cannot be told from a dead reward
    episode = find_episode(feat, warn, critical, sustain, refine_with=refine, not_before=baseline_end(n) // 2)
    reference, yardstick = feat.b_median, "its early level"
    if episode is None and use_std:
        pinned = _adv_small_from_start(ctx, feat, adv_kept, p)
        if pinned is not None:
            return pinned
    if episode is not None and use_std:
        episode = raw_onset(episode, np.nan_to_num(adv_kept / feat.b_median, nan=1.0) < p["ratio_warn"], floor=baseline_end(n) // 2)
    if use_std:
        # The early window cannot be the yardstick when the advantage scale fell inside it (a
        # fall in the first tenth of the run, whose median is then part of the way down): then
        # the fall is judged against the level it held just before, and the reward's variance
        # across the same change.
        fall = _adv_fall(ctx, feat, adv_kept, p)
        if fall is not None and (episode is None or (fall[0].start < episode.onset and fall[1] > feat.b_median)):
            episode, reference, rv_fall, explainers = fall
            adv_ratio = np.asarray(feat.value, dtype=float) / reference
            yardstick = "the level it held before the fall"
            verified = rv_fall is not None
            rv = np.full(n, rv_fall if rv_fall is not None else 1.0)
    if episode is None:
        return None
    first_step, last_step = episode.steps(feat)
    evidence: dict[str, Any] = {}
    lowest = None
    if use_std:
        held = adv_ratio[episode.start : episode.end + 1]
        lowest = float(np.min(held)) if yardstick == "its early level" else level_at_steps(feat, first_step, last_step) / reference
        evidence.update(adv_std_baseline=reference, adv_std_during=level_at_steps(feat, first_step, last_step), lowest_adv_std_ratio=lowest)
    if zero is not None and zero_feat is not None:
        evidence.update(adv_zero_frac_before=zero_feat.b_median, adv_zero_frac_during=level_at_steps(zero_feat, first_step, last_step))
    if verified:
        evidence["reward_variance_ratio_during"] = float(np.median(rv[episode.start : episode.end + 1]))
        evidence["reward_variance_measures"] = ", ".join(explainers)
    for metric in ("grad_norm", "reward_mean"):
        pair = before_after(ctx, metric, first_step, last_step)
        if pair is not None:
            evidence[f"{metric}_before"], evidence[f"{metric}_during"] = pair
    if lowest is not None:
        strength = p["ratio_warn"] / max(lowest, 1e-6) - 1.0
        what = f"Advantage std fell to {lowest:.1%} of {yardstick} ({reference:.3g} -> {evidence['adv_std_during']:.3g})"
    else:
        strength = (float(np.median(zero[episode.start : episode.end + 1])) - p["zero_frac_warn"]) / 0.1
        what = f"{evidence['adv_zero_frac_during']:.0%} of advantages are zero (early: {zero_feat.b_median:.0%})"
    tail = (" while the reward kept its variance" if verified else
            "; the run logs no reward-variance series, so a dead reward cannot be ruled out")
    return make_finding(
        ctx, "ADV_COLLAPSE", episode, feat,
        confidence(strength, 4.0, episode.end - episode.start + 1, sustain),
        f"{what}{tail}: the policy gradient has almost no signal left.",
        evidence,
        [
            "Check the advantage computation: normalisation (divide by std + eps), reward scaling, advantage clipping or masking.",
            "For PPO, check the value baseline is not tracking the returns exactly (explained variance near 1 with tiny advantages).",
            "Inspect the linked samples: completions with different rewards but near-zero advantages confirm it.",
        ],
        sample_order="abs(advantage) ASC NULLS LAST, reward_total DESC NULLS LAST",
    )


# ---------------------------------------------------------------------------------------------
# VALUE_DIVERGENCE
# ---------------------------------------------------------------------------------------------
_VALUE_HEAD_ACTIONS = (
    "Lower the value learning rate or vf_coef; check value clipping (cliprange_value) against the reward scale.",
    "Normalise or clip rewards so the returns the value head must predict keep a stable scale.",
)
"""What to try for a value head that lost track of the returns, however it was found."""


def _value_loss_from_opening(ctx: DetectorContext, vl: MetricFeatures, p: dict[str, Any]) -> Finding | None:
    """A value loss that left the run's first logged points inside the early window and stayed.

    The early window is the yardstick of the main test; a value head that diverges in the first
    few steps (a learning rate meant for the policy, a reward scale it was not initialised for)
    raises that yardstick with it and hides. The first `opening` (3) logged points are the
    value head as it came in, before any of this run's updates could move it much; a loss held
    at loss_ratio_critical (10x) of their median or more, from a sustained stretch to the last
    logged points, is an order of magnitude of error the head did not have at the start. A
    fresh value head starts at its worst and improves, so a healthy run's loss does not do
    this; the test is held to the stricter ratio and to a warning, because three points are a
    thin reference."""
    value = np.asarray(vl.value, dtype=float)
    ok = np.isfinite(value) & (value > 0)
    opening = 3
    first = np.flatnonzero(ok)[:opening]
    if len(first) < 2 or ok.sum() < 8:
        return None
    level = float(np.median(value[first]))
    n = len(value)
    sustain = sustain_points(n, p["sustain_frac"])
    high = ok & (value >= p["loss_ratio_critical"] * level)
    hit = held_stretch(high, sustain, not_before=int(first[-1]) - 1)
    if hit is None or not still_holds(high, hit[1], sustain):
        return None
    start, end = hit
    # dated where it left the opening level (half-way to loss_ratio_warn in log, as the main test)
    onset = raw_onset(Episode(start, end, "warn", start), ok & (value >= math.sqrt(p["loss_ratio_warn"]) * level),
                      floor=1).onset
    episode = Episode(start, end, "warn", onset)
    ratio = value[start : end + 1] / level
    typical = float(np.nanmedian(ratio))
    return make_finding(
        ctx, "VALUE_DIVERGENCE", episode, vl,
        confidence(typical / p["loss_ratio_critical"] - 1.0, 1.5, end - start + 1, sustain),
        f"The value loss rose to {typical:.0f}x its level at the run's first logged steps ({level:.3g}) and stayed there "
        "to the last logged step: the value head got worse than it started, so PPO's advantages are now mostly noise.",
        {"value_loss_opening": level, "value_loss_ratio_typical": typical, "value_loss_peak_ratio": float(np.nanmax(ratio))},
        [
            *_VALUE_HEAD_ACTIONS,
            "Check how the value head is initialised (from the reward model, or a fresh head) against the reward scale.",
        ],
    ).model_copy(update={"ongoing": True})


def _value_loss_early_level(vl: MetricFeatures) -> float:
    """The level a rising value loss is dated from: the early window's median, or the lowest
    level the loss held over five logged points in that window if lower. A rise that began
    inside the early window lifts its median (a loss climbing from 0.25 from a tenth of the run
    on has an early median of 1); the level it held before the climb is the one it left."""
    v = np.asarray(vl.value, dtype=float)[: baseline_end(len(vl))]
    v = v[np.isfinite(v)]
    if len(v) < 5:
        return float(vl.b_median)
    lowest = float(np.nanmin(trailing_median(v, 5)[4:]))
    return min(float(vl.b_median), lowest) if lowest > 0 else float(vl.b_median)


@detects("VALUE_DIVERGENCE")
def value_divergence(ctx: DetectorContext, p: dict[str, Any]) -> Finding | None:
    """The PPO value head stops predicting returns: explained variance <= 0, value loss runs away.

    PPO's advantages are returns minus the value head's predictions (through GAE), so the value
    head is the baseline that keeps the policy gradient's variance down. Explained variance
    1 - Var(returns - V)/Var(returns) near 1 means the baseline predicts the returns; at 0 it
    predicts nothing, and below 0 it adds noise. A value head that diverges (too high a value
    learning rate or vf_coef, value clipping fighting a reward scale change, returns drifting as
    the policy changes) turns every advantage into noise and the policy starts to follow it.
    Early in a run explained variance is often negative while the head learns; the test is a
    fall of at least ev_drop from its best level to at most ev_warn, or the value loss growing
    to loss_ratio_warn times its early level.
    """
    ev = ctx.features("value_explained_variance")
    vl = ctx.features("value_loss")
    use_ev = usable(ev)
    use_vl = usable(vl) and np.isfinite(vl.b_median) and vl.b_median > 0
    if not use_ev and not use_vl:
        return None
    feat: MetricFeatures = ev if use_ev else vl
    n = len(feat)
    sustain = sustain_points(n, p["sustain_frac"])
    warn = np.zeros(n, dtype=bool)
    critical = np.zeros(n, dtype=bool)
    ev_bad = np.zeros(n, dtype=bool)
    loss_bad = np.zeros(n, dtype=bool)
    refine = None
    if use_ev:
        s = np.asarray(ev.smooth, dtype=float)
        peak = np.fmax.accumulate(np.where(np.isfinite(s), s, -np.inf))
        drop = peak - s
        ev_bad = (s <= p["ev_warn"]) & (drop >= p["ev_drop"])  # NaN compares False
        critical |= ev_bad & (s <= p["ev_critical"])
        refine = -np.nan_to_num(s, nan=float(np.nanmedian(s)))
    loss_ratio = None
    if use_vl:
        ratio = vl.ratio if feat is vl else aligned(ctx, "value_loss", feat.step, "ratio")
        z = vl.z if feat is vl else aligned(ctx, "value_loss", feat.step, "z")
        if ratio is not None and z is not None:
            loss_ratio = np.nan_to_num(ratio, nan=1.0)
            loss_bad = (loss_ratio >= p["loss_ratio_warn"]) & (np.nan_to_num(z) > 3)
            critical |= loss_bad & (loss_ratio >= p["loss_ratio_critical"])
            if refine is None:
                refine = np.log(np.maximum(loss_ratio, 1e-12))
    warn |= ev_bad | loss_bad
    critical |= ev_bad & loss_bad
    episode = find_episode(feat, warn, critical, sustain, refine_with=refine, not_before=baseline_end(n) // 2)
    if episode is None:
        return _value_loss_from_opening(ctx, vl, p) if use_vl else None
    # the same tests on the logged values, not their trailing median: the date of the first of them
    raw_bad = np.zeros(n, dtype=bool)
    if use_ev:
        r = np.asarray(ev.value, dtype=float)
        raw_bad |= (r <= p["ev_warn"]) & (np.fmax.accumulate(np.where(np.isfinite(r), r, -np.inf)) - r >= p["ev_drop"])
    if loss_ratio is not None:
        early = _value_loss_early_level(vl)
        raw_ratio = (np.asarray(vl.value, dtype=float) / early if feat is vl
                     else aligned(ctx, "value_loss", feat.step, "value") / early)
        # a loss on its way up is dated from where it left its early level (half-way to
        # loss_ratio_warn in log, 2x by default) and kept rising into the episode
        raw_bad |= np.nan_to_num(raw_ratio, nan=1.0) >= math.sqrt(p["loss_ratio_warn"])
    episode = raw_onset(episode, raw_bad, floor=baseline_end(n) // 2)
    first_step, last_step = episode.steps(feat)
    window = slice(episode.start, episode.end + 1)
    evidence: dict[str, Any] = {}
    parts = []
    strength = 0.0
    if use_ev:
        s = np.asarray(ev.smooth, dtype=float)
        best = float(np.nanmax(s[: episode.start + 1]))
        low = float(np.nanmin(s[window]))
        evidence.update(explained_variance_best=best, explained_variance_low=low, explained_variance_now=float(s[-1]))
        if ev_bad[window].any():
            parts.append(f"explained variance fell from {best:.2f} to {low:.2f}")
            strength = max(strength, (best - low) / p["ev_drop"] - 1.0)
    if loss_ratio is not None:
        peak_ratio = float(np.max(loss_ratio[window]))
        evidence.update(value_loss_baseline=vl.b_median, value_loss_peak_ratio=peak_ratio)
        if loss_bad[window].any():
            parts.append(f"value loss grew to {peak_ratio:.1f}x its early level")
            strength = max(strength, peak_ratio / p["loss_ratio_warn"] - 1.0)
    pair = before_after(ctx, "value_clip_fraction", first_step, last_step)
    if pair is not None:
        evidence["value_clip_fraction_before"], evidence["value_clip_fraction_during"] = pair
    both = ev_bad[window].any() and loss_bad[window].any()
    return make_finding(
        ctx, "VALUE_DIVERGENCE", episode, feat,
        confidence(strength + (1.0 if both else 0.0), 1.5, episode.end - episode.start + 1, sustain),
        "The value head stopped predicting returns: " + " and ".join(parts) + ". PPO's advantages are now mostly noise.",
        evidence,
        [
            *_VALUE_HEAD_ACTIONS,
            "Roll back to before the onset if the policy has started to degrade (see reward and KL).",
        ],
    )


# ---------------------------------------------------------------------------------------------
# GRAD_PATHOLOGY
# ---------------------------------------------------------------------------------------------
def _events(steps: np.ndarray, gap: int) -> list[tuple[int, int]]:
    """Group sorted steps into events: runs whose consecutive steps are at most gap apart."""
    if len(steps) == 0:
        return []
    cuts = np.flatnonzero(np.diff(steps) > gap) + 1
    starts = np.concatenate([[0], cuts])
    ends = np.concatenate([cuts, [len(steps)]]) - 1
    return [(int(steps[a]), int(steps[b])) for a, b in zip(starts, ends)]


def _nonfinite_part(ctx: DetectorContext, p: dict[str, Any]) -> dict[str, Any] | None:
    table = ctx.query(
        "SELECT step, nan_count, inf_count, loss_nonfinite, grad_nonfinite FROM v1.feat_opt_nonfinite "
        "WHERE run_id = ? ORDER BY step"
    )
    if table.num_rows == 0:
        return None
    steps = to_numpy(table.column("step")).astype(np.int64)
    nan = np.nan_to_num(to_numpy(table.column("nan_count")).astype(float))
    inf = np.nan_to_num(to_numpy(table.column("inf_count")).astype(float))
    loss_bad = np.array([bool(v) for v in table.column("loss_nonfinite").to_pylist()])
    k = len(steps)
    span = max(1, (ctx.last_step or int(steps[-1])) - int(steps[0]) + 1)
    rate = k / span
    severity: Severity = "critical" if k >= p["nonfinite_critical_steps"] else "warn"
    conf = confidence(k / p["nonfinite_critical_steps"], 1.0, k, max(1, p["nonfinite_critical_steps"]), floor=0.55)
    return {
        "severity": severity,
        "confidence": conf,
        "first_step": int(steps[0]),
        "last_step": int(steps[-1]),
        "text": f"{k} step(s) with NaN/Inf gradients or loss from step {int(steps[0])}"
                + (f" ({int(loss_bad.sum())} with a non-finite loss)" if loss_bad.any() else ""),
        "evidence": {
            "nonfinite_steps": k,
            "first_nonfinite_step": int(steps[0]),
            "nonfinite_step_rate": rate,
            "nan_count_total": float(nan.sum()),
            "inf_count_total": float(inf.sum()),
            "nonfinite_loss_steps": int(loss_bad.sum()),
        },
    }


def spike_sigmas(n_points: int, cap: float, alpha: float = 0.01) -> float:
    """How many of its own noise scales a step must stand above the local level to be a spike:
    the level a run of n_points steps of log-normal noise exceeds with probability alpha (the
    largest of n normal draws grows like sqrt(2 ln n)), at least 3 and at most `cap`.

    A fixed 4.5 sigma is the right bar for a run of thousands of steps (about 1 chance in 300k
    a step), and far too high for a 30-point log, where 3.4 sigma already has 1 chance in a
    hundred to happen once by chance.
    """
    from statistics import NormalDist

    n = max(1, int(n_points))
    return float(min(cap, max(3.0, NormalDist().inv_cdf(1.0 - alpha / n))))


def _spike_part(ctx: DetectorContext, p: dict[str, Any], n_steps: int) -> dict[str, Any] | None:
    count = ctx.query("SELECT count(*) AS n FROM v1.feat_opt_grad_spikes WHERE run_id = ? AND log_ratio IS NOT NULL")
    n_points = int(count.column("n")[0].as_py() or 0)
    table = ctx.query(
        "SELECT step, grad_norm, log_ratio, noise_scale FROM v1.feat_opt_grad_spikes "
        "WHERE run_id = ? AND log_ratio >= greatest(?, ? * noise_scale) ORDER BY step",
        [ctx.run_id, math.log(p["spike_ratio_min"]), spike_sigmas(n_points, p["spike_sigmas"])],
    )
    if table.num_rows == 0:
        return None
    steps = to_numpy(table.column("step")).astype(np.int64)
    log_ratio = to_numpy(table.column("log_ratio")).astype(float)
    noise = float(table.column("noise_scale")[0].as_py() or 0.0)
    gap = max(2, int(math.ceil(n_steps / 1000.0)))
    events = _events(steps, gap)
    if len(events) < p["spike_events_warn"]:
        return None
    k = p["spike_events_warn"]
    # the first cluster of k events close enough together to be one episode, not chance; chance
    # goes by logged points, so on a sparse log the window spans as many points as a dense one's
    window = max(p["spike_window_min_steps"], int(p["spike_window_frac"] * n_steps), p["spike_window_min_points"] * ctx.stride)
    start = None
    for i in range(len(events) - k + 1):
        if events[i + k - 1][0] - events[i][0] <= window:
            start = i
            break
    if start is None:
        return None
    ev_after = events[start:]
    span = max(1, events[-1][1] - events[start][0] + 1)
    rate = len(ev_after) / span
    severity: Severity = "critical" if len(ev_after) >= p["spike_events_critical"] and rate >= p["spike_rate_critical"] else "warn"
    peak = float(np.exp(np.max(log_ratio)))
    median_spike = float(np.exp(np.median(log_ratio)))
    strength = (len(ev_after) / k - 1.0) + math.log(median_spike / p["spike_ratio_min"] + 1e-9) / 2
    conf = confidence(max(strength, 0.0), 1.5, len(ev_after), k)
    return {
        "severity": severity,
        "confidence": conf,
        "first_step": events[start][0],
        "last_step": events[-1][1],
        "text": f"{len(ev_after)} grad-norm spikes from step {events[start][0]} (median {median_spike:.0f}x, peak {peak:.0f}x the local level)",
        "evidence": {
            "grad_spike_events": len(ev_after),
            "grad_spike_median_ratio": median_spike,
            "grad_spike_peak_ratio": peak,
            "grad_spike_rate_per_step": rate,
            "grad_norm_log_noise": noise,
        },
    }


def _spike_burst_part(ctx: DetectorContext, p: dict[str, Any]) -> dict[str, Any] | None:
    """Spikes so frequent that they are the local level: a burst the spike test cannot see.

    The spike test measures a step against the level a quarter of the nearby steps reach, and
    against the run's spread of those ratios. Once a quarter or more of the steps are spikes,
    that level is the spikes' own and the spread is theirs too, so none of them stands out. A
    burst is read against the run before it instead: steps at spike_ratio_min (8x) the 95th
    percentile of the baseline window's grad norms (the largest an ordinary step got early, an
    informative batch's included) making up a quarter of the trailing window (a tenth of the
    run, 5 to 21 points) for growth_sustain_frac of the run, after the baseline window. It is
    dated at the first such step of the window where the share first held, or earlier at the
    spikes leading into it, each within half a window of the next."""
    feat = ctx.features("grad_norm")
    if not usable(feat, 20):
        return None
    raw = np.asarray(feat.value, dtype=float)
    n = len(raw)
    early = raw[baseline_window(raw)]
    early = early[np.isfinite(early) & (early > 0)]
    if len(early) < 8:
        return None
    top = float(np.percentile(early, 95))
    spike = np.isfinite(raw) & (raw >= p["spike_ratio_min"] * top)
    w = max(5, min(21, n // 10))
    share = np.convolve(spike.astype(float), np.ones(w), mode="full")[:n] / w
    sustain = sustain_points(n, p["growth_sustain_frac"], floor=4)
    hit = held_stretch(share >= 0.25, sustain, not_before=baseline_end(n))
    if hit is None:
        return None
    start, end = hit
    lo = max(0, start - w + 1)
    first = lo + int(np.flatnonzero(spike[lo : start + 1])[0])
    # the spikes that led into it, each within half a window of the next, belong to the burst
    gap = max(2, w // 2)
    before = np.flatnonzero(spike[: first])
    for k in before[::-1]:
        if first - k > gap or k < baseline_end(n) // 2:
            break
        first = int(k)
    last = int(np.flatnonzero(spike[: end + 1])[-1])
    count = int(spike[first : last + 1].sum())
    if count < p["spike_events_warn"]:
        return None
    ratios = raw[first : last + 1][spike[first : last + 1]] / top
    severity: Severity = "critical" if count >= p["spike_events_critical"] else "warn"
    return {
        "severity": severity,
        "confidence": confidence(count / p["spike_events_warn"] - 1.0 + math.log(float(np.median(ratios)) / p["spike_ratio_min"] + 1e-9) / 2,
                                 1.5, last - first + 1, sustain),
        "first_step": feat.step_at(first),
        "last_step": int(feat.step_hi[last]),
        "text": (f"{count} grad-norm spikes from step {feat.step_at(first)}, {float(np.mean(spike[first : last + 1])):.0%} of the "
                 f"steps (median {float(np.median(ratios)):.0f}x, peak {float(np.max(ratios)):.0f}x the largest ordinary grad norm "
                 f"of the early steps, {top:.3g})"),
        "evidence": {
            "grad_spike_events": count,
            "grad_spike_share": float(np.mean(spike[first : last + 1])),
            "grad_spike_median_ratio": float(np.median(ratios)),
            "grad_spike_peak_ratio": float(np.max(ratios)),
            "grad_norm_early_p95": top,
        },
    }


def _growth_part(ctx: DetectorContext, p: dict[str, Any]) -> dict[str, Any] | None:
    """Grad-norm growth: measured against the early window's level, or, when it happened inside
    that window (the yardstick then holds part of the growth, and its median may reach the new
    level), read from the series' own log levels."""
    feat = ctx.features("grad_norm")
    if not usable(feat, 20) or not np.isfinite(feat.b_median) or feat.b_median <= 0:
        return None
    w = max(5, min(21, len(feat) // 10))
    return _growth_after_early_window(feat, p, w) or _growth_in_early_window(feat, p, w)


def _growth_after_early_window(feat: MetricFeatures, p: dict[str, Any], w: int) -> dict[str, Any] | None:
    n = len(feat)
    # The level of the grad norm is a trailing median over a tenth of the run (5 to 21 points):
    # in group-relative RL a step's grad norm depends on how many of its groups carry signal, so
    # a short median flips between the sizes of informative and empty batches while nothing
    # grows; growth moves the whole distribution and the long median with it.
    level = trailing_median(np.asarray(feat.value, dtype=float), w)
    ratio = np.nan_to_num(level / feat.b_median, nan=1.0)
    sustain = sustain_points(n, p["growth_sustain_frac"], floor=4)
    logs = np.log(np.maximum(np.nan_to_num(level, nan=feat.b_median), 1e-12))
    episode = find_episode(
        feat,
        warn=ratio >= p["growth_ratio_warn"],
        critical=ratio >= p["growth_ratio_critical"],
        sustain=sustain,
        refine_with=logs,
        not_before=baseline_end(n),
    )
    if episode is None:
        return None
    # growth that has not recovered: a burst of a few steps (after a bad batch) settles back
    if float(np.median(ratio[episode.start :])) < p["growth_ratio_warn"] / 2:
        return None
    # and growth of the whole distribution, its top included: when only the mix of informative
    # and empty batches changes, the largest grad norms stay what they were before (the 95th
    # percentile of everything before the onset)
    raw = np.asarray(feat.value, dtype=float)
    early = raw[: max(3, episode.onset)]
    early = early[np.isfinite(early)]
    if len(early) >= 3:
        top_early = float(np.percentile(early, 95))
        tops = [np.nanpercentile(raw[max(0, i - w + 1) : i + 1], 90) for i in range(episode.start, n)]
        if top_early > 0 and float(np.nanmax(tops)) / top_early < p["growth_ratio_warn"] / 2:
            return None
    # and that trends up into and through the episode rather than jumping once: the trend test
    # runs from before the crossing to the last point that is still elevated
    elevated_to = int(np.flatnonzero(ratio >= p["growth_ratio_warn"] / 2)[-1])
    lo = max(baseline_end(n) // 2, episode.onset - 4 * sustain)
    trend = mann_kendall(logs[lo : max(elevated_to, episode.end) + 1])
    if trend.p_increasing > 1e-3:
        return None
    # the onset: the first logged point of the unbroken run of raw values already departed
    # (growth_departure_ratio x the early level) that leads into the episode
    raw = np.nan_to_num(np.asarray(feat.value, dtype=float) / feat.b_median, nan=0.0)
    floor = baseline_end(n)
    onset = episode.start
    while onset > floor and raw[onset - 1] >= p["growth_departure_ratio"]:
        onset -= 1
    # growth that starts as spikes among ordinary steps (ever more steps blow up, until the
    # median goes with them) has no unbroken run: it began where departed steps first made up
    # a quarter of the trailing window and kept doing so into the episode, at the first
    # departed step of that window
    # (the baseline window's median is of the steps before the spikes, so the spikes may date
    # from inside it, as the raw onsets of other detectors may). A spike here is half the warn
    # ratio or more: a quarter of a noisy series' steps sit at 1.5x its median by chance.
    departed = raw >= p["growth_ratio_warn"] / 2
    share = np.convolve(departed.astype(float), np.ones(w), mode="full")[:n] / w
    k, lowest = episode.start, floor // 2
    while k > lowest and share[k - 1] >= 0.25:
        k -= 1
    if k < episode.start:
        lo = max(lowest, k - w + 1)
        first = np.flatnonzero(departed[lo : k + 1])
        if len(first):
            onset = min(onset, lo + int(first[0]))
    episode = Episode(episode.start, episode.end, episode.severity, onset)
    # the condition holds until the grad norm last sat above half the warn level
    elevated = np.flatnonzero(ratio >= p["growth_ratio_warn"] / 2)
    end = int(max(episode.end, elevated[-1]))
    peak = float(np.max(ratio[episode.start :]))
    return {
        "severity": episode.severity,
        "confidence": confidence(peak / p["growth_ratio_warn"] - 1.0, 2.0, end - episode.start + 1, sustain),
        "first_step": feat.step_at(episode.onset),
        "last_step": int(feat.step_hi[end]),
        "text": f"grad norm grew to {peak:.0f}x its early level ({feat.b_median:.3g} -> {float(level[-1]):.3g} now)",
        "evidence": {
            "grad_norm_baseline": feat.b_median,
            "grad_norm_peak_ratio": peak,
            "grad_norm_now": float(level[-1]),
        },
    }


def _growth_in_early_window(feat: MetricFeatures, p: dict[str, Any], w: int) -> dict[str, Any] | None:
    """Grad-norm growth that happened inside the early window, read from its own log levels.

    The early window is the main test's yardstick; a grad norm that jumped to many times its
    level within it (a learning rate that only bites once warm-up ends, a loss term that blows
    up in the first dozen steps) lifts the yardstick with it. Log grad norm is cut into levels
    (episodes.log_level_jumps: segmentation under its own point noise, so the batch-to-batch
    spread of group-relative RL raises the bar) and a rise to growth_ratio_warn (6x) the level
    held before it, at z >= 4 and inside the early window, that still holds at the last logged
    points, is growth; critical at growth_ratio_critical."""
    n = len(feat)
    sustain = sustain_points(n, p["growth_sustain_frac"], floor=4)
    for jump in log_level_jumps(feat.value, p["growth_ratio_warn"], 4.0, sustain):
        if jump.start >= baseline_end(n) or not jump.ongoing:
            continue
        ratio = jump.after / jump.before
        severity: Severity = "critical" if ratio >= p["growth_ratio_critical"] else "warn"
        raw = np.nan_to_num(np.asarray(feat.value, dtype=float) / jump.before, nan=0.0)
        onset = raw_onset(Episode(jump.start, n - 1, severity, jump.start), raw >= p["growth_departure_ratio"], floor=1).onset
        return {
            "severity": severity,
            "confidence": confidence(ratio / p["growth_ratio_warn"] - 1.0, 2.0, n - jump.start, sustain),
            "first_step": feat.step_at(onset),
            "last_step": int(feat.step_hi[n - 1]),
            "text": f"grad norm jumped to {ratio:.0f}x the level it held before (from {jump.before:.3g} to {jump.after:.3g}) "
                    "early in the run and stays there",
            "evidence": {"grad_norm_before_jump": jump.before, "grad_norm_after_jump": jump.after, "grad_norm_peak_ratio": ratio},
        }
    return None


def _loss_part(ctx: DetectorContext, p: dict[str, Any]) -> dict[str, Any] | None:
    """The loss leaving its scale by orders of magnitude (a divergence), judged point by point.

    Each point is compared with what the loss did before it (never with what came after, so a
    divergence early in the run is not hidden by its own values): its typical size (median of
    |loss| so far) and the largest it got (95th percentile of |loss| so far). A policy-gradient
    loss swings around 0, and a batch with much signal gives a larger one without anything wrong.
    """
    feat = ctx.features("loss")
    if feat is None or len(feat) < 6:
        return None
    mag = np.abs(np.asarray(feat.value, dtype=float))
    ok = np.isfinite(mag)
    n = len(mag)
    sustain = max(2, min(5, sustain_points(n, 0.02, floor=2)))
    at = np.flatnonzero(ok)  # the finite points: the j-th of them is judged against seen[:j]
    seen = mag[at]
    # The threshold of every point at once, from the median and 95th percentile of each prefix
    # (prefix_quantiles: O(n log n), where np.median and np.percentile of each prefix took 0.2 s
    # a run). A point at or near its threshold is judged again with np.median and np.percentile
    # themselves, so the decision and every number reported are the plain computation's.
    typical_est, top_est = prefix_quantiles(seen, (0.5, 0.95))
    threshold_est = np.maximum(np.maximum(p["loss_ratio_warn"] * np.maximum(typical_est, 1e-12), 10.0 * top_est),
                               p["loss_abs_min"])
    near = np.flatnonzero(seen >= threshold_est * (1.0 - 1e-9))  # NaN (fewer than 2 before) compares False
    for j in near[near >= 5]:
        i = int(at[j])
        typical = max(float(np.median(seen[:j])), 1e-12)
        top = float(np.percentile(seen[:j], 95))
        threshold = max(p["loss_ratio_warn"] * typical, 10.0 * top, p["loss_abs_min"])
        if mag[i] >= threshold:
            high = ok & (mag >= threshold)
            hit = held_stretch(high, sustain, share=0.5, not_before=i)
            if hit is not None and hit[0] == i:
                start, end = hit
                peak = float(np.nanmax(mag[start : end + 1]))
                ratio = peak / typical
                ongoing = still_holds(high, end, sustain)
                severity: Severity = "critical" if ratio >= p["loss_ratio_critical"] or ongoing else "warn"
                onset = _loss_departure(seen, at, j, p)
                return {
                    "severity": severity,
                    "confidence": confidence(math.log10(ratio) / math.log10(p["loss_ratio_warn"]) - 1.0, 1.0, end - start + 1,
                                             sustain, floor=0.55),
                    "first_step": feat.step_at(onset),
                    "last_step": int(feat.step_hi[end]),
                    "text": (f"the loss diverged from step {feat.step_at(onset)}: |loss| reached {peak:.3g}, {ratio:.3g}x its "
                             f"typical size before ({typical:.3g})"),
                    "evidence": {"loss_typical_before": typical, "loss_largest_before": top, "loss_peak": peak,
                                 "loss_peak_ratio": ratio},
                }
    return None


def _loss_departure(seen: np.ndarray, at: np.ndarray, j: int, p: dict[str, Any]) -> int:
    """The first point of the unbroken climb leading into a loss divergence found at the j-th
    finite point: each point before it that already stood half-way (in log) to the divergence
    bar of its own past, sqrt(loss_ratio_warn) x its typical size and sqrt(10) x the largest it
    got, and above loss_abs_min. A divergence that climbs over a few steps is dated where the
    climb left the loss's range, not where it first crossed the full bar (smoothing, or a bar,
    may confirm a change, never delay its date)."""
    k = j
    while k - 1 >= 5:
        past = seen[: k - 1]
        bar = max(math.sqrt(p["loss_ratio_warn"]) * max(float(np.median(past)), 1e-12),
                  math.sqrt(10.0) * float(np.percentile(past, 95)), p["loss_abs_min"])
        if seen[k - 1] < bar:
            break
        k -= 1
    return int(at[k])


@detects("GRAD_PATHOLOGY")
def grad_pathology(ctx: DetectorContext, p: dict[str, Any]) -> Finding | None:
    """NaN/Inf in the gradients or the loss, violent grad-norm spikes, runaway growth, a diverging loss.

    A non-finite gradient means the update is garbage: mixed-precision overflow, a log of zero
    in the loss (a log-prob of -inf, a ratio exp() that overflowed), a division by a zero std.
    Trainers skip such steps, so the loss curve can look fine while more and more batches are
    thrown away. Repeated spikes far above the run's own noise mean a few tokens (huge ratios,
    near-zero probabilities) dominate the update; clipping hides the size but not the direction.
    Exponential growth of the grad norm is the lead-up to a divergence. A single isolated spike
    is common in healthy runs and is not reported. A spike is measured against the level a
    quarter of the nearby steps reach (the local 75th percentile), not their median: in
    group-relative RL only steps whose batch carries reward variance (and the first of two
    optimizer updates per batch) get a sizeable gradient, so a run whose batches are mostly
    degenerate has a tiny median grad norm and its few informative steps are not spikes. A
    loss that leaves its own scale by orders of magnitude (loss_ratio_warn times its early
    typical size, ten times the largest it was early, and at least loss_abs_min) is a
    divergence. Growth that comes with a diverging PPO value head ranks under VALUE_DIVERGENCE.
    """
    parts: dict[str, dict[str, Any]] = {}
    nonfinite = _nonfinite_part(ctx, p)
    if nonfinite is not None:
        parts["nonfinite"] = nonfinite
    if ctx.has("grad_norm"):
        spikes = _spike_part(ctx, p, ctx.n_steps)
        growth = _growth_part(ctx, p)
        burst = _spike_burst_part(ctx, p)
        if burst is not None and growth is not None and burst["evidence"]["grad_spike_share"] >= 0.5:
            burst = None  # most steps that high: the level itself grew, and the growth says so
        if burst is not None and (spikes is None or SEVERITY_ORDER[burst["severity"]] > SEVERITY_ORDER[spikes["severity"]]):
            spikes = burst  # the local test saw a few of its spikes, against a level the rest had raised
        if spikes is not None:
            parts["spikes"] = spikes
        if growth is not None:
            parts["growth"] = growth
    if ctx.has("loss"):
        loss = _loss_part(ctx, p)
        if loss is not None:
            parts["loss"] = loss
    if not parts:
        return None
    order = sorted(parts.values(), key=lambda d: (-SEVERITY_ORDER[d["severity"]], -d["confidence"]))
    top = order[0]
    first_step = min(d["first_step"] for d in parts.values() if d["severity"] == top["severity"])
    last_step = max(d["last_step"] for d in parts.values())
    evidence: dict[str, Any] = {}
    for d in parts.values():
        evidence.update(d["evidence"])
    evidence["kinds"] = ", ".join(parts)
    for metric in ("loss", "kl_mean", "entropy_mean"):
        feat = ctx.features(metric)
        if feat is not None and len(feat):
            evidence[f"{metric}_before"], evidence[f"{metric}_during"] = feat.b_median, level_at_steps(feat, first_step, last_step)
    return Finding(
        signature_id="GRAD_PATHOLOGY",
        severity=top["severity"],
        confidence=top["confidence"],
        first_step=first_step,
        last_step=last_step,
        explanation="Gradient pathology: " + "; ".join(d["text"] for d in order) + ".",
        evidence={k: (float(f"{v:.4g}") if isinstance(v, float) and np.isfinite(v) else v) for k, v in evidence.items()},
        suggested_actions=[
            "Lower the learning rate and tighten gradient clipping (max_grad_norm).",
            "Check for log(0) / division by a zero std in the loss and advantage code; mask or clamp ratios.",
            "Use bf16 (or fix fp16 loss scaling); roll back to the last checkpoint before the first bad step.",
        ],
        links_to_samples=ctx.sample_ids(first_step, last_step, order_by="step ASC, abs(advantage) DESC NULLS LAST"),
    )


# ---------------------------------------------------------------------------------------------
# STALE_ROLLOUTS
# ---------------------------------------------------------------------------------------------
def _offpolicy_correlations(ctx: DetectorContext, names: tuple[str, ...]) -> dict[str, float]:
    """Whole-run correlations of the off-policy gap with clipping (SQL view feat_opt_offpolicy)."""
    table = ctx.query(f"SELECT {', '.join(names)} FROM v1.feat_opt_offpolicy WHERE run_id = ?")
    out: dict[str, float] = {}
    if table.num_rows:
        for name in names:
            v = table.column(name)[0].as_py()
            if v is not None and math.isfinite(v):
                out[name] = float(v)
    return out


@detects("STALE_ROLLOUTS")
def stale_rollouts(ctx: DetectorContext, p: dict[str, Any]) -> Finding | None:
    """Rollouts are generated by a policy several updates old (batch_age high or rising).

    Asynchronous RL overlaps generation with training, so each batch was sampled by a policy
    batch_age optimizer steps older than the one being updated. PPO-style ratios correct a
    little staleness, but as the lag grows the ratios drift from 1, the clip engages on more
    tokens, importance weights get high variance and the update follows data the policy no
    longer produces. A steady lag of one or two steps is normal for async trainers; the
    signature is the lag rising well above the run's own early level, or sitting at age_high
    policy versions or more.
    """
    feat = ctx.features("batch_age")
    if not usable(feat):
        return None
    n = len(feat)
    sustain = sustain_points(n, p["sustain_frac"])
    s = np.nan_to_num(feat.smooth, nan=feat.b_median)
    base = feat.b_median if np.isfinite(feat.b_median) else 0.0
    ratio = s / max(base, 0.25)
    rising = (ratio >= p["age_ratio_warn"]) & (s - base >= p["age_rise_warn"]) & (np.nan_to_num(feat.z) > 3)
    high = s >= p["age_high"]
    warn = rising | high
    clip = aligned(ctx, "clip_fraction", feat.step)
    clip_feat = ctx.features("clip_fraction")
    effect = np.zeros(n, dtype=bool)
    if clip is not None and clip_feat is not None and np.isfinite(clip_feat.b_median):
        effect = clip >= np.maximum(2.0 * clip_feat.b_median, clip_feat.b_median + 0.05)
    critical = warn & (ratio >= p["age_ratio_critical"]) & (s >= p["age_high"]) & effect
    episode = find_episode(feat, warn, critical, sustain, refine_with=s, not_before=baseline_end(n) // 2)
    if episode is None:
        return None
    episode = back_to_departure(episode, s - base >= p["age_rise_warn"] / 3, baseline_end(n) // 2)
    first_step, last_step = episode.steps(feat)
    window = slice(episode.start, episode.end + 1)
    peak = float(np.max(s[window]))
    evidence: dict[str, Any] = {
        "batch_age_baseline": base,
        "batch_age_during": float(np.median(s[window])),
        "batch_age_peak": peak,
    }
    for metric in ("clip_fraction", "ratio_mean", "ratio_p95", "kl_mean"):
        pair = before_after(ctx, metric, first_step, last_step)
        if pair is not None:
            evidence[f"{metric}_before"], evidence[f"{metric}_during"] = pair
    evidence.update(_offpolicy_correlations(ctx, ("corr_age_clip", "corr_age_ratio_dev")))
    strength = max(peak / max(base, 0.25) / p["age_ratio_warn"], peak / p["age_high"]) - 1.0
    effect_text = ""
    if "clip_fraction_before" in evidence and np.isfinite(evidence["clip_fraction_during"]):
        effect_text = f"; clipping went from {evidence['clip_fraction_before']:.1%} to {evidence['clip_fraction_during']:.1%} of tokens"
    return make_finding(
        ctx, "STALE_ROLLOUTS", episode, feat,
        confidence(strength, 1.0, episode.end - episode.start + 1, sustain),
        f"Rollouts are {peak:.1f} policy versions old at the worst (early: {base:.1f}){effect_text}: "
        "the update is learning from data its current policy no longer produces.",
        evidence,
        [
            "Bound the staleness: lower max off-policy steps / the async queue depth, or sync weights to the inference engine more often.",
            "Give generation more capacity (or the trainer less), so the rollout queue does not back up.",
            "If some staleness is intended, correct for it (importance weights with truncation) and watch clip_fraction.",
        ],
    )


# ---------------------------------------------------------------------------------------------
# TRAIN_INFERENCE_MISMATCH
# ---------------------------------------------------------------------------------------------
def _mismatch_jump(feat: MetricFeatures, p: dict[str, Any]) -> tuple[Episode, float] | None:
    """A jump of the log-prob gap to ratio_warn times the level just before it (above abs_floor),
    read point by point from log levels, so a jump inside the early window is judged against
    what came before it: (episode, the level before), or None."""
    sustain = min(8, sustain_points(len(feat), p["sustain_frac"], floor=3))
    for jump in log_level_jumps(feat.value, p["ratio_warn"], 4.0, sustain, min_points=6):
        if jump.after < p["abs_floor"]:
            continue
        severity: Severity = "critical" if jump.rise >= math.log(p["ratio_critical"]) else "warn"
        # dated where the gap left its level on the way up (sqrt(ratio_warn), half-way to the
        # threshold in log), in the unbroken run of logged points leading into the jump's stretch
        raw = np.asarray(feat.value, dtype=float)
        left = np.nan_to_num(raw, nan=0.0) >= math.sqrt(p["ratio_warn"]) * jump.before
        return raw_onset(Episode(jump.start, jump.end, severity, jump.start), left, floor=1), jump.before
    return None


@detects("TRAIN_INFERENCE_MISMATCH")
def train_inference_mismatch(ctx: DetectorContext, p: dict[str, Any]) -> Finding | None:
    """The rollout engine's log-probs drift away from the trainer's for the same tokens.

    Fast inference engines (vLLM, SGLang) and the training framework compute the same policy
    with different kernels, precisions and batch layouts, so their token log-probs differ a
    little (~1e-3 nats is normal). The trainer then optimises a policy that did not generate
    the data: the update is silently off-policy. When the gap grows (weights not synced, a
    quantised or stale engine, numerics drifting as the policy sharpens on rare tokens) the
    bias compounds and runs collapse without any other warning. The test is the gap rising to
    ratio_warn times its early level and above abs_floor nats; a gap that rises only because
    entropy blew up (noise tokens are where kernels disagree most) is left to ENTROPY_BLOWUP.
    """
    feat = ctx.features("logprob_mismatch")
    if not usable(feat, 6):
        return None
    n = len(feat)
    # two readings: a drift against the early level (smoothed, walked back to where it departed),
    # and a jump against the level just before it (point by point, which also sees a jump inside
    # the early window); the one that shows it first is reported
    drift = None
    if n >= 10 and np.isfinite(feat.b_median) and feat.b_median > 0:
        sustain = sustain_points(n, p["sustain_frac"])
        smooth = np.nan_to_num(feat.smooth, nan=feat.b_median)
        ratio = smooth / feat.b_median
        robust = np.nan_to_num(feat.z) > 3
        warn = (ratio >= p["ratio_warn"]) & (smooth >= p["abs_floor"]) & robust
        critical = warn & (ratio >= p["ratio_critical"])
        found = find_episode(feat, warn, critical, sustain, refine_with=np.log(np.maximum(smooth, 1e-12)), not_before=baseline_end(n) // 2)
        if found is not None:
            drift = (back_to_departure(found, ratio >= p["departure_ratio"], baseline_end(n) // 2), float(feat.b_median), smooth, sustain)
    jump = None
    jumped = _mismatch_jump(feat, p)
    if jumped is not None:
        raw = np.asarray(feat.value, dtype=float)
        jump = (jumped[0], jumped[1], np.where(np.isfinite(raw), raw, jumped[1]), min(8, sustain_points(n, p["sustain_frac"], floor=3)))
    options = [o for o in (drift, jump) if o is not None]
    if not options:
        return None
    episode, base, s, sustain = min(options, key=lambda o: o[0].onset)
    first_step, last_step = episode.steps(feat)
    window = slice(episode.start, episode.end + 1)
    peak = float(np.max(s[window]))
    evidence: dict[str, Any] = {
        "logprob_mismatch_baseline": base,
        "logprob_mismatch_during": float(np.median(s[window])),
        "logprob_mismatch_peak": peak,
        "peak_ratio_to_baseline": peak / base,
    }
    for metric in ("clip_fraction", "ratio_mean", "entropy_mean", "reward_mean"):
        pair = before_after(ctx, metric, first_step, last_step)
        if pair is not None:
            evidence[f"{metric}_before"], evidence[f"{metric}_during"] = pair
    evidence.update(_offpolicy_correlations(ctx, ("corr_mismatch_clip", "corr_mismatch_entropy")))
    return make_finding(
        ctx, "TRAIN_INFERENCE_MISMATCH", episode, feat,
        confidence(peak / base / p["ratio_warn"] - 1.0, 2.0, episode.end - episode.start + 1, sustain),
        f"The inference engine's log-probs drifted from the trainer's: the gap grew from {base:.2g} "
        f"to {peak:.2g} nats/token ({peak / base:.0f}x) from step {first_step}. Updates are off-policy without being corrected for it.",
        evidence,
        [
            "Check weights are synced to the inference engine every step, and that it runs the same dtype (no quantisation) as the trainer.",
            "Compute the LM head / final log-softmax in fp32 on both sides.",
            "Correct for the gap with truncated importance sampling on the rollout log-probs, or recompute log-probs with the trainer.",
        ],
    )
