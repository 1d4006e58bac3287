"""Hostile values: one bad value costs that value (or its row), never the rest of the stream.

Before, one value Arrow cannot hold (a step of 2**63, a lone surrogate in a name or a text)
failed the writer's whole pending batch, which was retried with the bad row in it at every
flush: every later step or sample of the run was lost, and `dropped` stayed 0.
"""

from __future__ import annotations

import json

import pytest

from rlprobe import Recorder
from rlprobe.record.writer import RunWriter
from rlprobe.schemas import RunManifest

from recorder_helpers import FAST, events, rows, step_numbers

BAD_STEP_CALLS = {
    "a step of 2**63": lambda rec: rec.log_step(2**63, loss=1.0),
    "a metric name with a lone surrogate": lambda rec: rec.log_step(5, **{"loss\ud800": 1.0}),
    "an extra key with a lone surrogate": lambda rec: rec.log_step(5, extra={"x\udfff": 1.0}),
    "step=True": lambda rec: rec.log_step(True, loss=1.0),
}

BAD_SAMPLE_CALLS = {
    "completion text with a lone surrogate": lambda rec: rec.log_samples(5, [{"completion_text": "ok \ud800", "reward_total": 1.0}], select=False),
    "completion_len=2**63": lambda rec: rec.log_samples(5, [{"completion_len": 2**63, "reward_total": 1.0}], select=False),
    "a token id of 2**63": lambda rec: rec.log_samples(5, [{"completion_token_ids": [1, 2**63], "reward_total": 1.0}], select=False),
    "a sample step of 2**63": lambda rec: rec.log_samples(2**63, [{"reward_total": 1.0}], select=False),
}


def _record_around(run, bad) -> Recorder:
    """Steps and samples 0-4 and 6-9 around one bad call, flushed on both sides of it."""
    rec = Recorder(run, **FAST)
    for step in range(5):
        rec.log_step(step, loss=float(step))
        rec.log_samples(step, [{"prompt_text": f"p{step}", "reward_total": 1.0}], select=False)
    assert rec.flush()
    bad(rec)
    for step in range(6, 10):
        rec.log_step(step, loss=float(step))
        rec.log_samples(step, [{"prompt_text": f"p{step}", "reward_total": 1.0}], select=False)
    rec.close()
    return rec


@pytest.mark.parametrize("bad", BAD_STEP_CALLS.values(), ids=BAD_STEP_CALLS.keys())
def test_one_bad_step_value_costs_at_most_its_row(tmp_path, bad):
    run = tmp_path / "run"
    rec = _record_around(run, bad)
    got = step_numbers(run)
    assert [s for s in got if s != 5] == [0, 1, 2, 3, 4, 6, 7, 8, 9], got
    assert 1 not in [r["step"] for r in rows(run, "SELECT step FROM steps WHERE loss = 1.0 AND step <> 1")]
    assert events(run, "bad_record"), "the bad value is reported"
    assert rec.write_failures == 0 and rec.dropped == 0


@pytest.mark.parametrize("bad", BAD_SAMPLE_CALLS.values(), ids=BAD_SAMPLE_CALLS.keys())
def test_one_bad_sample_value_costs_at_most_its_sample(tmp_path, bad):
    run = tmp_path / "run"
    rec = _record_around(run, bad)
    prompts = sorted(r["prompt_text"] for r in rows(run, "SELECT prompt_text FROM samples WHERE prompt_text IS NOT NULL"))
    assert prompts == sorted(f"p{s}" for s in (0, 1, 2, 3, 4, 6, 7, 8, 9))
    assert events(run, "bad_record")
    assert rec.write_failures == 0 and rec.dropped == 0


