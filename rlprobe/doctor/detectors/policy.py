"""Signatures of the policy distribution itself: entropy collapse and blow-up, KL blow-up, and
KL that concentrates at a few token positions. See docs/signatures/ for the mechanics of each.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from rlprobe.arrow_numpy import to_numpy
from rlprobe.doctor.context import DetectorContext, MetricFeatures
from rlprobe.doctor.episodes import (
    Episode, baseline_end, confidence, find_episode, level_falls, log_level_jumps, make_finding, raw_onset, sustain_points,
)
from rlprobe.doctor.series import level_at_steps
from rlprobe.doctor.findings import Finding
from rlprobe.doctor.registry import detects
from rlprobe.doctor.stats import (
    HingeFit, centred_median, finite_or, first_sustained, hinge_fit, level_shifts, point_noise, refine_onset,
)


# ---------------------------------------------------------------------------------------------
# helpers
# ---------------------------------------------------------------------------------------------
def _blowup_sustain(n_points: int, p: dict[str, Any]) -> int:
    """How many logged points in a row a blow-up must hold: sustain_frac of the run, at least 2
    and at most 3. Entropy is a mean over every token of a batch; it does not sit at several
    times its level on two logged points in a row by chance, however long the run, and a
    blow-up the run came back from within a few dozen steps (an update that knocked the policy
    off, then the clipped ratios pulled it back) fills only a few of a long run's bins."""
    return min(3, sustain_points(n_points, p["sustain_frac"], floor=2))


def _entropy_blowup_episode(feat: MetricFeatures, p: dict[str, Any]) -> tuple[Episode, float, float, bool] | None:
    """The blow-up: (episode, the level before, the level after, whether it still holds).

    Log entropy is cut into segments of constant level (binary segmentation under its own
    point-to-point noise); a blow-up is a rise from one segment to the next of at least
    ratio_warn times and z_min standard errors (a climb cut into stages close together counts
    as one: episodes.log_level_jumps). The level before is the segment's own, not the
    run's early window, so a blow-up in the first fifth of a short run is judged against what
    came just before it. The onset is the first logged point from the change on that sits at
    least half-way (in log) to the new level and keeps doing so; the episode ends when entropy
    stays below that line. A rise inside the first 5% of the run that goes away is a warm-up
    transient, not a blow-up.
    """
    n = len(feat)
    sustain = _blowup_sustain(n, p)
    for jump in log_level_jumps(feat.value, p["ratio_warn"], p["z_min"], sustain):
        if jump.start < 0.05 * n and not jump.ongoing:
            continue  # a warm-up transient
        severity = "critical" if jump.rise >= math.log(p["ratio_critical"]) else "warn"
        return Episode(jump.start, jump.end, severity, jump.start), jump.before, jump.after, jump.ongoing
    return _blowup_from_opening(feat, p, sustain)


def _blowup_from_opening(feat: MetricFeatures, p: dict[str, Any], sustain: int) -> tuple[Episode, float, float, bool] | None:
    """A blow-up from the run's second or third logged point that the run came back from.

    Segments hold at least 3 points, so a rise after the first point or two has no segment
    before it. It shows as the fall back instead: log entropy high from the opening on, then
    down by ratio_warn or more (z_min standard errors) to the level of the first points. The
    first logged points are the model as it came in; entropy that leaves them by ratio_warn,
    holds there for `sustain` points and comes back to them blew up and recovered (0.47 at
    step 1, ~3.3 over the next twelve, ~0.5 after). A warm-up is not that long: the high
    stretch must last past the first 5% of the run."""
    value = np.asarray(feat.value, dtype=float)
    idx = np.flatnonzero(np.isfinite(value) & (value > 0))
    if len(idx) < 8:
        return None
    y = np.log(value[idx])
    noise = max(point_noise(y), math.log(1.02))
    for shift in level_shifts(y, noise, min_size=3):
        if shift.z > -p["z_min"] or shift.before - shift.after < math.log(p["ratio_warn"]):
            continue
        line = shift.after + 0.5 * (shift.before - shift.after)  # half-way down, in log
        k = next((i for i in range(shift.at) if y[i] >= line), None)
        if k is None or not 1 <= k <= 2:
            continue  # high from the first point (nothing to blow up from), or a later rise: the jump test's
        opening = float(np.median(y[:k]))
        high = y[k : shift.at] >= line
        if shift.at - k < sustain or float(np.mean(high)) < 0.8 or idx[shift.at - 1] < 0.05 * len(value):
            continue
        if shift.before - opening < math.log(p["ratio_warn"]) or abs(shift.after - opening) > 0.5 * math.log(p["ratio_warn"]):
            continue  # it must leave the opening level by the ratio and come back to it
        rise = shift.before - opening
        severity = "critical" if rise >= math.log(p["ratio_critical"]) else "warn"
        episode = Episode(int(idx[k]), int(idx[shift.at - 1]), severity, int(idx[k]))
        return episode, math.exp(opening), math.exp(shift.before), False
    return None


