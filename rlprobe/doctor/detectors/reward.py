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
import warnings
import weakref
from dataclasses import dataclass
from typing import Any

import numpy as np

from rlprobe.doctor.context import DetectorContext, MetricFeatures
from rlprobe.doctor.detectors._common import Episode, baseline_end, confidence, find_episode, make_finding, sustain_points
from rlprobe.doctor.findings import Finding
from rlprobe.doctor.registry import detector
from rlprobe.doctor.stats import theil_sen

# ---------------------------------------------------------------------------------------------
# shared helpers: one bin grid for the step metrics and the reward components
# ---------------------------------------------------------------------------------------------
CORRECT_PATTERN = r"correct|accura|verif|answer|match|exact|solve|pass|math|gold|equal|unit_?test"
FORMAT_PATTERN = r"format|tag|xml|strict|soft|struct|syntax|template|schema|json|regex"


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


# Per-run memo of what several reward detectors need (the grid, the binned components), so each
# is computed once per run; keyed weakly on the context, which the engine makes per run.
_MEMO: "weakref.WeakKeyDictionary[DetectorContext, dict[str, Any]]" = weakref.WeakKeyDictionary()


def _memo(ctx: DetectorContext) -> dict[str, Any]:
    return _MEMO.setdefault(ctx, {})


