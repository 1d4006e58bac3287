"""The divergence statistic: a robust z of the difference of two series against its own early
noise, required to hold for several consecutive steps.

Two runs of the same recipe never log identical numbers unless they share seed and data, so
"different" has to mean different beyond the usual gap between them. The usual gap is measured
on the first steps both runs logged (its median, and a robust spread), and a divergence is the
first point where the gap leaves that band by z_thresh spreads and stays out, on the same side,
for `sustain` consecutive common steps: a single spike (one bad batch) is not a divergence.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

MIN_BASELINE = 10
"""Fewest common steps the baseline is measured on; fewer common steps than this cannot be judged."""
MAX_BASELINE = 50
BASELINE_FRACTION = 0.2
REL_NOISE_FLOOR = 1e-3
"""The smallest noise: a thousandth of the metric's mean size over the common steps. Runs that were
identical until some step (a resumed run, one seed) or a metric constant at first (reward_min 0)
have zero early spread; the floor keeps z finite and a gap of a few thousandths of the metric
from counting as a divergence."""
_MAD_TO_SIGMA = 1.4826


@dataclass(frozen=True)
class Departure:
    """A difference series against its baseline band, and where it first left it, sustained."""

    index: int | None  # None: it never did
    z: np.ndarray
    baseline_n: int
    level: float
    noise: float


def baseline_size(n: int) -> int:
    """How many leading common steps set the baseline: a fifth of them, between 10 and 50."""
    return int(min(MAX_BASELINE, max(MIN_BASELINE, round(BASELINE_FRACTION * n))))


def robust_noise(diff: np.ndarray, scale: float) -> float:
    """The larger of the level spread (MAD) and the step-to-step spread of diff, floored.

    The step-to-step spread ignores a steady trend in the gap but understates slow wander (a
    random walk looks calm from one step to the next); the level spread catches the wander.
    Taking the larger keeps a gap that merely wanders from reading as a divergence.
    """
    level = _MAD_TO_SIGMA * float(np.median(np.abs(diff - np.median(diff))))
    steps = np.diff(diff)
    jitter = _MAD_TO_SIGMA * float(np.median(np.abs(steps - np.median(steps)))) / np.sqrt(2.0) if steps.size else 0.0
    return max(level, jitter, REL_NOISE_FLOOR * scale, 1e-12)


def first_departure(a: np.ndarray, b: np.ndarray, z_thresh: float, sustain: int) -> Departure:
    """The first index where (b - a) sits beyond z_thresh robust spreads of its baseline for
    `sustain` consecutive points on one side (index None when it never does). a and b are
    aligned and finite. Raises ValueError with fewer than MIN_BASELINE points."""
    n = len(a)
    if n < MIN_BASELINE:
        raise ValueError(f"{n} common points, need at least {MIN_BASELINE}")
    diff = b - a
    m = baseline_size(n)
    base = diff[:m]
    scale = float(np.mean(np.abs(a)) + np.mean(np.abs(b))) / 2.0
    level = float(np.median(base))
    noise = robust_noise(base, scale)
    z = (diff - level) / noise
    starts = [_first_run(z > z_thresh, sustain), _first_run(z < -z_thresh, sustain)]
    found = [s for s in starts if s is not None]
    return Departure(min(found) if found else None, z, m, level, noise)


def _first_run(mask: np.ndarray, length: int) -> int | None:
    """Index where the first run of `length` consecutive True values starts."""
    if length < 1 or mask.size < length:
        return None
    hits = np.flatnonzero(np.convolve(mask.astype(np.int64), np.ones(length, dtype=np.int64), "valid") == length)
    return int(hits[0]) if hits.size else None
