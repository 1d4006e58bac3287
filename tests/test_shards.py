"""Sample shards are never rewritten; readers take each shard once, whatever instant they list.

A flush writes only its new rows, as the next delta of the shard that is filling
(shard-NNNNN.delta-VVVVVV.parquet); a full shard, and every shard at close, is sealed as
shard-NNNNN.parquet from its deltas, which are deleted a little later. Earlier writers wrote the
filling shard as whole-shard versions (shard-NNNNN.open-VVVVVV.parquet, the newest wins): those
still read, and a resume seals them.
"""

from __future__ import annotations

from pathlib import Path

import pyarrow.parquet as pq
import pytest

from conftest import sample_rows
from rlprobe.layout import delta_name, newest_shards, parse_shard, shard_name
from rlprobe.record import writer as writer_module
from rlprobe.record.writer import RunWriter, _table
from rlprobe.schemas import SAMPLE_COLUMN_TYPES, RunManifest
from rlprobe.store import open_store


def shard_files(run: Path) -> list[str]:
    return sorted(p.name for p in (run / "samples").iterdir() if parse_shard(p.name))


def sample_ids(run: Path) -> list[str]:
    return [r[0] for r in open_store(run).rows("SELECT sample_id FROM samples ORDER BY sample_id")[2]]


@pytest.fixture
def small_shards(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(writer_module, "SAMPLES_PER_SHARD", 5)


def test_per_shard_the_sealed_file_wins_else_every_delta_else_the_newest_open_version() -> None:
    names = ["shard-00000.delta-000001.parquet", "shard-00000.parquet", "shard-00001.delta-000002.parquet",
             "shard-00001.delta-000001.parquet", "shard-00002.open-000001.parquet", "shard-00002.open-000003.parquet",
             "shard-00003.parquet", ".shard-00004.parquet.abcd.tmp"]
    assert newest_shards(names) == ["shard-00000.parquet", "shard-00001.delta-000001.parquet", "shard-00001.delta-000002.parquet",
                                    "shard-00002.open-000003.parquet", "shard-00003.parquet"]
    assert shard_name(7) == "shard-00007.parquet" and delta_name(7, 2) == "shard-00007.delta-000002.parquet"
    assert parse_shard(shard_name(7, 12)) == (7, 12)


def test_each_flush_writes_only_its_rows_and_a_full_shard_is_sealed(tmp_path: Path, small_shards: None) -> None:
    run = tmp_path / "run"
    w = RunWriter(run, RunManifest(run_id="r"))
    w.write_samples(sample_rows(0, 3))
    assert shard_files(run) == ["shard-00000.delta-000001.parquet"]
    w.write_samples(sample_rows(1, 3))  # fills shard 0 (5 rows): sealed; its deltas stay a while
    assert shard_files(run) == ["shard-00000.delta-000001.parquet", "shard-00000.delta-000002.parquet",
                                "shard-00000.parquet", "shard-00001.delta-000001.parquet"]
    assert pq.read_metadata(run / "samples" / "shard-00001.delta-000001.parquet").num_rows == 1
    w.write_samples(sample_rows(2, 1))
    assert len(sample_ids(run)) == 7
    w.compact()
    assert shard_files(run) == ["shard-00000.parquet", "shard-00001.parquet"]
    assert len(sample_ids(run)) == 7


def test_the_deltas_a_seal_replaced_are_deleted_after_the_grace_period(tmp_path: Path, small_shards: None,
                                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(writer_module, "_SUPERSEDED_GRACE_S", 0.0)
    run = tmp_path / "run"
    w = RunWriter(run, RunManifest(run_id="r"))
    w.write_samples(sample_rows(0, 5))
    w.write_samples(sample_rows(1, 1))
    assert shard_files(run) == ["shard-00000.parquet", "shard-00001.delta-000001.parquet"]


def test_a_listing_between_a_seal_and_the_deltas_deletion_counts_each_sample_once(tmp_path: Path, small_shards: None) -> None:
    run = tmp_path / "run"
    w = RunWriter(run, RunManifest(run_id="r"))
    w.write_samples(sample_rows(0, 2))
    w.write_samples(sample_rows(1, 2))
    w.write_samples(sample_rows(2, 1))  # shard 0 sealed; its deltas still there
    assert "shard-00000.parquet" in shard_files(run) and "shard-00000.delta-000001.parquet" in shard_files(run)
    assert len(sample_ids(run)) == len(set(sample_ids(run))) == 5


def test_a_resumed_recording_seals_what_a_killed_writer_left_filling(tmp_path: Path, small_shards: None) -> None:
    run = tmp_path / "run"
    w = RunWriter(run, RunManifest(run_id="r"))
    w.write_samples(sample_rows(0, 2))
    w.write_samples(sample_rows(1, 1))  # no close: the process was killed here
    before = sample_ids(run)
    resumed = RunWriter(run, RunManifest(run_id="r"))
    assert shard_files(run) == ["shard-00000.parquet"]
    assert sample_ids(run) == before
    resumed.write_samples(sample_rows(2, 1))
    assert shard_files(run) == ["shard-00000.parquet", "shard-00001.delta-000001.parquet"]
    assert resumed.max_sample_serial() >= 0
    assert len(sample_ids(run)) == 4


def _legacy_open_versions(run: Path) -> list[str]:
    """Shard 0 as an earlier writer left it: versions 1 and 2 of the whole filling shard."""
    RunWriter(run, RunManifest(run_id="r"))
    folder = run / "samples"
    folder.mkdir()
    rows = sample_rows(0, 3)
    pq.write_table(_table(rows[:2], SAMPLE_COLUMN_TYPES), folder / shard_name(0, 1))
    pq.write_table(_table(rows, SAMPLE_COLUMN_TYPES), folder / shard_name(0, 2))
    return sorted(r["sample_id"] for r in rows)


def test_open_versions_of_earlier_writers_read_newest_first_and_a_resume_seals_them(tmp_path: Path) -> None:
    run = tmp_path / "run"
    expected = _legacy_open_versions(run)
    assert sample_ids(run) == expected
    RunWriter(run, RunManifest(run_id="r"))
    assert shard_files(run) == ["shard-00000.parquet"]
    assert sample_ids(run) == expected


def test_a_corrupt_delta_is_quarantined_at_the_seal_and_the_others_kept(tmp_path: Path, small_shards: None) -> None:
    run = tmp_path / "run"
    w = RunWriter(run, RunManifest(run_id="r"))
    w.write_samples(sample_rows(0, 2))
    w.write_samples(sample_rows(1, 2))
    (run / "samples" / delta_name(0, 1)).write_bytes(b"PAR1 garbage PAR1")
    w.compact()
    assert shard_files(run) == ["shard-00000.parquet"]
    assert [sid.split("-")[0] for sid in sample_ids(run)] == ["1", "1"]
    assert list((run / "samples").glob("shard-00000.delta-000001.parquet.quarantined-*"))


def test_a_sealed_shard_is_the_deltas_rows_in_order(tmp_path: Path, small_shards: None) -> None:
    run = tmp_path / "run"
    w = RunWriter(run, RunManifest(run_id="r"))
    for step in range(5):
        w.write_samples(sample_rows(step, 1))
    sealed = pq.read_table(run / "samples" / shard_name(0))
    assert sealed.column("step").to_pylist() == [0, 1, 2, 3, 4]


def test_a_live_shard_is_never_more_than_a_few_files(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(writer_module, "DELTAS_PER_MERGE", 4)
    monkeypatch.setattr(writer_module, "_SUPERSEDED_GRACE_S", 0.0)
    run = tmp_path / "run"
    w = RunWriter(run, RunManifest(run_id="r"))
    for step in range(10):  # ten flushes of one sample each, in one shard
        w.write_samples(sample_rows(step, 1))
    assert len(newest_shards(shard_files(run))) <= 4 + 1
    assert "shard-00000.open-000008.parquet" in shard_files(run), "deltas 1..8 merged into the open version named by them"
    assert [sid.split("-")[0] for sid in sample_ids(run)] == [str(s) for s in range(10)]
    w.compact()
    assert shard_files(run) == ["shard-00000.parquet"]
    assert len(sample_ids(run)) == 10


def test_a_listing_between_a_merge_and_the_deletions_counts_each_sample_once(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(writer_module, "DELTAS_PER_MERGE", 3)
    run = tmp_path / "run"
    w = RunWriter(run, RunManifest(run_id="r"))
    for step in range(5):
        w.write_samples(sample_rows(step, 1))
    assert {"shard-00000.open-000003.parquet", "shard-00000.delta-000001.parquet"} <= set(shard_files(run))
    assert len(sample_ids(run)) == len(set(sample_ids(run))) == 5
