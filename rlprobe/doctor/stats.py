"""Deterministic statistics the detectors decide with: trend tests, changepoints, runs.

What SQL does badly lives here: exact trend-test p-values and changepoint search. Everything
takes plain numpy arrays (at most a few thousand points: the SQL layer bins long runs) and
ignores NaN where that is the honest thing to do.
"""

from __future__ import annotations

import heapq
import math
import warnings
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np


def _finite(x: np.ndarray) -> np.ndarray:
    x = np.asarray(x, dtype=float)
    return x[np.isfinite(x)]


def normal_sf(z: float) -> float:
    """P(Z > z) for a standard normal."""
    return 0.5 * math.erfc(z / math.sqrt(2.0))


@dataclass(frozen=True)
class Trend:
    """Mann-Kendall trend test result plus the Theil-Sen slope (units per point)."""

    s: float
    z: float
    p_increasing: float
    p_decreasing: float
    slope: float
    n: int


def mann_kendall(x: np.ndarray) -> Trend:
    """Mann-Kendall test with the tie-corrected variance and Theil-Sen slope; NaNs dropped."""
    y = _finite(x)
    n = len(y)
    if n < 4:
        return Trend(0.0, 0.0, 1.0, 1.0, 0.0, n)
    i, j = np.triu_indices(n, k=1)
    diffs = y[j] - y[i]
    s = float(np.sign(diffs).sum())
    _, counts = np.unique(y, return_counts=True)
    ties = counts[counts > 1]
    var = (n * (n - 1) * (2 * n + 5) - float((ties * (ties - 1) * (2 * ties + 5)).sum())) / 18.0
    if var <= 0:
        return Trend(s, 0.0, 1.0, 1.0, 0.0, n)
    z = (s - 1) / math.sqrt(var) if s > 0 else (s + 1) / math.sqrt(var) if s < 0 else 0.0
    slope = float(np.median(diffs / (j - i)))
    return Trend(s, z, normal_sf(z), normal_sf(-z), slope, n)


def theil_sen(x: np.ndarray, y: np.ndarray) -> tuple[float, float]:
    """Robust line fit: (slope, intercept) as medians over all point pairs; NaNs dropped."""
    x = np.asarray(x, dtype=float)
    y = np.asarray(y, dtype=float)
    ok = np.isfinite(x) & np.isfinite(y)
    x, y = x[ok], y[ok]
    if len(x) < 2:
        return 0.0, float(y[0]) if len(y) else 0.0
    i, j = np.triu_indices(len(x), k=1)
    dx = x[j] - x[i]
    keep = dx != 0
    slope = float(np.median((y[j] - y[i])[keep] / dx[keep])) if keep.any() else 0.0
    return slope, float(np.median(y - slope * x))


def robust_center_scale(x: np.ndarray, rel_floor: float = 0.05, abs_floor: float = 1e-12) -> tuple[float, float]:
    """Median and 1.4826*MAD of the finite values, the scale floored (relative and absolute)."""
    y = _finite(x)
    if len(y) == 0:
        return float("nan"), float("nan")
    med = float(np.median(y))
    mad = 1.4826 * float(np.median(np.abs(y - med)))
    return med, max(mad, rel_floor * abs(med), abs_floor)


def runs_of(mask: np.ndarray) -> list[tuple[int, int]]:
    """Maximal runs of True as (start, end) index pairs, end inclusive."""
    m = np.asarray(mask, dtype=bool)
    if not m.any():
        return []
    padded = np.concatenate([[False], m, [False]])
    edges = np.flatnonzero(padded[1:] != padded[:-1])
    return [(int(a), int(b) - 1) for a, b in zip(edges[::2], edges[1::2])]


def first_sustained(mask: np.ndarray, min_len: int) -> tuple[int, int] | None:
    """The first run of at least min_len consecutive True values, as (start, end)."""
    for start, end in runs_of(mask):
        if end - start + 1 >= min_len:
            return start, end
    return None


def longest_run(mask: np.ndarray) -> tuple[int, int] | None:
    """The longest run of True values (earliest on ties)."""
    best = None
    for start, end in runs_of(mask):
        if best is None or end - start > best[1] - best[0]:
            best = (start, end)
    return best


