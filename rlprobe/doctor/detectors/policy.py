"""Signatures of the policy distribution itself: entropy collapse and blow-up, KL blow-up."""

from __future__ import annotations

from typing import Any

import numpy as np

from rlprobe.doctor.context import DetectorContext
from rlprobe.doctor.detectors._common import baseline_end, confidence, find_episode, make_finding, sustain_points
from rlprobe.doctor.findings import Finding
from rlprobe.doctor.registry import detector


@detector(
    "ENTROPY_COLLAPSE",
    "Policy entropy collapses",
    needs_all=("entropy_mean",),
    ratio_warn=0.2,
    ratio_critical=0.08,
    sustain_frac=0.03,
)
def entropy_collapse(ctx: DetectorContext, p: dict[str, Any]) -> Finding | None:
    """Entropy falls toward zero relative to its own early level: exploration dies.

    Policy-gradient updates sharpen the distribution on whatever earned advantage; with too
    high a learning rate, too little KL/entropy regularisation, or a reward that is easy to
    satisfy one way, the policy becomes near-deterministic. Every completion in a group then
    looks alike, group reward variance vanishes, advantages go to zero and learning stalls.
    Natural RL fine-tuning lowers entropy too (often 2-4x over a run), so the test is relative
    to the run's own early level and must hold for a sustained stretch.
    """
    feat = ctx.features("entropy_mean")
    if feat is None or len(feat) < 10 or not np.isfinite(feat.b_median) or feat.b_median <= 0:
        return None
    sustain = sustain_points(len(feat), p["sustain_frac"])
    ratio = np.where(np.isfinite(feat.ratio), feat.ratio, 1.0)
    robust = feat.z < -3
    episode = find_episode(
        feat,
        warn=(ratio < p["ratio_warn"]) & robust,
        critical=(ratio < p["ratio_critical"]) & robust,
        sustain=sustain,
        refine_with=feat.smooth,
        not_before=baseline_end(len(feat)) // 2,
    )
    if episode is None:
        return None
    held = ratio[episode.start : episode.end + 1]
    lowest = float(np.min(held))
    evidence: dict[str, Any] = {
        "entropy_baseline": feat.b_median,
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
        f"Policy entropy fell to {lowest:.0%} of its early level ({feat.b_median:.3g} -> "
        f"{float(feat.smooth[-1]):.3g}) and stayed there: the policy is becoming deterministic.",
        evidence,
        [
            "Lower the learning rate or raise the KL coefficient (beta) to slow the sharpening.",
            "Add an entropy bonus, or raise the sampling temperature for rollouts.",
            "Check whether one easy reward component is dominating (see FORMAT_GAMING).",
            "Inspect the linked samples: near-identical completions within a group confirm it.",
        ],
        sample_order="step DESC",
    )


@detector(
    "ENTROPY_BLOWUP",
    "Policy entropy blows up",
    needs_all=("entropy_mean",),
    ratio_warn=2.5,
    ratio_critical=4.0,
    sustain_frac=0.02,
)
def entropy_blowup(ctx: DetectorContext, p: dict[str, Any]) -> Finding | None:
    """Entropy jumps far above its baseline and the text degenerates into noise.

    Typically a too-high learning rate (or a bad update after a loss spike) knocks the policy
    off the data manifold: token distributions flatten, completions become token soup that
    runs to the length cap, and reward falls to zero. Unlike a slow drift this happens within
    a handful of steps and rarely recovers without rolling back.
    """
    feat = ctx.features("entropy_mean")
    if feat is None or len(feat) < 10 or not np.isfinite(feat.b_median) or feat.b_median <= 0:
        return None
    sustain = sustain_points(len(feat), p["sustain_frac"], floor=3)
    ratio = np.where(np.isfinite(feat.ratio), feat.ratio, 1.0)
    robust = feat.z > 4
    episode = find_episode(
        feat,
        warn=(ratio > p["ratio_warn"]) & robust,
        critical=(ratio > p["ratio_critical"]) & robust,
        sustain=sustain,
        refine_with=feat.smooth,
        not_before=baseline_end(len(feat)) // 2,
    )
    if episode is None:
        return None
    peak = float(np.max(ratio[episode.start : episode.end + 1]))
    evidence: dict[str, Any] = {"entropy_baseline": feat.b_median, "entropy_peak": float(np.nanmax(feat.smooth)), "peak_ratio_to_baseline": peak}
    for metric in ("reward_mean", "completion_len_mean", "max_len_hit_frac"):
        other = ctx.features(metric)
        if other is not None and len(other):
            evidence[f"{metric}_before"] = other.b_median
            evidence[f"{metric}_now"] = float(other.smooth[-1])
    strength = peak / p["ratio_warn"] - 1.0
    return make_finding(
        ctx, "ENTROPY_BLOWUP", episode, feat,
        confidence(strength, 0.5, episode.end - episode.start + 1, sustain),
        f"Policy entropy jumped to {peak:.1f}x its early level: completions are likely degenerating into noise.",
        evidence,
        [
            "Roll back to the checkpoint before the onset and lower the learning rate.",
            "Tighten gradient clipping; check for a loss or grad-norm spike just before the onset.",
            "Inspect the linked samples for token soup or runs to the length cap.",
        ],
        sample_order="step DESC",
    )


