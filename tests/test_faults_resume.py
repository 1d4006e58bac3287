"""Resuming what a killed or broken session left: corrupt parts, a half-done compaction, temp files.

Each case builds the leftovers a real failure leaves on disk, resumes with a Recorder and checks
what the views read afterwards.
"""

from __future__ import annotations

import shutil

import pyarrow as pa
import pyarrow.parquet as pq

from rlprobe import Recorder
from rlprobe.record.writer import RunWriter
from rlprobe.schemas import RunManifest

from recorder_helpers import FAST, events, part_files, rows, step_numbers


def _live_run(run, steps_per_part=((0, 1, 2), (3, 4, 5), (6, 7, 8))) -> RunWriter:
    writer = RunWriter(run, RunManifest(run_id="r"))
    for steps in steps_per_part:
        writer.write_steps([{"step": s, "loss": float(s)} for s in steps])
    return writer


def test_close_after_resuming_a_run_with_a_corrupt_part_quarantines_it_and_keeps_the_rest(tmp_path):
    run = tmp_path / "run"
    _live_run(run)
    bad = part_files(run)[1]
    bad.write_bytes(b"PAR1 this is not a parquet file PAR1")
    rec = Recorder(run, **FAST)
    rec.log_step(9, loss=9.0)
    rec.close()  # raised ArrowInvalid before
    assert step_numbers(run) == [0, 1, 2, 6, 7, 8, 9]
    assert (run / "steps.parquet").exists() and not bad.exists()
    [kept] = list(bad.parent.glob(bad.name + ".quarantined-*"))
    assert kept.read_bytes().startswith(b"PAR1 this is not"), "the bad bytes are kept, not deleted"
    [event] = events(run, "quarantined")
    assert event["data"]["file"] == "steps/part-000001.parquet" and kept.name == event["data"]["quarantined_as"]
    assert rec.write_failures == 0


def test_a_part_whose_step_column_is_text_is_quarantined_not_fatal(tmp_path):
    run = tmp_path / "run"
    _live_run(run, ((0, 1),))
    pq.write_table(pa.table({"step": ["two"], "loss": [2.0]}), run / "steps" / "part-000001.parquet")
    with Recorder(run, **FAST) as rec:
        rec.log_step(3, loss=3.0)
    assert step_numbers(run) == [0, 1, 3]
    assert "not an integer" in events(run, "quarantined")[0]["data"]["reason"]


def test_a_resume_after_a_kill_inside_the_compaction_window_counts_each_step_once(tmp_path):
    run = tmp_path / "run"
    writer = _live_run(run)
    parts = part_files(run)
    saved = tmp_path / "saved"
    saved.mkdir()
    for p in parts:
        shutil.copy(p, saved / p.name)
    writer.compact()  # then "killed" before deleting the parts: put them back
    parts[0].parent.mkdir(exist_ok=True)
    for p in parts:
        shutil.copy(saved / p.name, p)
    assert step_numbers(run) == list(range(9)), "readers ignore parts beside steps.parquet"
    with Recorder(run, **FAST) as rec:
        rec.log_step(9, loss=9.0)
        assert rec.flush()
        live = rows(run, "SELECT count(*) AS n, count(DISTINCT step) AS d FROM steps")
    assert live == [{"n": 10, "d": 10}], "while live, every step once"
    assert step_numbers(run) == list(range(10))


def test_orphan_temp_files_of_a_killed_writer_are_removed_on_resume(tmp_path):
    run = tmp_path / "run"
    _live_run(run, ((0,),))
    orphans = [run / ".manifest.json.0123abcd.tmp", run / "steps" / ".part-000001.parquet.89abcdef.tmp"]
    for orphan in orphans:
        orphan.write_bytes(b"half a file")
    keep = run / ".my-own-notes.tmp"  # not one of ours: left alone
    keep.write_text("mine")
    with Recorder(run, **FAST) as rec:
        rec.log_step(1, loss=1.0)
    assert not any(o.exists() for o in orphans)
    assert keep.exists()
    assert step_numbers(run) == [0, 1]