def cusum_changepoint(x: np.ndarray) -> int | None:
    """Index where the mean most plausibly shifts (argmax of |cumsum(x - mean)|); NaNs filled."""
    y = np.asarray(x, dtype=float)
    if len(y) < 4 or not np.isfinite(y).any():
        return None
    y = np.where(np.isfinite(y), y, np.nanmedian(y))
    c = np.cumsum(y - y.mean())
    k = int(np.argmax(np.abs(c[:-1])))
    return k + 1


def _segment_cost(csum: np.ndarray, csum2: np.ndarray, a: int, b: int) -> float:
    n = b - a
    s = csum[b] - csum[a]
    return float(csum2[b] - csum2[a] - s * s / n) if n > 0 else 0.0


def binary_segmentation(x: np.ndarray, penalty: float | None = None, min_size: int = 5, max_changes: int = 8) -> list[int]:
    """Mean-shift changepoints by binary segmentation with a BIC-like penalty; sorted indices."""
    y = np.asarray(x, dtype=float)
    if not np.isfinite(y).any():
        return []
    y = np.where(np.isfinite(y), y, np.nanmedian(y))
    n = len(y)
    if n < 2 * min_size:
        return []
    _, scale = robust_center_scale(np.diff(y) / math.sqrt(2.0))
    var = max(scale * scale, 1e-24)
    penalty = penalty if penalty is not None else 2.0 * math.log(n) * var
    csum = np.concatenate([[0.0], np.cumsum(y)])
    csum2 = np.concatenate([[0.0], np.cumsum(y * y)])
    segments = [(0, n)]
    changes: list[int] = []
    # each segment's best split, found once: a round only splits one segment, so only its two
    # halves are new (the same gains, compared in the same order, as searching every segment
    # again each round)
    best_split: dict[tuple[int, int], tuple[float, int]] = {}
    while segments and len(changes) < max_changes:
        best = None
        for a, b in segments:
            if b - a < 2 * min_size:
                continue
            if (a, b) not in best_split:
                whole = _segment_cost(csum, csum2, a, b)
                ks = np.arange(a + min_size, b - min_size + 1)
                left_n, right_n = ks - a, b - ks
                left_s, right_s = csum[ks] - csum[a], csum[b] - csum[ks]
                left = csum2[ks] - csum2[a] - left_s * left_s / left_n
                right = csum2[b] - csum2[ks] - right_s * right_s / right_n
                gains = whole - left - right
                i = int(np.argmax(gains))  # the first of equal gains, as the loop it replaces
                best_split[(a, b)] = (gains[i], int(ks[i]))
            gain, k_at = best_split[(a, b)]
            if best is None or gain > best[0]:
                best = (float(gain), k_at, a, b)
        if best is None or best[0] <= penalty:
            break
        _, k, a, b = best
        changes.append(k)
        segments.remove((a, b))
        segments += [(a, k), (k, b)]
    return sorted(changes)


def onset_before(series: np.ndarray, detected_at: int, lookback: int) -> int:
    """Refine a detection index back to where the shift began (CUSUM over a lookback window)."""
    lo = max(0, detected_at - lookback)
    window = np.asarray(series[lo : detected_at + 1], dtype=float)
    k = cusum_changepoint(window)
    return lo + k if k is not None else detected_at


def squash(x: float, at_half: float) -> float:
    """Map a non-negative strength to [0, 1): 0 -> 0, at_half -> 0.5, growing saturates to 1."""
    x = max(0.0, float(x))
    return x / (x + at_half) if at_half > 0 else 1.0


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


def centred_median(x: np.ndarray, k: int = 5) -> np.ndarray:
    """Median of the finite values in a window of k points centred on each point (shrinking at
    the ends): follows a level change without the lag of a trailing median."""
    x = np.asarray(x, dtype=float)
    if len(x) == 0:
        return x
    h = k // 2
    pad = np.concatenate([np.full(h, np.nan), x, np.full(h, np.nan)])
    windows = np.lib.stride_tricks.sliding_window_view(pad, 2 * h + 1)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        return np.nanmedian(windows, axis=1)


