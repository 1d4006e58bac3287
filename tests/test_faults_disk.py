"""A real full disk: a small tmpfs that fills up and frees again while a run records.

Before, each flush rewrote the whole open sample shard (a write needed room for two copies, so
samples failed with a third of the disk free), the retry carried the whole backlog (samples
never resumed after space was freed), a half-written event line swallowed the next event, and
nothing was said on stderr. Skipped where mounting a tmpfs is not allowed.
"""

from __future__ import annotations

import errno
import json
import os
import shutil
import subprocess
from pathlib import Path

import pytest

from rlprobe import Recorder

from recorder_helpers import FAST, rows, step_numbers


@pytest.fixture
def small_disk(tmp_path: Path):
    """A 2 MiB tmpfs, unmounted afterwards."""
    mount = tmp_path / "disk"
    mount.mkdir()
    if shutil.which("mount") is None:
        pytest.skip("no mount command")
    done = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=2m", "tmpfs", str(mount)], capture_output=True, text=True)
    if done.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here ({done.stderr.strip() or 'not permitted'}): the full-disk tests need one")
    try:
        yield mount
    finally:
        subprocess.run(["umount", "-l", str(mount)], capture_output=True)


def fill(disk: Path, leave_bytes: int = 0) -> Path:
    """Fill the disk with one file, leaving about leave_bytes free."""
    filler = disk / "filler.bin"
    with open(filler, "wb") as fh:
        while True:
            st = os.statvfs(disk)
            free = st.f_bavail * st.f_frsize
            if free <= leave_bytes:
                break
            try:
                fh.write(b"\0" * min(65536, max(4096, free - leave_bytes)))
                fh.flush()
            except OSError as exc:
                assert exc.errno == errno.ENOSPC
                break
    return filler


def samples(step: int, n: int = 8) -> list[dict]:
    """n samples of about 1.2 KB of text that zstd cannot shrink much (hex of random bytes)."""
    return [{"prompt_text": f"p{step}-{i}", "completion_text": os.urandom(600).hex(), "reward_total": float(i)} for i in range(n)]


def test_samples_record_with_a_third_of_the_disk_free(small_disk):
    run = small_disk / "run"
    rec = Recorder(run, **FAST)
    for step in range(20):
        rec.log_samples(step, samples(step, 16), select=False)
        assert rec.flush(), rec.last_write_error
    disk = os.statvfs(small_disk)
    fill(small_disk, leave_bytes=disk.f_blocks * disk.f_frsize // 3)
    for step in range(20, 52):
        # the filling shard grows past the free space; a flush writes only its own rows
        rec.log_samples(step, samples(step, 16), select=False)
        assert rec.flush(), f"step {step}: {rec.last_write_error}"
    rec.close()  # sealing needs the shard's room once: if it fails, the deltas stay and read
    assert rows(run, "SELECT count(*) AS n FROM samples") == [{"n": 52 * 16}]


def test_a_disk_that_fills_and_frees_loses_only_what_it_counts_and_says_so_once(small_disk, capsys):
    run = small_disk / "run"
    rec = Recorder(run, queue_size=10_000, **FAST)
    for step in range(10):
        rec.log_step(step, loss=float(step))
        rec.log_samples(step, samples(step), select=False)
    assert rec.flush()
    filler = fill(small_disk)
    for step in range(10, 20):  # the disk is full: kept in memory and retried
        rec.log_step(step, loss=float(step))
        rec.log_samples(step, samples(step), select=False)
        rec.log_event("note", step=step, text="y" * 300)
        rec.flush(timeout=2)
    assert rec.write_failures > 0
    filler.unlink()  # space again
    for step in range(20, 30):
        rec.log_step(step, loss=float(step))
        rec.log_samples(step, samples(step), select=False)
    assert rec.flush(timeout=10), f"writes must resume once there is room: {rec.last_write_error}"
    rec.log_event("after", message="the disk has room again")
    rec.close()

    err = capsys.readouterr().err
    assert err.count("writes are failing") == 1 and err.count("writes work again") == 1, err
    assert step_numbers(run) == list(range(30)), "pending steps were retried once there was room"
    got = rows(run, "SELECT count(*) AS n, count(DISTINCT prompt_text) AS d FROM samples")
    assert got == [{"n": 240, "d": 240}], "pending samples were retried once there was room, none twice"
    lines = (run / "events.jsonl").read_text(encoding="utf-8").splitlines()
    parsed = [json.loads(line) for line in lines]  # no torn line
    assert [e["kind"] for e in parsed][-2:] == ["after", "recorder_close"]
    assert not list(run.rglob(".*.tmp"))


def test_an_event_write_cut_by_a_full_disk_leaves_no_torn_line(small_disk):
    run = small_disk / "run"
    rec = Recorder(run, **FAST)
    fill(small_disk, leave_bytes=1000)
    for i in range(50):
        rec.log_event("big", blob="z" * 700, i=i)  # some fit, then one is cut part-way, then none fit
    (small_disk / "filler.bin").unlink()
    rec.log_event("after")
    rec.close()
    lines = (run / "events.jsonl").read_bytes().decode("utf-8").splitlines()
    kinds = [json.loads(line)["kind"] for line in lines]  # every line is a whole event
    assert "after" in kinds and kinds[-1] == "recorder_close"
    assert rec.write_failures > 0
