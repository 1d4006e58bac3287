"""The writer thread's short cuts give exactly what the long way gives (issue 17, item 5).

Sampling orders rewards on a numpy array when a batch is plain dicts of plain numbers; a metric
name already seen skips its check; an int group id is its str(), which is its JSON text; a
shard is merged and sealed from the tables the writer wrote, unless its files changed behind the
writer's back. An idle writer sleeps until a flush is due, and the next log_* call wakes it.
"""

from __future__ import annotations

import json
import math
import random
import threading
import time
from pathlib import Path
from typing import Any, Callable

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from conftest import sample_rows
from rlprobe import Recorder
from rlprobe.layout import delta_name, shard_name
from rlprobe.record import coerce
from rlprobe.record import recorder as recorder_module
from rlprobe.record import writer as writer_module
from rlprobe.record.coerce import sample_row, step_row
from rlprobe.record.sampling import SamplingConfig, _reward_of, select
from rlprobe.record.writer import RunWriter
from rlprobe.schemas import RunManifest


def select_sample_by_sample(samples: list[Any], config: SamplingConfig, rng: random.Random) -> list[tuple[int, str]]:
    """The selection rule spelled out one sample at a time (rlprobe 0.2's code, kept as the reference)."""
    rewarded = sorted((r, i) for i, s in enumerate(samples) if (r := _reward_of(s)) is not None)
    chosen: dict[int, str] = {}
    for _, i in reversed(rewarded[len(rewarded) - config.top_k:] if config.top_k else []):
        chosen[i] = "top_k"
    for _, i in rewarded[: config.bottom_k]:
        chosen.setdefault(i, "bottom_k")
    middle = [i for i in range(len(samples)) if i not in chosen]
    for i in rng.sample(middle, min(config.random_k, len(middle))):
        chosen[i] = "random"
    return sorted(chosen.items())


REWARDS = [0.0, -0.0, 1.0, 1.0, 0.5, -2.5, math.inf, -math.inf, math.nan, None, 0, 1, 3, 10**20, 0.1 + 0.2, 0.3]


@pytest.mark.parametrize("config", [SamplingConfig(), SamplingConfig(top_k=5, bottom_k=5, random_k=0),
                                    SamplingConfig(top_k=0, bottom_k=1, random_k=3), SamplingConfig(top_k=9, bottom_k=9)])
def test_selection_on_a_reward_array_picks_what_the_sample_by_sample_rule_picks(config: SamplingConfig) -> None:
    draw = random.Random(5)
    for trial in range(300):
        batch = [{"reward_total": draw.choice(REWARDS), "completion_text": "x"} for _ in range(draw.randint(0, 12))]
        if trial % 7 == 0:
            for sample in batch[::2]:
                del sample["reward_total"]  # no reward at all
        rng_a, rng_b = random.Random(trial), random.Random(trial)
        assert select(batch, config, rng_a) == select_sample_by_sample(batch, config, rng_b), batch
        assert rng_a.random() == rng_b.random()  # the random draw consumed the generator the same way


class Reward:
    def __float__(self) -> float:
        return 0.7


def test_rewards_that_are_not_plain_numbers_follow_the_same_rules() -> None:
    batch = [{"reward_total": "0.9"}, {"reward_total": True}, {"reward_total": np.float32(0.25)},
             {"reward_total": Reward()}, {"reward_total": "junk"}, {"reward_total": [0.5]}, {"reward_total": 2**2000}]
    config = SamplingConfig(top_k=2, bottom_k=1, random_k=0)
    expected = select_sample_by_sample(batch[:-1], config, random.Random(1))
    assert expected == [(0, "top_k"), (1, "top_k"), (2, "bottom_k")]  # True counts as 1.0, "0.9" as 0.9
    assert select(batch[:-1], config, random.Random(1)) == expected
    for too_big in (batch, [{"reward_total": 2**2000}, {"reward_total": 1.0}]):
        with pytest.raises(OverflowError):  # as before: the recorder reports the whole call as a bad record
            select(too_big, config, random.Random(1))


