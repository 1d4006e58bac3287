"""Sample shards are never rewritten under their own name; readers take the newest copy of each.

A flush writes the shard that is still filling as a new version (shard-NNNNN.open-VVVVVV.parquet)
and deletes the version before it; a full shard, and every shard at close, is sealed as
shard-NNNNN.parquet. A reader that lists the folder in between two steps of that sees two copies
of one shard: the samples view must count it once.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from conftest import sample_rows
from rlprobe.layout import newest_shards, parse_shard, shard_name
from rlprobe.record import writer as writer_module
from rlprobe.record.writer import RunWriter
from rlprobe.schemas import RunManifest
from rlprobe.store import open_store


def shard_files(run: Path) -> list[str]:
    return sorted(p.name for p in (run / "samples").iterdir() if parse_shard(p.name))


def sample_ids(run: Path) -> list[str]:
    return [r[0] for r in open_store(run).rows("SELECT sample_id FROM samples ORDER BY sample_id")[2]]


@pytest.fixture
def small_shards(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(writer_module, "SAMPLES_PER_SHARD", 5)


def test_the_newest_copy_of_each_shard_wins() -> None:
    names = ["shard-00000.open-000001.parquet", "shard-00000.parquet", "shard-00001.open-000002.parquet",
             "shard-00001.open-000003.parquet", "shard-00002.parquet", ".shard-00003.parquet.abcd.tmp"]
    assert newest_shards(names) == ["shard-00000.parquet", "shard-00001.open-000003.parquet", "shard-00002.parquet"]
    assert shard_name(7) == "shard-00007.parquet"
    assert parse_shard(shard_name(7, 12)) == (7, 12)


def test_each_flush_leaves_one_open_version_and_close_seals_it(tmp_path: Path, small_shards: None) -> None:
    run = tmp_path / "run"
    w = RunWriter(run, RunManifest(run_id="r"))
    w.write_samples(sample_rows(0, 3))
    assert shard_files(run) == ["shard-00000.open-000001.parquet"]
    w.write_samples(sample_rows(1, 3))  # fills shard 0 (5 rows) and opens shard 1
    assert shard_files(run) == ["shard-00000.parquet", "shard-00001.open-000001.parquet"]
    w.write_samples(sample_rows(2, 1))
    assert shard_files(run) == ["shard-00000.parquet", "shard-00001.open-000002.parquet"]
    assert len(sample_ids(run)) == 7
    w.compact()
    assert shard_files(run) == ["shard-00000.parquet", "shard-00001.parquet"]
    assert len(sample_ids(run)) == 7


def test_a_listing_that_catches_two_copies_counts_the_shard_once(tmp_path: Path, small_shards: None) -> None:
    run = tmp_path / "run"
    w = RunWriter(run, RunManifest(run_id="r"))
    w.write_samples(sample_rows(0, 2))
    older = tmp_path / "older.parquet"
    shutil.copy(run / "samples" / shard_name(0, 1), older)
    w.write_samples(sample_rows(1, 2))
    expected = sample_ids(run)
    assert len(expected) == 4
    # the instant between writing version 2 and deleting version 1
    shutil.copy(older, run / "samples" / shard_name(0, 1))
    assert sample_ids(run) == expected
    # the instant between sealing the shard and deleting its last open version
    w.write_samples(sample_rows(2, 1))
    shutil.copy(older, run / "samples" / shard_name(0, 1))
    assert sample_ids(run) == sorted(expected + [r["sample_id"] for r in sample_rows(2, 1)])


def test_a_resumed_recording_seals_what_a_killed_writer_left_open(tmp_path: Path, small_shards: None) -> None:
    run = tmp_path / "run"
    w = RunWriter(run, RunManifest(run_id="r"))
    w.write_samples(sample_rows(0, 2))
    w.write_samples(sample_rows(1, 1))  # no close: the process was killed here
    before = sample_ids(run)
    resumed = RunWriter(run, RunManifest(run_id="r"))
    assert shard_files(run) == ["shard-00000.parquet"]
    assert sample_ids(run) == before
    resumed.write_samples(sample_rows(2, 1))
    assert shard_files(run) == ["shard-00000.parquet", "shard-00001.open-000001.parquet"]
    assert resumed.max_sample_serial() >= 0
    assert len(sample_ids(run)) == 4