# ---------------------------------------------------------------------------------------------
# ENTROPY_COLLAPSE
# ---------------------------------------------------------------------------------------------
@detects("ENTROPY_COLLAPSE")
def entropy_collapse(ctx: DetectorContext, p: dict[str, Any]) -> Finding | None:
    """Entropy falls toward zero relative to its own early level: exploration dies.

    Policy-gradient updates sharpen the distribution on whatever earned advantage; with too
    high a learning rate, too little KL/entropy regularisation, or a reward that is easy to
    satisfy one way, the policy becomes near-deterministic. Every completion in a group then
    looks alike, group reward variance vanishes, advantages go to zero and learning stalls.
    Natural RL fine-tuning lowers entropy too (often 2-4x over a run), so the test is relative
    to the run's own early level (ratio of the smoothed entropy to the baseline median below
    ratio_warn, 0.2, and below the baseline by more than 3 robust z, or by more than 3 times
    its own step-to-step noise in log) and must hold for a
    sustained stretch (3% of the run). Critical below ratio_critical (0.1).
    """
    feat = ctx.features("entropy_mean")
    if feat is None or len(feat) < 10 or not np.isfinite(feat.b_median) or feat.b_median <= 0:
        return None
    sustain = sustain_points(len(feat), p["sustain_frac"])
    ratio = finite_or(feat.ratio, 1.0)
    robust = feat.z < p["z_max"]
    # A fall past ratio_warn is past what healthy sharpening does (2-4x); it must stand out from
    # the noise, either against the baseline's spread or against the series' own step-to-step
    # noise (in log). The baseline's spread alone is too wide a yardstick when the decline is
    # already under way in the baseline window (entropy 0.45 -> 0.03 read as z -2.3 on a
    # 35-point log) or entropy is noisy step to step (0.21 -> 0.017 on 457 points, z > -3).
    value = np.asarray(feat.value, dtype=float)
    log_value = np.log(np.where(np.isfinite(value) & (value > 0), value, np.nan))
    noise = max(point_noise(log_value), math.log(1.02)) if np.isfinite(log_value).sum() >= 4 else math.inf
    robust |= np.log(np.maximum(ratio, 1e-12)) < p["z_max"] * noise
    log_smooth = np.log(np.maximum(finite_or(feat.smooth, feat.b_median), 1e-12))
    episode = find_episode(
        feat,
        warn=(ratio < p["ratio_warn"]) & robust,
        critical=(ratio < p["ratio_critical"]) & robust,
        sustain=sustain,
        refine_with=log_smooth,
        not_before=baseline_end(len(feat)) // 2,
    )
    reference, yardstick, fall_path = feat.b_median, "its early level", False
    if episode is not None:
        lo = baseline_end(len(feat)) // 2
        episode = Episode(episode.start, episode.end, episode.severity,
                          refine_onset(log_smooth, episode.start, lo, episode.start + 2 * sustain))
        episode = raw_onset(episode, value / feat.b_median < p["ratio_warn"], floor=lo)
        held = ratio[episode.start : episode.end + 1]
        lowest = float(np.min(held))
    # The early window cannot be the yardstick when entropy fell inside it (a collapse in the
    # first tenth of a long run, or within the first few points of a short log): its median is
    # already part of the way down. Then the fall is judged against the level entropy held just
    # before it, as for a blow-up. No warm-up is skipped: healthy sharpening takes entropy down
    # 2-4x over a whole run, so a fall past ratio_warn in the first few percent is a collapse,
    # not the run settling; one under way from the first point counts from the opening entropy.
    falls = level_falls(feat.value, p["ratio_warn"], -p["z_max"], min(8, sustain_points(len(feat), p["sustain_frac"], floor=3)),
                        warmup=0.0, opening=3)
    if episode is not None and falls and not (falls[0].start < episode.onset and falls[0].before > feat.b_median):
        falls = []  # the early window's level is the level before: the test above stands
    if falls:
        fall = falls[0]
        severity = "critical" if fall.after <= p["ratio_critical"] * fall.before else "warn"
        episode, reference, lowest = Episode(fall.start, fall.end, severity, fall.start), fall.before, fall.after / fall.before
        yardstick, fall_path = "the level it held before the fall", True
    if episode is None:
        return None
    # the run's first logged point is the model as it came in: entropy held at a fifth of that or
    # more has not collapsed, whatever the early window says (it came back down from a blow-up
    # that filled the window: 0.47 at the first step, 3.3 over the next twelve, 0.51 after)
    ok = np.flatnonzero(np.isfinite(value) & (value > 0))
    if len(ok) and float(np.nanmedian(value[episode.start : episode.end + 1])) >= p["ratio_warn"] * float(value[ok[0]]):
        return None
    evidence: dict[str, Any] = {
        "entropy_baseline": reference,
        "entropy_now": float(feat.smooth[-1]),
        "lowest_ratio_to_baseline": lowest,
        "steps_below_threshold": int(feat.step_hi[episode.end] - feat.step[episode.start] + 1),
    }
    for metric, key in (("reward_std", "reward_std_ratio"), ("zero_variance_group_frac", "zero_variance_group_frac_now")):
        other = ctx.features(metric)
        if other is not None and len(other):
            evidence[key] = float(other.ratio[-1]) if key.endswith("ratio") else float(other.smooth[-1])
    strength = p["ratio_warn"] / max(lowest, 1e-6) - 1.0
    return make_finding(
        ctx, "ENTROPY_COLLAPSE", episode, feat,
        confidence(strength, 1.5, episode.end - episode.start + 1, sustain),
        f"Policy entropy fell to {lowest:.0%} of {yardstick} ({reference:.3g} -> "
        f"{lowest * reference if fall_path else float(feat.smooth[-1]):.3g}) and stayed there"
        + (f" ({float(feat.smooth[-1]):.3g} now)" if fall_path else "") + ": the policy is becoming deterministic.",
        evidence,
        [
            "Lower the learning rate or raise the KL coefficient (beta) to slow the sharpening.",
            "Add an entropy bonus, or raise the sampling temperature for rollouts.",
            "Check whether one easy reward component is dominating (see FORMAT_GAMING).",
            "Inspect the linked samples: near-identical completions within a group confirm it.",
        ],
        sample_order="step DESC",
    )