def prefix_quantiles(x: np.ndarray, qs: Sequence[float]) -> np.ndarray:
    """[k, i]: the qs[k] quantile of the finite values x[:i] (np.quantile's linear interpolation,
    the same float up to rounding; np.percentile's exactly), NaN for i = 0.

    What each point is judged against when only what came before it counts (a divergence early
    in a run must not be hidden by its own values). np.quantile of every prefix is quadratic
    (0.2 s for a 1,000-point series); here, for each q, two heaps hold the prefix's values at
    or below the order statistic the quantile starts from and those above it, and each new
    value moves at most one across: O(n log n).
    """
    x = np.asarray(x, dtype=float)
    n = len(x)
    out = np.full((len(qs), n), np.nan)
    if n < 2:
        return out
    sizes = np.arange(1, n)  # the prefix of point i has i values
    for k, q in enumerate(qs):
        low: list[float] = []  # the values at or below the order statistic, negated (a max-heap)
        high: list[float] = []  # the values above it
        below = np.empty(n - 1)  # the order statistic floor((size - 1) q) of each prefix ...
        above = np.empty(n - 1)  # ... and the one after it (the same at the top)
        for i in range(n - 1):
            value = float(x[i])
            if low and value <= -low[0]:
                heapq.heappush(low, -value)
            else:
                heapq.heappush(high, value)
            keep = math.floor(i * q) + 1  # prefix of i + 1 values: order statistics 0 .. floor(i q)
            while len(low) > keep:
                heapq.heappush(high, -heapq.heappop(low))
            while len(low) < keep:
                heapq.heappush(low, -heapq.heappop(high))
            below[i] = -low[0]
            above[i] = high[0] if high else -low[0]
        virtual = (sizes - 1) * q
        gamma = virtual - np.floor(virtual)
        diff = above - below
        # numpy's lerp: from the nearer end, so that gamma = 1 gives the upper value exactly
        out[k, 1:] = np.where(gamma >= 0.5, above - diff * (1 - gamma), below + diff * gamma)
    return out


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
    """Median of the finite values (NaN when there are none)."""
    v = np.asarray(x, dtype=float)
    v = v[np.isfinite(v)]
    return float(np.median(v)) if len(v) else float("nan")


def center_scale(values: np.ndarray, rel_floor: float = 0.05, abs_floor: float = 1e-9) -> tuple[float, float]:
    """Median and floored 1.4826*MAD, as doctor_features computes its scale."""
    v = np.asarray(values, dtype=float)
    v = v[np.isfinite(v)]
    if len(v) == 0:
        return float("nan"), float("nan")
    med = float(np.median(v))
    mad = 1.4826 * float(np.median(np.abs(v - med)))
    return med, max(mad, rel_floor * abs(med), abs_floor)


def finite_or(x: np.ndarray, fill: float) -> np.ndarray:
    """x with NaN/inf replaced by fill."""
    x = np.asarray(x, dtype=float)
    return np.where(np.isfinite(x), x, fill)


def diff_noise(x: np.ndarray) -> float:
    """Point-to-point noise of a series (1.4826 MAD of first differences / sqrt 2): robust to trends and shifts."""
    v = _without_copies(np.asarray(x, dtype=float))
    if len(v) < 4:
        return float("nan")
    d = np.diff(v)
    return 1.4826 * float(np.median(np.abs(d - np.median(d)))) / math.sqrt(2.0)


def _without_copies(x: np.ndarray) -> np.ndarray:
    """The finite points of a series, with exact copies of the point before dropped when the
    series repeats itself.

    A metric measured once per rollout batch is logged again on each optimizer update that
    batch feeds (TRL's num_iterations, PPO epochs): the same reward mean on two or four steps
    in a row. Half its differences are then exactly 0, its median difference is 0, and the
    point-to-point noise would read as none, so any wobble becomes a change of level. A copy is
    a point equal to the one before that is not at the series' lowest or highest value (a
    reward pinned at 0 or at its ceiling repeats because it is pinned, and that says something
    about its noise); when at least a quarter of the steps are copies, the noise is that of the
    distinct values."""
    v = x[np.isfinite(x)]
    if len(v) < 8:
        return v
    same = np.diff(v) == 0
    if not same.any():
        return v
    inner = (v[1:] != np.min(v)) & (v[1:] != np.max(v))
    if float(np.mean(same & inner)) < 0.25:
        return v
    return v[np.concatenate([[True], ~(same & inner)])]


