"""Building blocks the detectors share: sustained windows, onsets, confidence, findings."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from rlprobe.doctor.context import DetectorContext, MetricFeatures
from rlprobe.doctor.findings import Finding, Severity
from rlprobe.doctor.stats import cusum_changepoint, first_sustained, squash


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
) -> Finding:
    """A Finding for an episode, with links to the samples captured while it held."""
    first_step, last_step = episode.steps(feat)
    return Finding(
        signature_id=signature_id,
        severity=episode.severity,
        confidence=conf,
        first_step=first_step,
        last_step=last_step,
        explanation=explanation,
        evidence={k: _round(v) for k, v in evidence.items()},
        suggested_actions=actions,
        links_to_samples=ctx.sample_ids(first_step, last_step, order_by=sample_order),
    )


def _round(value: Any) -> Any:
    if isinstance(value, (float, np.floating)):
        v = float(value)
        return v if not np.isfinite(v) else float(f"{v:.4g}")
    if isinstance(value, np.integer):
        return int(value)
    return value
