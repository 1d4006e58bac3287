"""A step written twice is one row in the steps view, live or closed, merged as compaction merges it.

An overlapping resume (steps 50-149 logged over a crashed session's 0-99) used to show both rows
while live, and kept them for good if that process crashed too; a kill inside the compaction
window followed by a resume gave 2075 rows for 1510 distinct steps.
"""

from __future__ import annotations

from conftest import make_run

from recorder_helpers import rows


def _overlapping_resume(run):
    writer = make_run(run, list(range(100)), state="crashed", steps_per_part=25)
    # the resumed session re-runs 50-99 from a checkpoint and goes on to 149; it logs loss only
    writer.write_steps([{"step": s, "wall_time": 2e9 + s, "loss": -float(s)} for s in range(50, 150)])
    return writer


def _steps(run):
    return rows(run, "SELECT step, loss, reward_mean FROM steps ORDER BY step")


def test_an_overlapping_resume_reads_one_row_per_step_while_live_and_after_a_crash(tmp_path):
    run = tmp_path / "run"
    writer = _overlapping_resume(run)
    live = _steps(run)
    assert [r["step"] for r in live] == list(range(150))
    by_step = {r["step"]: r for r in live}
    assert by_step[60]["loss"] == -60.0, "the later write wins"
    assert by_step[60]["reward_mean"] == 30.0, "a column the later write did not log keeps the earlier value"
    assert by_step[10]["loss"] == 3005.0 and by_step[120]["reward_mean"] is None
    assert rows(run, "SELECT steps_recorded, first_step, last_step FROM runs") == [{"steps_recorded": 150, "first_step": 0, "last_step": 149}]
    writer.compact()
    assert _steps(run) == live, "the live view and the compacted file agree row for row"


def test_a_step_logged_in_two_calls_of_one_flush_is_one_row(tmp_path):
    run = tmp_path / "run"
    writer = make_run(run, 3, state="live")
    writer.write_steps([{"step": 5, "loss": 1.0}, {"step": 5, "reward_mean": 2.0}, {"step": 5, "loss": 3.0}])
    assert rows(run, "SELECT loss, reward_mean FROM steps WHERE step = 5") == [{"loss": 3.0, "reward_mean": 2.0}]
    assert rows(run, "SELECT steps_recorded FROM runs") == [{"steps_recorded": 4}]


def test_duplicates_in_one_run_of_a_root_leave_the_other_runs_as_they_are(tmp_path):
    _overlapping_resume(tmp_path / "a")
    make_run(tmp_path / "b", 7, state="closed")
    got = rows(tmp_path, "SELECT run_id, count(*) AS n, count(DISTINCT step) AS d FROM steps GROUP BY run_id ORDER BY run_id")
    assert got == [{"run_id": "a", "n": 150, "d": 150}, {"run_id": "b", "n": 7, "d": 7}]