@dataclass(frozen=True)
class HingeFit:
    """y = a + p u, plus from the breakpoint u_k on a jump b and a bend g1 d + g2 d^2.

    d = (u - u_k) / u_scale, with u_scale the span of the fitted u (keeps the fit well
    conditioned whatever the units of u).
    """

    index: int  # breakpoint, as an index into the points that were fitted
    a: float
    p: float
    b: float
    g1: float
    g2: float
    u_scale: float
    sigma: float  # robust residual scale of the hinge fit
    improvement: float  # (SSE of the plain line - SSE of the hinge) / sigma^2

    def extra(self, du: np.ndarray) -> np.ndarray:
        """What the hinge adds to the line at du = u - u_k (0 before the breakpoint)."""
        du = np.asarray(du, dtype=float)
        d = np.maximum(du, 0.0) / self.u_scale
        return np.where(du >= 0, self.b + self.g1 * d + self.g2 * d * d, 0.0)


def _suffix(x: np.ndarray) -> np.ndarray:
    return np.cumsum(x[::-1])[::-1]


def hinge_fit(u: np.ndarray, y: np.ndarray, min_side: int, min_before: int | None = None) -> HingeFit | None:
    """Best single-breakpoint fit of y = a + p u + [u >= u_k] (b + g1 d + g2 d^2), d = u - u_k scaled.

    u must increase (ln step for a power law, the point index for a line). Every candidate
    breakpoint k (at least min_side points from either end, and at least min_before points
    from the start when given: the trend before a break is only trusted over enough points) is
    solved exactly from suffix sums of powers of u (binomial expansion of (u - u_k)^m), so the
    whole search is O(n).
    """
    n = len(u)
    first = max(min_side, min_before or 0)
    if n < first + min_side + 4:
        return None
    u = np.asarray(u, dtype=float)
    y = np.asarray(y, dtype=float)
    mean_u = float(np.mean(u))
    u_scale = float(max(np.ptp(u), 1e-12))
    w = (u - mean_u) / u_scale  # centred and scaled for numerical stability
    ks = np.arange(first, n - min_side)
    wk = w[ks]
    sw = [_suffix(w**j)[ks] for j in range(5)]  # sums over the suffix of w^j ...
    syw = [_suffix(y * w**j)[ks] for j in range(3)]  # ... and of y w^j

    def centred(sums: list[np.ndarray], m: int) -> np.ndarray:  # sum over the suffix of f (w - wk)^m
        return sum(math.comb(m, j) * (-wk) ** (m - j) * sums[j] for j in range(m + 1))

    C = [centred(sw, m) for m in range(5)]
    E = [centred(syw, m) for m in range(3)]
    D = [C[1] + wk * C[0], C[2] + wk * C[1], C[3] + wk * C[2]]  # sums of w (w - wk)^m
    K = len(ks)
    full = lambda value: np.full(K, float(value))  # noqa: E731
    N, W, WW = full(n), full(w.sum()), full((w * w).sum())
    rows = (
        (N, W, C[0], C[1], C[2]),
        (W, WW, D[0], D[1], D[2]),
        (C[0], D[0], C[0], C[1], C[2]),
        (C[1], D[1], C[1], C[2], C[3]),
        (C[2], D[2], C[2], C[3], C[4]),
    )
    xtx = np.empty((K, 5, 5))
    for i, row in enumerate(rows):
        for j, col in enumerate(row):
            xtx[:, i, j] = col
    xty = np.stack([full(y.sum()), full((w * y).sum()), E[0], E[1], E[2]], axis=1)
    xtx += np.eye(5)[None] * 1e-9
    beta = np.linalg.solve(xtx, xty[..., None])[..., 0]
    sse = float((y * y).sum()) - (beta * xty).sum(axis=1)
    best = int(np.argmin(sse))
    k = int(ks[best])
    a, p, b, g1, g2 = (float(c) for c in beta[best])
    p_u = p / u_scale  # slope per unit of u
    fit = HingeFit(k, a - p_u * mean_u, p_u, b, g1, g2, u_scale, 1.0, 0.0)
    resid = y - (fit.a + fit.p * u + fit.extra(u - u[k]))
    sigma = max(1.4826 * float(np.median(np.abs(resid - np.median(resid)))), 1e-6)
    design0 = np.vstack([np.ones(n), w]).T
    coef0, *_ = np.linalg.lstsq(design0, y, rcond=None)
    sse0 = float(((y - design0 @ coef0) ** 2).sum())
    return HingeFit(k, fit.a, fit.p, b, g1, g2, u_scale, sigma, (sse0 - float(sse[best])) / sigma**2)


