"""Detect functions bound to their catalog rows.

The catalog (rlprobe.doctor.catalog) says what a signature is; a detector module says how to
find it, with ``@detects("ID")`` on one function. A detector whose inputs are not plain step
metrics (list columns, captured samples) passes ``check=``: a function saying why it cannot run
on a recording, or None when it can.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Callable, Optional

from rlprobe.doctor.catalog import BY_ID, SIGNATURES, Signature

if TYPE_CHECKING:
    from rlprobe.doctor.context import DetectorContext
    from rlprobe.doctor.findings import Finding

DetectFn = Callable[["DetectorContext", dict[str, Any]], Optional["Finding"]]
CheckFn = Callable[["DetectorContext"], Optional[str]]


@dataclass(frozen=True)
class Detector:
    """One signature's catalog row with the function that detects it."""

    id: str
    title: str
    detect: DetectFn
    needs_all: tuple[str, ...] = ()
    needs_any: tuple[str, ...] = ()
    params: dict[str, Any] = field(default_factory=dict)
    doc: str = ""
    check: Optional[CheckFn] = None
    signature: Optional[Signature] = None

    def skip_reason(self, ctx: "DetectorContext") -> str | None:
        """Why this detector cannot run on ctx's recording, or None if it can."""
        if self.check is not None:
            return self.check(ctx)
        nonfinite = self.signature is not None and self.signature.reads_nonfinite

        def has(metric: str) -> bool:
            return ctx.has(metric) or (nonfinite and ctx.raw.never_finite(metric))

        missing = [m for m in self.needs_all if not has(m)]
        if missing:
            return ctx.absence(missing, "needs")
        if self.needs_any and not any(has(m) for m in self.needs_any):
            return ctx.absence(list(self.needs_any), "needs one of")
        return None


_FUNCTIONS: dict[str, tuple[DetectFn, Optional[CheckFn]]] = {}
DETECTORS: dict[str, Detector] = {}


def detects(signature_id: str, check: Optional[CheckFn] = None) -> Callable[[DetectFn], DetectFn]:
    """Bind a detect function to the catalog row of signature_id (which must exist)."""

    def register(fn: DetectFn) -> DetectFn:
        if signature_id not in BY_ID:
            raise ValueError(f"{signature_id} is not in the signature catalog (rlprobe/doctor/catalog.py)")
        if signature_id in _FUNCTIONS:
            raise ValueError(f"detector {signature_id} registered twice")
        _FUNCTIONS[signature_id] = (fn, check)
        return fn

    return register


def all_detectors() -> dict[str, Detector]:
    """Every built-in detector in causal order (causes before their symptoms)."""
    if not DETECTORS:
        from rlprobe.doctor import detectors  # noqa: F401  (binds the functions on import)
        from rlprobe.doctor.catalog import causal_order

        missing = [s.id for s in SIGNATURES if s.id not in _FUNCTIONS]
        if missing:
            raise RuntimeError(f"catalog signatures without a detector: {', '.join(missing)}")
        for sid in causal_order():
            sig = BY_ID[sid]
            fn, check = _FUNCTIONS[sid]
            DETECTORS[sid] = Detector(sid, sig.title, fn, sig.needs_all, sig.needs_any, dict(sig.params),
                                      (fn.__doc__ or "").strip(), check, sig)
    return DETECTORS
