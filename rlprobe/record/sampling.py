"""Stratified sample capture: the extremes by reward plus a random draw from the middle."""

from __future__ import annotations

import math
import random
from dataclasses import dataclass
from typing import Any, Sequence

import numpy as np


@dataclass(frozen=True)
class SamplingConfig:
    """How many samples log_samples keeps per call: top_k + bottom_k by reward, random_k others."""

    top_k: int = 2
    bottom_k: int = 2
    random_k: int = 4
    seed: int | None = None

    def __post_init__(self) -> None:
        for name in ("top_k", "bottom_k", "random_k"):
            if getattr(self, name) < 0:
                raise ValueError(f"SamplingConfig.{name} must be >= 0, got {getattr(self, name)}")


def _reward_of(sample: Any) -> float | None:
    value = sample.get("reward_total") if isinstance(sample, dict) else getattr(sample, "reward_total", None)
    try:
        value = float(value)
    except (TypeError, ValueError):
        return None
    return None if math.isnan(value) else value


_PLAIN_REWARDS = frozenset({float, int, type(None)})  # reward types numpy converts exactly as float() does


def _by_reward(samples: Sequence[Any]) -> list[int]:
    """Indices of the samples with a usable reward, lowest reward first (ties: lower index first).

    A batch of plain dicts is ordered on its rewards as they are: floats without a NaN by a
    stable sort of the indices (the cheapest path, and the usual batch), floats, ints and None
    on a numpy array of them. Any other batch goes sample by sample through _reward_of, which
    both match value for value (None and NaN are no reward either way).
    """
    if set(map(type, samples)) == {dict}:
        values = [s.get("reward_total") for s in samples]
        types = set(map(type, values))
        if types == {float} and not any(map(math.isnan, values)):
            return sorted(range(len(values)), key=values.__getitem__)
        if types <= _PLAIN_REWARDS:
            try:
                rewards = np.array(values, dtype=np.float64)
            except (OverflowError, ValueError, TypeError):
                rewards = None  # an int past float's range: the per-sample path says what it says
            if rewards is not None and rewards.shape == (len(values),):
                usable = np.flatnonzero(~np.isnan(rewards))
                return usable[np.argsort(rewards[usable], kind="stable")].tolist()
    rewarded = [(r, i) for i, s in enumerate(samples) if (r := _reward_of(s)) is not None]
    rewarded.sort()
    return [i for _, i in rewarded]


def select(samples: Sequence[Any], config: SamplingConfig, rng: random.Random) -> list[tuple[int, str]]:
    """Indices of the samples to keep, each with its capture_reason, in original order.

    Samples without a usable reward never count as extremes; they stay eligible for the
    random draw, so a batch that lost its rewards is still represented.
    """
    order = _by_reward(samples)
    chosen: dict[int, str] = {}
    for i in reversed(order[len(order) - config.top_k:] if config.top_k else []):
        chosen[i] = "top_k"
    for i in order[: config.bottom_k]:
        chosen.setdefault(i, "bottom_k")
    middle = [i for i in range(len(samples)) if i not in chosen]
    for i in rng.sample(middle, min(config.random_k, len(middle))):
        chosen[i] = "random"
    return sorted(chosen.items())
