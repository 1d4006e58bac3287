"""What the doctor says: findings, skipped detectors, and how findings are ranked."""

from __future__ import annotations

from typing import Any, Literal, Optional

from pydantic import BaseModel, Field

Severity = Literal["info", "warn", "critical"]
SEVERITY_ORDER: dict[str, int] = {"info": 0, "warn": 1, "critical": 2}


class Finding(BaseModel):
    """One diagnosed problem: what, how bad, since when, on what evidence, what to try."""

    signature_id: str
    severity: Severity
    confidence: float = Field(ge=0.0, le=1.0)
    first_step: Optional[int] = None
    explanation: str
    evidence: dict[str, Any] = Field(default_factory=dict)
    suggested_actions: list[str] = Field(default_factory=list)
    links_to_samples: list[str] = Field(default_factory=list)
    # additive: where the condition held (for shading a chart) and which run it is about
    last_step: Optional[int] = None
    run_id: Optional[str] = None
    # additive: the signature whose finding explains this one (see rlprobe.doctor.causes), and
    # whether the condition still held at the last logged step (False: it ended, the run recovered)
    explained_by: Optional[str] = None
    ongoing: Optional[bool] = None


class Skipped(BaseModel):
    """A detector that did not run on this recording, and why (usually: inputs not logged)."""

    signature_id: str
    reason: str


class Diagnosis(BaseModel):
    """Everything one doctor pass produced for one run."""

    run_id: Optional[str] = None
    run_dir: Optional[str] = None
    steps: int = 0
    last_step: Optional[int] = None
    findings: list[Finding] = Field(default_factory=list)
    skipped: list[Skipped] = Field(default_factory=list)

    @property
    def worst(self) -> Optional[Finding]:
        """The top-ranked finding, if any."""
        return self.findings[0] if self.findings else None

    @property
    def has_critical(self) -> bool:
        """True when any finding is critical (the CLI's exit 1)."""
        return any(f.severity == "critical" for f in self.findings)


def rank_key(finding: Finding) -> tuple[int, int, float, int]:
    """Severity first, then what still holds before what has ended, then confidence, then the earliest first_step."""
    first = finding.first_step if finding.first_step is not None else 2**62
    return (-SEVERITY_ORDER[finding.severity], 1 if finding.ongoing is False else 0, -finding.confidence, first)


def rank(findings: list[Finding]) -> list[Finding]:
    """Findings in the order a user should read them: each cause first, its symptoms under it.

    A finding explained by another (``explained_by``) is placed right after its cause; a cause
    and its symptoms rank as a group, by the group's worst severity, then by rank_key of the
    cause. Findings that explain nothing and are explained by nothing are groups of one: by
    severity, then whether the condition still holds (an episode the run recovered from ranks
    after one that goes on), then confidence, then the earliest first_step.
    """
    ids = {f.signature_id for f in findings}
    children: dict[str, list[Finding]] = {}
    roots: list[Finding] = []
    for f in findings:
        if f.explained_by is not None and f.explained_by in ids and f.explained_by != f.signature_id:
            children.setdefault(f.explained_by, []).append(f)
        else:
            roots.append(f)

    def members(f: Finding, seen: frozenset[str]) -> list[Finding]:
        out = [f]
        for child in sorted(children.get(f.signature_id, []), key=rank_key):
            if child.signature_id not in seen:
                out += members(child, seen | {child.signature_id})
        return out

    groups = [members(root, frozenset({root.signature_id})) for root in roots]

    def group_key(group: list[Finding]) -> tuple[int, int, float, int]:
        worst = max(SEVERITY_ORDER[f.severity] for f in group)
        head = rank_key(group[0])
        return (-worst, head[1], head[2], head[3])

    ordered = [f for group in sorted(groups, key=group_key) for f in group]
    placed = {id(f) for f in ordered}
    return ordered + sorted((f for f in findings if id(f) not in placed), key=rank_key)