@dataclass
class Grid:
    """The SQL features' bins for one run (<= 1000 consecutive-step bins), indexable by position."""

    step0: int
    width: int
    step: np.ndarray  # first step of each bin
    step_hi: np.ndarray  # last step of each bin

    def __len__(self) -> int:
        return len(self.step)

    @classmethod
    def of(cls, ctx: DetectorContext) -> "Grid":
        """The run's bins, exactly as doctor_binned cuts them (from the run's step extent)."""
        memo = _memo(ctx)
        if "grid" not in memo:
            row = ctx.query("SELECT min(step) AS lo, max(step) AS hi FROM v1.steps WHERE run_id = ?").to_pylist()[0]
            step0, last = int(row["lo"]), int(row["hi"])
            width = max(1, math.ceil((last - step0 + 1) / 1000.0))
            lo = step0 + width * np.arange((last - step0) // width + 1)
            memo["grid"] = cls(step0, width, lo.astype(np.int64), np.minimum(lo + width - 1, last).astype(np.int64))
        return memo["grid"]

    def index_of(self, step: np.ndarray) -> np.ndarray:
        return ((np.asarray(step, dtype=float) - self.step0) // self.width).astype(np.int64)

    def place(self, feat: MetricFeatures, column: str) -> np.ndarray:
        """A feature column spread onto the grid (NaN in bins the metric has no row for)."""
        out = np.full(len(self), np.nan)
        idx = self.index_of(feat.step)
        ok = (idx >= 0) & (idx < len(self))
        out[idx[ok]] = np.asarray(getattr(feat, column), dtype=float)[ok]
        return out

    def as_features(self, metric: str, value: np.ndarray, smooth: np.ndarray) -> MetricFeatures:
        """A MetricFeatures over the whole grid, so episodes map to steps like any feature's."""
        n = len(self)
        zeros = np.zeros(n)
        return MetricFeatures(
            metric=metric, step=self.step, step_hi=self.step_hi, value=value, vmin=value, vmax=value,
            n_nonfinite=zeros.astype(np.int64), smooth=smooth, b_median=float("nan"), scale=float("nan"),
            ratio=zeros, z=zeros, z_raw=zeros, cusum_up=zeros, cusum_down=zeros,
            sustained_up=zeros.astype(np.int64), sustained_down=zeros.astype(np.int64),
        )


def trailing_mean(x: np.ndarray, k: int) -> np.ndarray:
    """Mean of the finite values among the last k points at each point."""
    v = np.asarray(x, dtype=float)
    ok = np.isfinite(v)
    c = np.concatenate([[0.0], np.cumsum(np.where(ok, v, 0.0))])
    m = np.concatenate([[0], np.cumsum(ok)])
    i = np.arange(1, len(v) + 1)
    lo = np.maximum(i - k, 0)
    cnt = m[i] - m[lo]
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(cnt > 0, (c[i] - c[lo]) / np.maximum(cnt, 1), np.nan)


def trailing_median(x: np.ndarray, k: int = 5) -> np.ndarray:
    """Median of the last k finite values at each point (the SQL features' `smooth`)."""
    x = np.asarray(x, dtype=float)
    if len(x) == 0:
        return x
    pad = np.concatenate([np.full(k - 1, np.nan), x])
    windows = np.lib.stride_tricks.sliding_window_view(pad, k)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # all-NaN windows give NaN, as intended
        return np.nanmedian(windows, axis=1)


def baseline_window(value: np.ndarray) -> np.ndarray:
    """Grid indices of the baseline window: doctor_baseline's rule over the finite points."""
    idx = np.flatnonzero(np.isfinite(value))
    p = len(idx)
    skip = int(math.floor(0.05 * p))
    return idx[skip : skip + max(8, int(math.floor(0.15 * p)))]


def center_scale(values: np.ndarray, rel_floor: float = 0.05, abs_floor: float = 1e-9) -> tuple[float, float]:
    """Median and floored 1.4826*MAD, as doctor_features computes its scale."""
    v = np.asarray(values, dtype=float)
    v = v[np.isfinite(v)]
    if len(v) == 0:
        return float("nan"), float("nan")
    med = float(np.median(v))
    mad = 1.4826 * float(np.median(np.abs(v - med)))
    return med, max(mad, rel_floor * abs(med), abs_floor)


def ffill(x: np.ndarray) -> np.ndarray:
    """Carry the last finite value forward over NaN gaps (leading NaNs stay)."""
    x = np.asarray(x, dtype=float).copy()
    ok = np.isfinite(x)
    if not ok.any():
        return x
    idx = np.where(ok, np.arange(len(x)), 0)
    np.maximum.accumulate(idx, out=idx)
    out = x[idx]
    out[: int(np.argmax(ok))] = np.nan
    return out


def nanmedian(x: np.ndarray) -> float:
    v = np.asarray(x, dtype=float)
    v = v[np.isfinite(v)]
    return float(np.median(v)) if len(v) else float("nan")


@dataclass
class Track:
    """One series on the grid: raw bin means, smooth, and its own baseline."""

    name: str
    value: np.ndarray
    smooth: np.ndarray
    b_median: float
    scale: float


def metric_track(ctx: DetectorContext, grid: Grid, metric: str) -> Track | None:
    """A step metric's SQL features on the grid."""
    feat = ctx.features(metric)
    if feat is None or len(feat) == 0:
        return None
    return Track(metric, grid.place(feat, "value"), ffill(grid.place(feat, "smooth")), feat.b_median, feat.scale)


def component_tracks(ctx: DetectorContext, grid: Grid) -> list[Track]:
    """Every logged reward component on the grid, with a baseline computed like the SQL one.

    Component columns are named by the run (reward_component.<name>), so no fixed SQL view can
    list them; they are binned here with one query per run, on the same bins as doctor_binned
    (mean of the finite values per bin).
    """
    memo = _memo(ctx)
    if "components" in memo:
        return memo["components"]
    prefix = "reward_component."
    names = [c for c in ctx.query("SELECT * FROM v1.steps LIMIT 0", []).column_names if c.startswith(prefix)]
    out: list[Track] = []
    if names:
        cols = ", ".join(
            f'avg(CASE WHEN isfinite("{c}") THEN "{c}" END) AS "{c}"' for c in (n.replace('"', '""') for n in names)
        )
        table = ctx.query(
            f"SELECT CAST(floor((step - ?) / ?) AS BIGINT) AS bin, {cols} FROM v1.steps "
            "WHERE run_id = ? GROUP BY bin ORDER BY bin",
            [grid.step0, grid.width, ctx.run_id],
        )
        bins = table.column("bin").to_numpy(zero_copy_only=False)
        ok = (bins >= 0) & (bins < len(grid))
        for name in names:
            value = np.full(len(grid), np.nan)
            value[bins[ok]] = table.column(name).to_numpy(zero_copy_only=False).astype(float)[ok]
            if np.isfinite(value).sum() < 10:
                continue
            b, scale = center_scale(value[baseline_window(value)])
            spread = float(np.nanpercentile(value, 95) - np.nanpercentile(value, 5))
            out.append(Track(name[len(prefix):], value, ffill(trailing_median(value)), b, max(scale, 0.02 * spread, 1e-6)))
    memo["components"] = out
    return out


def noise_ratio(ctx: DetectorContext, grid: Grid, metric: str) -> np.ndarray | None:
    """v1.feat_reward_noise's jitter of a metric (trailing mean |change|, over its early level) on the grid."""
    table = ctx.query(
        "SELECT step, noise_ratio FROM v1.feat_reward_noise WHERE run_id = ? AND metric = ? ORDER BY step",
        [ctx.run_id, metric],
    )
    if table.num_rows == 0:
        return None
    step = table.column("step").to_numpy(zero_copy_only=False).astype(float)
    ratio = table.column("noise_ratio").to_numpy(zero_copy_only=False).astype(float)
    if not np.isfinite(ratio).any():
        return None
    out = np.full(len(grid), np.nan)
    idx = grid.index_of(step)
    ok = (idx >= 0) & (idx < len(grid))
    out[idx[ok]] = ratio[ok]
    return ffill(out)


def window(lo: int, hi: int, n: int) -> slice:
    return slice(max(0, lo), max(0, min(n, hi)))


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


def on_rows(grid: Grid, feat: MetricFeatures, values: np.ndarray) -> np.ndarray:
    """A grid array read at the rows of a metric's features."""
    idx = np.clip(grid.index_of(feat.step), 0, len(grid) - 1)
    return np.asarray(values, dtype=float)[idx]


def level_change(track: Track | None, grid_lo: int, grid_hi: int, pre: int) -> tuple[float, float, float] | None:
    """(level before, level during, change in baseline scales) of a track around [lo, hi]."""
    if track is None:
        return None
    n = len(track.value)
    before = nanmedian(track.value[window(grid_lo - pre, grid_lo, n)])
    during = nanmedian(track.value[window(grid_lo, grid_hi + 1, n)])
    if not (np.isfinite(before) and np.isfinite(during)):
        return None
    return before, during, (during - before) / track.scale


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


@detector(
    "REWARD_STD_DEATH",
    "Reward variance dies",
    needs_all=("reward_std",),
    ratio_warn=0.15,
    ratio_critical=0.08,
    jitter_max=0.3,
    entropy_drop=0.75,
    distinct_max=0.8,
    sustain_frac=0.03,
)
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
    """
    feat = ctx.features("reward_std")
    if feat is None or len(feat) < 10 or not np.isfinite(feat.b_median) or feat.b_median <= 0:
        return None
    grid = Grid.of(ctx)
    sustain = sustain_points(len(feat), p["sustain_frac"])
    ratio = np.where(np.isfinite(feat.ratio), feat.ratio, 1.0)
    dead = (ratio < p["ratio_warn"]) & (feat.z < -2)  # z: a noisy baseline cannot fake a death
    jitter = noise_ratio(ctx, grid, "reward_mean")
    if jitter is not None:
        rows = on_rows(grid, feat, jitter)
        dead &= ~(rows >= p["jitter_max"])
    episode = find_episode(
        feat, warn=dead, critical=dead & (ratio < p["ratio_critical"]), sustain=sustain,
        refine_with=feat.smooth, not_before=baseline_end(len(feat)) // 2,
    )
    if episode is None:
        return None
    g_on = int(grid.index_of(feat.step[episode.onset : episode.onset + 1])[0])
    g_start = int(grid.index_of(feat.step[episode.start : episode.start + 1])[0])
    g_end = int(grid.index_of(feat.step[episode.end : episode.end + 1])[0])
    pre = max(3, 2 * sustain)
    way, moves = direction(ctx, grid, g_on, g_end, pre)
    variant = {"up": "saturated", "down": "collapsed"}.get(way, "pinned")
    lowest = float(np.min(ratio[episode.start : episode.end + 1]))
    evidence: dict[str, Any] = {
        "variant": variant,
        "lowest_ratio_to_baseline": lowest,
        "reward_std_baseline": feat.b_median,
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
        if ent["peak_ratio_to_baseline"] > 2.0:
            severity, note = "info", " It follows an entropy blow-up (see ENTROPY_BLOWUP), which is the likelier root cause."
    # a collapse onto one behaviour: entropy fell with the variance, or the captured samples
    # started repeating each other (distinct completions per step, v1.feat_reward_samples)
    stats = sample_stats(ctx, grid)
    distinct = sample_median(stats, "distinct_share", 0, g_on - 1), sample_median(stats, "distinct_share", g_start, g_end)
    if distinct[0] is not None and distinct[1] is not None:
        evidence["distinct_completions_before"], evidence["distinct_completions_during"] = distinct
    repeating = distinct[0] is not None and distinct[1] is not None and distinct[1] <= p["distinct_max"] < distinct[0]
    narrowed = ent is not None and ent["ratio_to_before"] < p["entropy_drop"]
    if variant != "collapsed" and severity != "info" and not (repeating or narrowed):
        severity = "info"
        note = " Neither entropy nor the samples show the policy collapsing: the run may simply have finished learning what this data can teach."
    wording = {
        "saturated": "saturated at the ceiling (every rollout earns the top reward)",
        "collapsed": "collapsed (every rollout earns the same low reward)",
        "pinned": "pinned (every rollout earns the same reward)",
    }[variant]
    strength = p["ratio_warn"] / max(lowest, 1e-3) - 1.0
    return make_finding(
        ctx, "REWARD_STD_DEATH", Episode(episode.start, episode.end, severity, episode.onset), feat,
        confidence(strength, 2.0, episode.end - episode.start + 1, sustain),
        f"Reward variance died: reward_std fell to {lowest:.0%} of its early level and the reward is {wording}; "
        f"advantages are ~0 and the policy gets no learning signal.{note}",
        evidence,
        [
            "Saturated: stop, or move to harder prompts (filter out prompts every rollout solves).",
            "Collapsed: roll back to before the onset and lower the learning rate; check the reward function on the linked samples.",
            "Raise the sampling temperature or add an entropy bonus so rollouts of a prompt differ again.",
            "Filter zero-variance groups (DAPO's dynamic sampling) so batches keep a learning signal.",
        ],
        sample_order="step DESC",
    )


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


@detector(
    "DEGENERATE_GROUPS",
    "Zero-variance GRPO groups dominate",
    needs_all=("zero_variance_group_frac",),
    level_warn=0.75,
    level_critical=0.85,
    baseline_max=0.5,
    closure_min=0.82,
    closure_floor=0.7,
    rise_z=3.0,
    jitter_min=0.6,
    jitter_strong=1.0,
    within_share_max=0.25,
    entropy_collapsed=0.2,
    sustain_frac=0.03,
)
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
    if feat is None or len(feat) < 10 or not np.isfinite(feat.b_median):
        return None
    if feat.b_median > p["baseline_max"]:
        return None  # most groups were degenerate from the start: an easy task's normal state
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
    mask = high & polar if confirmable else high & (closure >= p["closure_min"])
    episode = find_episode(
        feat, warn=mask, critical=mask & (level >= p["level_critical"]), sustain=sustain,
        refine_with=feat.smooth, not_before=baseline_end(len(feat)) // 2,
    )
    if episode is None:
        return None
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
        if not held_jitter >= (p["jitter_min"] if held_closure >= p["closure_min"] else p["jitter_strong"]):
            return None
    if share is not None:
        evidence["within_group_share_ratio"] = nanmedian(share[window(g_start, g_end + 1, len(grid))])
    severity = episode.severity if confirmable else "info"
    note = "" if confirmable else " (The run logs nothing that tells polarised groups from a saturated batch.)"
    ent = entropy_state(ctx, grid, g_on, g_start, g_end, pre)
    if ent is not None:
        evidence["entropy_ratio_to_baseline"] = ent["ratio_to_baseline"]
        if ent["ratio_to_baseline"] < p["entropy_collapsed"]:
            severity, note = "info", " Entropy has collapsed too: ENTROPY_COLLAPSE is the likelier root cause."
        elif ent["peak_ratio_to_baseline"] > 2.5:
            severity, note = "info", " Entropy blew up first: the groups fail together because the text degenerated (see ENTROPY_BLOWUP)."
    strength = (peak - p["level_warn"]) / max(1.0 - p["level_warn"], 1e-6)
    return make_finding(
        ctx, "DEGENERATE_GROUPS", Episode(episode.start, episode.end, severity, episode.onset), feat,
        confidence(strength, 0.4, episode.end - episode.start + 1, sustain),
        f"{peak:.0%} of GRPO groups have zero reward variance (early level {feat.b_median:.0%}), mostly {kind}: "
        f"those groups give no gradient and the effective batch has shrunk to the few mixed groups.{note}",
        evidence,
        [
            "All-correct: the prompts have become too easy; filter solved prompts or move to harder data (curriculum).",
            "All-wrong: the prompts are too hard or the reward never fires; check the reward on the linked samples, add easier prompts.",
            "Use DAPO-style dynamic sampling: drop zero-variance groups and resample until the batch is full.",
            "Raise the group size or the sampling temperature so groups are more likely to hold mixed outcomes.",
        ],
        sample_order="step DESC",
    )


def diff_noise(x: np.ndarray) -> float:
    """Point-to-point noise of a series (1.4826 MAD of first differences / sqrt 2): robust to trends and shifts."""
    v = np.asarray(x, dtype=float)
    v = v[np.isfinite(v)]
    if len(v) < 4:
        return float("nan")
    d = np.diff(v)
    return 1.4826 * float(np.median(np.abs(d - np.median(d)))) / math.sqrt(2.0)


def sharp_window(grid: Grid) -> int:
    """Points within which a 'sharp' change must happen: 3% of the run, at most ~25 steps, at least 3."""
    return max(3, min(math.ceil(25 / grid.width), math.ceil(0.03 * len(grid))))


def rise_of(ctx: DetectorContext, grid: Grid, metric: str, onset: int, lo: int, hi: int, pre: int) -> float | None:
    """How much a metric rose from the `pre` points before onset to its level over [lo, hi]."""
    track = metric_track(ctx, grid, metric)
    if track is None:
        return None
    before = nanmedian(track.value[window(onset - pre, onset, len(grid))])
    during = nanmedian(track.value[window(lo, hi + 1, len(grid))])
    return during - before if np.isfinite(before) and np.isfinite(during) else None


def _judge_collapse(
    ctx: DetectorContext, grid: Grid, feat: MetricFeatures, value: np.ndarray, episode: Episode,
    opening: float, noise: float, w: int, sustain: int, p: dict[str, Any],
) -> tuple[float, dict[str, Any]] | None:
    """Is a candidate fall a collapse? (share of the gain erased, evidence), or None.

    Plain segment medians: the level just before the onset, the opening level, the level while
    it held, the final level; each difference against its own sampling noise.
    """
    n = len(value)
    m = max(w, sustain)
    n_open, n_held = max(3, int(0.05 * n)), episode.end - episode.start + 1
    top = nanmedian(value[max(0, episode.onset - m) : episode.onset])
    after = nanmedian(value[episode.start : episode.end + 1])
    final = nanmedian(value[max(episode.start, n - m) :])
    gain, drop = top - opening, top - after

    def se(a: int, b: int) -> float:  # sd of a difference of two medians of a and b points
        return 1.25 * noise * math.sqrt(1.0 / a + 1.0 / b)

    erased_share = drop / gain if gain > 0 else 0.0
    # an improvement worth the name, against the per-rollout spread of the reward
    spread = rollout_spread(ctx, grid, int(grid.index_of(feat.step[episode.onset : episode.onset + 1])[0]))
    if not (
        gain >= p["min_gain_noise"] * se(m, n_open)
        and drop >= p["min_drop_noise"] * se(m, n_held)
        and erased_share >= p["erased_warn"]
        and (spread is None or gain >= p["min_gain_spread"] * spread)
    ):
        return None
    if final - after > 0.5 * drop:
        return None  # it came back: a dip, not a collapse
    # Slow wander of the level (learning, drifting data) is not white noise: the fall must also
    # dwarf how much the m-point level typically moved over m points before the onset, beyond
    # what the white noise alone moves it (covered above).
    lvl = trailing_median(value, m)[m : episode.onset]
    wiggle = float("nan")
    if len(lvl) > m + 5:
        moves = lvl[m:] - lvl[:-m]
        spread_moves = 1.4826 * float(np.nanmedian(np.abs(moves - np.nanmedian(moves))))
        wiggle = math.sqrt(max(spread_moves**2 - se(m, m) ** 2, 0.0))
        if wiggle > 0 and drop < p["min_drop_wiggle"] * wiggle:
            return None
    # a cliff, not a slope: the largest fall between two adjacent w-point windows near the onset
    best_split = 0.0
    for k in range(max(w, episode.onset - w), min(n - 1, episode.start + w) + 1):
        best_split = max(best_split, nanmedian(value[k - w : k]) - nanmedian(value[k : k + w]))
    if not (best_split >= p["sharp_share"] * drop and best_split >= 3.0 * se(w, w)):
        return None
    return float(erased_share), {
        "reward_opening": opening,
        "reward_peak_before": top,
        "reward_after": after,
        "reward_final": final,
        "share_of_gain_erased": float(erased_share),
        "fall_in_sharpest_window": best_split,
        "sharp_window_steps": int(w * grid.width),
        "fall_over_usual_level_moves": drop / wiggle if np.isfinite(wiggle) and wiggle > 0 else float("nan"),
    }


@detector(
    "REWARD_COLLAPSE",
    "Reward collapses after improving",
    needs_all=("reward_mean",),
    erased_warn=0.5,
    erased_critical=0.75,
    min_gain_noise=3.0,
    min_drop_noise=5.0,
    min_gain_spread=0.3,
    min_drop_wiggle=4.0,
    sharp_share=0.6,
    sustain_frac=0.03,
)
def reward_collapse(ctx: DetectorContext, p: dict[str, Any]) -> Finding | None:
    """Reward falls sharply and stays down after having improved: the policy broke.

    A policy that has learned something can lose it within a few updates: one oversized step
    (a loss or gradient spike, a learning rate too high for the current curvature, a stale or
    corrupted batch) moves it to a region where it writes worse answers, and on-policy RL then
    trains on those worse rollouts, so it rarely finds its way back. The reward curve shows a
    cliff, not a slope: most of the gain is erased within a few steps and it stays down.

    The detector needs a real improvement first (the level before the fall well above the
    run's opening level, against noise and against the per-rollout reward spread), then a fall
    that erases at least half of that gain, dwarfs the level's usual wander, happens within a
    short window (3% of the run, at most ~25 steps) and does not come back. When entropy blew
    up or collapsed, completions started hitting the length cap, generations started looping,
    every rollout now earns the same reward, or the groups polarised as entropy fell, those are
    the likelier causes (ENTROPY_BLOWUP, ENTROPY_COLLAPSE, TRUNCATION_STARVE,
    REPETITION_SPIRAL, REWARD_STD_DEATH, DEGENERATE_GROUPS) and this is reported as info.
    """
    feat = ctx.features("reward_mean")
    if feat is None or len(feat) < 20:
        return None
    grid = Grid.of(ctx)
    n = len(feat)
    value = ffill(np.where(np.isfinite(feat.value), feat.value, np.nan))
    w = sharp_window(grid)
    level = trailing_median(value, max(5, w))
    # noise from the first 30% of the run: a dead stretch later (all rewards equal) has no jitter
    noise = diff_noise(value[: max(10, int(0.3 * n))])
    if not np.isfinite(noise) or noise <= 0:
        noise = max(abs(feat.b_median) * 0.01, 1e-9)
    level_noise = 1.25 * noise / math.sqrt(max(5, w))  # sd of a median of that many points
    opening = nanmedian(value[: max(3, int(0.05 * n))])
    peak = np.fmax.accumulate(np.where(np.isfinite(level), level, -np.inf))
    gain = peak - opening
    fall = peak - level
    with np.errstate(invalid="ignore", divide="ignore"):
        erased = np.where(gain > 0, fall / gain, 0.0)
    base = (gain >= p["min_gain_noise"] * level_noise) & (fall >= p["min_drop_noise"] * level_noise)
    std = ctx.features("reward_std")
    sustain = sustain_points(n, p["sustain_frac"])
    # Candidates come from the running best, which noise biases up; each is then judged on plain
    # segment medians. A rejected candidate (a dip, a noise excursion) does not hide a later one.
    not_before = max(3, int(0.05 * n))
    for _ in range(8):
        episode = find_episode(
            feat, warn=base & (erased >= p["erased_warn"]), critical=base & (erased >= p["erased_critical"]),
            sustain=sustain, refine_with=value, not_before=not_before,
        )
        if episode is None:
            return None
        verdict = _judge_collapse(ctx, grid, feat, value, episode, opening, noise, w, sustain, p)
        if verdict is not None:
            break
        not_before = episode.end + 1
    else:
        return None
    held_erased, evidence = verdict
    severity = "critical" if held_erased >= p["erased_critical"] else "warn"
    notes = []
    g_on, g_start, g_end = (int(grid.index_of(feat.step[k : k + 1])[0]) for k in (episode.onset, episode.start, episode.end))
    pre = max(3, 2 * sustain)
    ent = entropy_state(ctx, grid, g_on, g_on, min(g_end, g_start + 2 * w), pre)
    if ent is not None:
        evidence["entropy_peak_ratio_to_baseline"] = ent["peak_ratio_to_baseline"]
        if ent["peak_ratio_to_baseline"] > 2.5:
            severity = "info"
            notes.append("entropy blew up at the same time (see ENTROPY_BLOWUP)")
        elif ent["ratio_to_baseline"] < 0.2:
            severity = "info"
            notes.append("entropy collapsed at the same time (see ENTROPY_COLLAPSE)")
    # A policy broken by a bad update gets more random; one that polarises per prompt (every
    # group all-right or all-wrong) gets more confident, and its reward falls when the groups it
    # now always fails outnumber the ones it always solves: almost every group degenerate, or
    # many more of them while entropy fell.
    zvf = metric_track(ctx, grid, "zero_variance_group_frac")
    zvf_rise = rise_of(ctx, grid, "zero_variance_group_frac", g_on, g_start, g_end, pre)
    if zvf is not None and zvf_rise is not None:
        zvf_level = nanmedian(zvf.value[window(g_start, g_end + 1, len(grid))])
        evidence["zero_variance_group_frac_during"] = zvf_level
        fell = ent is not None and ent["ratio_to_before"] < 0.9
        if zvf_rise > 0.3 and (zvf_level >= 0.85 or fell) and severity != "info":
            severity = "info"
            notes.append("GRPO groups polarised into all-right or all-wrong (see DEGENERATE_GROUPS)")
    for metric in ("max_len_hit_frac", "truncation_rate"):
        rise = rise_of(ctx, grid, metric, g_on, g_start, g_end, pre)
        if rise is not None:
            evidence[f"{metric}_rise"] = rise
            if rise > 0.15:
                severity = "info"
                notes.append("completions started hitting the length cap (see TRUNCATION_STARVE)")
                break
    rep = metric_track(ctx, grid, "repetition_rate")
    if rep is not None and np.isfinite(rep.b_median) and rep.b_median > 0:
        rep_ratio = nanmedian(rep.smooth[window(g_start, g_end + 1, len(grid))]) / rep.b_median
        evidence["repetition_ratio_to_baseline"] = rep_ratio
        if rep_ratio > 2.0:
            severity = "info"
            notes.append("generations started looping (see REPETITION_SPIRAL)")
    if std is not None and np.isfinite(std.b_median) and std.b_median > 0:
        # from the fall to the end of the run: the variance may die a little after the fall began
        std_now = nanmedian(on_rows(grid, feat, grid.place(std, "smooth"))[episode.start :]) / std.b_median
        evidence["reward_std_ratio_to_baseline"] = std_now
        if std_now < 0.2:
            severity = "info"
            notes.append("every rollout now earns the same reward (see REWARD_STD_DEATH)")
    note = f" Likely a symptom: {'; '.join(notes)}." if notes else ""
    strength = held_erased / p["erased_warn"] - 1.0
    return make_finding(
        ctx, "REWARD_COLLAPSE", Episode(episode.start, episode.end, severity, episode.onset), feat,
        confidence(strength, 0.4, episode.end - episode.start + 1, sustain),
        f"Reward collapsed: after improving from {opening:.3g} to {evidence['reward_peak_before']:.3g} it fell to "
        f"{evidence['reward_after']:.3g}, "
        f"erasing {held_erased:.0%} of the gain, and has not recovered.{note}",
        evidence,
        [
            "Roll back to the last checkpoint before the onset and resume with a lower learning rate.",
            "Look for a loss or grad-norm spike, or a bad batch, just before the onset; tighten gradient clipping.",
            "Compare the linked samples from after the onset with earlier ones to see what broke.",
        ],
        sample_order="step ASC",
    )


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
    memo = _memo(ctx)
    if "samples" not in memo:
        memo["samples"] = None
        if ctx.has_samples:
            table = ctx.query(
                "SELECT step, reward_sd, len_reward_corr, distinct_share FROM v1.feat_reward_samples "
                "WHERE run_id = ? ORDER BY step"
            )
            if table.num_rows:
                out = {name: table.column(name).to_numpy(zero_copy_only=False).astype(float) for name in table.column_names}
                out["idx"] = grid.index_of(out.pop("step"))
                memo["samples"] = out
    return memo["samples"]


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


def rollout_spread(ctx: DetectorContext, grid: Grid, hi: int) -> float | None:
    """A per-rollout reward spread before grid point hi: the larger of reward_std's early level and
    the captured samples' median reward spread (reward_std may be a within-group std)."""
    out = []
    std = ctx.features("reward_std")
    if std is not None and np.isfinite(std.b_median) and std.b_median > 0:
        out.append(float(std.b_median))
    sd = sample_median(sample_stats(ctx, grid), "reward_sd", 0, hi - 1)
    if sd is not None:
        out.append(sd)
    return max(out) if out else None


@detector(
    "REWARD_HACK_LENGTH",
    "Reward hacking through length",
    needs_all=("completion_len_mean", "reward_mean"),
    ratio_warn=1.5,
    ratio_critical=2.5,
    reward_rise_min=1.0,
    correct_rise_max=1.0,
    stall_ratio=0.0,
    correct_share_max=0.5,
    coupling_min=0.2,
    coupling_rise=0.2,
    sustain_frac=0.03,
    format_pattern=FORMAT_PATTERN,
    correct_pattern=CORRECT_PATTERN,
)
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
        return None
    episode = hinge_onset(episode, feat.smooth, baseline_end(len(feat)), sustain)
    g_on, g_start, g_end = (int(grid.index_of(feat.step[k : k + 1])[0]) for k in (episode.onset, episode.start, episode.end))
    pre = max(5, 2 * sustain, g_start - g_on)
    reward = metric_track(ctx, grid, "reward_mean")
    r_change = level_change(reward, g_start, g_end, pre)
    if r_change is None or r_change[2] < -0.5:
        return None  # length grew while reward fell: not hacking (see TRUNCATION_STARVE, REPETITION_SPIRAL)
    peak = float(np.max(ratio[episode.start : episode.end + 1]))
    evidence: dict[str, Any] = {
        "peak_length_ratio": peak,
        "completion_len_baseline": feat.b_median,
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
        f"Completions grew to {peak:.1f}x their early length and the reward rose with them "
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


@detector(
    "FORMAT_GAMING",
    "A format reward pins at its ceiling while correctness stagnates",
    needs_all=("reward_mean",),
    rise_z=5.0,
    late_share=0.7,
    near_ceiling=0.15,
    correct_rise_max=1.0,
    stall_ratio=0.25,
    fall_critical=3.0,
    sustain_frac=0.03,
    format_pattern=FORMAT_PATTERN,
    correct_pattern=CORRECT_PATTERN,
)
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
    baseline window to near its ceiling, with most of its rise happening after the baseline,
    while no correctness component (by name, see `correct_pattern`; else the other
    components) improves over the same stretch. Needs reward components; without at least
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
        if best is None or episode.onset < best[0].onset:
            best = (episode, c, feats, float(np.nanmax(z[episode.start : episode.end + 1])))
    if best is None:
        return None
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
    worst_fall = 0.0
    for o in others:
        rising, change = still_improving(o, g_start, g_end, pre, p["correct_rise_max"], p["stall_ratio"])
        if rising:
            return None  # correctness kept improving: the format was learned alongside it
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
        f"The format reward '{c.name}' jumped to its ceiling ({evidence[f'reward_component.{c.name}_before']:.3g} -> "
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