# ---------------------------------------------------------------------------------------------
# ENTROPY_BLOWUP
# ---------------------------------------------------------------------------------------------
@detects("ENTROPY_BLOWUP")
def entropy_blowup(ctx: DetectorContext, p: dict[str, Any]) -> Finding | None:
    """Entropy jumps far above its baseline and the text degenerates into noise.

    Typically a too-high learning rate (or a bad update after a loss spike) knocks the policy
    off the data manifold: token distributions flatten, completions become token soup that
    runs to the length cap, and reward falls to zero. Unlike a slow drift this happens within
    a handful of steps and rarely recovers without rolling back. The test compares levels, not
    single points: log entropy is cut into segments of constant level, and a rise from one to
    the next of at least ratio_warn (2.5x) and z_min (4) standard errors, held by most points
    for 2% of the run (2 or 3 points), is a blow-up; critical at ratio_critical (4x) while
    it still holds. The reference is the level just before the rise, so a blow-up in the first
    fifth of a short run (the real collapse log: entropy 0.2 -> 7 at step 25 of 200) is judged
    against what came before it. One the run came back from says so and is a warning.
    Truncation, KL and reward collapse that follow are its symptoms (catalog links).
    """
    feat = ctx.features("entropy_mean")
    if feat is None:
        return None
    hit = _entropy_blowup_episode(feat, p)
    if hit is None:
        return None
    episode, before, after, ongoing = hit
    sustain = _blowup_sustain(len(feat), p)
    value = np.asarray(feat.value, dtype=float)
    seg = value[episode.start : episode.end + 1]
    peak = float(np.nanmax(seg))
    first_step, last_step = episode.steps(feat)
    now = float(np.nanmedian(value[max(0, len(value) - sustain) :]))
    evidence: dict[str, Any] = {
        "entropy_before": before,
        "entropy_after": after,
        "entropy_peak": peak,
        "ratio_to_before": after / before,
        "peak_ratio_to_before": peak / before,
        "entropy_now": now,
        "steps_high": int(last_step - first_step + 1),
    }
    for metric in ("reward_mean", "completion_len_mean", "max_len_hit_frac", "truncation_rate", "kl_mean"):
        other = ctx.features(metric)
        if other is not None and len(other):
            evidence[f"{metric}_before"] = level_at_steps(other, -2**62, first_step - 1)
            evidence[f"{metric}_while_high"] = level_at_steps(other, first_step, last_step)
    if not ongoing:  # one the run came back from is a warning, whatever it was while it held
        evidence["severity_while_it_held"] = episode.severity
        episode = Episode(episode.start, episode.end, "warn", episode.onset)
    text = (f"Policy entropy jumped from {before:.3g} to {after:.3g} ({after / before:.1f}x the level before, peak "
            f"{peak:.3g}) from step {first_step}")
    if ongoing:
        text += " and stays there: completions are likely degenerating into noise."
    else:
        text += (f" and held there to step {last_step}; it has fallen back since (now {now:.3g}). Completions were "
                 "likely degenerating into noise meanwhile, and whatever the policy learned from them stays.")
    strength = (after / before) / p["ratio_warn"] - 1.0
    return make_finding(
        ctx, "ENTROPY_BLOWUP", episode, feat,
        confidence(strength, 0.25, episode.end - episode.start + 1, sustain, floor=0.5),
        text,
        evidence,
        [
            "Roll back to the checkpoint before the onset and lower the learning rate.",
            "Tighten gradient clipping; check for a loss or grad-norm spike just before the onset.",
            "Inspect the linked samples for token soup or runs to the length cap.",
        ],
        sample_order="step DESC",
        holds=lambda v: v >= p["ratio_warn"] * before,
    ).model_copy(update={"ongoing": ongoing})


