"""Sources cut mid-write: what is whole imports, the cut record does not, and the import says so.

A trainer killed mid-write, a run still running, a copy taken while its file grew: each leaves
a last record cut at some byte. The files here are written the way trainers write them
(json.dumps lines, print() of the Trainer's dicts, verl's step lines, csv.writer, the HF
Trainer's own TrainerState.save_to_json, an XTuner log) and then cut at a byte offset.

An append-only source (JSONL, CSV, a console log) imports its whole records, exits 0 and prints
one `torn:` line on stderr; a whole-document source (trainer_state.json, a JSON array) cut short
is refused with one line and exit 2. `rlprobe watch` says nothing: a growing file always ends so.
"""

from __future__ import annotations

import csv
import hashlib
import json
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner, Result

import rlprobe
from rlprobe.cli import cli
from shared_data import CORPUS  # ../shared, found from a worktree too


def invoke(*args: Any) -> Result:
    return CliRunner().invoke(cli, [str(a) for a in args], catch_exceptions=False)


def steps_of(run_dir: Path, columns: str = "step") -> list[dict[str, Any]]:
    return rlprobe.RunReader(run_dir).query(f"SELECT {columns} FROM steps ORDER BY step").to_pylist()


def sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def cut(path: Path, at: int) -> Path:
    """path's first `at` bytes, written next to it as a copy (the original stays whole)."""
    out = path.with_name("cut-" + path.name)
    out.write_bytes(path.read_bytes()[:at])
    return out


def last_line_start(data: bytes) -> int:
    return data.rstrip(b"\n").rfind(b"\n") + 1


def torn_lines(result: Result) -> list[str]:
    return [line for line in result.stderr.splitlines() if line.startswith("torn: ")]


def write_jsonl(path: Path, steps: int = 5) -> Path:
    with open(path, "w") as fh:  # what verl's file logger and home-grown loops write: a dict, a newline
        for step in range(1, steps + 1):
            fh.write(json.dumps({"step": step, "reward": 0.1 * step, "kl": 0.01 * step, "entropy": 1.0}) + "\n")
    return path


# -- append-only sources: the whole records import, one line on stderr -----------------------------------


@pytest.mark.parametrize("into_last_line", [1, 20, -2])  # a byte in, halfway, all but '}' and the newline
def test_a_jsonl_file_cut_in_its_last_line_imports_the_lines_before(tmp_path: Path, into_last_line: int) -> None:
    whole = write_jsonl(tmp_path / "metrics.jsonl")
    data = whole.read_bytes()
    at = (len(data) if into_last_line < 0 else last_line_start(data)) + into_last_line
    source = cut(whole, at)
    before = sha256(source)

    result = invoke("import", source, tmp_path / "run")
    assert result.exit_code == 0, result.output
    [line] = torn_lines(result)
    assert str(source) in line and f"last line incomplete ({at - last_line_start(data)} bytes" in line
    assert "may still be being written" in line and "the 4 lines before it are" in line
    assert "malformed" not in result.stdout  # cut, not malformed
    assert [r["step"] for r in steps_of(tmp_path / "run")] == [1, 2, 3, 4]
    assert sha256(source) == before

    doctor = invoke("doctor", source)
    assert "(torn: " in doctor.stderr and str(source) in doctor.stderr


def test_the_read_commands_on_a_cut_source_say_so(tmp_path: Path) -> None:
    whole = write_jsonl(tmp_path / "metrics.jsonl")
    source = cut(whole, len(whole.read_bytes()) - 10)
    for args in (("ls", source), ("samples", source), ("show", source, "--step", "2")):
        result = invoke(*args)
        assert result.exit_code == 0, (args, result.output)
        assert "(torn: " in result.stderr and str(source) in result.stderr, args


def test_report_on_a_cut_source_says_so_and_writes_the_report(tmp_path: Path) -> None:
    whole = write_jsonl(tmp_path / "metrics.jsonl")
    source = cut(whole, len(whole.read_bytes()) - 10)
    before = sha256(source)
    result = invoke("report", source, "--out", tmp_path / "r.html")
    assert result.exit_code == 0, result.output
    [line] = [line for line in result.stderr.splitlines() if line.startswith("(torn: ")]
    assert str(source) in line and "last line incomplete" in line
    assert result.stdout.strip() == str(tmp_path / "r.html") and (tmp_path / "r.html").stat().st_size > 0
    assert sha256(source) == before
    assert "(torn: " not in invoke("report", whole, "--out", tmp_path / "w.html").stderr


