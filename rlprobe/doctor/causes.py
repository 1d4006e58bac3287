"""The one rule for symptoms: a finding explained by another keeps itself, ranks under its cause
and says so.

The catalog declares which signatures explain which (rlprobe.doctor.catalog.LINKS). After every
detector has run over a run, each finding is checked against the findings of its declared
causes: a cause explains it when the cause is at least a warning (and, if it did not begin before
the symptom, at least as severe: a mild anomaly that shows up together with a severe one is not
called its root), and its episode was under way
when the symptom began (it began no later than shortly after the symptom, and had not ended
well before it), and, if the cause has ended, the symptom did not outlast it by much (a cause
that is over cannot explain what still holds long after). Of several causes the one that began
first wins. Nothing else changes about the
symptom: its severity, confidence and evidence stay what its own detector said, so disabling the
cause in doctor.toml (or a cause that does not fire) leaves the symptom exactly as it would be
alone.
"""

from __future__ import annotations

from rlprobe.doctor.catalog import BY_ID, causes_of
from rlprobe.doctor.findings import SEVERITY_ORDER, Finding

# How far apart a cause's and a symptom's onsets may be and still be one story: onsets are read
# off logged points by different tests (a level, a sustained ratio), so two things that began
# together can show a couple of logged points apart.
TOLERANCE_FRAC = 0.05


def tolerance(span_steps: int, stride: int = 1) -> int:
    """Steps by which a cause may start after its symptom: two logging intervals, or 5% of the run."""
    return max(2 * max(1, int(stride)), int(TOLERANCE_FRAC * max(0, span_steps)))


def explains(cause: Finding, symptom: Finding, tol: int, implies: bool = False) -> bool:
    """True when cause's episode was under way when symptom began (within tol steps).

    implies: the cause's condition entails the symptom's (Link.implies), so which showed up
    first or worse does not decide it.
    """
    if SEVERITY_ORDER[cause.severity] < SEVERITY_ORDER["warn"]:
        return False
    if cause.first_step is None or symptom.first_step is None:
        return False
    # When both showed up at the same logged point (or the cause after), the data cannot order
    # them: then a milder anomaly is not called the root of a more severe one.
    if not implies and cause.first_step >= symptom.first_step and SEVERITY_ORDER[cause.severity] < SEVERITY_ORDER[symptom.severity]:
        return False
    if cause.first_step > symptom.first_step + tol:
        return False
    last = cause.last_step if cause.last_step is not None else cause.first_step
    if last < symptom.first_step - tol:
        return False
    # a cause that ended cannot explain a symptom that still holds long after it: something
    # else keeps it going
    if cause.ongoing is False and symptom.ongoing is not False and symptom.last_step is not None and last + tol < symptom.last_step:
        return False
    return True


def apply_links(findings: list[Finding], span_steps: int, stride: int = 1) -> list[Finding]:
    """The findings of one run, each symptom marked with the cause that explains it."""
    by_id = {f.signature_id: f for f in findings}
    tol = tolerance(span_steps, stride)
    out = []
    for f in findings:
        candidates = [by_id[link.cause] for link in causes_of(f.signature_id)
                      if link.cause in by_id and explains(by_id[link.cause], f, tol, link.implies)]
        if not candidates:
            out.append(f)
            continue
        cause = min(candidates, key=lambda c: (c.first_step, -SEVERITY_ORDER[c.severity], -c.confidence))
        why = next(link.why for link in causes_of(f.signature_id) if link.cause == cause.signature_id)
        noun = BY_ID[cause.signature_id].noun or cause.signature_id
        sentence = (f" It follows {noun} from step {cause.first_step}, the likelier root cause ({why}; "
                    f"see {cause.signature_id}).")
        out.append(f.model_copy(update={
            "explained_by": cause.signature_id,
            "explanation": f.explanation.rstrip() + sentence,
            "evidence": {**f.evidence, "explained_by": cause.signature_id, "explained_by_first_step": cause.first_step},
        }))
    return out
