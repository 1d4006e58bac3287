"""A run's series as the detectors read them: one grid of bins per run, tracks on it, levels.

The SQL features (doctor_features) give each step metric on the bins of doctor_binned; reward
components and per-sample statistics are laid on the same grid here, so that series of
different metrics line up index for index. Levels (medians over a stretch), a metric aligned
onto another's steps, and the level before and during an episode are the words findings use.
"""

from __future__ import annotations

import math
import weakref
from dataclasses import dataclass
from typing import Any

import numpy as np

from rlprobe.arrow_numpy import to_numpy
from rlprobe.doctor.context import DetectorContext, MetricFeatures
from rlprobe.doctor.stats import center_scale, ffill, nanmedian, trailing_median

# Per-run memo of what several detectors need (the grid, the binned components), so each is
# computed once per run; keyed weakly on the context, which the engine makes per run.
_MEMO: "weakref.WeakKeyDictionary[DetectorContext, dict[str, Any]]" = weakref.WeakKeyDictionary()


def memo(ctx: DetectorContext) -> dict[str, Any]:
    """The per-run memo of ctx."""
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
        memo_ = memo(ctx)
        if "grid" not in memo_:
            row = ctx.query("SELECT min(step) AS lo, max(step) AS hi FROM v1.steps WHERE run_id = ?").to_pylist()[0]
            step0, last = int(row["lo"]), int(row["hi"])
            width = max(1, math.ceil((last - step0 + 1) / 1000.0))
            lo = step0 + width * np.arange((last - step0) // width + 1)
            memo_["grid"] = cls(step0, width, lo.astype(np.int64), np.minimum(lo + width - 1, last).astype(np.int64))
        return memo_["grid"]

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
    list them; they are binned here with one query per run, on the bins of doctor_binned (its
    v1.doctor_bin_width: the grid's), as the mean of the finite values per bin. The query names
    no bounds of its own, so over a root it is asked once for every run of a chunk.
    """
    memo_ = memo(ctx)
    if "components" in memo_:
        return memo_["components"]
    prefix = "reward_component."
    names = [c for c in ctx.query("SELECT * FROM v1.steps LIMIT 0", []).column_names if c.startswith(prefix)]
    out: list[Track] = []
    if names:
        cols = ", ".join(
            f'avg(CASE WHEN isfinite("{c}") THEN "{c}" END) AS "{c}"' for c in (n.replace('"', '""') for n in names)
        )
        table = ctx.query(
            f"SELECT CAST(floor((s.step - z.step_min) / z.width) AS BIGINT) AS bin, {cols} FROM v1.steps AS s "
            "JOIN v1.doctor_bin_width AS z USING (run_id) WHERE run_id = ? GROUP BY bin ORDER BY bin"
        )
        bins = to_numpy(table.column("bin"))
        ok = (bins >= 0) & (bins < len(grid))
        for name in names:
            value = np.full(len(grid), np.nan)
            value[bins[ok]] = to_numpy(table.column(name)).astype(float)[ok]
            if np.isfinite(value).sum() < 10:
                continue
            b, scale = center_scale(value[baseline_window(value)])
            spread = float(np.nanpercentile(value, 95) - np.nanpercentile(value, 5))
            out.append(Track(name[len(prefix):], value, ffill(trailing_median(value)), b, max(scale, 0.02 * spread, 1e-6)))
    memo_["components"] = out
    return out


def baseline_window(value: np.ndarray) -> np.ndarray:
    """Grid indices of the baseline window: doctor_baseline's rule over the finite points."""
    idx = np.flatnonzero(np.isfinite(value))
    p = len(idx)
    skip = int(math.floor(0.05 * p))
    return idx[skip : skip + max(8, int(math.floor(0.15 * p)))]


def noise_ratio(ctx: DetectorContext, grid: Grid, metric: str) -> np.ndarray | None:
    """v1.feat_reward_noise's jitter of a metric (trailing mean |change|, over its early level) on the grid."""
    table = ctx.query(
        "SELECT step, noise_ratio FROM v1.feat_reward_noise WHERE run_id = ? AND metric = ? ORDER BY step",
        [ctx.run_id, metric],
    )
    if table.num_rows == 0:
        return None
    step = to_numpy(table.column("step")).astype(float)
    ratio = to_numpy(table.column("noise_ratio")).astype(float)
    if not np.isfinite(ratio).any():
        return None
    out = np.full(len(grid), np.nan)
    idx = grid.index_of(step)
    ok = (idx >= 0) & (idx < len(grid))
    out[idx[ok]] = ratio[ok]
    return ffill(out)


def window(lo: int, hi: int, n: int) -> slice:
    """The slice [lo, hi) clipped to [0, n)."""
    return slice(max(0, lo), max(0, min(n, hi)))


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


def series_features(metric: str, step: np.ndarray, step_hi: np.ndarray, value: np.ndarray) -> MetricFeatures:
    """A MetricFeatures over a series computed here (baseline/z columns unused, left at 0)."""
    n = len(step)
    zeros = np.zeros(n)
    ints = np.zeros(n, dtype=np.int64)
    smooth = trailing_median(value)
    return MetricFeatures(
        metric=metric, step=np.asarray(step, dtype=np.int64), step_hi=np.asarray(step_hi, dtype=np.int64), value=value,
        vmin=value, vmax=value, n_nonfinite=ints, smooth=smooth, b_median=float("nan"), scale=float("nan"),
        ratio=zeros, z=zeros, z_raw=zeros, cusum_up=zeros, cusum_down=zeros, sustained_up=ints, sustained_down=ints,
    )


def level_at_index(feat: MetricFeatures | None, lo: int | None = None, hi: int | None = None) -> float:
    """Median of the smoothed series over [lo, hi) (the whole series by default)."""
    if feat is None or not len(feat):
        return float("nan")
    seg = np.asarray(feat.smooth[lo:hi], dtype=float)
    seg = seg[np.isfinite(seg)]
    return float(np.median(seg)) if len(seg) else float("nan")


def at_step(feat: MetricFeatures, step: int) -> int:
    """Index of the bin of feat that holds step (the last bin starting at or before it)."""
    return int(max(0, np.searchsorted(feat.step, step, side="right") - 1))


def aligned(ctx: DetectorContext, metric: str, steps: np.ndarray, what: str = "smooth") -> np.ndarray | None:
    """Another metric's feature column (smooth or ratio) interpolated onto the given steps."""
    feat = ctx.features(metric)
    if feat is None or len(feat) == 0:
        return None
    values = getattr(feat, what)
    ok = np.isfinite(values)
    if not ok.any():
        return None
    return np.interp(steps.astype(float), feat.step[ok].astype(float), values[ok])


def values_between(feat: MetricFeatures | None, lo_step: int, hi_step: int) -> np.ndarray:
    """A metric's finite logged values (bin means) from lo_step to hi_step (empty if not logged)."""
    if feat is None:
        return np.array([])
    sel = (feat.step >= lo_step) & (feat.step <= hi_step)
    v = np.asarray(feat.value, dtype=float)[sel]
    return v[np.isfinite(v)]


def level_at_steps(feat: MetricFeatures, lo_step: int, hi_step: int) -> float:
    """Median of a metric's smoothed series between two steps (NaN if none)."""
    m = (feat.step >= lo_step) & (feat.step <= hi_step) & np.isfinite(feat.smooth)
    return float(np.median(feat.smooth[m])) if m.any() else float("nan")


def before_after(ctx: DetectorContext, metric: str, first_step: int, last_step: int) -> tuple[float, float] | None:
    """A metric's level before an episode (its baseline) and during it."""
    feat = ctx.features(metric)
    if feat is None or len(feat) == 0:
        return None
    return feat.b_median, level_at_steps(feat, first_step, last_step)


def usable(feat: MetricFeatures | None, min_points: int = 10) -> bool:
    """True when feat has at least min_points bins and some finite smoothed value."""
    return feat is not None and len(feat) >= min_points and bool(np.isfinite(feat.smooth).any())