def refine_onset(y: np.ndarray, start: int, lo: int, hi: int, share: float = 0.0) -> int:
    """Where a detected shift began, at most start.

    A threshold is crossed well after a drift begins, and a slow drift (a ramp over hundreds of
    steps) starts long before a short CUSUM window reaches. y[lo:hi] (from the baseline to just
    past the crossing) is fitted by a line plus, after a breakpoint, a jump and a bend
    (hinge_fit on the point index); the onset is the first point from the breakpoint on where
    the fitted departure from the line has covered `share` of what it had reached at `start`.
    That skips a bend that dips before it rises, and stays at the breakpoint for a jump.
    """
    lo, hi = max(0, lo), min(len(y), hi)
    seg = np.asarray(y[lo:hi], dtype=float)
    ok = np.isfinite(seg)
    if ok.sum() < 12 or not lo <= start < hi:
        return start
    x = np.flatnonzero(ok).astype(float)
    fit = hinge_fit(x, seg[ok], min_side=3)
    if fit is None:
        return start
    k = int(x[fit.index])
    if k >= start - lo:
        return start
    dx = np.arange(k, start - lo + 1, dtype=float) - k
    extra = fit.extra(dx)
    total = float(extra[-1])
    if not np.isfinite(total) or total == 0.0:
        return start
    covered = np.flatnonzero(extra / total >= share)
    return int(min(start, lo + k + (int(covered[0]) if len(covered) else 0)))


# -- the noise a series can have ---------------------------------------------------------------
_GRANULARITY_BLOCK = 256  # N tried together: a mean of up to 256 rollouts is found in the first block


def granularity(x: np.ndarray, max_n: int = 4096, tol: float = 1e-6) -> int | None:
    """The smallest N such that (nearly) every finite value is a multiple of 1/N, or None.

    A batch-mean of a binary (or few-valued) reward over N rollouts moves in steps of 1/N: 16
    rollouts give 0, 0.0625, 0.125, ... That N says how much such a mean can move by chance
    (binomial_sd), which an empirical noise estimate cannot say when the series barely moved
    (a sparse reward: zero on most steps). Non-integer multiples beyond rounding (a learned
    reward model's scores) give None.

    N passes when at least 98% of the values v have |v N - round(v N)| <= tol max(1, N). A
    continuous series fails every N up to max_n, and trying them one at a time cost ~50 ms
    per series; so the N are tried in blocks, each first against a few of the values: N is out
    as soon as more of those fail than the 2% allowed of all values (failing on a subset of the
    values is failing on all of them, so no N that would pass is put out). That answers exactly
    as trying every N on every value (see tests/test_doctor_stats.py).
    """
    v = _finite(x)
    if len(v) < 5 or not np.any(v != v[0]):
        return None
    # whether a value is a multiple of 1/N depends on the value alone: each distinct value is
    # tested once and counts as often as it occurs
    values, counts = np.unique(np.abs(v), return_counts=True)
    total = len(v)
    # the fewest values that must pass: the share (count / total, as np.mean of the test) >= 0.98
    need = int(np.argmax(np.arange(total + 1) / total >= 0.98))
    allowed = total - need
    # the screen: N is out when more than `allowed` of these (the most frequent distinct values,
    # allowed + 64 of them) fail; a series whose values are no multiples of 1/N fails most of them
    probe = np.argsort(-counts, kind="stable")[: allowed + 64]
    # and before it, the same rule on the first allowed + 1 of them: the fewest that can put N
    # out (all of them failing, when each value occurs once), a quarter of the work on a
    # continuous series of 1,000 points, where almost every N is put out here
    first = probe[: allowed + 1]
    for lo in range(1, max_n + 1, _GRANULARITY_BLOCK):
        ns = np.arange(lo, min(lo + _GRANULARITY_BLOCK, max_n + 1), dtype=float)
        ns = ns[(~_multiples_of(values[first], ns, tol)).astype(np.int64) @ counts[first] <= allowed]
        if not len(ns):
            continue
        misses = (~_multiples_of(values[probe], ns, tol)).astype(np.int64) @ counts[probe]
        maybe = ns[misses <= allowed]
        if len(maybe):
            hits = _multiples_of(values, maybe, tol).astype(np.int64) @ counts
            passed = np.flatnonzero(hits / total >= 0.98)
            if len(passed):
                return int(maybe[passed[0]])
    return None


