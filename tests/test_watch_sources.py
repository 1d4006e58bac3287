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
from shared_data import CORPUS  # ../shared, found from a worktree too


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


# -- a console log that never prints logging_steps: the same numbers as an import of the same text ----------

def _bar(n: int, total: int) -> str:
    return f"  {100 * n // total:>3}%|#         | {n}/{total} [00:{n % 60:02d}<00:10,  1.20s/it]"


def _trainer_dict(step: int) -> str:
    return "{'loss': 0.01, 'reward': %s, 'completions/clipped_ratio': %s, 'epoch': 0.01}" % (
        round(0.9 - step / 400, 4), 1.0 if step > 60 else 0.0)


def buffered_trainer_log(every: int, total: int, block: int) -> list[str]:
    """A Trainer's stdout and stderr as the file receives them: the bar (stderr) at every step, the dicts
    (stdout, buffered) `block` at a time when the buffer fills, the rest and the totals at exit."""
    lines = ["***** Running training *****", f"  Total optimization steps = {total}"]
    held: list[str] = []
    for step in range(1, total + 1):
        lines.append(_bar(step, total))
        if step % every == 0:
            held.append(_trainer_dict(step))
            if len(held) > block:
                lines += held[:block]
                held = held[block:]
    return lines + held + [
        "{'train_runtime': 900.0, 'train_samples_per_second': 1.0, 'train_steps_per_second': 0.1, 'train_loss': 0.01}"]


def imported_steps(text: str, tmp_path: Path) -> dict[int, int]:
    """line -> step, as `rlprobe import` numbers the entries of this text."""
    from rlprobe.importers import console_log

    prefix = tmp_path / "prefix.log"
    prefix.write_text(text)
    return {e.line: e.step for e in console_log.parse(prefix).entries}


def handed_out(follower: SourceFollower) -> dict[int, int]:
    """line -> step of every entry the follower handed out so far (a renumbering replaces them all)."""
    seen: dict[int, int] = {}
    poll = follower.poll

    def spy() -> list[Any]:
        out = poll()
        if follower.renumbered:
            seen.clear()
        seen.update({e.line: e.step for e in out})
        return out

    follower.poll = spy  # type: ignore[method-assign]
    return seen


def test_a_live_log_without_logging_steps_is_numbered_as_an_import_of_what_was_read(tmp_path: Path) -> None:
    """Each look numbers what it read as an import of that text would; a renumbering rewrites the recording."""
    lines = buffered_trainer_log(every=5, total=100, block=4)
    log = tmp_path / "train.log"
    log.write_text("")
    follower = SourceFollower(log, "console")
    seen = handed_out(follower)
    recording = FollowedRecording(follower, tmp_path / "rec")
    watcher = RunWatcher(tmp_path / "rec")
    firsts: list[int] = []  # the first entry's step, each time it changed
    try:
        for n in range(1, len(lines) + 1):  # a line at a time: the most a follower can be asked to renumber
            with open(log, "a") as fh:
                fh.write(lines[n - 1] + "\n")
            recording.sync()
            assert seen == imported_steps("\n".join(lines[:n]) + "\n", tmp_path)
            if seen and (not firsts or firsts[-1] != min(seen.values())):
                firsts.append(min(seen.values()))
            if follower.renumbered or n in (60, 120):  # the recording and its watcher: no step twice, none lost
                assert [r["step"] for r in steps_of(tmp_path / "rec")] == sorted(seen.values())
                watcher.tick()
                assert watcher.steps == len(seen) and watcher.last_step == max(seen.values())
        # While the run goes, each entry can only lower N (the progress bar's bound), down to the true 5.
        assert firsts == sorted(firsts, reverse=True) and firsts[-1] == 5 and recording.renumbered == len(firsts) - 1
        events = [json.loads(e) for e in (tmp_path / "rec" / "events.jsonl").read_text().splitlines()]
        assert "by its progress bar" in [e for e in events if e["kind"] == "steps_renumbered"][-1]["message"]
    finally:
        watcher.close()
        recording.close()
    assert [r["step"] for r in steps_of(tmp_path / "rec")] == list(range(5, 101, 5))
    assert "completed run of 100 optimization steps" in follower.step_rule


CORPUS_LOG = CORPUS / "grpo_qwen25_7b_gsm8k_rho0.30_s43_lengthcollapse.log"


@pytest.mark.skipif(not CORPUS_LOG.exists(), reason="../shared/realdata/corpus not present")
def test_watch_on_a_real_log_gives_the_steps_and_alerts_of_doctor(tmp_path: Path) -> None:
    """A real TRL log that never prints logging_steps (every 5, read from its totals): watch and doctor agree."""
    doctor = invoke("doctor", CORPUS_LOG, "--json")
    watch = invoke("watch", CORPUS_LOG, "--max-ticks", 1, "--poll", 0, "--json", "--into", tmp_path / "kept")
    assert doctor.exit_code == watch.exit_code == 1
    watched = {(f["signature_id"], f["first_step"]) for f in map(json.loads, watch.stdout.splitlines())}
    assert watched == {(f["signature_id"], f["first_step"]) for f in json.loads(doctor.stdout)["findings"]}
    assert ("TRUNCATION_STARVE", 75) in watched
    assert [r["step"] for r in steps_of(tmp_path / "kept")] == list(range(5, 201, 5))


