"""The doctor's statistics that were made faster answer exactly as the plain computation they
replaced: granularity (every N tried on every value), prefix_quantiles (numpy's quantiles of
every prefix) and GRAD_PATHOLOGY's loss part built on it. Each reference is the old code, kept
here as the definition."""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import pytest

from rlprobe.doctor.stats import granularity, prefix_quantiles


def granularity_reference(x: np.ndarray, max_n: int = 4096, tol: float = 1e-6) -> int | None:
    """granularity as it was: every N from 1 up, tested on every value."""
    v = np.asarray(x, dtype=float)
    v = v[np.isfinite(v)]
    if len(v) < 5 or not np.any(v != v[0]):
        return None
    v = np.abs(v)
    for n in range(1, max_n + 1):
        scaled = v * n
        if np.mean(np.abs(scaled - np.round(scaled)) <= tol * max(1.0, n)) >= 0.98:
            return n
    return None


def _granular(rng: np.random.Generator, size: int, n: int, noisy_share: float) -> np.ndarray:
    """Means of n binary outcomes, a share of them replaced by values that are no multiple of 1/n."""
    v = rng.binomial(n, rng.uniform(0.05, 0.95), size=size) / n
    noisy = rng.random(size) < noisy_share
    v[noisy] = rng.uniform(0, 1, size=int(noisy.sum()))
    return v


