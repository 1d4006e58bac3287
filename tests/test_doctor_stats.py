"""The doctor's statistics that were made faster answer exactly as the plain computation they
replaced: granularity (every N tried on every value). Each reference is the old code, kept here
as the definition."""

from __future__ import annotations

import numpy as np
import pytest

from rlprobe.doctor.stats import granularity


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
