"""Words that help: a sample hint one can paste, diff's higher/lower from the values it prints,
an unknown table that names the views, schema aligned for long names, symptoms under their
cause, shell completion."""

from __future__ import annotations

import math
import os
import shlex
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner, Result

from rlprobe.cli import cli
from rlprobe.cli.doctor import diagnosis_lines, samples_hint
from rlprobe.doctor.findings import Diagnosis, Finding
from rlprobe.record.writer import RunWriter
from rlprobe.schemas import RunManifest

from conftest import make_run


def invoke(*args: Any) -> Result:
    return CliRunner().invoke(cli, [str(a) for a in args], catch_exceptions=False, env={"COLUMNS": None, "NO_COLOR": "1"})


def test_a_findings_sample_hint_is_a_command_that_runs(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from rlprobe.synth import write_run

    monkeypatch.chdir(tmp_path)
    write_run("runs/kl", "KL_BLOWUP", n_steps=300, seed=1)
    result = invoke("doctor", "runs/kl")
    assert result.exit_code == 1
    (line,) = [line for line in result.stdout.splitlines() if line.strip().startswith("samples: ")]
    command = shlex.split(line.split("samples: ", 1)[1])
    assert command[:3] == ["rlprobe", "query", "runs/kl"]  # the path as typed, not RUN
    pasted = invoke(*command[1:], "--json")
    assert pasted.exit_code == 0, pasted.output
    import json

    rows = json.loads(pasted.stdout)
    assert len(rows) == 5 and {r["sample_id"] for r in rows} <= set(line.split("IN (")[1].replace("'", "").replace(")", " ").replace(",", " ").split())


@pytest.mark.parametrize("path, ids", [
    ("runs/my run", ["1-0-2", "o'hara"]),
    ("runs/$HOME", ["a\"b"]),
])
def test_a_sample_hint_survives_odd_paths_and_ids(path: str, ids: list[str]) -> None:
    words = shlex.split(samples_hint(path, ids, imported=False))
    assert words[2] == path
    for sample_id in ids:
        assert "'" + sample_id.replace("'", "''") + "'" in words[3]  # a SQL literal of the id


def test_a_symptom_prints_under_its_cause_and_an_ended_episode_says_so(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("NO_COLOR", "1")
    cause = Finding(signature_id="ENTROPY_BLOWUP", severity="critical", confidence=0.9, first_step=100, last_step=400,
                    explanation="Entropy rose.", ongoing=True)
    symptom = Finding(signature_id="TRUNCATION_STARVE", severity="warn", confidence=0.7, first_step=110,
                      explanation="Completions hit the limit.", explained_by="ENTROPY_BLOWUP", ongoing=True)
    ended = Finding(signature_id="CLIP_SATURATION", severity="warn", confidence=0.6, first_step=20, last_step=60,
                    explanation="Clipping saturated.", ongoing=False)
    d = Diagnosis(run_id="r", run_dir="/runs/r", steps=400, findings=[cause, symptom, ended])
    lines = diagnosis_lines(d, "runs/r")
    heads = [line for line in lines if "from step" in line]
    assert heads[0].startswith("CRITICAL ENTROPY_BLOWUP")
    assert heads[1].startswith("  ↳ WARN     TRUNCATION_STARVE") and heads[1].endswith("(symptom of ENTROPY_BLOWUP)")
    assert lines[lines.index(heads[1]) + 1] == "    Completions hit the limit."  # the symptom's text indented under it
    assert "from step 20, ended at step 60" in heads[2]


def _two_runs(tmp_path: Path) -> tuple[Path, Path]:
    """B above A throughout, but the gap B - A falls from about +420 to about +220 at step 40."""
    a, b = tmp_path / "a", tmp_path / "b"
    for path, level in ((a, lambda s: 709.0), (b, lambda s: 1131.0 if s < 40 else 931.0)):
        manifest = RunManifest(run_id=path.name, created_at="2024-01-01T00:00:00+00:00")
        writer = RunWriter(path, manifest)
        writer.write_steps([{"step": s, "wall_time": 1.7e9 + s,
                             "completion_len_mean": level(s) + 3 * math.sin(s * (1.3 if path is a else 2.1))}
                            for s in range(80)])
        writer.compact()
    return a, b


def test_diff_says_higher_or_lower_from_the_values_it_prints(tmp_path: Path) -> None:
    a, b = _two_runs(tmp_path)
    result = invoke("diff", a, b)
    assert result.exit_code == 0, result.output
    (row,) = [line.split() for line in result.stdout.splitlines() if line.strip().startswith("completion_len_mean")]
    _, from_step, a_value, b_value, b_vs_a, gap = row[:6]
    assert int(from_step) >= 40
    assert float(b_value) > float(a_value) and b_vs_a == "higher"  # what the values say
    assert gap == "fell"  # the gap B - A left its early level downward
    header = [line for line in result.stdout.splitlines() if "from_step" in line][0]
    assert header.split()[:6] == ["metric", "from_step", "A", "B", "B", "vs"]


def test_an_unknown_table_names_the_views(finished_run: Path) -> None:
    result = invoke("query", finished_run, "SELECT * FROM step")
    assert result.exit_code == 2 and len(result.stderr.splitlines()) == 1
    message = result.stderr
    assert "no table or view named step (did you mean steps?)" in message
    for view in ("steps", "samples", "events", "runs", "manifest", "batch_age", "rollout_events"):
        assert view in message
    other = invoke("query", finished_run, "SELECT nope FROM steps")  # other errors stay DuckDB's own words
    assert other.exit_code == 2 and "nope" in other.stderr and "the views are" not in other.stderr


def test_schema_aligns_long_extra_names(tmp_path: Path) -> None:
    long_name = "a_very_long_custom_metric_name_from_a_home_grown_trainer_loop"
    run = tmp_path / "long"
    make_run(run, 3, extra=(long_name, "short"))
    result = invoke("schema", run)
    assert result.exit_code == 0
    block = result.stdout.split("\n\n")[0].splitlines()[2:]  # the steps view's columns
    starts = {len(line) - len(line.split()[-1]) for line in block}
    assert len(starts) == 1, block  # every type starts in the same column
    assert any(f"extra.{long_name}" in line for line in block)


def test_shell_completion_is_there_and_documented() -> None:
    script = Path(sys.executable).parent / "rlprobe"
    proc = subprocess.run([str(script)], env={**os.environ, "_RLPROBE_COMPLETE": "bash_source"}, capture_output=True,
                          text=True, timeout=60)
    assert proc.returncode == 0 and "_rlprobe_completion()" in proc.stdout
    words = subprocess.run([str(script)], env={**os.environ, "_RLPROBE_COMPLETE": "bash_complete", "COMP_WORDS": "rlprobe exp",
                                                "COMP_CWORD": "1"}, capture_output=True, text=True, timeout=60).stdout
    assert "export" in words
    readme = (Path(__file__).resolve().parents[1] / "README.md").read_text(encoding="utf-8")
    assert "_RLPROBE_COMPLETE=bash_source rlprobe" in readme and "_RLPROBE_COMPLETE=zsh_source rlprobe" in readme
