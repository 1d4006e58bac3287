"""Stratified sample capture: the extremes by reward plus a random draw from the middle."""

from __future__ import annotations

import math
import random
from dataclasses import dataclass
from typing import Any, Sequence


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


def select(samples: Sequence[Any], config: SamplingConfig, rng: random.Random) -> list[tuple[int, str]]:
    """Indices of the samples to keep, each with its capture_reason, in original order.

    Samples without a usable reward never count as extremes; they stay eligible for the
    random draw, so a batch that lost its rewards is still represented.
    """
    rewarded = [(r, i) for i, s in enumerate(samples) if (r := _reward_of(s)) is not None]
    rewarded.sort()
    chosen: dict[int, str] = {}
    for _, i in reversed(rewarded[len(rewarded) - config.top_k:] if config.top_k else []):
        chosen[i] = "top_k"
    for _, i in rewarded[: config.bottom_k]:
        chosen.setdefault(i, "bottom_k")
    middle = [i for i in range(len(samples)) if i not in chosen]
    for i in rng.sample(middle, min(config.random_k, len(middle))):
        chosen[i] = "random"
    return sorted(chosen.items())
