"""The detector catalog: each signature registers its inputs, default thresholds and logic."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Callable, Optional

if TYPE_CHECKING:
    from rlprobe.doctor.context import DetectorContext
    from rlprobe.doctor.findings import Finding

DetectFn = Callable[["DetectorContext", dict[str, Any]], Optional["Finding"]]


@dataclass(frozen=True)
class Detector:
    """One failure signature. ``detect`` returns a Finding or None; it never sees absent inputs."""

    id: str
    title: str
    detect: DetectFn
    needs_all: tuple[str, ...] = ()
    needs_any: tuple[str, ...] = ()
    params: dict[str, Any] = field(default_factory=dict)
    doc: str = ""

    def skip_reason(self, ctx: "DetectorContext") -> str | None:
        """Why this detector cannot run on ctx's recording, or None if it can."""
        missing = [m for m in self.needs_all if not ctx.has(m)]
        if missing:
            return f"needs {', '.join(missing)}, which this run did not log"
        if self.needs_any and not any(ctx.has(m) for m in self.needs_any):
            return f"needs one of {', '.join(self.needs_any)}; this run logged none"
        return None


DETECTORS: dict[str, Detector] = {}


def detector(
    id: str,
    title: str,
    needs_all: tuple[str, ...] = (),
    needs_any: tuple[str, ...] = (),
    **params: Any,
) -> Callable[[DetectFn], DetectFn]:
    """Register a detect function under a signature id, with its default parameters."""

    def register(fn: DetectFn) -> DetectFn:
        if id in DETECTORS:
            raise ValueError(f"detector {id} registered twice")
        DETECTORS[id] = Detector(id, title, fn, needs_all, needs_any, dict(params), (fn.__doc__ or "").strip())
        return fn

    return register


def all_detectors() -> dict[str, Detector]:
    """Every built-in detector, importing the catalog on first use."""
    from rlprobe.doctor import detectors  # noqa: F401  (registers on import)

    return DETECTORS
