"""The catalog as data and the one rule for symptoms, by example.

Runs are built as small tables of what a trainer would log (diagnose_tables), so each test says
in numbers what the run looked like.
"""

from __future__ import annotations

import ast
from pathlib import Path

import numpy as np
import pyarrow as pa
import pytest

from rlprobe.doctor.catalog import BY_ID, LINKS, SIGNATURES, causal_order, causes_of
from rlprobe.doctor.causes import apply_links, explains
from rlprobe.doctor.engine import diagnose_tables
from rlprobe.doctor.findings import Finding, rank
from rlprobe.doctor.registry import all_detectors

REPO = Path(__file__).resolve().parents[1]


def table(n: int, step_every: int = 1, **cols: np.ndarray) -> pa.Table:
    steps = np.arange(1, n + 1) * step_every
    data = {"run_id": pa.array(["run"] * n), "step": pa.array(steps, pa.int64())}
    data.update({k: pa.array(np.asarray(v, dtype=float), pa.float64()) for k, v in cols.items()})
    return pa.table(data)


def noisy(n: int, level: float, sd: float, seed: int) -> np.ndarray:
    return level + np.random.default_rng(seed).normal(0, sd, n)


def by_id(d) -> dict[str, Finding]:  # type: ignore[no-untyped-def]
    return {f.signature_id: f for f in d.findings}


# -- the catalog -------------------------------------------------------------------------------


def test_every_signature_has_a_detector_a_docs_page_and_its_parameters_on_it() -> None:
    detectors = all_detectors()
    assert set(detectors) == {s.id for s in SIGNATURES}
    for sig in SIGNATURES:
        page = REPO / sig.page
        assert page.exists(), f"{sig.id} has no docs page at {sig.page}"
        text = page.read_text(encoding="utf-8")
        for name in sig.params:
            assert f"`{name}`" in text or f"{name} =" in text, f"{sig.page} does not mention the parameter {name}"


def test_causes_run_before_their_symptoms_and_links_name_catalog_signatures() -> None:
    order = causal_order()
    assert set(order) == set(BY_ID)
    for link in LINKS:
        assert order.index(link.cause) < order.index(link.symptom), link
    assert list(all_detectors()) == list(order)
    assert {link.cause for link in causes_of("TRUNCATION_STARVE")} >= {"ENTROPY_BLOWUP", "REPETITION_SPIRAL"}


def test_no_detector_module_imports_another() -> None:
    folder = REPO / "rlprobe" / "doctor" / "detectors"
    modules = {p.stem for p in folder.glob("*.py") if p.stem != "__init__"}
    for path in folder.glob("*.py"):
        if path.stem == "__init__":
            continue
        tree = ast.parse(path.read_text(encoding="utf-8"))
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom) and node.module:
                assert not any(node.module.endswith(f"detectors.{m}") for m in modules), f"{path.name} imports {node.module}"
            assert not (isinstance(node, ast.Name) and node.id == "DETECTORS"), f"{path.name} reaches into the registry"


# -- the one rule for symptoms ----------------------------------------------------------------


def f(sig: str, severity: str, first: int, last: int, ongoing: bool | None = True, confidence: float = 0.8) -> Finding:
    return Finding(signature_id=sig, severity=severity, confidence=confidence, first_step=first, last_step=last,
                   explanation=f"{sig} happened.", ongoing=ongoing)


def test_a_symptom_keeps_its_finding_ranks_under_its_cause_and_says_so() -> None:
    found = apply_links([f("TRUNCATION_STARVE", "critical", 80, 200, confidence=0.99),
                         f("ENTROPY_BLOWUP", "critical", 70, 200, confidence=0.6),
                         f("KL_BLOWUP", "warn", 10, 200)], span_steps=200)
    ts = next(x for x in found if x.signature_id == "TRUNCATION_STARVE")
    assert ts.explained_by == "ENTROPY_BLOWUP" and ts.severity == "critical" and ts.confidence == 0.99
    assert "entropy blow-up from step 70" in ts.explanation and "see ENTROPY_BLOWUP" in ts.explanation
    # KL_BLOWUP began long before the blow-up: not its symptom
    assert next(x for x in found if x.signature_id == "KL_BLOWUP").explained_by is None
    assert [x.signature_id for x in rank(found)] == ["ENTROPY_BLOWUP", "TRUNCATION_STARVE", "KL_BLOWUP"]


def test_what_a_cause_must_be_to_explain() -> None:
    symptom = f("REWARD_COLLAPSE", "warn", 95, 200)
    assert explains(f("TRUNCATION_STARVE", "warn", 90, 200), symptom, tol=10)
    assert not explains(f("TRUNCATION_STARVE", "info", 90, 200), symptom, tol=10)  # info explains nothing
    assert not explains(f("TRUNCATION_STARVE", "warn", 150, 200), symptom, tol=10)  # began well after
    assert not explains(f("TRUNCATION_STARVE", "warn", 10, 40), symptom, tol=10)  # over long before
    # over while the symptom goes on long after: something else keeps it going
    assert not explains(f("TRUNCATION_STARVE", "warn", 95, 110, ongoing=False), symptom, tol=10)
    # showed up at the same logged point, milder: not called the root of a severe symptom
    assert not explains(f("ENTROPY_BLOWUP", "warn", 95, 200), f("TRUNCATION_STARVE", "critical", 95, 200), tol=10)
    assert explains(f("ENTROPY_BLOWUP", "warn", 80, 200), f("TRUNCATION_STARVE", "critical", 95, 200), tol=10)


def blowup_run(n: int = 200) -> pa.Table:
    """Entropy 0.2 -> 3 at step 100; from then on every completion is cut at the cap."""
    step = np.arange(1, n + 1)
    after = step >= 100
    return table(
        n,
        entropy_mean=np.where(after, 3.0, 0.2) * noisy(n, 1.0, 0.03, 1),
        max_len_hit_frac=np.where(after, 0.98, 0.01),
        reward_mean=np.where(after, 0.02, 0.6) + noisy(n, 0.0, 0.02, 2),
    )


def test_disabling_a_cause_leaves_its_symptom_standing_on_its_own() -> None:
    (d,) = diagnose_tables(blowup_run())
    found = by_id(d)
    assert d.findings[0].signature_id == "ENTROPY_BLOWUP"
    assert found["TRUNCATION_STARVE"].explained_by == "ENTROPY_BLOWUP"
    (alone,) = diagnose_tables(blowup_run(), config={"ENTROPY_BLOWUP": {"enabled": False}})
    ts = by_id(alone)["TRUNCATION_STARVE"]
    assert ts.explained_by is None and "ENTROPY_BLOWUP" not in ts.explanation
    assert ts.severity == found["TRUNCATION_STARVE"].severity and ts.first_step == found["TRUNCATION_STARVE"].first_step
