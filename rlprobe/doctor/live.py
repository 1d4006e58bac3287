"""Live diagnosis: watch a recording as it grows, report each finding once, decide on halting.

Read-side only: a watcher reads the files a Recorder (in this or another process) has written;
it never imports the recorder's threads and never writes into the recording.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Iterable, Mapping, Optional

from rlprobe.doctor.findings import SEVERITY_ORDER, Finding

Sink = Callable[[Finding], Any]


@dataclass(frozen=True)
class HaltPolicy:
    """When a live finding should stop training; conservative by default (critical, >= 70%)."""

    min_severity: str = "critical"
    min_confidence: float = 0.7
    signatures: Optional[frozenset[str]] = None

    def __post_init__(self) -> None:
        if self.min_severity not in SEVERITY_ORDER:
            raise ValueError(f"min_severity must be one of {sorted(SEVERITY_ORDER, key=SEVERITY_ORDER.get)}, not {self.min_severity!r}")
        if not 0.0 <= self.min_confidence <= 1.0:
            raise ValueError(f"min_confidence must be within [0, 1], not {self.min_confidence!r}")
        if self.signatures is not None and not isinstance(self.signatures, frozenset):
            object.__setattr__(self, "signatures", frozenset(self.signatures))

    def should_halt(self, finding: Finding) -> bool:
        """True when this finding is severe, confident and (if listed) of a halting signature."""
        return (
            SEVERITY_ORDER[finding.severity] >= SEVERITY_ORDER[self.min_severity]
            and finding.confidence >= self.min_confidence
            and (self.signatures is None or finding.signature_id in self.signatures)
        )


class RunWatcher:
    """Tails a (possibly not yet existing) run; each tick returns only findings not reported before.

    A finding is keyed by its signature: it is reported when first seen and again only when its
    severity rises (warn -> critical). Sinks get each new finding; a sink that raises is
    reported once on the watcher's `errors` list and never stops the watcher.
    """

    def __init__(
        self,
        run_dir: str | os.PathLike[str],
        sinks: Iterable[Sink] = (),
        config: Mapping[str, Any] | None = None,
        config_path: str | os.PathLike[str] | None = None,
    ) -> None:
        self.run_dir = Path(run_dir)
        self.sinks = list(sinks)
        self.config = config
        self.config_path = config_path
        self.reported: dict[str, str] = {}  # signature_id -> worst severity reported
        self.errors: list[str] = []
        self.ticks = 0
        self.last_error: Optional[str] = None

    def _diagnose(self) -> list[Finding]:
        from rlprobe.doctor.engine import diagnose_path
        from rlprobe.errors import RlprobeError

        if not (self.run_dir / "manifest.json").exists():
            return []  # not started yet
        try:
            diagnoses = diagnose_path(self.run_dir, self.config_path, self.config)
        except RlprobeError as exc:
            self.last_error = str(exc)  # e.g. no steps yet; the next tick tries again
            return []
        self.last_error = None
        return [f for d in diagnoses for f in d.findings]

    def tick(self) -> list[Finding]:
        """Read what is new, diagnose, and return (and send to sinks) the findings not reported before."""
        self.ticks += 1
        new: list[Finding] = []
        for finding in self._diagnose():
            before = self.reported.get(finding.signature_id)
            if before is not None and SEVERITY_ORDER[finding.severity] <= SEVERITY_ORDER[before]:
                continue
            self.reported[finding.signature_id] = finding.severity
            new.append(finding)
        for finding in new:
            for sink in self.sinks:
                try:
                    sink(finding)
                except Exception as exc:  # a broken sink must never stop the watcher
                    self.errors.append(f"{getattr(sink, '__name__', sink)!s}: {type(exc).__name__}: {exc}")
        return new
