"""`rlprobe watch` on files a trainer is writing: a console log, JSONL, trainer_state.json, TensorBoard.

The source grows between looks the way a trainer writes it (a line at a time, a line cut
mid-write, a trainer state rewritten at each checkpoint); each look must turn only what is new
into steps, never a step twice, and the live doctor must say what `rlprobe doctor` says.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner, Result

import rlprobe
from rlprobe.cli import cli
from rlprobe.doctor.live import RunWatcher
from rlprobe.importers.follow import FollowedRecording, SourceFollower


def invoke(*args: Any) -> Result:
    return CliRunner().invoke(cli, [str(a) for a in args], catch_exceptions=False)


def steps_of(run_dir: Path, columns: str = "step") -> list[dict[str, Any]]:
    return rlprobe.RunReader(run_dir).query(f"SELECT {columns} FROM steps ORDER BY step").to_pylist()


def synth_dicts(tmp_path: Path, pathology: str, n_steps: int = 300) -> list[dict[str, Any]]:
    """The steps of a synthetic run as the dicts a trainer would print (rlprobe's own names)."""
    assert invoke("synth", tmp_path / "synth", "--pathology", pathology, "--n-steps", n_steps, "--seed", "3").exit_code == 0
    rows = rlprobe.RunReader(tmp_path / "synth").query("SELECT * EXCLUDE (run_id, kl_positional) FROM steps ORDER BY step").to_pylist()
    return [{k: v for k, v in r.items() if v is not None} for r in rows]


def test_a_growing_console_log_is_read_line_by_line(tmp_path: Path) -> None:
    log = tmp_path / "train.log"
    log.write_text("TrainingArguments(logging_steps=5, output_dir=out)\n")
    follower = SourceFollower(log, "console")
    recording = FollowedRecording(follower, tmp_path / "rec")

    def append(text: str) -> None:
        with open(log, "a") as fh:
            fh.write(text)

    append("{'loss': 0.1, 'reward': 0.5}\n{'loss': 0.2, 're")  # the second dict is still being printed
    assert recording.sync() == 1
    append("ward': 0.6}\n")
    assert recording.sync() == 1 and recording.sync() == 0  # nothing new, nothing written
    append("  5%|#         | 15/300 [00:10<03:00]\r{'loss': 0.3, 'reward': 0.7}\n")
    assert recording.sync() == 1
    recording.close()
    assert steps_of(tmp_path / "rec", "step, reward_mean") == [
        {"step": 5, "reward_mean": 0.5}, {"step": 10, "reward_mean": 0.6}, {"step": 15, "reward_mean": 0.7}]
    assert "logging_steps=5 printed" in follower.step_rule
    [run] = rlprobe.list_runs(tmp_path / "rec")
    assert run["status"] == "closed"


def test_jsonl_and_a_rewritten_trainer_state(tmp_path: Path) -> None:
    jsonl = tmp_path / "metrics.jsonl"
    jsonl.write_text(json.dumps({"step": 1, "reward": 0.1}) + "\n" + '{"step": 2, "rew')
    follower = SourceFollower(jsonl, "jsonl")
    assert [e.step for e in follower.poll()] == [1]
    with open(jsonl, "a") as fh:
        fh.write('ard": 0.2}\n')
    assert [e.step for e in follower.poll()] == [2]

    state = tmp_path / "trainer_state.json"
    state.write_text(json.dumps({"log_history": [{"step": 5, "reward": 0.1}]}))
    follower = SourceFollower(state, "trainer_state")
    assert [e.step for e in follower.poll()] == [5]
    state.write_text(json.dumps({"log_history": [{"step": 5, "reward": 0.1}, {"step": 10, "reward": 0.2}]}))
    assert [e.step for e in follower.poll()] == [10]  # the checkpoint rewrote the whole file
    state.write_text('{"log_history": [{"step": 5')  # caught mid-rewrite: read again next time
    assert follower.poll() == []


def test_a_tensorboard_step_is_held_until_its_tags_are_all_in(tmp_path: Path) -> None:
    pytest.importorskip("tensorboard")
    from tensorboard.compat.proto import event_pb2, summary_pb2
    from tensorboard.summary.writer.event_file_writer import EventFileWriter

    writer = EventFileWriter(str(tmp_path / "tb"))

    def scalar(step: int, tag: str, value: float) -> None:  # HF's callback: one event per tag
        writer.add_event(event_pb2.Event(step=step, summary=summary_pb2.Summary(
            value=[summary_pb2.Summary.Value(tag=tag, simple_value=value)])))
        writer.flush()

    follower = SourceFollower(tmp_path / "tb", "tensorboard")
    scalar(1, "train/reward", 0.1), scalar(1, "train/kl", 0.01), scalar(2, "train/reward", 0.2)
    assert [e.step for e in follower.poll()] == [1]
    scalar(2, "train/kl", 0.02)  # the rest of step 2 arrives after the look
    assert follower.poll() == []
    writer.close()
    [last] = follower.close()
    assert (last.step, last.mapped.fields) == (2, pytest.approx({"reward_mean": 0.2, "kl_mean": 0.02}))  # float32 in TB


def test_watch_on_a_log_says_what_doctor_says(tmp_path: Path) -> None:
    dicts = synth_dicts(tmp_path, "ENTROPY_COLLAPSE")
    log = tmp_path / "train.log"
    log.write_text("logging_steps=1\n" + "\n".join(repr(d) for d in dicts) + "\n")

    doctor = invoke("doctor", log, "--json")
    watch = invoke("watch", log, "--max-ticks", 1, "--poll", 0, "--json", "--into", tmp_path / "kept")
    assert doctor.exit_code == watch.exit_code == 1  # a critical finding: the same gate
    seen = {json.loads(line)["signature_id"] for line in watch.stdout.splitlines() if line.strip()}
    assert seen == {f["signature_id"] for f in json.loads(doctor.stdout)["findings"]}
    assert len(steps_of(tmp_path / "kept")) == len(dicts)
    assert "the recording of" in watch.stderr


def test_watch_waits_for_a_log_that_does_not_exist_yet(tmp_path: Path) -> None:
    result = invoke("watch", tmp_path / "later.log", "--max-ticks", 2, "--poll", 0)
    assert result.exit_code == 2 and "waiting for source" in result.stderr and "never appeared" in result.stderr


def test_watch_refuses_a_source_that_is_not_what_it_says(tmp_path: Path) -> None:
    binary = tmp_path / "train.log"
    binary.write_bytes(bytes(range(256)) * 4)
    result = invoke("watch", binary, "--max-ticks", 1, "--poll", 0)
    assert result.exit_code == 2 and result.stderr.strip().count("\n") == 0 and "unknown format" in result.stderr
    kept = tmp_path / "kept"
    kept.mkdir()
    (kept / "x").write_text("")
    log = tmp_path / "ok.log"
    log.write_text("{'loss': 0.1, 'reward': 0.5}\n")
    result = invoke("watch", log, "--max-ticks", 1, "--into", kept)
    assert result.exit_code == 2 and "not empty" in result.stderr


def test_a_watcher_on_a_followed_source_sees_each_new_step(tmp_path: Path) -> None:
    """The public RunWatcher API on a recording a follower feeds: one tick per look, incremental."""
    dicts = synth_dicts(tmp_path, "REWARD_COLLAPSE", n_steps=240)
    jsonl = tmp_path / "m.jsonl"
    jsonl.write_text("")
    recording = FollowedRecording(SourceFollower(jsonl, "jsonl"), tmp_path / "rec")
    watcher = RunWatcher(tmp_path / "rec")
    try:
        seen: set[str] = set()
        for start in range(0, len(dicts), 60):
            with open(jsonl, "a") as fh:
                fh.write("".join(json.dumps(d) + "\n" for d in dicts[start:start + 60]))
            assert recording.sync() == 60
            seen |= {f.signature_id for f in watcher.tick()}
            assert watcher.steps == start + 60
        assert "REWARD_COLLAPSE" in seen
    finally:
        watcher.close()
        recording.close()