def _multiples_of(values: np.ndarray, ns: np.ndarray, tol: float) -> np.ndarray:
    """[i, j]: values[j] * ns[i] is within tol max(1, ns[i]) of a whole number, computed as
    granularity always has (the same floats: v * N, np.round, the same tolerance)."""
    scaled = values[None, :] * ns[:, None]
    return np.abs(scaled - np.round(scaled)) <= (tol * np.maximum(1.0, ns))[:, None]


def binomial_sd(p: float, n: int, span: float = 1.0) -> float:
    """Standard deviation of the mean of n independent outcomes of a two-valued reward that is
    `span` apart, at success rate p (clipped away from 0 and 1 by half an outcome)."""
    if n <= 0:
        return float("nan")
    q = min(max(p, 0.5 / n), 1.0 - 0.5 / n)
    return span * math.sqrt(q * (1.0 - q) / n)


def point_noise(x: np.ndarray) -> float:
    """Point-to-point noise of a series: 1.4826 MAD of first differences / sqrt 2 (robust to
    trends and level shifts). NaN when there are fewer than 4 finite points."""
    return diff_noise(x)


def bounded_noise(x: np.ndarray) -> float:
    """Noise of a bounded batch-mean (a reward or a fraction): the larger of its point-to-point
    noise and, where its granularity is known, the binomial noise of a mean of that many
    outcomes, at the level of its middle half closest to 0.5 (the noisiest level it sat at).

    The floor matters for sparse, saturated or dead stretches: when most points sit at 0 (or 1)
    the point-to-point noise is ~0, and a single success, or the ordinary noise of the stretch
    where the reward was alive, would otherwise count as a change of level.
    """
    v = _finite(x)
    if len(v) < 4:
        return float("nan")
    lo, hi = float(np.min(v)), float(np.max(v))
    if lo >= 0.0 and 0.0 < hi < 1.0 and float(np.mean(v == hi)) >= 0.5:
        # A mean of outcomes cannot sit at exactly the same value below 1 on most steps (at 0.5
        # with 16 outcomes its standard deviation is 0.125); a term can, once every rollout earns
        # its full weight: a format term worth 0.5 pinned at 0.5. Its outcomes are shares of that
        # weight, and the binomial floor is that of the share (0.94 of 16 rollouts), scaled back,
        # not the noise of a coin at 0.5.
        return hi * bounded_noise(v / hi)
    empirical = diff_noise(v)
    n = granularity(v)
    if n is not None and lo >= 0.0 and hi <= 1.0:
        q25, q75 = np.percentile(v, [25, 75])
        p = float(min(max(0.5, q25), q75))
        floor = binomial_sd(p, n)
        # A sparse reward sits at 0 on most steps and jumps on a few: the median difference is 0
        # and says nothing of those jumps, and when the rollouts of a step share few prompts
        # their outcomes are correlated, so a step's mean varies more than the binomial says.
        # The root mean square of successive differences (von Neumann) sees both.
        mssd = _von_neumann(v)
        if _zero_inflated(v):
            # the points off the pinned end are where it was alive, and a mean of n outcomes at
            # that level is that noisy: 3 successes in 256 on two steps, then none again, is
            # one binomial wobble (1.7 standard errors), not a level gained and lost
            pinned = float(np.min(v)) if float(np.mean(v == np.min(v))) >= 0.5 else float(np.max(v))
            alive = v[v != pinned]
            alive_sd = binomial_sd(float(np.median(alive)), n) if len(alive) else 0.0
            floor = max(floor, mssd, alive_sd)
        return max(empirical, floor) if np.isfinite(empirical) else floor
    if _zero_inflated(v) and lo >= 0.0:
        # a bounded score on another scale (a format term worth 2, a reward in [0, 3]) pinned at
        # one end has no point-to-point noise either: its median difference is 0, and the rise
        # that pinned it would otherwise be measured against nothing. Its successive differences
        # (von Neumann) see the wobbles off the pinned end.
        mssd = _von_neumann(v)
        return max(empirical, mssd) if np.isfinite(empirical) else mssd
    return empirical


def _von_neumann(v: np.ndarray) -> float:
    """The root mean square of successive differences over sqrt 2: a point noise that sees jumps
    a median difference of 0 hides (0 for fewer than 2 points)."""
    d = np.diff(v)
    return math.sqrt(float(np.mean(d * d)) / 2.0) if len(d) else 0.0