def test_a_jsonl_line_missing_only_its_newline_is_whole(tmp_path: Path) -> None:
    whole = write_jsonl(tmp_path / "metrics.jsonl")
    source = cut(whole, len(whole.read_bytes()) - 1)  # a JSON object ends with its brace
    result = invoke("import", source, tmp_path / "run")
    assert result.exit_code == 0 and torn_lines(result) == []
    assert [r["step"] for r in steps_of(tmp_path / "run")] == [1, 2, 3, 4, 5]


def test_the_json_report_carries_the_torn_line_and_stderr_still_says_it(tmp_path: Path) -> None:
    whole = write_jsonl(tmp_path / "metrics.jsonl")
    source = cut(whole, len(whole.read_bytes()) - 10)
    result = invoke("import", source, tmp_path / "run", "--json")
    [torn] = json.loads(result.stdout)["torn"]
    assert torn == {"file": str(source), "tail_bytes": torn["tail_bytes"], "records": 4, "cut": True, "unit": "line"}
    assert len(torn_lines(result)) == 1


def test_a_console_log_cut_inside_a_printed_dict(tmp_path: Path) -> None:
    log = tmp_path / "train.log"
    dicts = [{"loss": 0.01 * i, "reward": 0.1 * i, "kl": 0.001 * i, "epoch": 0.1 * i} for i in range(1, 6)]
    log.write_text("logging_steps=5\n" + "".join(f"{d}\n" for d in dicts))  # what the Trainer's print(logs) leaves
    data = log.read_bytes()
    source = cut(log, last_line_start(data) + 25)

    result = invoke("import", source, tmp_path / "run")
    assert result.exit_code == 0 and "malformed" not in result.stdout
    [line] = torn_lines(result)
    assert "last line incomplete (25 bytes" in line
    assert [r["step"] for r in steps_of(tmp_path / "run")] == [5, 10, 15, 20]


def test_a_verl_step_line_cut_mid_number_is_not_read(tmp_path: Path) -> None:
    """`critic/score/mean:0.6875` cut to `:0.68` would read as a wrong reward; a line with no newline is not read."""
    log = tmp_path / "verl.log"
    log.write_text("".join(f"step:{s} - actor/entropy:0.{50 - s}1 - critic/score/mean:0.{s}875 - "
                           f"response_length/mean:{200 + s}.5\n" for s in range(1, 7)))
    data = log.read_bytes()
    source = cut(log, data.rfind(b"875 - response") - 1)  # step 6's reward reads 0.6 here

    result = invoke("import", source, tmp_path / "run")
    assert result.exit_code == 0 and len(torn_lines(result)) == 1
    assert steps_of(tmp_path / "run", "step, reward_mean")[-1] == {"step": 5, "reward_mean": 0.5875}


def test_a_console_log_ending_in_a_progress_bar_says_nothing(tmp_path: Path) -> None:
    """tqdm redraws its bar with carriage returns, no newline: an unended line, but no record in it."""
    log = tmp_path / "train.log"
    log.write_text("logging_steps=1\n{'loss': 0.1, 'reward': 0.5}\n 40%|####      | 2/5 [00:10<00:15]\r 60%|######    | 3/5 [00:15<00:10]")
    result = invoke("import", log, tmp_path / "run")
    assert result.exit_code == 0 and torn_lines(result) == []


def test_a_csv_row_cut_mid_cell_is_not_read(tmp_path: Path) -> None:
    source = tmp_path / "metrics.csv"
    with open(source, "w", newline="") as fh:  # csv.writer ends every row with \r\n
        writer = csv.writer(fh)
        writer.writerow(["step", "reward", "kl"])
        writer.writerows([[s, f"0.{s}875", f"0.00{s}"] for s in range(1, 5)])
    data = source.read_bytes()
    torn = cut(source, len(data) - 5)  # step 4's kl: 0.004 -> 0.0

    result = invoke("import", torn, tmp_path / "run")
    assert result.exit_code == 0 and len(torn_lines(result)) == 1
    assert steps_of(tmp_path / "run", "step, kl_mean")[-1] == {"step": 3, "kl_mean": 0.003}


