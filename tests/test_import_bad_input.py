"""Bad input to `rlprobe import`: one readable line, exit 2, the source untouched, nothing left behind.

Each case is a file or folder as a user meets it: a half-written trainer state, binary bytes
under a tracker's file name, a tracker folder with no run, a sqlite file that is not MLflow's.
"""

from __future__ import annotations

import hashlib
import sqlite3
from pathlib import Path
from typing import Callable

import pytest
from click.testing import CliRunner

from rlprobe.cli import cli

NOISE = bytes(range(256)) * 16


def make_half_written_trainer_state(tmp: Path) -> Path:
    path = tmp / "trainer_state.json"
    path.write_text('{"log_history": [{"step": 1, "loss": 0.1}, {"step": 2, "lo')
    return path


def make_binary_event_file(tmp: Path) -> Path:
    pytest.importorskip("tensorboard")
    folder = tmp / "logs" / "run1"
    folder.mkdir(parents=True)
    (folder / "events.out.tfevents.1700000000.host.1.0").write_bytes(NOISE)
    return tmp / "logs"


def make_binary_wandb_log(tmp: Path) -> Path:
    pytest.importorskip("wandb")
    folder = tmp / "wandb" / "offline-run-20260101_000000-abcd1234"
    folder.mkdir(parents=True)
    (folder / "run-abcd1234.wandb").write_bytes(NOISE)
    return folder


def make_empty_wandb_folder(tmp: Path) -> Path:
    (tmp / "wandb").mkdir()
    (tmp / "wandb" / "debug.log").write_text("")
    return tmp / "wandb"


def make_sqlite_that_is_not_mlflow(tmp: Path) -> Path:
    pytest.importorskip("mlflow")
    path = tmp / "other.db"
    with sqlite3.connect(path) as db:
        db.execute("CREATE TABLE t (x INTEGER)")
    return path


def make_binary_jsonl(tmp: Path) -> Path:
    path = tmp / "metrics.jsonl"
    path.write_bytes(NOISE)
    return path


def make_binary_log(tmp: Path) -> Path:
    path = tmp / "train.log"
    path.write_bytes(NOISE)
    return path


def make_truncated_parquet(tmp: Path) -> Path:
    path = tmp / "completions_00001.parquet"
    path.write_bytes(b"PAR1" + NOISE[:100])
    return path


CASES: dict[str, tuple[Callable[[Path], Path], str]] = {
    "half-written trainer_state.json": (make_half_written_trainer_state, "not readable as JSON"),
    "binary bytes as a TensorBoard event file": (make_binary_event_file, "none of its"),
    "binary bytes as a W&B log": (make_binary_wandb_log, "not a readable W&B run"),
    "a wandb folder with no run": (make_empty_wandb_folder, "no TensorBoard event files, W&B runs or MLflow store"),
    "a sqlite file that is not an MLflow store": (make_sqlite_that_is_not_mlflow, "unknown format"),
    "binary bytes as JSONL": (make_binary_jsonl, "no metric dicts found"),
    "binary bytes as a console log": (make_binary_log, "unknown format"),
    "a truncated parquet file": (make_truncated_parquet, "not a readable parquet file"),
}


def digest(path: Path) -> dict[str, str]:
    files = [path] if path.is_file() else sorted(p for p in path.rglob("*") if p.is_file())
    return {str(p): hashlib.sha256(p.read_bytes()).hexdigest() for p in files}


@pytest.mark.parametrize("case", sorted(CASES))
def test_bad_input_is_one_line_exit_2_and_touches_nothing(tmp_path: Path, case: str) -> None:
    make, expected = CASES[case]
    source = make(tmp_path / "src" if (tmp_path / "src").mkdir() is None else tmp_path)
    before = digest(source)
    listing = sorted(p.name for p in (tmp_path / "src").iterdir())

    result = CliRunner().invoke(cli, ["import", str(source), str(tmp_path / "out" / "run")], catch_exceptions=False)
    assert result.exit_code == 2, result.output
    line = result.stderr.strip()
    assert "\n" not in line and "Traceback" not in line and expected in line, line
    assert digest(source) == before
    assert sorted(p.name for p in (tmp_path / "src").iterdir()) == listing  # nothing added next to the source
    assert not (tmp_path / "out" / "run").exists()
    assert not (tmp_path / "out").exists() or not any((tmp_path / "out").iterdir())  # no hidden temporary left


def test_the_doctor_gives_the_same_one_line(tmp_path: Path) -> None:
    source = make_binary_log(tmp_path)
    result = CliRunner().invoke(cli, ["doctor", str(source)], catch_exceptions=False)
    assert result.exit_code == 2 and "unknown format" in result.stderr and result.stderr.strip().count("\n") == 0