def _zero_inflated(v: np.ndarray) -> bool:
    """True when most points of a bounded series sit exactly at one end of it (0, or its top)."""
    return float(np.mean(v == np.min(v))) >= 0.5 or float(np.mean(v == np.max(v))) >= 0.5


# -- level shifts ------------------------------------------------------------------------------
@dataclass(frozen=True)
class Shift:
    """The most significant change of level of a series, by segment means.

    `at` is the first index of the new level; before and after are the medians of the
    segments on either side (the segment before reaching back at most `lookback` points), `end`
    the last index of the segment after, and `z` the change in standard errors of the two
    medians under the series' noise.
    """

    at: int
    before: float
    after: float
    end: int
    z: float
    start: int = 0  # first index of the stretch `before` is the median of


def level_shifts(y: np.ndarray, noise: float, min_size: int = 3, lookback: int | None = None, max_changes: int = 8) -> list[Shift]:
    """Every change of level binary segmentation finds in y (NaN filled), in time order.

    The penalty is the BIC-like 2 ln(n) noise^2 of binary_segmentation, with the noise given
    (so a noise floor, e.g. bounded_noise's, raises it); each change is reported against its
    neighbouring segments.
    """
    v = np.asarray(y, dtype=float)
    ok = np.isfinite(v)
    if ok.sum() < 2 * min_size or not np.isfinite(noise) or noise <= 0:
        return []
    filled = np.where(ok, v, np.nanmedian(v))
    n = len(filled)
    cps = binary_segmentation(filled, penalty=2.0 * math.log(n) * noise * noise * 1.0, min_size=min_size, max_changes=max_changes)
    bounds = [0, *cps, n]
    out = []
    for j, k in enumerate(cps):
        lo = bounds[j] if lookback is None else max(bounds[j], k - lookback)
        hi = bounds[j + 2]
        before = v[lo:k][np.isfinite(v[lo:k])]
        after = v[k:hi][np.isfinite(v[k:hi])]
        if len(before) == 0 or len(after) == 0:
            continue
        b, a = float(np.median(before)), float(np.median(after))
        se = 1.25 * noise * math.sqrt(1.0 / len(before) + 1.0 / len(after))
        # a sparse series on a grid of steps changes at its first logged point after the cut
        at = k + int(np.argmax(ok[k:hi]))
        out.append(Shift(int(at), b, a, int(hi - 1), (a - b) / se if se > 0 else 0.0, int(lo)))
    return out


def bounded_level_shifts(y: np.ndarray) -> list[Shift]:
    """level_shifts of a share or rate in [0, 1] under its own bounded_noise, looking back over a
    third of the series (at least 8 points): the levels an early-window rise is read from.
    Empty when the series has no noise to judge a change by (constant, or too short)."""
    v = np.asarray(y, dtype=float)
    noise = bounded_noise(v)
    if not np.isfinite(noise) or noise <= 0:
        return []
    return level_shifts(v, noise, min_size=3, lookback=max(8, len(v) // 3))


def level_reached(shifts: list[Shift], j: int, max_gap: int) -> tuple[float, int]:
    """The level a rise at shifts[j] reached, and the index of its last stage: through the
    rising stages that follow it within max_gap points (binary segmentation cuts a steep
    sigmoid into several steps; they are one rise)."""
    reached, last = shifts[j].after, j
    while (last + 1 < len(shifts) and shifts[last + 1].after > shifts[last + 1].before
           and shifts[last + 1].at - shifts[last].at <= max_gap):
        last += 1
        reached = max(reached, shifts[last].after)
    return reached, last


def level_before(shifts: list[Shift], j: int, min_z: float) -> tuple[float, int]:
    """The level a change at shifts[j] counts from, and the first index of the stretch that held it.

    Earlier stages of the same change belong to it (a fall in stages counts from the level
    before its first stage, a rise in stages likewise), and a neighbouring change smaller than
    min_z standard errors is no change at all: the segmentation split one plateau, and the
    level was held across both pieces.
    """
    top, lo = shifts[j].before, shifts[j].start
    falling = shifts[j].after < shifts[j].before
    for prev in reversed(shifts[:j]):
        if (prev.after < prev.before) == falling and prev.after != prev.before:
            top, lo = prev.before, prev.start
        elif abs(prev.z) < min_z:
            lo = prev.start
        else:
            break
    return top, lo
