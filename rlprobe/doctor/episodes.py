"""Episodes: where a condition held in a series, since when, how bad, and the Finding that says so.

The building blocks every detector shares: how long a condition must hold (sustain_points),
where a run's early level is measured (baseline_end), the first sustained stretch of a
condition (find_episode), moving an onset back to where a drift began (hinge_onset,
back_to_departure), confidence from strength and duration, and a Finding for an episode with
links to the samples captured while it held.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from typing import Any, Callable

import numpy as np

from rlprobe.doctor.context import DetectorContext, MetricFeatures
from rlprobe.doctor.findings import Finding, Severity
from rlprobe.doctor.stats import cusum_changepoint, ffill, first_sustained, level_shifts, point_noise, squash

def sustain_points(n_points: int, frac: float = 0.03, floor: int = 5) -> int:
    """How many consecutive points a condition must hold: 3% of the run, at least `floor`."""
    return max(floor, int(round(frac * n_points)))


def baseline_end(n_points: int) -> int:
    """Index just past the SQL baseline window (first 5% skipped, next 15%, at least 8 points)."""
    skip = int(np.floor(0.05 * n_points))
    return min(n_points, skip + max(8, int(np.floor(0.15 * n_points))))


@dataclass(frozen=True)
class Episode:
    """Where a condition held: indexes into a MetricFeatures, plus its severity."""

    start: int
    end: int
    severity: Severity
    onset: int  # refined start (where the shift began), <= start

    def steps(self, feat: MetricFeatures) -> tuple[int, int]:
        """(first_step, last_step) of the episode, onset included."""
        return feat.step_at(self.onset), int(feat.step_hi[self.end])


def find_episode(
    feat: MetricFeatures,
    warn: np.ndarray,
    critical: np.ndarray,
    sustain: int,
    refine_with: np.ndarray | None = None,
    not_before: int = 0,
) -> Episode | None:
    """The first sustained run of `warn`, upgraded to critical if `critical` is sustained too.

    The onset is refined backwards with a CUSUM changepoint over the series that drives the
    condition, because a threshold is crossed well after a drift begins.
    """
    warn = np.asarray(warn, dtype=bool).copy()
    critical = np.asarray(critical, dtype=bool).copy()
    warn[:not_before] = False
    critical[:not_before] = False
    hit = first_sustained(warn | critical, sustain)
    if hit is None:
        return None
    start, end = hit
    crit_hit = first_sustained(critical[start:], sustain)
    severity: Severity = "critical" if crit_hit is not None else "warn"
    onset = start
    if refine_with is not None:
        lo = max(not_before, start - 4 * sustain)
        k = cusum_changepoint(np.asarray(refine_with[lo : start + sustain], dtype=float))
        if k is not None:
            onset = min(start, lo + k)
    return Episode(start, end, severity, onset)


def raw_onset(episode: Episode, raw: np.ndarray, floor: int = 0) -> Episode:
    """The episode with its onset at the first logged point of the unbroken run of points whose
    raw values already meet the condition and lead into it (never before `floor`, never later
    than it was). One point that does not meet it between two that do does not end the run.

    A condition tested on a smoothed series (a trailing median) crosses a few points after the
    values did; smoothing may confirm a change, never delay its date. `raw` is the condition on
    the unsmoothed values, point by point (NaN points, where the metric was not logged, are
    passed over: a sparse log's empty bins do not break the run).
    """
    raw = np.asarray(raw, dtype=bool)
    k = min(episode.onset, episode.start)
    j = k
    while j > floor:
        if raw[j - 1]:
            j -= 1
            k = j
        elif j - 2 >= floor and raw[j - 2]:
            j -= 2  # one noisy point in between does not end the run of values that met it
            k = j
        else:
            break
    return Episode(episode.start, episode.end, episode.severity, min(episode.onset, k))


def confidence(strength: float, at_half: float, duration: int, sustain: int, floor: float = 0.35) -> float:
    """Confidence from how far past the threshold (strength) and for how long (duration)."""
    depth = squash(strength, at_half)
    length = min(1.0, duration / (3.0 * sustain))
    return round(min(0.99, floor + (1.0 - floor) * (0.6 * depth + 0.4 * length)), 3)


def make_finding(
    ctx: DetectorContext,
    signature_id: str,
    episode: Episode,
    feat: MetricFeatures,
    conf: float,
    explanation: str,
    evidence: dict[str, Any],
    actions: list[str],
    sample_order: str = "abs(advantage) DESC NULLS LAST",
    holds: Callable[[np.ndarray], np.ndarray] | None = None,
) -> Finding:
    """A Finding for an episode, with links to the samples captured while it held.

    On a run binned coarser than its steps, the first step is moved inside the bin before the
    episode when that bin's last logged steps already sit at the episode's level (onset_in_bin),
    and the explanation's "step N" follows it. `holds`, when the detector has one, says which
    logged values meet its condition (see onset_in_bin)."""
    first_step, last_step = episode.steps(feat)
    inside = onset_in_bin(ctx, feat, episode.onset, holds=holds)
    if inside is not None and inside < first_step:
        explanation = re.sub(rf"\b(steps?) {first_step}\b", rf"\g<1> {inside}", explanation)
        first_step = inside
    try:
        links = ctx.sample_ids(first_step, last_step, order_by=sample_order)
    except Exception:  # samples captured without the column the order needs (in-memory views)
        links = ctx.sample_ids(first_step, last_step, order_by="step DESC")
    return Finding(
        signature_id=signature_id,
        severity=episode.severity,
        confidence=conf,
        first_step=first_step,
        last_step=last_step,
        explanation=explanation,
        evidence={k: _round(v) for k, v in evidence.items()},
        suggested_actions=actions,
        links_to_samples=links,
    )


def onset_in_bin(ctx: DetectorContext, feat: MetricFeatures, index: int, span: int = 5,
                 holds: Callable[[np.ndarray], np.ndarray] | None = None) -> int | None:
    """The first step of a change that began inside the bin before `index`, from the steps as
    logged, or None.

    A run longer than the doctor's bins (at most 1,000 a run) is read bin by bin, and a bin the
    change happened in holds steps from both sides: its mean sits between the two levels, and
    the episode starts a bin late. Each logged step of that bin is given to the level it is
    nearer, the level before (the steps of up to `span` bins before it) or the episode's (its
    first `span` bins); the unbroken run of steps at the episode's level that ends the bin is
    where the change began (a reward function that returned 0 from step 3220 of a bin of steps
    3215 and 3220). A detector whose condition is a threshold passes it as `holds`: a step of the
    bin then belongs to the episode when its value meets the condition, which is the post-hoc
    onset's rule (the first logged point where the condition holds). Nearness to the two levels
    would hand the first step of a ramp to the level before: entropy 0.38 -> 1.37 -> 2.4 -> ... -> 6.9
    has 1.37 nearer 0.38, though it is 3.6x the level before and the blow-up's first step."""
    if index <= 0 or index >= len(feat) or int(feat.step_hi[index - 1]) <= int(feat.step[index - 1]):
        return None  # one step a bin: nothing inside it to read
    name = feat.metric if feat.metric in ctx.raw else f"reward_component.{feat.metric}"
    if name not in ctx.raw or "step" not in ctx.raw:
        return None
    steps, values = ctx.raw["step"], ctx.raw[name]
    lo, hi = int(feat.step[index - 1]), int(feat.step_hi[index - 1])
    n = len(feat)
    before = values[(steps >= int(feat.step[max(0, index - 1 - span)])) & (steps < lo)]
    during = values[(steps >= int(feat.step[index])) & (steps <= int(feat.step_hi[min(n - 1, index + span - 1)]))]
    before, during = before[np.isfinite(before)], during[np.isfinite(during)]
    if len(before) < 2 or len(during) < 2:
        return None
    was, now = float(np.median(before)), float(np.median(during))
    if was == now:
        return None
    bin_rows = (steps >= lo) & (steps <= hi) & np.isfinite(values)
    in_steps, in_values = steps[bin_rows], values[bin_rows]
    near = (np.asarray(holds(in_values), dtype=bool) if holds is not None
            else np.abs(in_values - now) < np.abs(in_values - was))
    k = len(near)
    while k > 0 and near[k - 1]:
        k -= 1
    return int(in_steps[k]) if k < len(near) else None