def _cases() -> list[tuple[str, np.ndarray, int]]:
    rng = np.random.default_rng(17)
    cases: list[tuple[str, np.ndarray, int]] = [
        ("constant", np.full(50, 0.25), 4096),
        ("too_short", np.array([0.0, 0.5, 1.0, 0.5]), 4096),
        ("integers", rng.integers(0, 5, 300).astype(float), 4096),
        ("continuous", rng.normal(0.3, 0.1, 1000), 4096),
        ("continuous_long", rng.normal(0.3, 0.1, 5000), 4096),
        ("negative_steps", -_granular(rng, 400, 8, 0.0), 4096),
        ("sparse", np.where(rng.random(1000) < 0.03, 1 / 256, 0.0), 4096),
        ("nans_and_infs", np.concatenate([_granular(rng, 200, 16, 0.0), [np.nan, np.inf, -np.inf]]), 4096),
        ("small_max_n", _granular(rng, 300, 64, 0.0), 32),
        ("fine_grain", _granular(rng, 1000, 3000, 0.0), 4096),
        ("beyond_max_n", _granular(rng, 1000, 5000, 0.0), 4096),
        ("rounded_floats", np.round(_granular(rng, 500, 12, 0.0), 4), 4096),
        ("with_one", np.concatenate([_granular(rng, 300, 10, 0.0), [1.0]]), 4096),
    ]
    for size in (5, 6, 50, 51, 100, 1000):
        for n in (2, 3, 16, 256, 1024):
            for share in (0.0, 0.02, 0.021, 0.05):
                cases.append((f"g{n}_s{size}_noise{share}", _granular(rng, size, n, share), 4096))
    # the boundary of the 98%: exactly `allowed` values off the grid, then one more
    for size in (50, 100, 250, 1000):
        base = _granular(rng, size, 16, 0.0)
        for off in range(max(0, size // 50 - 1), size // 50 + 2):
            v = base.copy()
            v[:off] = 0.123456789
            cases.append((f"edge_s{size}_off{off}", v, 4096))
    # the first screen (the allowed + 1 most frequent values): off-grid values repeated so that
    # they lead the probe, at and past the 2%, and grids hidden among continuous values
    for size in (100, 1000, 5000):
        allowed = size // 50
        for off in (allowed, allowed + 1):
            for copies in (1, 2, 5, allowed):
                v = _granular(rng, size, 8, 0.0)
                v[:off] = np.repeat(rng.uniform(0, 1, off // copies + 1), copies)[:off]
                cases.append((f"repeats_s{size}_off{off}_x{copies}", v, 4096))
        mixed = rng.normal(0.5, 0.2, size)
        mixed[: size - allowed] = _granular(rng, size - allowed, 24, 0.0)
        cases.append((f"mostly_grid_s{size}", rng.permutation(mixed), 4096))
        cases.append((f"half_grid_s{size}", np.concatenate([_granular(rng, size // 2, 24, 0.0), rng.normal(0.5, 0.2, size // 2)]), 4096))
    return cases


CASES = _cases()


@pytest.mark.parametrize("name,x,max_n", CASES, ids=[c[0] for c in CASES])
def test_granularity_answers_as_trying_every_n_on_every_value(name: str, x: np.ndarray, max_n: int) -> None:
    assert granularity(x, max_n=max_n) == granularity_reference(x, max_n=max_n)


def test_granularity_finds_the_rollouts_of_a_binary_mean() -> None:
    rng = np.random.default_rng(3)
    assert granularity(_granular(rng, 500, 16, 0.0)) in (1, 2, 4, 8, 16)
    assert granularity(np.arange(200) % 17 / 16) == 16
    assert granularity(rng.normal(0, 1, 500)) is None


@pytest.mark.parametrize("seed", range(12))
def test_prefix_quantiles_are_numpys_quantiles_of_every_prefix(seed: int) -> None:
    rng = np.random.default_rng(seed)
    size = int(rng.integers(1, 400))
    x = rng.lognormal(0, 2, size)
    if seed % 3 == 0:
        x = np.round(x, 1)  # ties
    if seed % 4 == 1:
        x = np.sort(x)[::-1].copy()  # every new value the smallest so far
    qs = (0.5, 0.95, 0.0, 1.0, 0.25)
    got = prefix_quantiles(x, qs)
    assert got.shape == (len(qs), size)
    assert np.isnan(got[:, 0]).all()
    for i in range(1, size):
        want = np.quantile(x[:i], qs)
        np.testing.assert_allclose(got[:, i], want, rtol=1e-14, atol=0)
        assert got[0, i] == pytest.approx(np.median(x[:i]), rel=1e-14, abs=0)
        assert got[1, i] == np.percentile(x[:i], 95)  # the same formula: the same float


# -- GRAD_PATHOLOGY's loss part, against the loop over every prefix it replaced ---------------
def loss_part_reference(feat: Any, p: dict[str, Any]) -> dict[str, Any] | None:
    """optimization._loss_part as it was: np.median and np.percentile of every prefix (and the
    onset walked back over the points already half-way, in log, to their own past's bar)."""
    from rlprobe.doctor.episodes import confidence, held_stretch, still_holds, sustain_points

    mag = np.abs(np.asarray(feat.value, dtype=float))
    ok = np.isfinite(mag)
    n = len(mag)
    sustain = max(2, min(5, sustain_points(n, 0.02, floor=2)))
    seen: list[float] = []
    at: list[int] = []
    for i in range(n):
        if not ok[i]:
            continue
        if len(seen) >= 5:
            typical = max(float(np.median(seen)), 1e-12)
            top = float(np.percentile(seen, 95))
            threshold = max(p["loss_ratio_warn"] * typical, 10.0 * top, p["loss_abs_min"])
            if mag[i] >= threshold:
                high = ok & (mag >= threshold)
                hit = held_stretch(high, sustain, share=0.5, not_before=i)
                if hit is not None and hit[0] == i:
                    start, end = hit
                    peak = float(np.nanmax(mag[start : end + 1]))
                    ratio = peak / typical
                    ongoing = still_holds(high, end, sustain)
                    severity = "critical" if ratio >= p["loss_ratio_critical"] or ongoing else "warn"
                    k, onset = len(seen), i
                    while k - 1 >= 5:
                        past = seen[: k - 1]
                        bar = max(math.sqrt(p["loss_ratio_warn"]) * max(float(np.median(past)), 1e-12),
                                  math.sqrt(10.0) * float(np.percentile(past, 95)), p["loss_abs_min"])
                        if seen[k - 1] < bar:
                            break
                        k -= 1
                        onset = at[k]
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
        seen.append(float(mag[i]))
        at.append(i)
    return None


class _LossFeatures:
    """The little of MetricFeatures that _loss_part reads: values, and the steps of each bin."""

    def __init__(self, value: np.ndarray) -> None:
        self.value = value
        self.step = np.arange(len(value), dtype=np.int64) * 3 + 10
        self.step_hi = self.step + 2

    def __len__(self) -> int:
        return len(self.value)

    def step_at(self, index: int) -> int:
        return int(self.step[index])


class _LossOnly:
    """The little of a DetectorContext that _loss_part reads: the loss features."""

    def __init__(self, value: np.ndarray) -> None:
        self.feat = _LossFeatures(value)

    def features(self, metric: str) -> Any:
        return self.feat if metric == "loss" else None


def _loss_series(rng: np.random.Generator, n: int, kind: str) -> np.ndarray:
    v = rng.normal(0, 0.05, n) * rng.lognormal(0, 1, n)
    if kind == "diverges":
        at = int(rng.integers(0, n))
        v[at:] *= np.exp(np.linspace(0, rng.uniform(2, 20), n - at))
    elif kind == "bursts":  # short bursts far above the level: some held, some not
        for at in rng.integers(0, n, 4):
            v[at : at + int(rng.integers(1, 6))] *= rng.lognormal(6, 2)
    elif kind == "steps":  # a level that keeps jumping 100-fold: many points near the threshold
        v = np.abs(v) + 100.0 ** np.floor(np.arange(n) / max(1, n // 6)) * 2
    elif kind == "ties":
        v = np.round(np.abs(v), 2) * 100
        v[-(n // 4) :] = 1e4
    v[rng.random(n) < 0.05] = rng.choice([np.nan, np.inf, -np.inf])
    return v


LOSS_PARAMS = [
    {"loss_ratio_warn": 100.0, "loss_ratio_critical": 1e4, "loss_abs_min": 1.0},  # the catalog's
    {"loss_ratio_warn": 3.0, "loss_ratio_critical": 10.0, "loss_abs_min": 0.0},
    {"loss_ratio_warn": 1.5, "loss_ratio_critical": 2.0, "loss_abs_min": 0.0},
]


@pytest.mark.parametrize("kind", ["noise", "diverges", "bursts", "steps", "ties"])
def test_loss_part_answers_as_the_loop_over_every_prefix(kind: str) -> None:
    from rlprobe.doctor.detectors.optimization import _loss_part

    rng = np.random.default_rng(len(kind))
    found = 0
    for trial in range(12):
        value = _loss_series(rng, int(rng.integers(6, 700)), kind)
        for p in LOSS_PARAMS:
            ctx = _LossOnly(value)
            want = loss_part_reference(ctx.feat, p)
            assert _loss_part(ctx, p) == want, (kind, trial, p)  # the same floats, steps and words
            found += want is not None
    assert found or kind == "noise"