# ---------------------------------------------------------------------------------------------
# KL_BLOWUP
# ---------------------------------------------------------------------------------------------


@detects("KL_BLOWUP")
def kl_blowup(ctx: DetectorContext, p: dict[str, Any]) -> Finding | None:
    """KL to the reference grows super-linearly or jumps: the policy is escaping the reference.

    The KL penalty (or its absence, beta = 0) bounds how far the policy may drift; once the
    reward gradient overwhelms it, KL compounds step over step. Rewards often still look fine
    while the policy exploits regions where the reward model is wrong. Healthy KL grows like a
    power of the step with exponent at most about 1 (sqrt-like to linear), so the test works in
    log-log space: ln KL is fitted with a power law plus, after a breakpoint searched over every
    point, a jump and an extra slope. From the breakpoint on, KL is compared with the fitted
    trend continued at the steeper of its own slope and linear growth (healthy_slope); the
    signature is KL staying excess_warn (3x) above that ceiling for 2% of the run (critical:
    excess_critical, 6x), with the breakpoint clearly better than a plain power law
    (min_improvement) and KL above min_kl nats. The first step is where the fitted curve left
    the power law by `departure` (5%). KL starts at ~0 (the policy is the reference) and climbs
    as the policy first moves; the trend is fitted from where KL first reached settle_share (a
    fifth) of its median level over the first third of the run and min_kl nats, so that first
    climb is never extrapolated into a blow-up. A KL
    jump while entropy blows up is that blow-up's
    symptom (a link in the catalog): it is ranked under ENTROPY_BLOWUP and says so.
    """
    metric = "kl_mean" if ctx.features("kl_mean") is not None else "kl_max"
    feat = ctx.features(metric)
    if feat is None or len(feat) < 20:
        return None
    return _kl_trend_break(ctx, p, feat, metric) or _kl_runaway_from_opening(ctx, p, feat, metric)