@pytest.mark.skipif(not (CORPUS / "grpo_xtuner_qwen25_7b_32k_math_latecollapse.txt").exists(), reason="corpus not present")
def test_an_xtuner_log_cut_mid_line_imports_as_the_log_up_to_that_line(tmp_path: Path) -> None:
    data = (CORPUS / "grpo_xtuner_qwen25_7b_32k_math_latecollapse.txt").read_bytes()
    at = data.find(b"rewards/mean", len(data) // 2) + len(b"rewards/mean : 0")  # a rollout's reward cut mid-number
    (tmp_path / "cut.txt").write_bytes(data[:at])
    (tmp_path / "lines.txt").write_bytes(data[:data.rfind(b"\n", 0, at) + 1])

    result = invoke("import", tmp_path / "cut.txt", tmp_path / "cut")
    assert result.exit_code == 0 and len(torn_lines(result)) == 1
    assert invoke("import", tmp_path / "lines.txt", tmp_path / "lines").exit_code == 0
    columns = "step, reward_mean, entropy_mean"
    assert steps_of(tmp_path / "cut", columns) == steps_of(tmp_path / "lines", columns)


@pytest.mark.skipif(not (CORPUS / "grpo_trl_qwen25math_1p5b_gsm8k_hard_learning.log").exists(), reason="corpus not present")
def test_a_real_log_that_ends_mid_dict_says_so() -> None:
    """This TRL log was committed while its run was going: it stops inside the 176th dict."""
    source = CORPUS / "grpo_trl_qwen25math_1p5b_gsm8k_hard_learning.log"
    from rlprobe.importers import as_recording

    with as_recording(source) as rec:
        assert rec.report.steps == 175 and rec.report.bad_lines == []
        [torn] = rec.report.torn
        assert torn["tail_bytes"] == len(source.read_bytes()) - last_line_start(source.read_bytes())


# -- whole documents: one line, exit 2, nothing written ---------------------------------------------


def write_trainer_state(folder: Path) -> Path:
    transformers = pytest.importorskip("transformers")
    state = transformers.TrainerState(global_step=30, max_steps=30, logging_steps=10)
    state.log_history = [{"step": s, "loss": 0.1, "reward": 0.01 * s, "kl": 0.001 * s} for s in (10, 20, 30)]
    folder.mkdir(parents=True)
    state.save_to_json(str(folder / "trainer_state.json"))  # what the Trainer writes at each checkpoint
    return folder / "trainer_state.json"


def write_json_array(folder: Path) -> Path:
    folder.mkdir(parents=True)
    path = folder / "log_history.json"
    path.write_text(json.dumps([{"step": s, "reward": 0.01 * s} for s in (10, 20, 30)], indent=2))
    return path


@pytest.mark.parametrize("write", [write_trainer_state, write_json_array])
@pytest.mark.parametrize("share", [0.1, 0.5, 0.99])
def test_a_document_cut_short_is_refused_with_one_line(tmp_path: Path, write: Any, share: float) -> None:
    whole = write(tmp_path / "out" / "checkpoint-30")
    data = whole.read_bytes()
    whole.write_bytes(data[:int(len(data) * share)])
    before = sha256(whole)

    for source in (whole, tmp_path / "out" / "checkpoint-30"):
        if source.is_dir() and write is write_json_array:
            continue  # a folder is read for its trainer_state.json only
        result = invoke("import", source, tmp_path / "run")
        assert result.exit_code == 2, result.output
        line = result.stderr.strip()
        assert "\n" not in line and "ends mid-document" in line and str(whole) in line, line
        assert not (tmp_path / "run").exists()
        doctor = invoke("doctor", source)
        assert doctor.exit_code == 2 and doctor.stderr.strip() == line
    assert sha256(whole) == before and sorted(p.name for p in whole.parent.iterdir()) == [whole.name]


def test_a_document_that_is_whole_but_wrong_is_not_called_cut(tmp_path: Path) -> None:
    source = tmp_path / "trainer_state.json"
    source.write_text('{"log_history": [{"step": 1, "loss": 0.1}],, "global_step": 1}')
    result = invoke("import", source, tmp_path / "run")
    assert result.exit_code == 2 and "not readable as JSON (JSONDecodeError" in result.stderr
    assert "mid-document" not in result.stderr


# -- watch: a growing file always ends mid-line; nothing to say -----------------------------------------


def test_watch_says_nothing_of_a_partial_last_line(tmp_path: Path) -> None:
    jsonl = write_jsonl(tmp_path / "metrics.jsonl")
    with open(jsonl, "a") as fh:
        fh.write('{"step": 6, "reward": 0.')  # the trainer is writing step 6
    log = tmp_path / "train.log"
    log.write_text("logging_steps=1\n{'loss': 0.1, 'reward': 0.5}\n{'loss': 0.2, 'rew")

    for source in (jsonl, log):
        into = tmp_path / f"kept-{source.suffix[1:]}"
        result = invoke("watch", source, "--max-ticks", 3, "--poll", 0, "--into", into)
        assert result.exit_code in (0, 1), result.output
        assert "torn" not in result.stderr.lower() and "incomplete" not in result.stderr and "malformed" not in result.output
    assert [r["step"] for r in steps_of(tmp_path / "kept-jsonl")] == [1, 2, 3, 4, 5]