def _round(value: Any) -> Any:
    if isinstance(value, (float, np.floating)):
        v = float(value)
        return v if not np.isfinite(v) else float(f"{v:.4g}")
    if isinstance(value, np.integer):
        return int(value)
    return value


def hinge_onset(episode: Episode, series: np.ndarray, not_before: int, sustain: int) -> Episode:
    """Move an episode's onset back to where a ramp leading into it began.

    A threshold is crossed well after a slow ramp begins, and a CUSUM over a short window
    finds the middle of the ramp. Here a flat-then-linear ("hockey stick") line is fitted by
    least squares over everything from `not_before` to just past the episode start, and the
    knot is the onset: a slow healthy drift before the ramp is absorbed by the flat part.
    """
    lo, hi = max(0, not_before), min(len(series), episode.start + sustain + 1)
    y = ffill(np.asarray(series[lo:hi], dtype=float))
    ok = np.isfinite(y)
    if ok.sum() < 8:
        return episode
    x = np.arange(len(y), dtype=float)[ok]
    y = y[ok]
    knots = x[2:-3]
    if len(knots) > 200:  # candidate knots: at most 200, evenly spread
        knots = knots[np.linspace(0, len(knots) - 1, 200).astype(int)]
    if len(knots) == 0:
        return episode
    # least squares of y = a + b * max(x - k, 0) for every knot k at once
    h = np.maximum(x[None, :] - knots[:, None], 0.0)
    hc = h - h.mean(axis=1, keepdims=True)
    yc = y - y.mean()
    var_h = (hc * hc).sum(axis=1)
    cov = hc @ yc
    with np.errstate(invalid="ignore", divide="ignore"):
        sse = float(yc @ yc) - np.where(var_h > 0, cov * cov / var_h, 0.0)
    knot = int(knots[int(np.argmin(sse))])
    return Episode(episode.start, episode.end, episode.severity, min(lo + knot, episode.onset))


