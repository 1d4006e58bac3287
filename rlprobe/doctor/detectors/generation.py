"""Signatures of generation: completions that starve at the length cap, loop, or slow down.

TRUNCATION_STARVE, REPETITION_SPIRAL and THROUGHPUT_ROT. See docs/signatures/ for the mechanics
of each. Truncation and length growth are also downstream symptoms of other failures (an
entropy blow-up turns completions into token soup that runs to the cap; a repetition loop runs
until the cap stops it): the catalog declares those links and the engine ranks a symptom under
its cause (rlprobe.doctor.causes), so nothing here looks at another signature.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from rlprobe.arrow_numpy import to_numpy
from rlprobe.doctor.context import DetectorContext, MetricFeatures
from rlprobe.doctor.episodes import (
    Episode, baseline_end, confidence, find_episode, held_stretch, make_finding, raw_onset, still_holds, sustain_points,
)
from rlprobe.doctor.findings import Finding, Severity
from rlprobe.doctor.registry import detects
from rlprobe.doctor.series import at_step, level_at_index, series_features, values_between
from rlprobe.doctor.stats import bounded_level_shifts, bounded_noise, finite_or, level_before, level_reached, level_shifts, mann_kendall, nanmedian, point_noise, refine_onset, trailing_median


# ---------------------------------------------------------------------------------------------
# helpers
# ---------------------------------------------------------------------------------------------
def _early(x: np.ndarray) -> np.ndarray:
    """The baseline window of a series (first 5% skipped, next 15%, at least 8 points)."""
    n = len(x)
    seg = np.asarray(x[int(np.floor(0.05 * n)) : baseline_end(n)], dtype=float)
    return seg[np.isfinite(seg)]


def _text_repetition(ctx: DetectorContext) -> dict[str, np.ndarray] | None:
    """Per sampled step: n-gram repetition of the captured completions (v1.feat_gen_text_repetition)."""
    if not ctx.has_samples:
        return None
    table = ctx.query(
        "SELECT step, samples, rep_samples, ngram_rep_median, ngram_rep_mean, looping_frac, truncated_frac "
        "FROM v1.feat_gen_text_repetition WHERE run_id = ? AND rep_samples > 0 ORDER BY step"
    )
    if table.num_rows == 0:
        return None
    return {name: np.asarray(to_numpy(table.column(name)), dtype=float) for name in table.column_names}


# ---------------------------------------------------------------------------------------------
# TRUNCATION_STARVE
# ---------------------------------------------------------------------------------------------
def _truncation(ctx: DetectorContext) -> tuple[MetricFeatures, np.ndarray, str] | None:
    """The truncated share per bin as logged: max_len_hit_frac, else truncation_rate, else 1 - eos_rate;
    else, from completion_len_mean, 1 where the mean sits exactly at its own maximum (see
    _pinned_at_cap) and 0 elsewhere."""
    for metric, invert in (("max_len_hit_frac", False), ("truncation_rate", False), ("eos_rate", True)):
        feat = ctx.features(metric)
        if feat is not None and len(feat) >= 3:
            value = np.asarray(feat.value, dtype=float)
            frac = 1.0 - value if invert else value
            return feat, np.clip(frac, 0.0, 1.0), metric
    return _pinned_at_cap(ctx)


def _pinned_at_cap(ctx: DetectorContext) -> tuple[MetricFeatures, np.ndarray, str] | None:
    """Every completion at the cap, read from the mean length alone (logs without a truncation share).

    A batch's mean length can equal the cap only when every completion in it was cut there, and
    a mean that sits at exactly the same value on many points, that value its own maximum, is
    that: completions of free length never average to the same number twice in a row, let alone
    at their longest. Points at that value count as all truncated (share 1), the others as
    unknown but not all (share 0), so the words claim the cap only where the mean shows it; the
    usual sustained-stretch test then applies. Only a mean whose early level was well below that
    value (80% of it) is read so: near the cap from the start, the share is unknown throughout."""
    feat = ctx.features("completion_len_mean")
    if feat is None or len(feat) < 3:
        return None
    value = np.asarray(feat.value, dtype=float)
    ok = np.isfinite(value)
    if not ok.any():
        return None
    top = float(np.max(value[ok]))
    pinned = ok & (np.abs(value - top) <= 1e-9 * max(abs(top), 1.0))
    if top <= 0 or int(pinned.sum()) < 3:
        return None
    # only a mean that came from well below the cap: one that sits near it from the start (a
    # small batch whose mean is the cap on some steps and a few tokens under it on the rest)
    # truncates a share no mean can tell on every step, pinned or not
    early = _early(value)
    if not len(early) or float(np.median(early)) > 0.8 * top:
        return None
    return feat, np.where(ok, pinned.astype(float), np.nan), "completion_len_mean"


@detects("TRUNCATION_STARVE")
def truncation_starve(ctx: DetectorContext, p: dict[str, Any]) -> Finding | None:
    """Completions keep hitting the length cap instead of ending.

    A completion cut at max_completion_length never reaches its answer: verifiable rewards
    score it as wrong (or a length penalty punishes it), it produces no EOS for the policy to
    learn to emit, and the rollout compute spent on it is wasted. When a policy drifts towards
    longer outputs than the cap allows (a reasoning style that needs more room, a
    length-rewarding judge, or an instruction to "think step by step" with a small cap), a
    growing share of the batch is truncated, reward drops and GRPO groups fill with identical
    zero rewards. The test is on absolute shares, point by point (healthy runs truncate a few
    percent): the share of completions that hit the cap (max_len_hit_frac, else
    truncation_rate, else 1 - eos_rate) at or above frac_warn from the first logged point where
    it is so, holding on most points of a sustained stretch (3% of the run, at least 3 points);
    critical once it holds at frac_critical. A run whose completions are (nearly) all cut from
    its first step to its last, with a reward that never moves, is starved from the start and
    critical: no rollout ends, so there is nothing to learn from. One that merely starts above
    frac_warn is how its first policy meets the cap, a warning. An episode that ended (the
    share fell back below frac_warn) says when it ended, and is a warning if it held at
    frac_critical, else info.
    """
    found = _truncation(ctx)
    if found is None:
        return None
    feat, frac, metric = found
    n = len(feat)
    ok = np.isfinite(frac)
    sustain = sustain_points(n, p["sustain_frac"], floor=3)
    high = ok & (frac >= p["frac_warn"])
    hit = held_stretch(high, sustain)
    if hit is None:
        return None
    start, end = hit
    seg = slice(start, end + 1)
    held = float(np.nanmedian(frac[seg]))
    peak = float(np.nanmax(frac[seg]))
    # it still holds only while the latest points are up too: a stretch that ended a point or
    # two before the end of a short log, with the latest points' median back under frac_warn,
    # has ended as far as the log can tell (the watcher re-judges when it rises again)
    ongoing = still_holds(high, end, sustain) and float(np.nanmedian(frac[max(0, n - sustain) :])) >= p["frac_warn"]
    # where the rise began: walk back over the points just before the crossing that already sat
    # measurably above the early share (3 of its noise units, and half of frac_warn)
    early = frac[int(0.05 * n) : baseline_end(n)]
    early = early[np.isfinite(early)]
    onset = start
    if len(early) >= 3 and start > 0:
        e_level = float(np.median(early))
        e_noise = bounded_noise(early) if len(early) >= 4 else float("nan")
        line = max(e_level + 3.0 * (e_noise if np.isfinite(e_noise) else 0.0), 0.5 * p["frac_warn"])
        while onset > 0 and ok[onset - 1] and frac[onset - 1] >= line and frac[onset - 1] > e_level:
            onset -= 1
    first_step, last_step = feat.step_at(onset), int(feat.step_hi[end])
    cross_step = feat.step_at(start)
    crit = held_stretch(ok & (frac >= p["frac_critical"]), sustain, not_before=start)
    crit = crit if crit is not None and crit[0] <= end else None
    before = frac[max(0, onset - 2 * sustain) : onset]
    before = before[np.isfinite(before)]
    now = float(np.nanmedian(frac[max(0, n - sustain) :]))
    # from the mean length alone the share is known only where it is all (see _pinned_at_cap)
    from_mean = metric == "completion_len_mean"
    if from_mean:
        before = before[:0]
    evidence: dict[str, Any] = {
        "metric": metric,
        **({"truncated_share_before": float(np.median(before))} if len(before) else {}),
        "truncated_share_while_high": held,
        "truncated_share_peak": peak,
        "truncated_share_now": now,
    }
    if from_mean:
        del evidence["truncated_share_now"]  # below the cap the share is unknown, not 0
    from_start = onset <= 1
    dead = from_start and ongoing and held >= p["dead_frac"] and float(np.nanmin(frac[seg])) >= p["frac_critical"]
    # what the reward did: the level before the episode and during it, against its own noise
    reward = ctx.features("reward_mean")
    r_during = values_between(reward, first_step, last_step)
    r_before = values_between(reward, -2**62, first_step - 1)[-max(3, 2 * sustain):]
    consequence = ""
    reward_flat = True
    if reward is not None and len(r_during) >= 2:
        r_noise = bounded_noise(np.asarray(reward.value, dtype=float))
        during = float(np.median(r_during))
        evidence["reward_mean_while_high"] = during
        if len(r_before) >= 2 and np.isfinite(r_noise) and r_noise > 0:
            prior = float(np.median(r_before))
            evidence["reward_mean_before"] = prior
            se = 1.25 * r_noise * math.sqrt(1.0 / len(r_before) + 1.0 / len(r_during))
            if prior - during > 3.0 * se:
                consequence = f" The reward fell from {prior:.3g} to {during:.3g} while they were cut."
            elif during - prior > 3.0 * se:
                consequence = f" The reward still rose ({prior:.3g} -> {during:.3g}): answers evidently come before the cap, but the policy is not learning to stop."
                reward_flat = False
            else:
                consequence = f" The reward held at about {during:.3g}: answers evidently come before the cap, but the policy is not learning to stop."
        else:
            spread = float(np.ptp(r_during))
            rising = np.isfinite(r_noise) and r_noise > 0 and any(
                sh.z >= 4.0 for sh in level_shifts(np.asarray(reward.value, dtype=float), r_noise, min_size=3))
            reward_flat = not rising
            evidence["reward_mean_spread_while_high"] = spread
            consequence = (f" The reward never moved (about {during:.3g} on every step)." if reward_flat
                           else f" The reward rose meanwhile (median {during:.3g}): the run learns despite the cap.")
    severity = "critical" if crit is not None else "warn"
    if dead and reward_flat:
        severity = "critical"
        what = (f"Every completion hits the length cap from the first logged step ({held:.0%} of them, step {first_step} "
                f"to {last_step}): no rollout ends, so there is nothing to learn from and the run is starved from the start.")
    elif from_mean:
        cap = float(np.nanmax(np.asarray(feat.value, dtype=float)))
        evidence["completion_len_mean_at_cap"] = cap
        what = (f"The mean completion length sat at exactly {cap:.6g} tokens, its longest, from step {cross_step}: a batch "
                "whose mean is the cap had every completion cut there, without an answer or EOS, and their rollout "
                "compute is wasted.")
        if from_start:
            severity = "warn"
            what += " It was so from the first steps: the cap is too short for the initial policy."
    else:
        what = f"{held:.0%} of completions hit the length cap from step {cross_step}"
        if onset < start:
            what += f" (rising from step {first_step}, {float(frac[onset]):.0%})"
        if crit is not None and crit[0] > start:
            what += f", {float(np.nanmedian(frac[crit[0] : crit[1] + 1])):.0%} from step {feat.step_at(crit[0])}"
        what += f" (peak {peak:.0%}"
        if len(before):
            what += f"; {evidence['truncated_share_before']:.0%} before"
        what += "): they end without an answer or EOS and their rollout compute is wasted."
        if from_start:
            severity = "warn"
            what += " It was so from the first steps: the cap is too short for the initial policy."
    if not ongoing:
        # what is over is reported by what it was: a stretch that held at frac_critical is worth
        # a warning after the fact; a milder one the run got out of by itself is a note
        evidence["severity_while_it_held"] = severity
        severity = "warn" if severity == "critical" else "info"
        what += (f" It lasted to step {last_step}; the mean has since fallen below it (now "
                 f"{float(np.asarray(feat.value, dtype=float)[np.isfinite(feat.value)][-1]):.4g}): the run recovered." if from_mean else
                 f" It lasted to step {last_step}; the share has since fallen to {now:.0%}: the run recovered.")
    len_max = ctx.features("completion_len_max")
    if len_max is not None and len(len_max):
        cap = float(np.nanmax(len_max.vmax))
        lo, hi = at_step(len_max, first_step), at_step(len_max, last_step) + 1
        evidence["length_cap_seen"] = cap
        evidence["share_of_steps_at_cap"] = float(np.mean(len_max.vmax[lo:hi] >= 0.999 * cap))
    sample_share = _sample_truncated_share(ctx, first_step, last_step)
    if sample_share is not None:
        evidence["captured_samples_truncated"] = sample_share
    # a directly measured share, not an inference: past the threshold for long is near-certain
    conf = confidence(held / p["frac_warn"] - 1.0, 1.0, end - start + 1, sustain, floor=0.5)
    return make_finding(
        ctx, "TRUNCATION_STARVE", Episode(start, end, severity, onset), feat, conf, what + consequence, evidence,
        [
            "Raise max_completion_length if the task needs longer reasoning, or lower it deliberately with a length penalty.",
            "Add an overlong penalty or soft length reward (DAPO's overlong reward shaping) so the policy learns to stop.",
            "Mask truncated completions out of the loss (DAPO's overlong filtering) so they do not teach a wrong signal.",
            "Read the linked samples: rambling, loops or unfinished reasoning tell which fix applies.",
        ],
        sample_order="truncated DESC NULLS LAST, completion_len DESC NULLS LAST",
    ).model_copy(update={"ongoing": ongoing})


def _sample_truncated_share(ctx: DetectorContext, lo: int, hi: int) -> float | None:
    if not ctx.has_samples:
        return None
    try:
        table = ctx.query(
            "SELECT avg(CASE WHEN truncated THEN 1.0 ELSE 0.0 END) AS share FROM v1.samples "
            "WHERE run_id = ? AND step BETWEEN ? AND ? AND truncated IS NOT NULL",
            [ctx.run_id, int(lo), int(hi)],
        )
    except Exception:  # samples without a truncated column
        return None
    value = table.column("share")[0].as_py()
    return float(value) if value is not None else None


# ---------------------------------------------------------------------------------------------
# COMPLETION_COLLAPSE
# ---------------------------------------------------------------------------------------------
def _short_from_start(ctx: DetectorContext, feat: MetricFeatures, value: np.ndarray, p: dict[str, Any]) -> Finding | None:
    """Completions of a few tokens that earn nothing, from the first logged step on.

    No comparison with the run's own early length can see a run whose completions were never
    long. A mean of at most few_tokens (8) tokens holds a bare answer or nothing (an EOS sampled
    at once, a chat template that ends the turn), and when the reward also sits at 0 on nearly
    every step (at most nothing_earned, 0.01: a hundredth of a unit reward, the share of a rare
    partial credit, on 90% of the steps, and never above 0.05) such completions earn nothing and the run has no signal to climb out with. A task
    answered in a word that the policy gets right keeps its reward, and stays quiet here."""
    reward = ctx.features("reward_mean")
    if reward is None or len(reward) < 5:
        return None
    ok = np.isfinite(value)
    rv = np.asarray(reward.value, dtype=float)
    rv = rv[np.isfinite(rv)]
    if ok.sum() < 8 or len(rv) < 5:
        return None
    short = ok & (value <= p["few_tokens"])
    sustain = sustain_points(len(value), p["sustain_frac"], floor=3)
    hit = held_stretch(short, sustain)
    if hit is None or hit[0] > 1 or not still_holds(short, hit[1], sustain) or float(np.mean(short[ok])) < 0.9:
        return None
    if float(np.mean(rv <= p["nothing_earned"])) < 0.9 or float(np.max(rv)) > 0.05:
        return None  # the short answers earn something: a task answered in a word, not a collapse
    start, end = hit
    first_step, last_step = feat.step_at(start), int(feat.step_hi[end])
    typical = float(np.nanmedian(value[ok]))
    return make_finding(
        ctx, "COMPLETION_COLLAPSE", Episode(start, end, "critical", start), feat, 0.9,
        f"From the first logged step, completions are {typical:.3g} tokens on average (at most {p['few_tokens']:.0f} on "
        f"{float(np.mean(short[ok])):.0%} of the steps) and the reward stays at 0 (at most {float(np.max(rv)):.2g}): the policy ends its answer at once, "
        "so nothing it writes can earn a reward and the run has no learning signal.",
        {"completion_len_typical": typical, "share_of_steps_short": float(np.mean(short[ok])),
         "reward_max": float(np.max(rv)), "steps_short": int(last_step - first_step + 1)},
        [
            "Read a few completions: an immediate EOS or an empty turn points at the chat template or the stop tokens.",
            "Check max_new_tokens / min_new_tokens and the EOS and pad token ids the generator uses.",
            "Check that the prompt ends where the model is meant to start answering (generation prompt added).",
        ],
        sample_order="step ASC",
    ).model_copy(update={"ongoing": True})


@detects("COMPLETION_COLLAPSE")
def completion_collapse(ctx: DetectorContext, p: dict[str, Any]) -> Finding | None:
    """Completions shrink to a few tokens: the policy drops its reasoning and emits a bare answer.

    A policy can find that the shortest completion is the safest: an empty or one-token answer
    avoids the format penalties, the length penalty, the truncation a long chain of thought
    risks, or (with a per-token loss normaliser) the negative advantage spread over many tokens.
    Once a few groups reward the short form, GRPO pushes every prompt towards it; within a few
    dozen steps completions are a handful of tokens, the reasoning that earned the reward is
    gone, reward and group variance fall with it (on an easy task the reward may hold a while).
    The test reads completion_len_mean point by point against the highest level its trailing
    5-point median reached before: at or below ratio_warn (0.3) of that level and at most
    max_tokens (48) for a sustained stretch (3% of the run, at least 3 points); critical at
    ratio_critical (0.12), or when the reward fell while it held. A collapse the run came back
    from is at most a warning, and says when it ended.
    """
    feat = ctx.features("completion_len_mean")
    if feat is None or len(feat) < 8:
        return None
    value = np.asarray(feat.value, dtype=float)
    ok = np.isfinite(value)
    if ok.sum() < 8:
        return None
    n = len(value)
    short_start = _short_from_start(ctx, feat, value, p)
    if short_start is not None:
        return short_start
    # the level completions had reached: the running peak of the trailing median (a single long
    # batch does not set it, a sustained level does)
    level = trailing_median(np.where(ok, value, np.nan), 5)
    peak = np.fmax.accumulate(np.where(np.isfinite(level), level, -np.inf))
    ref = np.concatenate([[np.nan], peak[:-1]])  # the peak before each point, not including it
    with np.errstate(invalid="ignore", divide="ignore"):
        ratio = np.where(ref > 0, value / ref, np.nan)
    short = ok & (ratio <= p["ratio_warn"]) & (value <= p["max_tokens"])
    sustain = sustain_points(n, p["sustain_frac"], floor=3)
    hit = held_stretch(short, sustain, not_before=2)
    if hit is None:
        return None
    start, end = hit
    seg = slice(start, end + 1)
    reference = float(ref[start])
    during = nanmedian(value[seg])
    lowest = float(np.nanmin(value[seg]))
    ongoing = still_holds(short, end, sustain)
    evidence: dict[str, Any] = {
        "completion_len_before": reference,
        "completion_len_during": during,
        "completion_len_lowest": lowest,
        "ratio_during": during / reference,
        "completion_len_now": float(value[ok][-1]),
    }
    severity = "critical" if during <= p["ratio_critical"] * reference else "warn"
    reward = ctx.features("reward_mean")
    consequence = ""
    if reward is not None and len(reward) == n and np.array_equal(reward.step, feat.step):
        r = np.asarray(reward.value, dtype=float)
        before = nanmedian(r[max(0, start - 2 * sustain) : start])
        after = nanmedian(r[seg])
        if np.isfinite(before) and np.isfinite(after):
            evidence["reward_mean_before"], evidence["reward_mean_during"] = before, after
            noise = 1.4826 * nanmedian(np.abs(np.diff(r[np.isfinite(r)]))) / np.sqrt(2.0) if np.isfinite(r).sum() > 3 else np.nan
            fell = np.isfinite(noise) and before - after > 3.0 * max(noise, 1e-9) / np.sqrt(max(1, min(end - start + 1, 2 * sustain)))
            if fell and before - after > 0.1 * max(abs(before), 1e-9):
                severity = "critical"
                consequence = f" The reward fell with them ({before:.3g} -> {after:.3g})."
            else:
                consequence = f" The reward held ({before:.3g} -> {after:.3g}) so far: on an easy task a bare answer can still pass."
    # the few-token stretch confirms a collapse; it began where the completions first stood at
    # ratio_warn of their level in the unbroken run of points that leads into it (806 -> 250
    # tokens by step 365, 9 by step 415: a careful reader sees it at 365)
    shrunk = ok & (ratio <= p["ratio_warn"])
    onset = raw_onset(Episode(start, end, severity, start), shrunk, floor=2).onset
    first_step, last_step = feat.step_at(start), int(feat.step_hi[end])
    when = f"from step {first_step}"
    if onset < start:
        evidence["shrinking_from_step"] = feat.step_at(onset)
        when = (f"from step {first_step}, after falling below {p['ratio_warn']:.0%} of that level from step "
                f"{feat.step_at(onset)}")
    if not ongoing:
        evidence["severity_while_it_held"] = severity
        severity = "warn" if severity == "critical" else severity
        when += f" to step {last_step}; they have grown back since (now {evidence['completion_len_now']:.0f} tokens)"
    strength = p["ratio_warn"] / max(during / reference, 1e-3) - 1.0
    return make_finding(
        ctx, "COMPLETION_COLLAPSE", Episode(start, end, severity, onset), feat,
        confidence(strength, 1.5, end - start + 1, sustain, floor=0.5),
        f"Completions shrank to {during:.0f} tokens on average ({during / reference:.0%} of the {reference:.0f} they had "
        f"reached) {when}: the policy is dropping its reasoning and emitting a bare answer or nothing.{consequence}",
        evidence,
        [
            "Read the linked samples: empty or one-line completions confirm it.",
            "Check the reward for what a short answer earns: a format or length term that pays for brevity, or a penalty only long answers risk.",
            "Use a loss normaliser that does not favour short sequences (Dr. GRPO's constant normaliser rather than per-sequence length).",
            "Roll back to before the onset and lower the learning rate.",
        ],
        sample_order="completion_len ASC NULLS LAST",
    ).model_copy(update={"ongoing": ongoing})


# ---------------------------------------------------------------------------------------------
# REPETITION_SPIRAL
# ---------------------------------------------------------------------------------------------
def _repetition_inputs(ctx: DetectorContext) -> str | None:
    if ctx.has("repetition_rate"):
        return None
    if ctx.has_samples:
        table = ctx.query("SELECT count(*) AS n FROM v1.samples WHERE run_id = ? AND completion_text IS NOT NULL")
        if table.column("n")[0].as_py() > 0:
            return None
    return "needs repetition_rate or captured samples with completion_text; this run logged neither"


def _repetition_rise_in_window(feat: MetricFeatures, p: dict[str, Any]) -> tuple[Episode, MetricFeatures, np.ndarray, str, dict[str, Any]] | None:
    """A rise of repetition_rate inside the early window (so that window's level is not the level
    before it): read from the rate's own levels (binary segmentation under its noise), from a
    level held for a sustained stretch to one at rate_warn or more, rise_min and ratio_min above
    it (a rise in stages counted whole), held to the end of the run."""
    value = np.clip(np.asarray(feat.value, dtype=float), 0.0, 1.0)
    n = len(value)
    sustain = sustain_points(n, p["sustain_frac"], floor=3)
    shifts = bounded_level_shifts(value)
    for j, shift in enumerate(shifts):
        if shift.z < 4.0 or shift.after <= shift.before or shift.at >= baseline_end(n):
            continue  # later rises are the main test's
        before, lo = level_before(shifts, j, 4.0)
        if shift.at - lo < sustain:
            continue  # the level before is a blip of a few points, not one the run held
        before = max(before, 0.0)
        after, _ = level_reached(shifts, j, max(sustain, int(math.ceil(0.05 * n))))
        if after < p["rate_warn"] or after - before < p["rise_min"] or after < p["ratio_min"] * max(before, 0.01):
            continue
        high = np.isfinite(value) & (value >= before + 0.5 * (after - before))
        hit = held_stretch(high, sustain, not_before=max(0, shift.at - 2))
        if hit is None or not still_holds(high, hit[1], sustain):
            continue
        start, end = hit
        level = np.clip(finite_or(feat.smooth, before), 0.0, 1.0)
        severity: Severity = "critical" if float(np.nanmedian(value[start : end + 1])) >= p["rate_critical"] else "warn"
        return _rate_onset(Episode(start, end, severity, start), value, before, lo + 1, p), feat, level, "repetition_rate", \
            {"baseline": before, "sustain": sustain}
    return _repetition_from_opening(feat, value, sustain, p)


def _rate_onset(episode: Episode, value: np.ndarray, before: float, floor: int, p: dict[str, Any]) -> Episode:
    """A loop's first step, as the main test dates it: the first logged point of the unbroken run
    already at rate_warn and rise_min above the level before, leading into the held stretch."""
    raw = np.nan_to_num(value, nan=0.0)
    return raw_onset(episode, (raw >= p["rate_warn"]) & (raw - before >= p["rise_min"]), floor=floor)


def _repetition_from_opening(feat: MetricFeatures, value: np.ndarray, sustain: int, p: dict[str, Any]
                             ) -> tuple[Episode, MetricFeatures, np.ndarray, str, dict[str, Any]] | None:
    """A loop that took hold within the run's first few points, too soon for any level before it
    but the first logged point: that point is the model as it came in (a measured rate, not a
    noisy guess), and a rate that leaves it by ratio_min and rise_min to rate_warn or more within
    a sustained stretch and holds there to the end is a loop the training started."""
    n = len(value)
    ok = np.flatnonzero(np.isfinite(value))
    if len(ok) < 10:
        return None
    before = float(value[ok[0]])
    after = float(np.nanmedian(value[ok[1]:]))
    if after < p["rate_warn"] or after - before < p["rise_min"] or after < p["ratio_min"] * max(before, 0.01):
        return None
    high = np.isfinite(value) & (value >= before + 0.5 * (after - before))
    hit = held_stretch(high, sustain, not_before=int(ok[1]))
    if hit is None or hit[0] > ok[0] + sustain or not still_holds(high, hit[1], sustain):
        return None
    start, end = hit
    level = np.clip(finite_or(feat.smooth, before), 0.0, 1.0)
    severity: Severity = "critical" if float(np.nanmedian(value[start : end + 1])) >= p["rate_critical"] else "warn"
    return _rate_onset(Episode(start, end, severity, start), value, before, int(ok[0]) + 1, p), feat, level, "repetition_rate", \
        {"baseline": before, "sustain": sustain}


def _repetition_episode(ctx: DetectorContext, p: dict[str, Any]) -> tuple[Episode, MetricFeatures, np.ndarray, str, dict[str, Any]] | None:
    """The sustained rise of repetition: from repetition_rate if logged, else from the samples' text."""
    feat = ctx.features("repetition_rate")
    if feat is not None and len(feat) >= 10 and np.isfinite(feat.b_median):
        level = np.clip(finite_or(feat.smooth, 0.0), 0.0, 1.0)
        base = max(float(feat.b_median), 0.0)
        rise = level - base
        ratio = level / max(base, 0.01)
        sustain = sustain_points(len(feat), p["sustain_frac"])
        episode = find_episode(
            feat,
            warn=(level >= p["rate_warn"]) & (rise >= p["rise_min"]) & (ratio >= p["ratio_min"]),
            critical=(level >= p["rate_critical"]) & (rise >= p["rise_min"]) & (ratio >= p["ratio_min"]),
            sustain=sustain,
            refine_with=level,
            not_before=baseline_end(len(feat)) // 2,
        )
        if episode is None:
            return _repetition_rise_in_window(feat, p)
        episode = Episode(episode.start, episode.end, episode.severity,
                          refine_onset(level, episode.start, baseline_end(len(feat)) // 2, episode.start + 2 * sustain))
        episode = _rate_onset(episode, np.asarray(feat.value, dtype=float), base, baseline_end(len(feat)) // 2, p)
        return episode, feat, level, "repetition_rate", {"baseline": base, "sustain": sustain}
    text = _text_repetition(ctx)
    if text is None or len(text["step"]) < 10:
        return None
    rep = np.clip(text["ngram_rep_mean" if p["text_stat"] == "mean" else "ngram_rep_median"], 0.0, 1.0)
    steps = text["step"].astype(np.int64)
    hi = np.concatenate([steps[1:] - 1, [steps[-1]]])
    feat = series_features("text.ngram_repetition", steps, hi, rep)
    early = _early(rep)
    if len(early) < 3:
        return None
    base = float(np.median(early))
    level = np.clip(finite_or(feat.smooth, base), 0.0, 1.0)
    novelty_ratio = (1.0 - level) / max(1.0 - base, 0.05)
    sustain = sustain_points(len(feat), p["sustain_frac"])
    episode = find_episode(
        feat,
        warn=(novelty_ratio <= p["text_novelty_warn"]) & (level >= p["text_rep_warn"]),
        critical=(novelty_ratio <= p["text_novelty_critical"]) & (level >= p["text_rep_critical"]),
        sustain=sustain,
        refine_with=level,
        not_before=baseline_end(len(feat)) // 2,
    )
    if episode is None:
        return None
    episode = Episode(episode.start, episode.end, episode.severity,
                      refine_onset(level, episode.start, baseline_end(len(feat)) // 2, episode.start + 2 * sustain))
    looping = finite_or(text["looping_frac"], np.nan)
    return episode, feat, level, "samples", {"baseline": base, "sustain": sustain, "looping_frac": looping}


@detects("REPETITION_SPIRAL", check=_repetition_inputs)
def repetition_spiral(ctx: DetectorContext, p: dict[str, Any]) -> Finding | None:
    """Generated text loops, with rising n-gram repetition.

    Once a policy puts probability on repeating what it just wrote, every repetition makes
    the next one likelier (the model conditions on its own loop); RL sharpens it further when
    the loop is not punished (a judge that rewards length, a verifier that only reads the last
    line, a length-normalised loss that dilutes the penalty over a long completion). The loop
    runs until the length cap stops it: completions lengthen, reward falls, and entropy drops.
    The test, when the run logs repetition_rate (share of repeated n-grams per completion): the
    smoothed rate at or above rate_warn (0.15), at least rise_min (0.1) and ratio_min (2.5x)
    above its own early level, for 3% of the run; critical at rate_critical (0.3). Without
    repetition_rate it measures the captured samples' text (v1.feat_gen_text_repetition: share
    of repeated word 4-grams in the end of each completion, averaged over the samples of a
    step, text_stat mean or median): at or above
    text_rep_warn (0.5) while the share of fresh 4-grams fell to text_novelty_warn (0.5) of its
    early level; critical at text_rep_critical (0.7) and text_novelty_critical (0.3).
    """
    found = _repetition_episode(ctx, p)
    if found is None:
        return None
    episode, feat, level, source, info = found
    sustain = info["sustain"]
    first_step, last_step = episode.steps(feat)
    seg = slice(episode.start, episode.end + 1)
    peak = float(np.max(level[seg]))
    held = float(np.median(level[seg]))
    base = info["baseline"]
    evidence: dict[str, Any] = {
        "source": source,
        "repetition_baseline": base,
        "repetition_while_high": held,
        "repetition_peak": peak,
        "repetition_now": float(level[-1]),
    }
    if source == "repetition_rate":
        text = _text_repetition(ctx) if ctx.has_samples else None
        if text is not None and len(text["step"]) >= 4:
            inside = (text["step"] >= first_step) & (text["step"] <= last_step)
            early = _early(text["ngram_rep_median"])
            if inside.any() and len(early):
                evidence["text_ngram_repetition_early"] = float(np.median(early))
                evidence["text_ngram_repetition_while_high"] = float(np.nanmedian(text["ngram_rep_median"][inside]))
                evidence["text_looping_samples_while_high"] = float(np.nanmean(text["looping_frac"][inside]))
        strength = (held - p["rate_warn"]) / p["rate_warn"] + max(held / max(base, 0.01) / p["ratio_min"] - 1.0, 0.0)
    else:
        inside = slice(episode.start, episode.end + 1)
        evidence["text_looping_samples_while_high"] = float(np.nanmean(info["looping_frac"][inside]))
        strength = (held - p["text_rep_warn"]) / (1.0 - p["text_rep_warn"]) * 2.0
    for other in ("completion_len_mean", "reward_mean", "entropy_mean"):
        f = ctx.features(other)
        if f is not None and len(f):
            o = at_step(f, first_step)
            evidence[f"{other}_before"] = level_at_index(f, max(0, o - 2 * sustain), max(1, o))
            evidence[f"{other}_while_high"] = level_at_index(f, o, at_step(f, last_step) + 1)
    conf = confidence(strength, 1.0, episode.end - episode.start + 1, sustain)
    what = "of n-grams repeat within a completion" if source == "repetition_rate" else "of word 4-grams repeat in the captured completions"
    return make_finding(
        ctx, "REPETITION_SPIRAL", episode, feat, conf,
        f"Generated text is looping: {held:.0%} {what} from step {first_step} on (early: {base:.0%}, peak {peak:.0%}).",
        evidence,
        [
            "Add a repetition penalty or n-gram blocking to rollout sampling, or raise the temperature.",
            "Penalise repetition in the reward (or make the verifier reject looping completions).",
            "Check the length handling: a loss normalised per sequence length dilutes the penalty on long loops (see Dr. GRPO).",
            "Read the linked samples: the repeated phrase often points at what the reward pays for.",
        ],
        sample_order="completion_len DESC NULLS LAST",
    )


# ---------------------------------------------------------------------------------------------
# THROUGHPUT_ROT
# ---------------------------------------------------------------------------------------------
def _step_up_z(value: np.ndarray, onset: int, start: int, end: int) -> float:
    """How far step time over [start, end] stands above the steps before onset, in standard
    errors of the difference of the two medians of log step time under its point noise.

    The trend test sees a creep; a slow-down that came as one step up and then held (a leak
    that filled a cache, a new per-step overhead) has no trend after the step, and Mann-Kendall
    over the plateau reads it as noise. A level that moved by many standard errors and stayed is
    the same slow-down."""
    v = np.asarray(value, dtype=float)
    logv = np.log(np.where(np.isfinite(v) & (v > 0), v, np.nan))
    before = logv[:onset][np.isfinite(logv[:onset])]
    during = logv[start : end + 1][np.isfinite(logv[start : end + 1])]
    noise = point_noise(logv)
    if len(before) < 3 or len(during) < 3 or not np.isfinite(noise) or noise <= 0:
        return 0.0
    se = 1.25 * noise * math.sqrt(1.0 / len(before) + 1.0 / len(during))
    return float((np.median(during) - np.median(before)) / se)


@detects("THROUGHPUT_ROT")
def throughput_rot(ctx: DetectorContext, p: dict[str, Any]) -> Finding | None:
    """Step time creeps up: each step costs more wall-clock than it did early in the run.

    Usually a symptom: completions got longer (generation cost grows with length, attention
    cost faster), and then it is reported as info. When length did not grow it points at the
    system, and at ratio_warn (2x) that is a warning: a leaking KV cache or memory fragmentation in the inference engine,
    a growing replay buffer or logging payload, checkpoint or evaluation overheads, host-side
    data loading. The test: the smoothed step_time_s (else generation_time_s) at or above
    ratio_info (1.5x) its early level for 10% of the run, with a significant upward
    Mann-Kendall trend (p < trend_p) after the early window, or, for a slow-down that came as one
    step up and held, a level at least step_z (5) standard errors above the steps before it. The
    evidence says how much of it
    completion length and generation time explain.
    """
    metric = "step_time_s" if ctx.features("step_time_s") is not None else "generation_time_s"
    feat = ctx.features(metric)
    if feat is None or len(feat) < 20 or not np.isfinite(feat.b_median) or feat.b_median <= 0:
        return None
    ratio = finite_or(feat.ratio, 1.0)
    sustain = sustain_points(len(feat), p["sustain_frac"])
    # a creep that began with the run has already lifted the early window: the run's opening
    # (its first 5%, at least 3 points) is the cost of a step before it, when it is lower (the
    # first steps are slower, not faster, when compilation or cache warm-up is all they add)
    value = np.asarray(feat.value, dtype=float)
    n_open = max(3, int(0.05 * len(feat)))
    opening = nanmedian(value[:n_open])
    early = opening if np.isfinite(opening) and 0 < opening < feat.b_median else float(feat.b_median)
    ratio = finite_or(feat.smooth, feat.b_median) / early
    # the smoothed level confirms a slow-down and the raw points date it: a sparse log whose last
    # sustained stretch of points all sit at the new level holds it, though the smoother, a few
    # points behind, has not caught up yet (a step-up in the last sixth of a 31-point log)
    raw_high = np.nan_to_num(value / early, nan=0.0) >= p["ratio_info"]
    episode = find_episode(
        feat, warn=(ratio >= p["ratio_info"]) | raw_high, critical=np.zeros(len(feat), dtype=bool), sustain=sustain,
        refine_with=finite_or(feat.smooth, feat.b_median), not_before=baseline_end(len(feat)),
    )
    if episode is None:
        return None
    log_smooth = np.log(np.maximum(finite_or(feat.smooth, feat.b_median), 1e-12))
    episode = Episode(episode.start, episode.end, "info",
                      refine_onset(log_smooth, episode.start, baseline_end(len(feat)) // 2, episode.start + 2 * sustain))
    raw_ratio = value / early
    # measured against the opening, a slow-down may date from just after it (a step up inside
    # the early window, which then is no yardstick); else not before the middle of that window
    floor = n_open if early == opening else baseline_end(len(feat)) // 2
    episode = raw_onset(episode, np.nan_to_num(raw_ratio, nan=0.0) >= p["ratio_info"], floor=floor)
    # the trend is read after the early window, or from just before the onset when the slow-down
    # began inside it (a jump that then holds has no trend left after the window)
    tail = np.asarray(feat.value[max(0, min(baseline_end(len(feat)), episode.onset - sustain)) :], dtype=float)
    tail = tail[np.isfinite(tail)]
    if len(tail) > 300:  # the trend test is O(n^2): thin long series evenly
        tail = tail[np.linspace(0, len(tail) - 1, 300).astype(int)]
    trend = mann_kendall(tail)
    if trend.p_increasing > p["trend_p"] and _step_up_z(feat.value, episode.onset, episode.start, episode.end) < p["step_z"]:
        return None
    seg = slice(episode.start, episode.end + 1)
    # the level before: a jump early enough to fall inside the early window lifts that window's
    # median, so the steps before the onset say better what a step cost before it (never more
    # than the window: a slow creep before the onset does not move the reference up)
    base = early
    before = np.asarray(feat.value[: episode.onset], dtype=float)
    before = before[np.isfinite(before)]
    if len(before) >= sustain and 0 < float(np.median(before)) < base:
        base = float(np.median(before))
        ratio = finite_or(feat.smooth, feat.b_median) / base
    held = float(np.median(ratio[seg]))
    # a creep is still growing: the level it reached by the last points, not the median over the
    # whole stretch, is what every step still to come costs. The median of the raw points there
    # (the smoother lags a step-up by a few points, and a median of a sustained stretch is
    # already robust to one slow step)
    now_ratio = float(np.nanmedian(value[max(episode.start, episode.end + 1 - sustain) : episode.end + 1])) / base
    first_step, last_step = episode.steps(feat)
    evidence: dict[str, Any] = {
        f"{metric}_baseline": base,
        f"{metric}_now": float(feat.smooth[-1]),
        "ratio_while_high": held,
        "ratio_now": float(ratio[-1]),
        "trend_p_value": trend.p_increasing,
    }
    length_ratio = float("nan")
    length = ctx.features("completion_len_mean")
    if length is not None and len(length) and np.isfinite(length.b_median) and length.b_median > 0:
        o = at_step(length, first_step)
        length_ratio = level_at_index(length, o, at_step(length, last_step) + 1) / length.b_median
        evidence["completion_len_ratio"] = length_ratio
    if metric == "step_time_s":
        gen = ctx.features("generation_time_s")
        if gen is not None and len(gen) and np.isfinite(gen.b_median) and gen.b_median > 0:
            o = at_step(gen, first_step)
            gen_now = level_at_index(gen, o, at_step(gen, last_step) + 1)
            evidence["generation_time_ratio"] = gen_now / gen.b_median
            step_now = held * base
            evidence["generation_share_of_growth"] = float(np.clip((gen_now - gen.b_median) / max(step_now - base, 1e-9), 0, 1))
    severity: Severity = "info"
    if np.isfinite(length_ratio) and length_ratio >= 1.0 + 0.5 * (held - 1.0):
        why = f"Completions got {length_ratio:.1f}x longer over the same stretch, which explains most of it (see REWARD_HACK_LENGTH or TRUNCATION_STARVE if the length is not earning reward)."
    elif np.isfinite(length_ratio):
        why = f"Completion length only changed {length_ratio:.2f}x, so it is not the length: look at the inference engine, memory, data loading or per-step overheads."
        # the system, not the policy, is slowing down: at ratio_warn the run pays that much more
        # for every step still to come, and a leak that grows this fast tends to end in an OOM
        if max(held, now_ratio) >= p["ratio_warn"]:
            severity = "warn"
    else:
        why = "The run did not log completion length, so whether length explains it is unknown."
    return make_finding(
        ctx, "THROUGHPUT_ROT", Episode(episode.start, episode.end, severity, episode.onset), feat,
        confidence(held / p["ratio_info"] - 1.0, 0.5, episode.end - episode.start + 1, sustain),
        f"Each step takes {held:.1f}x as long as early in the run"
        + (f", {now_ratio:.1f}x by step {feat.step_at(episode.end)}" if now_ratio >= 1.15 * held else "")
        + f" ({metric} {base:.3g}s -> {now_ratio * base:.3g}s). {why}",
        evidence,
        [
            "Compare generation_time_s with step_time_s: generation-bound slow-down follows completion length.",
            "If length did not grow, profile the inference engine (KV cache, memory) and per-step overheads (logging, checkpoints, data loading).",
            "If length grew without reward, cap or penalise length (see REWARD_HACK_LENGTH, TRUNCATION_STARVE).",
        ],
        sample_order="completion_len DESC NULLS LAST",
    )