def test_a_lone_surrogate_in_a_text_keeps_the_text_with_a_replacement_character(tmp_path):
    run = tmp_path / "run"
    with Recorder(run, **FAST) as rec:
        rec.log_samples(0, [{"completion_text": "a\ud800b", "reward_total": 1.0}], select=False)
    assert [r["completion_text"] for r in rows(run, "SELECT completion_text FROM samples")] == ["a\ufffdb"]
    assert "U+FFFD" in events(run, "bad_record")[0]["message"]


def test_step_true_is_not_step_one(tmp_path):
    run = tmp_path / "run"
    with Recorder(run, **FAST) as rec:
        rec.log_step(True, loss=1.0)
        rec.log_step(2, loss=2.0)
    assert step_numbers(run) == [2]
    assert "bool" in events(run, "bad_record")[0]["message"]


def test_the_writer_leaves_out_a_row_arrow_cannot_hold_and_writes_the_others(tmp_path):
    writer = RunWriter(tmp_path / "run", RunManifest(run_id="r"))
    writer.write_steps([{"step": 0, "loss": 0.0}, {"step": 2**63, "loss": 1.0}, {"step": 2, "loss": 2.0}])
    writer.compact()
    assert step_numbers(tmp_path / "run") == [0, 2]
    [(what, step, reason)] = writer.take_rejected()
    assert (what, step) == ("step", 2**63) and "OverflowError" in reason


# -- nothing on the training thread raises ------------------------------------------------------

class Unprintable:
    def __str__(self) -> str:
        raise RuntimeError("no str for you")

    __repr__ = __str__


def _self_referencing() -> dict:
    d: dict = {"a": 1}
    d["me"] = d
    return d


HOSTILE_CALLS = {
    "log_event with a lone surrogate in message and data": lambda rec: rec.log_event("note", message="m\ud800", text="t\udfff", **{"k\ud800": 1}),
    "log_event with a dict that contains itself": lambda rec: rec.log_event("note", data=_self_referencing()),
    "log_event with objects whose str() raises": lambda rec: rec.log_event(Unprintable(), message=Unprintable(), obj=Unprintable()),
    "log_event with kind given twice": lambda rec: rec.log_event("note", kind="other"),
    "log_event with a step of 2**63": lambda rec: rec.log_event("note", step=2**63),
    "log_step with step given twice": lambda rec: rec.log_step(1, **{"step": 2}),
    "log_step with no step": lambda rec: rec.log_step(loss=1.0),
    "log_samples with a misplaced keyword": lambda rec: rec.log_samples(1, [], step=2, colour="red"),
}


@pytest.mark.parametrize("call", HOSTILE_CALLS.values(), ids=HOSTILE_CALLS.keys())
def test_no_hostile_call_raises_and_every_event_line_is_valid_json(tmp_path, call):
    run = tmp_path / "run"
    with Recorder(run, **FAST) as rec:
        call(rec)  # must not raise
        rec.log_step(0, loss=0.0)
        rec.log_event("after")
    assert rec.write_failures == 0, rec.last_write_error
    lines = (run / "events.jsonl").read_bytes().decode("utf-8").splitlines()
    assert all(json.loads(line) for line in lines)
    kinds = [e["kind"] for e in events(run)]
    assert "after" in kinds and kinds[-1] == "recorder_close", kinds
    assert 0 in step_numbers(run)


def test_keyword_arguments_still_work(tmp_path):
    run = tmp_path / "run"
    with Recorder(run, **FAST) as rec:
        rec.log_step(step=3, loss=3.0)
        rec.log_samples(step=3, samples=[{"prompt_text": "p", "reward_total": 1.0}], select=False)
        rec.log_event(kind="checkpoint", step=3, message="saved", path="ckpt-3")
    assert step_numbers(run) == [3]
    assert rows(run, "SELECT prompt_text FROM samples") == [{"prompt_text": "p"}]
    [ckpt] = events(run, "checkpoint")
    assert (ckpt["step"], ckpt["message"], ckpt["data"]) == (3, "saved", {"path": "ckpt-3"})
    assert events(run, "bad_record") == []