def cold_and_warm(make: Callable[[], Any], monkeypatch: pytest.MonkeyPatch) -> tuple[Any, Any]:
    """make() with every name unknown (the full path), then again with the names just learnt."""
    monkeypatch.setattr(coerce, "_STEP_FLOAT_COLUMNS", {})
    monkeypatch.setattr(coerce, "_SAMPLE_FLOAT_COLUMNS", {})
    monkeypatch.setattr(coerce, "_DICT_COLUMNS", {coerce.REWARD_COMPONENT_PREFIX: {}, coerce.EXTRA_PREFIX: {}})
    return make(), make()


def test_a_step_logged_again_under_names_already_seen_gives_the_same_row(monkeypatch: pytest.MonkeyPatch) -> None:
    metrics = {"loss": 0.5, "kl_mean": 1, "lr": np.float64(1e-6), "tokens_per_s": 3.5, "extra.seen": 2.0,
               "reward_component.fmt": 1.0, "reward_components": {"correct": 1.0, "len": 7}, "extra": {"gpu": 0.25},
               "kl_positional": [0.1, 0.2], "bad\ud800name": 1.0, "entropy_mean": None, "step": 3.0}
    cold, warm = cold_and_warm(lambda: step_row(7, metrics, 123.0), monkeypatch)
    assert cold == warm
    row, problems = warm
    assert row == {"step": 7, "wall_time": 123.0, "loss": 0.5, "kl_mean": 1.0, "lr": 1e-6, "extra.tokens_per_s": 3.5,
                   "extra.seen": 2.0, "reward_component.fmt": 1.0, "reward_component.correct": 1.0,
                   "reward_component.len": 7.0, "extra.gpu": 0.25, "kl_positional": [0.1, 0.2]}
    assert len(problems) == 2 and "lone surrogate" in problems[0] and problems[1] == "step: given twice"


GROUP_IDS = [3, 3.5, True, np.int64(4), [1, "a"], {"g": 1}, "é", "plain", -(2**70)]


def test_a_group_id_is_stored_as_its_json_text_whatever_it_is(monkeypatch: pytest.MonkeyPatch) -> None:
    for group in GROUP_IDS:
        cold, warm = cold_and_warm(lambda: sample_row({"group_id": group, "reward_total": 1.0}, 0, 0), monkeypatch)
        assert cold == warm
        expected = group if isinstance(group, str) else json.dumps(group, default=str, ensure_ascii=False)
        assert warm[0]["group_id"] == expected, group
    assert sample_row({"group_id": 3}, 0, 0)[0]["group_id"] == "3"


def test_a_sample_logged_again_under_names_already_seen_gives_the_same_row(monkeypatch: pytest.MonkeyPatch) -> None:
    sample = {"prompt_text": "2+2?", "completion_text": "caf\u00e9 \U0001f600", "reward_total": 1, "advantage": 0.5,
              "completion_len": 4.0, "truncated": "false", "completion_token_ids": [1, 2], "group_id": "g",
              "reward_components": {"fmt": 1.0}, "extra": {"temp": 0.7}, "my_score": 0.25, "extra.kept": 1.0,
              "sample_id": "s-1", "step": 99, "rank": 5, "logprob_mean": None, "kl_contribution": "1e-3"}
    cold, warm = cold_and_warm(lambda: sample_row(sample, 3, 1), monkeypatch)
    assert cold == warm and warm[1] == []
    row = warm[0]
    assert row["step"] == 3 and row["rank"] == 1 and row["reward_total"] == 1.0 and row["completion_len"] == 4
    assert row["truncated"] is False and row["extra.my_score"] == 0.25 and row["extra.kept"] == 1.0
    assert row["completion_text"] == "caf\u00e9 \U0001f600" and row["kl_contribution"] == 0.001


def test_text_with_a_lone_surrogate_is_repaired_and_reported_every_time() -> None:
    for _ in range(2):
        row, problems = sample_row({"completion_text": "a\ud800b", "prompt_text": "ok"}, 0, 0)
        assert row["completion_text"] == "a\ufffdb" and len(problems) == 1 and "completion_text" in problems[0]