@pytest.mark.skipif(not CORPUS_LOG.exists(), reason="../shared/realdata/corpus not present")
def test_a_real_log_followed_as_it_grows_ends_with_the_steps_of_its_import(tmp_path: Path) -> None:
    data = CORPUS_LOG.read_bytes()
    log = tmp_path / "live.log"
    log.write_bytes(b"")
    follower = SourceFollower(log, "console")
    seen = handed_out(follower)
    recording = FollowedRecording(follower, tmp_path / "rec")
    for cut in range(4096, len(data) + 4096, 4096):  # 4 KiB at a time, lines cut anywhere
        log.write_bytes(data[:cut])
        recording.sync()
        assert seen == imported_steps(data[:data[:cut].rfind(b"\n") + 1].decode(), tmp_path)
    recording.close()
    assert [r["step"] for r in steps_of(tmp_path / "rec")] == list(range(5, 201, 5))


def test_watch_says_when_steps_are_renumbered_and_reports_its_findings_again(tmp_path: Path, capsys: Any) -> None:
    from rlprobe.cli.watch import _sync, _Target

    lines = buffered_trainer_log(every=5, total=100, block=4)
    first_dict = next(i for i, line in enumerate(lines) if line.startswith("{"))
    log = tmp_path / "train.log"
    log.write_text("\n".join(lines[:first_dict + 1]) + "\n")  # one entry, the bar at 25: N <= 25
    recording = FollowedRecording(SourceFollower(log, "console"), tmp_path / "rec")
    watcher = RunWatcher(tmp_path / "rec")
    target = _Target(None, watcher, recording)
    try:
        _sync(target, recording.sync)
        watcher.reported["TRUNCATION_STARVE"] = target.worst["TRUNCATION_STARVE"] = "warn"  # as if printed at step 25
        assert recording.renumbered == 0 and "revised" not in capsys.readouterr().err
        with open(log, "a") as fh:
            fh.write("\n".join(lines[first_dict + 1:first_dict + 4]) + "\n")  # three more: N <= 25 // 4 = 6
        _sync(target, recording.sync)
        err = capsys.readouterr().err
        assert recording.renumbered == 1 and "step numbers revised, 4 steps rewritten" in err
        assert "reported again" in err and watcher.reported == {} and target.worst == {}
    finally:
        watcher.close()
        recording.close()


# -- a TensorBoard logdir holding several runs: each is watched ------------------------------------------------

def write_tb_steps(folder: Path, dicts: list[dict[str, Any]]) -> None:
    """One event per step with every scalar of the step (torch's SummaryWriter.add_scalars would write the same values)."""
    pytest.importorskip("tensorboard")
    from tensorboard.compat.proto import event_pb2, summary_pb2
    from tensorboard.summary.writer.event_file_writer import EventFileWriter

    writer = EventFileWriter(str(folder))
    for row in dicts:
        values = [summary_pb2.Summary.Value(tag=f"train/{k}", simple_value=float(v)) for k, v in row.items()
                  if k != "step" and isinstance(v, (int, float))]
        writer.add_event(event_pb2.Event(step=int(row["step"]), summary=summary_pb2.Summary(value=values)))
    writer.close()


def test_watch_on_a_tensorboard_logdir_watches_each_run(tmp_path: Path) -> None:
    logs = tmp_path / "logs"
    write_tb_steps(logs / "grpo-collapse", synth_dicts(tmp_path / "a", "ENTROPY_COLLAPSE", n_steps=200))
    write_tb_steps(logs / "sweep" / "grpo-ok", synth_dicts(tmp_path / "b", "healthy", n_steps=200))

    watch = invoke("watch", logs, "--max-ticks", 1, "--poll", 0, "--json", "--into", tmp_path / "kept")
    assert watch.exit_code == 1, watch.output
    assert "following 2 runs of the logdir" in watch.stderr and "grpo-collapse, sweep/grpo-ok" in watch.stderr
    watched = {(f["run"], f["signature_id"], f["first_step"]) for f in map(json.loads, watch.stdout.splitlines())}
    for name in ("grpo-collapse", "sweep/grpo-ok"):  # each run: what doctor says of it alone
        doctor = json.loads(invoke("doctor", logs / name, "--json").stdout)
        assert {(n, s, f) for n, s, f in watched if n == name} == {
            (name, f["signature_id"], f["first_step"]) for f in doctor["findings"]}
    assert any(s == "ENTROPY_COLLAPSE" for _, s, _ in watched)
    assert len(steps_of(tmp_path / "kept" / "grpo-collapse")) == len(steps_of(tmp_path / "kept" / "sweep" / "grpo-ok")) == 200

    text = invoke("watch", logs, "--max-ticks", 1, "--poll", 0)
    assert "ENTROPY_COLLAPSE" in text.stdout and "in grpo-collapse" in text.stdout


def test_a_run_started_in_a_watched_logdir_joins(tmp_path: Path) -> None:
    from rlprobe.cli.watch import _Followed

    logs = tmp_path / "logs"
    rows = [{"step": s, "reward": 0.1} for s in range(1, 4)]
    write_tb_steps(logs / "first", rows)
    followed = _Followed(logs, "tensorboard", None, tmp_path / "kept", logdir=True)
    try:
        assert [name for name, _ in followed.discover()] == ["first"]
        assert followed.discover() == []
        write_tb_steps(logs / "second", rows)  # the trainer started another run
        [(name, recording)] = followed.discover()
        assert name == "second" and recording.run_dir == tmp_path / "kept" / "second"
    finally:
        followed.close()