def back_to_departure(episode: Episode, above: np.ndarray, floor: int) -> Episode:
    """Move an episode's onset back over the points just before it that were already departing.

    A threshold is crossed well after a drift begins; walking back while the series is still
    above a lower 'departure' level (e.g. 1.5x its baseline) finds where the rise started.
    """
    i = episode.start
    while i > floor and above[i - 1]:
        i -= 1
    return Episode(episode.start, episode.end, episode.severity, min(episode.onset, i))


def held_stretch(cond: np.ndarray, sustain: int, share: float = 0.8, not_before: int = 0) -> tuple[int, int] | None:
    """The first stretch where a condition holds, judged point by point with no smoothing delay.

    It starts at the first point (from not_before on) where cond holds and keeps holding on at
    least `share` of the points of the next `sustain` (itself included): one noisy point inside
    does not break it, and its start is exactly where the condition first held. It ends at the
    last point where cond holds before `sustain` points in a row where it does not (or at the
    last point). (start, end) indexes, end inclusive; None when no such stretch exists.
    """
    c = np.asarray(cond, dtype=bool)
    n = len(c)
    need = max(1, int(np.ceil(share * sustain)))
    csum = np.concatenate([[0], np.cumsum(c)])
    start = None
    for i in range(max(0, not_before), n):
        if not c[i]:
            continue
        hi = min(n, i + sustain)
        if hi - i < sustain:
            break  # not enough points left to confirm anything
        if csum[hi] - csum[i] >= need:
            start = i
            break
    if start is None:
        return None
    end = start
    gap = 0
    for j in range(start + 1, n):
        if c[j]:
            end, gap = j, 0
        else:
            gap += 1
            if gap >= sustain:
                break
    return start, end


def still_holds(cond: np.ndarray, end: int, sustain: int) -> bool:
    """True when the stretch ending at `end` reaches the last logged points (it has not ended)."""
    return end >= len(cond) - max(1, sustain)


@dataclass(frozen=True)
class LogJump:
    """A jump of a positive series to several times its level, held from `start` to `end`."""

    start: int
    end: int
    before: float  # the level before the jump
    after: float  # the level after it
    rise: float  # ln(after / before)
    ongoing: bool  # still above the half-way line at the last logged points