def _kl_runaway_from_opening(ctx: DetectorContext, p: dict[str, Any], feat: MetricFeatures, metric: str) -> Finding | None:
    """KL that ran away from the run's first steps on, so there was never a trend to break.

    The trend test needs a stretch of KL growing like a power of the step before the break; a
    policy that escapes the reference within the first few steps has none, and its whole climb
    is read as the trend. Healthy KL, once it is measurable (min_kl nats) and the learning rate
    has arrived (warmup_share of its peak), grows at most about linearly in the step: a
    hundred-fold rise would take a hundred times the steps it took to get there. KL that
    multiplies by runaway_ratio (100x) from that first measurable point faster than the square
    of the step (log-log slope of at least runaway_exponent, 2) and keeps at least half the level
    it reached for the rest of the run has no healthy reading. Critical at 10x runaway_ratio.
    It is dated at the first logged point that stood at 10x (the square root of the ratio, in
    log) the first measurable level, in the unbroken run of points leading into the rise."""
    raw = np.asarray(feat.value, dtype=float)
    value = centred_median(raw, 5)
    steps = feat.step.astype(float)
    n = len(value)
    measurable = np.flatnonzero(np.isfinite(raw) & (raw >= p["min_kl"]) & (steps > 0))
    if not len(measurable):
        return None
    a = int(measurable[0])
    warm = ctx.lr_reached_step(p["warmup_share"])
    if warm is not None:
        a = max(a, int(np.searchsorted(feat.step, warm)))
    if a >= n - 2 or not np.isfinite(value[a]) or value[a] <= 0:
        return None
    # the level where KL became measurable: the logged value there, unless its centred median is
    # lower (at the series' first point that median has only the points after it, and on a
    # runaway they are already far up: 0.0096, 0.27, 1.1 has a "median" of 0.27 at 0.0096)
    level = float(min(value[a], raw[a])) if np.isfinite(raw[a]) and raw[a] > 0 else float(value[a])
    sustain = sustain_points(n, p["sustain_frac"], floor=3)
    came_back: tuple[int, int, float, float] | None = None
    for j in range(a + 1, n - sustain + 1):
        v = value[j]
        if not np.isfinite(v) or v < p["runaway_ratio"] * level or steps[j] <= steps[a]:
            continue
        exponent = math.log(v / level) / math.log(steps[j] / steps[a])
        if exponent < p["runaway_exponent"]:
            continue
        rest = value[j:]
        rest = rest[np.isfinite(rest)]
        tail = value[n - sustain :]
        tail = tail[np.isfinite(tail)]
        if not len(tail) or float(np.median(rest)) < 0.5 * v or float(np.median(tail)) < 0.5 * v:
            # it came back. A runaway that held for a twentieth of the run (twice the sustained
            # stretch, at least 5 points) still trained every update in it far from the
            # reference: a warning that says when it ended (as a blow-up the run climbed out of)
            held = j
            while held + 1 < n and np.isfinite(value[held + 1]) and value[held + 1] >= 0.5 * v:
                held += 1
            if came_back is None and held - j + 1 >= max(2 * sustain, 5) and held < n - sustain:
                came_back = (j, held, float(v), exponent)
            continue
        found = (j, n - 1, float(v), exponent)
        break
    else:
        found = came_back
    if found is None:
        return None
    j, last, v, exponent = found
    ongoing = last == n - 1
    peak = float(np.nanmax(value[j : last + 1]))
    severity = "critical" if ongoing and peak >= 10.0 * p["runaway_ratio"] * level else "warn"
    episode = raw_onset(Episode(j, last, severity, j), np.nan_to_num(raw, nan=0.0) >= math.sqrt(p["runaway_ratio"]) * level,
                        floor=a + 1)
    now = float(np.nanmedian(value[n - sustain :]))
    since = (f"and it stays there (now {now:.3g}): the policy escaped the reference from step "
             f"{feat.step_at(episode.onset)} on." if ongoing else
             f"and held there to step {int(feat.step_hi[last])}; it has come back since (now {now:.3g}). The updates in "
             "between were taken far from the reference.")
    return make_finding(
        ctx, "KL_BLOWUP", episode, feat,
        confidence(math.log(peak / level) / math.log(p["runaway_ratio"]) - 1.0, 0.7, last - j + 1, sustain),
        f"KL to the reference ({metric}) ran away from the first steps: from {level:.3g} at step {int(steps[a])} to "
        f"{v:.3g} by step {int(steps[j])} ({v / level:.0f}x, faster than the square of the step; healthy KL grows at "
        f"most about linearly), peak {peak:.3g}, {since}",
        {f"{metric}_first_measurable": level, f"{metric}_at_runaway": v, f"{metric}_peak": peak,
         f"{metric}_now": now, "growth_exponent": exponent},
        [
            "Raise the KL coefficient (beta), or use an adaptive KL controller; lower the learning rate." if ongoing else
            "Check that the checkpoints you keep come from after the recovery; compare their samples with early ones.",
            "Check the learning-rate warm-up: a run that starts at full rate can leave the reference in its first steps.",
            "Compare the linked samples with early ones for drift in style or format; check the reward for an exploit." if ongoing else
            "Raise the KL coefficient (beta), or use an adaptive KL controller, before the next run.",
        ],
        sample_order="kl_contribution DESC NULLS LAST",
    ).model_copy(update={"ongoing": ongoing})


