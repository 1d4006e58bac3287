"""Deterministic statistics the detectors decide with: trend tests, changepoints, runs.

What SQL does badly lives here: exact trend-test p-values and changepoint search. Everything
takes plain numpy arrays (at most a few thousand points: the SQL layer bins long runs) and
ignores NaN where that is the honest thing to do.
"""

from __future__ import annotations

import math
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
    while segments and len(changes) < max_changes:
        best = None
        for a, b in segments:
            if b - a < 2 * min_size:
                continue
            whole = _segment_cost(csum, csum2, a, b)
            for k in range(a + min_size, b - min_size + 1):
                gain = whole - _segment_cost(csum, csum2, a, k) - _segment_cost(csum, csum2, k, b)
                if best is None or gain > best[0]:
                    best = (gain, k, a, b)
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
