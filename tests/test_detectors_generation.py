"""The generation detectors on synthetic runs: TRUNCATION_STARVE, REPETITION_SPIRAL, THROUGHPUT_ROT.

Each pathology is caught near its true onset and ranked first among the warnings of the whole
catalog (THROUGHPUT_ROT is info by design, never a warning); downstream truncation is reported
as a symptom of its root cause; the healthy families stay quiet; a run without the inputs lists
the detector as skipped. Seeds are from the train range (< 100,000), like the benchmark's
tuning split.
"""

from __future__ import annotations

import random
from typing import Any

import numpy as np
import pyarrow as pa
import pytest

from rlprobe.doctor.engine import diagnose_tables
from rlprobe.doctor.findings import Diagnosis, Finding
from rlprobe.doctor.registry import all_detectors
from rlprobe.record.sampling import SamplingConfig, select
from rlprobe.synth import HEALTHY_FAMILIES, make_run

MINE = ("TRUNCATION_STARVE", "REPETITION_SPIRAL", "THROUGHPUT_ROT")
# the generation detectors ask ENTROPY_BLOWUP's and REPETITION_SPIRAL's own tests for root causes
ONLY_MINE = {k: {"enabled": False} for k in all_detectors() if k not in MINE}


def tables(kind: str, n_steps: int, seed: int, samples: bool = False, drop: tuple[str, ...] = ()) -> tuple[pa.Table, pa.Table | None, Any]:
    """A synthetic run as the steps (and samples) views show it (benchmarks/detectors.py's to_tables)."""
    run = make_run(kind, n_steps=n_steps, seed=seed)
    n = len(run.steps)
    cols: dict[str, pa.Array] = {"run_id": pa.array(["run"] * n, pa.string()), "step": pa.array(run.steps, pa.int64())}
    for name, values in run.series.items():
        if name not in drop:
            cols[name] = pa.array(np.asarray(values, dtype=float), pa.float64(), mask=~np.asarray(run.logged(name), dtype=bool))
    for name, values in run.components.items():
        cols[f"reward_component.{name}"] = pa.array(np.asarray(values, dtype=float), pa.float64())
    rows: list[dict[str, Any]] = []
    if samples:
        rng = random.Random(seed)
        for step in run.steps[:: max(1, n // 200)]:
            batch = run.samples(int(step))
            for i, reason in select(batch, SamplingConfig(), rng):
                s = dict(batch[i])
                s.pop("reward_components", None)
                s.update(run_id="run", step=int(step), rank=0, sample_id=f"{step}-{i}", capture_reason=reason)
                rows.append(s)
    return pa.table(cols), (pa.Table.from_pylist(rows) if rows else None), run.truth


def diagnose(kind: str, n_steps: int, seed: int, config: dict[str, Any] | None = None, **kw: Any) -> tuple[Diagnosis, Any]:
    steps, samples, truth = tables(kind, n_steps, seed, **kw)
    return diagnose_tables(steps, samples, config)[0], truth


def alarms(d: Diagnosis) -> list[Finding]:
    return [f for f in d.findings if f.severity != "info"]


def finding(d: Diagnosis, sig: str) -> Finding | None:
    return next((f for f in d.findings if f.signature_id == sig), None)


# -- pathologies: caught, near the onset, ranked first ----------------------------------------


@pytest.mark.parametrize("sig, n_steps, seed", [
    ("TRUNCATION_STARVE", 150, 0),
    ("TRUNCATION_STARVE", 3000, 2),
    ("REPETITION_SPIRAL", 150, 2),
    ("REPETITION_SPIRAL", 3000, 0),
])
def test_pathology_is_caught_near_its_onset_and_ranked_first(sig: str, n_steps: int, seed: int) -> None:
    d, truth = diagnose(sig, n_steps, seed, samples=True)
    top = alarms(d)
    assert top and top[0].signature_id == sig, [(f.signature_id, f.severity, f.confidence) for f in top]
    f = top[0]
    # the onset is where the data shows it: the synthetic process may start a few steps before
    # any completion is actually cut (its share is exactly 0 until then)
    seen = truth.onset_step
    if sig == "TRUNCATION_STARVE":
        run = make_run(sig, n_steps=n_steps, seed=seed)
        share = np.nan_to_num(run.series["max_len_hit_frac"], nan=0.0)
        seen = int(run.steps[np.flatnonzero((run.steps >= truth.onset_step) & (share > 0))[0]])
    assert abs(f.first_step - seen) <= max(15, 0.03 * n_steps), (f.first_step, seen, truth.onset_step)
    assert f.severity == "critical" and f.confidence >= 0.8
    assert f.links_to_samples and f.suggested_actions


def test_truncation_evidence_shows_the_cap_and_the_truncated_samples() -> None:
    d, truth = diagnose("TRUNCATION_STARVE", 3000, 2, config=ONLY_MINE, samples=True)
    f = finding(d, "TRUNCATION_STARVE")
    assert f is not None
    assert f.evidence["truncated_share_while_high"] >= 0.25 > f.evidence["truncated_share_before"]
    if "length_cap_seen" in f.evidence:
        assert f.evidence["length_cap_seen"] == truth.params["cap"]
    assert f.evidence["captured_samples_truncated"] > 0.2


def test_repetition_is_found_in_the_text_when_repetition_rate_is_not_logged() -> None:
    for n_steps, seed in ((150, 0), (3000, 1)):
        d, truth = diagnose("REPETITION_SPIRAL", n_steps, seed, config=ONLY_MINE, samples=True, drop=("repetition_rate",))
        f = finding(d, "REPETITION_SPIRAL")
        assert f is not None and f.severity != "info" and f.evidence["source"] == "samples"
        assert f.evidence["text_looping_samples_while_high"] > 0.5
        # loops take over the captured text later than a logged repetition_rate shows them
        assert truth.onset_step <= f.first_step <= truth.onset_step + 0.25 * n_steps


def test_throughput_rot_says_whether_length_explains_it_and_warns_only_when_it_does_not() -> None:
    for n_steps, seed in ((150, 1), (3000, 2)):
        d, truth = diagnose("THROUGHPUT_ROT", n_steps, seed)
        f = finding(d, "THROUGHPUT_ROT")
        assert f is not None and f.severity in ("info", "warn")
        assert f.first_step >= truth.onset_step - 0.05 * n_steps
        assert f.evidence["ratio_while_high"] >= 1.5
        if "completion_len_ratio" in f.evidence:
            assert f.evidence["completion_len_ratio"] < 1.3 and "not the length" in f.explanation
        # a warning only for a slow-down of 2x or more that the logged length does not explain
        assert (f.severity == "warn") == (f.evidence["ratio_while_high"] >= 2.0 and "not the length" in f.explanation)


def test_throughput_rot_with_growing_length_blames_the_length() -> None:
    d, _ = diagnose("healthy:reasoning_growth", 2000, 4, config=ONLY_MINE)
    f = finding(d, "THROUGHPUT_ROT")
    assert f is not None and f.severity == "info" and "longer" in f.explanation


# -- root causes: downstream truncation steps back to info -----------------------------------


def test_truncation_after_an_entropy_blowup_is_a_symptom() -> None:
    d, _ = diagnose("ENTROPY_BLOWUP", 800, 2)
    f = finding(d, "TRUNCATION_STARVE")
    assert f is not None and f.explained_by == "ENTROPY_BLOWUP" and "see ENTROPY_BLOWUP" in f.explanation
    order = [x.signature_id for x in d.findings]
    assert order[0] == "ENTROPY_BLOWUP" and order.index("TRUNCATION_STARVE") > 0


def test_truncation_from_a_repetition_loop_is_a_symptom() -> None:
    d, _ = diagnose("REPETITION_SPIRAL", 4747, 3)
    f = finding(d, "TRUNCATION_STARVE")
    assert f is not None and f.explained_by == "REPETITION_SPIRAL" and "see REPETITION_SPIRAL" in f.explanation
    assert alarms(d)[0].signature_id == "REPETITION_SPIRAL"


# -- healthy runs stay quiet ------------------------------------------------------------------


@pytest.mark.parametrize("family", list(HEALTHY_FAMILIES))
def test_healthy_family_stays_quiet(family: str) -> None:
    for seed, n_steps in ((12, 300), (31, 2000)):
        d, _ = diagnose(f"healthy:{family}", n_steps, seed, config=ONLY_MINE, samples=seed == 12)
        loud = [(f.signature_id, f.severity, f.first_step) for f in alarms(d)]
        assert not loud, f"healthy:{family} seed {seed}: {loud}"


# -- edge cases -------------------------------------------------------------------------------


def test_missing_inputs_are_skipped_with_a_reason() -> None:
    d, _ = diagnose("healthy:steady", 300, 5, drop=("max_len_hit_frac", "truncation_rate", "eos_rate", "completion_len_mean",
                                                   "repetition_rate", "step_time_s", "generation_time_s"))
    skipped = {s.signature_id: s.reason for s in d.skipped}
    assert "max_len_hit_frac" in skipped["TRUNCATION_STARVE"] and "completion_len_mean" in skipped["TRUNCATION_STARVE"]
    assert "repetition_rate" in skipped["REPETITION_SPIRAL"] and "samples" in skipped["REPETITION_SPIRAL"]
    assert "step_time_s" in skipped["THROUGHPUT_ROT"]


def test_a_very_short_run_is_diagnosed_without_errors() -> None:
    d, _ = diagnose("TRUNCATION_STARVE", 12, 0, samples=True)
    assert not [s for s in d.skipped if s.reason.startswith("detector error")]
    assert not [f for f in alarms(d) if f.signature_id in ("REPETITION_SPIRAL", "THROUGHPUT_ROT")]