# -- shards sealed and merged from what the writer wrote --------------------------------------
@pytest.fixture
def small_shards(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(writer_module, "SAMPLES_PER_SHARD", 7)


@pytest.fixture
def frequent_merges(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(writer_module, "DELTAS_PER_MERGE", 2)


def write_in_flushes(run: Path) -> None:
    w = RunWriter(run, RunManifest(run_id="r"))
    for step, n in enumerate([1, 2, 1, 3, 2, 1, 4, 1]):
        rows = sample_rows(step, n)
        if step == 3:
            for row in rows:
                row["extra.score"] = 0.5  # a column only some deltas have
                del row["completion_token_ids"]
        w.write_samples(rows)
    w.compact()


def sealed(run: Path) -> list[pa.Table]:
    return [pq.read_table(p) for p in sorted((run / "samples").glob("shard-?????.parquet"))]


def test_shards_merged_and_sealed_from_memory_equal_shards_merged_and_sealed_from_their_files(
        tmp_path: Path, small_shards: None, frequent_merges: None, monkeypatch: pytest.MonkeyPatch) -> None:
    write_in_flushes(tmp_path / "memory")
    monkeypatch.setattr(writer_module._WrittenShard, "holds", lambda self, files: False)
    write_in_flushes(tmp_path / "files")
    from_memory, from_files = sealed(tmp_path / "memory"), sealed(tmp_path / "files")
    assert [t.num_rows for t in from_memory] == [7, 7, 1]
    assert len(from_memory) == len(from_files)
    for a, b in zip(from_memory, from_files):
        assert a.schema == b.schema and a.equals(b)


def test_a_delta_deleted_behind_the_writers_back_is_missing_from_the_seal_as_from_every_read(
        tmp_path: Path, small_shards: None) -> None:
    run = tmp_path / "run"
    w = RunWriter(run, RunManifest(run_id="r"))
    w.write_samples(sample_rows(0, 2))
    w.write_samples(sample_rows(1, 2))
    (run / "samples" / delta_name(0, 1)).unlink()
    w.write_samples(sample_rows(2, 3))  # fills shard 0: sealed from the files readers read
    assert pq.read_table(run / "samples" / shard_name(0)).column("step").to_pylist() == [1, 1, 2, 2, 2]


# -- the idle writer --------------------------------------------------------------------------
class RecordedEvent(threading.Event):
    """An Event that remembers the timeout of each wait."""

    def __init__(self) -> None:
        super().__init__()
        self.timeouts: list[float | None] = []

    def wait(self, timeout: float | None = None) -> bool:
        self.timeouts.append(timeout)
        return super().wait(timeout)


def eventually(check: Callable[[], bool], within_s: float = 20.0) -> bool:
    deadline = time.monotonic() + within_s
    while not check():
        if time.monotonic() > deadline:
            return False
        time.sleep(0.01)
    return True


def test_an_idle_writer_sleeps_a_flush_interval_and_the_next_log_call_wakes_it(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    with monkeypatch.context() as patch:
        patch.setattr(recorder_module.threading, "Event", RecordedEvent)
        rec = Recorder(tmp_path / "run", flush_interval_s=3600.0, install_handlers=False)
    wake = rec._wake
    assert isinstance(wake, RecordedEvent)
    try:
        assert eventually(lambda: wake.timeouts[-1:] == [3600.0])  # asleep, not polling every 0.2 s
        rec.log_step(1, loss=1.0)
        assert eventually(lambda: len(rec._pending_steps) == 1)  # taken off the queue long before the hour
    finally:
        rec.close()
    assert pq.read_table(tmp_path / "run" / "steps.parquet").column("loss").to_pylist() == [1.0]


def test_rows_pending_in_an_idle_writer_are_written_when_the_flush_is_due(tmp_path: Path) -> None:
    rec = Recorder(tmp_path / "run", flush_interval_s=0.3, install_handlers=False)
    try:
        rec.log_step(1, loss=1.0)
        rec.log_samples(1, [{"completion_text": "a", "reward_total": 1.0}])
        parts = tmp_path / "run" / "steps"
        assert eventually(lambda: parts.is_dir() and any(parts.iterdir()))  # no flush() called
        assert eventually(lambda: any((tmp_path / "run" / "samples").glob("shard-*.parquet")))
    finally:
        rec.close()