def log_level_jumps(value: np.ndarray, ratio_min: float, z_min: float, sustain: int, min_points: int = 8) -> list[LogJump]:
    """The jumps of a positive series to ratio_min times its level or more, read point by point
    from its log levels (so a jump early in the run is judged against what came just before it).

    A jump is a level shift of ln(value) by at least ln(ratio_min), z_min standard errors of the
    series' own point noise (at least 2% a point); its stretch starts at the first logged point
    from the shift on that sits half-way (in log) to the new level and keeps doing so
    (held_stretch), and ends when the series stays below that line. A jump that ramps up over a
    few dozen steps is cut by the segmentation into stages, each below the ratio: rising stages
    with at most a ramp's length between them (5% of the run, at least `sustain` points) are one
    jump, counted from the level before the first and reaching the level after the last, as a
    reader sees one climb; it is dated by the stage where it first reaches ratio_min. Stages
    further apart are separate rises (a slow drift upward over the run is not a jump).
    """
    value = np.asarray(value, dtype=float)
    ok = np.isfinite(value) & (value > 0)
    if ok.sum() < min_points:
        return []
    y = np.where(ok, np.log(np.where(ok, value, 1.0)), np.nan)
    noise = max(point_noise(y), math.log(1.02))
    n = len(value)
    ramp = max(sustain, int(math.ceil(0.05 * n)))
    shifts = level_shifts(y, noise, min_size=3, lookback=max(8, n // 3))
    out = []
    for j, shift in enumerate(shifts):
        if shift.z < z_min:
            continue
        first = j
        while first > 0 and shifts[first - 1].after > shifts[first - 1].before and shifts[first].at - shifts[first - 1].at <= ramp:
            first -= 1
        before = shifts[first].before
        rise = shift.after - before
        if rise < math.log(ratio_min):
            continue
        cond = ok & (y >= before + 0.5 * rise)
        hit = held_stretch(cond, sustain, not_before=max(0, shifts[first].at - 2))
        if hit is None:
            continue
        start, end = hit
        if out and start <= out[-1].end:
            continue  # a later stage of a climb already reported
        last = j  # the climb goes on through the rising stages that follow it closely
        while last + 1 < len(shifts) and shifts[last + 1].after > shifts[last + 1].before and shifts[last + 1].at - shifts[last].at <= ramp:
            last += 1
        top = max(shift.after, shifts[last].after)
        out.append(LogJump(start, end, math.exp(before), math.exp(top), top - before, still_holds(cond, end, sustain)))
    return out


@dataclass(frozen=True)
class LevelFall:
    """A fall of a positive series to a fraction of the level it held just before, still held."""

    start: int  # first logged point of the fall's stretch (at least half-way down, in log)
    end: int
    before: float  # the level before the fall
    after: float  # the level it fell to (the lowest of a fall in stages)


def level_falls(value: np.ndarray, ratio_max: float, z_min: float, sustain: int, warmup: float = 0.05,
                opening: int | None = None) -> list[LevelFall]:
    """Falls of a positive series to ratio_max of the level just before them or lower, that
    still hold at the last logged points.

    The reading of log_level_jumps on the reciprocal (a fall by a factor k is a rise of 1/value
    by k): levels cut by binary segmentation under the series' own point noise, z_min standard
    errors, a fall in stages close together counted as one. For when a run's early window cannot
    be the yardstick because the fall happened inside it. The level before must have been held
    for `sustain` points, and after the run's first `warmup` share (a series may start high and
    settle during warm-up; a detector whose series cannot settle that far passes 0, and then
    `opening` points, when given, are enough before a fall that starts at the run's opening:
    the first logged points are the model as it came in, a level by construction), and a fall
    the run came back from is left out: these are states the run is in.
    The level before is that of the segment just before the fall, the median of all points
    before it, or the lowest level held for `sustain` points in a row after the first 5%,
    whichever is lowest: falling back from a spike or a blow-up to below the level the run held
    before it is a fall from that level, not from the spike's top.
    """
    value = np.asarray(value, dtype=float)
    n = len(value)
    ok = np.isfinite(value) & (value > 0)
    if ok.sum() < 8:
        return []
    inverse = np.where(ok, 1.0 / np.where(ok, value, 1.0), np.nan)
    out = []
    for jump in log_level_jumps(inverse, 1.0 / ratio_max, z_min, sustain):
        if not jump.ongoing or jump.start < max(sustain if opening is None else min(sustain, opening), int(warmup * n)):
            continue
        # the level the run held before, not the top of a spike it fell back from: the segment
        # just before, the median of everything before the fall, or the lowest level held for
        # `sustain` points after the first 5%, whichever is lowest (entropy that blew up from
        # 0.66 to 7.4 for 13 of 20 points and came back to 0.52 fell back, not 93% down). The
        # fall's own way down (the points just before its stretch that already sit under the
        # segment's level) is not a level the run held.
        lo, top = int(0.05 * n), 1.0 / jump.before
        approach = jump.start
        while approach > lo and not (np.isfinite(value[approach - 1]) and value[approach - 1] >= 0.8 * top):
            approach -= 1
        held = value[lo:approach]
        held = held[np.isfinite(held)]
        lowest_held = (float(np.min([np.median(held[i : i + sustain]) for i in range(len(held) - sustain + 1)]))
                       if len(held) >= sustain else np.inf)
        before = min(1.0 / jump.before, float(np.median(value[:jump.start][ok[:jump.start]])), lowest_held)
        after = 1.0 / jump.after
        if after <= ratio_max * before:
            out.append(LevelFall(jump.start, jump.end, before, after))
    return out