def _kl_trend_break(ctx: DetectorContext, p: dict[str, Any], feat: MetricFeatures, metric: str) -> Finding | None:
    """KL_BLOWUP's main test: a break away from KL's own power-law trend (see kl_blowup)."""
    # KL of one step is a noisy sample (a batch where the policy barely moved logs ~0, and in
    # log space those points would dominate any fit): the trend is fitted to a centred 5-point
    # median, which follows a real break without lag and ignores single outliers.
    value = centred_median(np.asarray(feat.value, dtype=float), 5)
    smooth = np.asarray(feat.smooth, dtype=float)
    steps = feat.step.astype(float)
    lo = int(np.floor(0.05 * len(feat)))
    # KL starts at ~0 (the policy is the reference) and climbs as the policy first moves: that
    # climb is not a trend to extrapolate. The trend is fitted from where KL first reached a
    # fifth of its typical (median) level over the first third of the run, and min_kl nats
    # (below that the policy has not measurably left the reference).
    early = value[: max(5, len(value) // 10)]
    typical = float(np.nanmedian(np.where(early > 0, early, np.nan))) if np.any(early > 0) else float("nan")
    if np.isfinite(typical):
        settled = np.flatnonzero(np.isfinite(value) & (value >= max(p["settle_share"] * typical, p["min_kl"])))
        if len(settled):
            lo = max(lo, int(settled[0]))
    # Nor is the first half of a learning-rate warm-up: while the rate is a small fraction of
    # its peak the policy barely moves, and KL sits at the estimator's floor (a run with a
    # 10-step warm-up: KL ~0.002 over steps 1-6, then 0.12 by step 15 as the rate arrives).
    # Fitted from there, that floor would be a flat trend any later climb breaks away from. The
    # trend starts where the rate reached half its peak (warmup_share); a jump later in the
    # warm-up still breaks away from the trend the policy had by then.
    warm = ctx.lr_reached_step(p["warmup_share"])
    if warm is not None:
        lo = max(lo, int(np.searchsorted(feat.step, warm)))
    ok = np.isfinite(value) & (value > 0) & (steps > 0) & (np.arange(len(feat)) >= lo)
    idx = np.flatnonzero(ok)
    if len(idx) < 20:
        return None
    u_all = np.log(np.maximum(steps, 1.0))
    # the trend a break departs from is trusted only over a tenth of the fitted points (at least
    # 8), and only if KL was not falling: a few points that happen to dip would make any
    # ordinary rise look like a break
    fit = hinge_fit(u_all[idx], np.log(value[idx]), min_side=max(3, len(idx) // 25), min_before=max(4, len(idx) // 20))
    if fit is None or fit.improvement < p["min_improvement"]:
        return None
    if fit.p < -0.5:
        return None  # KL was falling before the break: a rise back is a recovery, not an escape
    c = int(idx[fit.index])
    uc = u_all[c]
    slope = max(fit.p, p["healthy_slope"])
    ceiling = fit.a + fit.p * uc + slope * (u_all - uc)
    log_smooth = np.log(np.maximum(finite_or(smooth, np.nan), 1e-300))
    excess = np.where((np.arange(len(feat)) >= c) & np.isfinite(log_smooth), log_smooth - ceiling, 0.0)
    big = finite_or(smooth, 0.0) >= p["min_kl"]
    sustain = sustain_points(len(feat), p["sustain_frac"], floor=3)
    warn = (excess > math.log(p["excess_warn"])) & big
    critical = (excess > math.log(p["excess_critical"])) & big
    hit = first_sustained(warn | critical, sustain)
    if hit is None:
        return None
    start, end = hit
    severity = "critical" if first_sustained(critical[start:], sustain) is not None else "warn"
    onset = _kl_onset(fit, u_all, c, start, p["departure"])
    episode = Episode(start, end, severity, onset)
    # the logged values (not their centred median, which a one-point jump reaches a point late)
    # that already stood well above the trend (sqrt(excess_warn), 1.7x) and lead into the episode
    raw_log = np.log(np.where(np.isfinite(feat.value) & (feat.value > 0), feat.value, np.nan))
    trend = fit.a + fit.p * u_all
    episode = raw_onset(episode, np.nan_to_num(raw_log - trend, nan=0.0) > 0.5 * math.log(p["excess_warn"]), floor=lo)
    peak_excess = float(np.exp(np.max(excess[start : end + 1])))
    verdict = " the policy is escaping the reference."
    evidence: dict[str, Any] = {
        f"{metric}_baseline": feat.b_median,
        f"{metric}_at_onset": float(np.exp(fit.a + fit.p * uc)),
        f"{metric}_now": float(smooth[-1]),
        f"{metric}_peak": float(np.nanmax(smooth)),
        "trend_exponent_before": fit.p,
        "jump_factor_at_onset": float(np.exp(fit.b)),
        "fitted_factor_above_trend_at_end": float(np.exp(fit.extra(u_all[idx[-1]] - uc))),
        "peak_excess_over_trend": peak_excess,
    }
    kl_max = ctx.features("kl_max")
    if metric == "kl_mean" and kl_max is not None and len(kl_max):
        evidence["kl_max_baseline"] = kl_max.b_median
        evidence["kl_max_now"] = float(kl_max.smooth[-1])
    conf = confidence(math.log(peak_excess) / math.log(p["excess_warn"]) - 1.0, 0.7, end - start + 1, sustain)
    first_step = feat.step_at(episode.onset)
    return make_finding(
        ctx, "KL_BLOWUP", episode, feat, conf,
        f"KL to the reference ({metric}) broke away from its own trend at step {first_step} and rose to "
        f"{peak_excess:.1f}x what even linear growth would give, reaching {float(np.nanmax(smooth)):.3g} "
        f"(from {float(np.exp(fit.a + fit.p * uc)):.3g} on its trend at the break):{verdict}",
        evidence,
        [
            "Raise the KL coefficient (beta), or use an adaptive KL controller.",
            "Lower the learning rate; check the reward for an exploit the policy has found.",
            "Compare the linked samples with early ones for drift in style or format.",
        ],
        sample_order="kl_contribution DESC NULLS LAST",
    )


def _kl_onset(fit: HingeFit, u: np.ndarray, c: int, start: int, departure: float) -> int:
    """Where the departure from the power law began: the first point at or after the breakpoint
    where the fitted extra term (jump plus bend) exceeds ln(departure).

    The breakpoint itself can sit before the visible departure (a quadratic bend may dip
    before it rises) or, for a jump, exactly on it; the fitted curve says when KL actually
    left its trend, without the noise of the raw series.
    """
    extra = fit.extra(u[c:] - u[c])
    above = np.flatnonzero(extra >= math.log(departure))
    onset = c + int(above[0]) if len(above) else c
    return int(min(onset, start))


# ---------------------------------------------------------------------------------------------
# REF_POLICY_DRIFT_ASYMMETRY
# ---------------------------------------------------------------------------------------------
def _kl_positional_logged(ctx: DetectorContext) -> str | None:
    # not ctx.has("kl_positional"): DetectorContext.has() cannot test a list-valued column
    table = ctx.query("SELECT count(*) AS n FROM v1.steps WHERE run_id = ? AND kl_positional IS NOT NULL AND len(kl_positional) >= 2")
    if table.column("n")[0].as_py() == 0:
        return "needs kl_positional, which this run did not log"
    return None


@detects("REF_POLICY_DRIFT_ASYMMETRY", check=_kl_positional_logged)
def ref_policy_drift_asymmetry(ctx: DetectorContext, p: dict[str, Any]) -> Finding | None:
    """KL concentrates at a few token positions: a template or formatting mismatch.

    kl_positional splits a step's KL over position buckets along the completion. A policy that
    learns spreads its drift from the reference over the whole completion. When almost all of
    it sits in one or two buckets, the policy and the reference disagree about a few specific
    tokens: typically a chat template, BOS/EOS or special token that the reference never saw
    (or sees differently), a system prompt mismatch, or a formatting prefix the reward pays
    for. The KL penalty then fights over those tokens instead of regularising the behaviour,
    and the scalar kl_mean hides it. The test: the share of KL in the top two buckets at or
    above top2_warn (0.5) and at least rise_min (0.15) above its own early level, for 3% of
    the run; critical at top2_critical (0.8). Shares come from the SQL feature
    v1.feat_policy_kl_positional.
    """
    table = ctx.query(
        "SELECT step, step_hi, top1_share, top2_share, eff_buckets, top_bucket, n_buckets, kl_total "
        "FROM v1.feat_policy_kl_positional WHERE run_id = ? ORDER BY step"
    )
    if table.num_rows < 10:
        return None
    col = {name: to_numpy(table.column(name)) for name in table.column_names}
    top2 = np.asarray(col["top2_share"], dtype=float)
    n = len(top2)
    feat = _share_features(col, top2)
    lo_b = int(np.floor(0.05 * n))
    base = top2[lo_b : baseline_end(n)]
    base = base[np.isfinite(base)]
    if len(base) < 3:
        return None
    b_top2 = float(np.median(base))
    smooth = feat.smooth
    sustain = sustain_points(n, p["sustain_frac"])
    rise = smooth - b_top2
    episode = find_episode(
        feat,
        warn=(smooth >= p["top2_warn"]) & (rise >= p["rise_min"]),
        critical=(smooth >= p["top2_critical"]) & (rise >= p["rise_min"]),
        sustain=sustain,
        refine_with=smooth,
        not_before=baseline_end(n) // 2,
    )
    if episode is None:
        return None
    episode = Episode(episode.start, episode.end, episode.severity,
                      refine_onset(smooth, episode.start, baseline_end(n) // 2, episode.start + 2 * sustain))
    seg = slice(episode.start, episode.end + 1)
    peak = float(np.nanmax(smooth[seg]))
    buckets = np.asarray(col["top_bucket"], dtype=float)[seg]
    buckets = buckets[np.isfinite(buckets)].astype(int)
    top_bucket = int(np.bincount(buckets).argmax()) if len(buckets) else -1
    n_buckets = int(np.nanmax(np.asarray(col["n_buckets"], dtype=float)))
    eff = np.asarray(col["eff_buckets"], dtype=float)
    where = "start" if top_bucket <= max(0, n_buckets // 4 - 1) else "end" if top_bucket >= n_buckets - max(1, n_buckets // 4) else "middle"
    evidence: dict[str, Any] = {
        "top2_share_baseline": b_top2,
        "top2_share_peak": peak,
        "top2_share_now": float(smooth[-1]),
        "top1_share_now": float(np.asarray(col["top1_share"], dtype=float)[-1]),
        "dominant_bucket": top_bucket,
        "n_buckets": n_buckets,
        "effective_buckets_baseline": float(np.nanmedian(eff[lo_b : baseline_end(n)])),
        "effective_buckets_now": float(np.nanmedian(eff[max(0, n - sustain) :])),
    }
    kl = ctx.features("kl_mean")
    if kl is not None and len(kl):
        evidence["kl_mean_baseline"] = kl.b_median
        evidence["kl_mean_now"] = float(kl.smooth[-1])
    strength = (peak - p["top2_warn"]) / max(1.0 - p["top2_warn"], 1e-6) + max(rise[seg].max() - p["rise_min"], 0.0)
    conf = confidence(strength, 0.4, episode.end - episode.start + 1, sustain)
    position = {"start": "at the start of the completions", "end": "at the end of the completions", "middle": "in the middle of the completions"}[where]
    return make_finding(
        ctx, "REF_POLICY_DRIFT_ASYMMETRY", episode, feat, conf,
        f"{peak:.0%} of the KL to the reference sits in two of {n_buckets} position buckets (early: {b_top2:.0%}), "
        f"mostly bucket {top_bucket}, {position}: the policy and the reference disagree about a few tokens "
        "(template, special token or formatting mismatch), not about the behaviour.",
        evidence,
        [
            "Check that the policy and the reference use the same chat template, BOS/EOS and special tokens.",
            "Compare the first and last tokens of the linked samples with the reference's formatting.",
            "If the reward pays for a prefix or suffix, make sure the reference was given the same prompt format.",
        ],
        sample_order="kl_contribution DESC NULLS LAST",
    )


def _share_features(col: dict[str, np.ndarray], top2: np.ndarray) -> MetricFeatures:
    """The binned top-2 share as a MetricFeatures (so the episode helpers can use it)."""
    n = len(top2)
    filled = np.where(np.isfinite(top2), top2, np.nan)
    smooth = np.array([np.nanmedian(filled[max(0, i - 4) : i + 1]) if np.isfinite(filled[max(0, i - 4) : i + 1]).any() else np.nan for i in range(n)])
    smooth = np.where(np.isfinite(smooth), smooth, 0.0)
    zeros = np.zeros(n)
    steps = np.asarray(col["step"], dtype=float).astype(np.int64)
    return MetricFeatures(
        metric="kl_positional.top2_share", step=steps, step_hi=np.asarray(col["step_hi"], dtype=float).astype(np.int64),
        value=filled, vmin=filled, vmax=filled, n_nonfinite=zeros.astype(np.int64), smooth=smooth,
        b_median=float("nan"), scale=float("nan"), ratio=zeros, z=zeros, z_raw=zeros, cusum_up=zeros, cusum_down=zeros,
        sustained_up=zeros.astype(np.int64), sustained_down=zeros.astype(np.int64),
    )