def _excess_over_trend(y: np.ndarray, gap: int, span: int) -> np.ndarray:
    """y[t] divided by a line fitted to y[t-gap-span : t-gap] and extrapolated to t.

    Healthy KL grows roughly linearly or slower, so a recent-trend projection keeps up with it;
    super-linear growth or a jump outruns the projection by a growing factor.
    """
    n = len(y)
    out = np.ones(n)
    x = np.arange(n, dtype=float)
    for t in range(gap + span, n):
        xs = x[t - gap - span : t - gap]
        ys = y[t - gap - span : t - gap]
        ok = np.isfinite(ys)
        if ok.sum() < 3:
            continue
        slope, intercept = np.polyfit(xs[ok], ys[ok], 1)
        projected = max(intercept + slope * t, np.nanmax(ys[ok]), 1e-12)
        out[t] = y[t] / projected if np.isfinite(y[t]) else 1.0
    return out


@detector(
    "KL_BLOWUP",
    "KL to the reference blows up",
    needs_any=("kl_mean", "kl_max"),
    excess_warn=2.5,
    excess_critical=5.0,
    min_ratio_to_baseline=4.0,
    sustain_frac=0.02,
)
def kl_blowup(ctx: DetectorContext, p: dict[str, Any]) -> Finding | None:
    """KL to the reference grows super-linearly or jumps: the policy is escaping the reference.

    The KL penalty (or its absence, beta = 0) bounds how far the policy may drift; once the
    reward gradient overwhelms it, KL compounds step over step. Rewards often still look fine
    while the policy exploits regions where the reward model is wrong. Slow, roughly linear KL
    growth is normal; the signature is growth that outruns its own recent trend.
    """
    metric = "kl_mean" if ctx.features("kl_mean") is not None else "kl_max"
    feat = ctx.features(metric)
    if feat is None or len(feat) < 20:
        return None
    smooth = np.where(np.isfinite(feat.smooth), feat.smooth, np.nan)
    gap = max(2, len(feat) // 50)
    span = max(5, len(feat) // 10)
    excess = _excess_over_trend(smooth, gap, span)
    big = np.nan_to_num(feat.ratio, nan=0.0) > p["min_ratio_to_baseline"]
    sustain = sustain_points(len(feat), p["sustain_frac"], floor=3)
    episode = find_episode(
        feat,
        warn=(excess > p["excess_warn"]) & big,
        critical=(excess > p["excess_critical"]) & big,
        sustain=sustain,
        refine_with=smooth,
        not_before=baseline_end(len(feat)) // 2,
    )
    if episode is None:
        return None
    peak_excess = float(np.max(excess[episode.start : episode.end + 1]))
    evidence: dict[str, Any] = {
        f"{metric}_baseline": feat.b_median,
        f"{metric}_now": float(smooth[-1]),
        f"{metric}_peak": float(np.nanmax(smooth)),
        "peak_excess_over_trend": peak_excess,
    }
    kl_max = ctx.features("kl_max")
    if metric == "kl_mean" and kl_max is not None and len(kl_max):
        evidence["kl_max_now"] = float(kl_max.smooth[-1])
    return make_finding(
        ctx, "KL_BLOWUP", episode, feat,
        confidence(peak_excess / p["excess_warn"] - 1.0, 1.0, episode.end - episode.start + 1, sustain),
        f"KL to the reference ({metric}) outran its own trend by {peak_excess:.1f}x and reached "
        f"{float(np.nanmax(smooth)):.3g} (early level {feat.b_median:.3g}): the policy is escaping the reference.",
        evidence,
        [
            "Raise the KL coefficient (beta), or use an adaptive KL controller.",
            "Lower the learning rate; check the reward for an exploit the policy has found.",
            "Compare the linked samples with early ones for drift in style or format.",
        ],
        sample_order="kl_contribution DESC NULLS LAST",
    )
