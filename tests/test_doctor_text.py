"""The doctor copies a run's samples without their text, and reads the text from the files only
for what reads it: the n-gram repetition of completions (REPETITION_SPIRAL when a run logs no
repetition_rate), the share of distinct completions (REWARD_STD_DEATH), a custom detector that
names a text column, and the report's samples. The findings are those of the same rows held in
memory with their text, over one run and over a root.
"""

from __future__ import annotations

from pathlib import Path

import pyarrow.parquet as pq
import pytest

from rlprobe.doctor import diagnose_path, session
from rlprobe.doctor.engine import diagnose_connection, diagnose_store, diagnose_tables
from rlprobe.doctor.config import load_config
from rlprobe.store import open_store
from rlprobe.synth import write_run


def without_repetition_rate(run_dir: Path) -> Path:
    """The run as a trainer that logs no repetition_rate records it (samples with text only)."""
    steps = pq.read_table(run_dir / "steps.parquet")
    pq.write_table(steps.drop_columns(["repetition_rate"]), run_dir / "steps.parquet")
    return run_dir


@pytest.fixture(scope="module")
def root(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("text") / "root"
    write_run(root / "loop", "REPETITION_SPIRAL", n_steps=400, seed=3)
    without_repetition_rate(root / "loop")
    write_run(root / "dead", "REWARD_STD_DEATH", n_steps=400, seed=5)
    write_run(root / "ok", "healthy", n_steps=400, seed=6)
    return root


def summary(d) -> tuple[list[tuple], list[str]]:
    return ([(f.signature_id, f.severity, f.confidence, f.first_step, f.evidence, f.links_to_samples) for f in d.findings],
            sorted(s.signature_id for s in d.skipped))


def test_the_doctors_copy_of_the_samples_holds_no_text(root: Path) -> None:
    store = open_store(root / "loop")
    text = session.materialize(store.con)
    copied = {r[0] for r in store.con.execute("DESCRIBE doctor_samples").fetchall()}
    assert "completion_text" not in copied and "prompt_text" not in copied and "reward_total" in copied
    # a statement that reads text gets the recording's samples, the same rows with their text
    sql = "SELECT count(*) AS n, count(completion_text) AS texts FROM v1.samples"
    with text.around(sql):
        (n, texts), = store.con.execute(sql).fetchall()
    assert n == texts == store.con.execute("SELECT count(*) FROM doctor_samples").fetchall()[0][0] > 0


def test_repetition_from_text_is_found_as_over_the_samples_held_in_memory(root: Path) -> None:
    store = open_store(root / "loop")
    steps = store.con.sql("SELECT * FROM v1.steps").to_arrow_table()
    samples = store.con.sql("SELECT * FROM v1.samples").to_arrow_table()
    (in_memory,) = diagnose_tables(steps, samples)
    (recorded,) = diagnose_path(root / "loop")
    f = next(f for f in recorded.findings if f.signature_id == "REPETITION_SPIRAL")
    assert f.evidence["source"] == "samples"
    assert summary(recorded) == summary(in_memory)


def test_a_root_is_diagnosed_as_its_runs_one_by_one_where_text_is_read(root: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    alone = {d.run_id: summary(d) for run in sorted(root.iterdir()) for d in diagnose_path(run)}
    for chunk_steps in (1_000_000, 500):  # one chunk; a run per chunk
        monkeypatch.setattr(session, "CHUNK_STEPS", chunk_steps)
        assert {d.run_id: summary(d) for d in diagnose_path(root)} == alone
    found = {f[0]: f[4] for findings, _ in alone.values() for f in findings}
    assert found["REPETITION_SPIRAL"]["source"] == "samples"  # from the completions' text
    assert "distinct_completions_during" in found["REWARD_STD_DEATH"]  # distinct texts per step


def test_a_custom_detector_reads_the_text(root: Path, tmp_path: Path) -> None:
    (tmp_path / "detectors").mkdir()
    (tmp_path / "detectors" / "looping.sql").write_text(
        "-- id: LONG_TEXT\n-- severity: info\n-- explanation: Some completion is long.\n"
        "SELECT min(step) AS first_step, max(length(completion_text)) AS longest\n"
        "FROM samples WHERE run_id = ? AND length(completion_text) > 0 HAVING count(*) > 0\n"
    )
    (tmp_path / "doctor.toml").write_text('[doctor]\ncustom_detectors = "detectors"\n')
    store = open_store(root / "loop")
    longest = store.con.execute("SELECT max(length(completion_text)) FROM v1.samples").fetchall()[0][0]
    runs = [{"run_id": store.con.execute("SELECT run_id FROM v1.runs").fetchall()[0][0], "steps": 400}]
    text = session.materialize(store.con)
    (d,) = diagnose_connection(store.con, runs, load_config(tmp_path / "doctor.toml"), text=text)
    assert [f.evidence for f in d.findings if f.signature_id == "LONG_TEXT"] == [{"longest": longest}]


def test_after_the_doctor_the_samples_view_has_its_text_for_the_report(root: Path) -> None:
    store = open_store(root / "loop")
    diagnose_store(store, load_config(None))
    ((n, texts),) = store.con.execute("SELECT count(*), count(completion_text) FROM v1.samples").fetchall()
    assert n == texts > 0
