"""What the CLI prints on a terminal: tables that fit, colour for severity, NO_COLOR, the pager,
one progress bar.

Golden tables live in tests/golden/cli/<name>_<width>.txt, rendered with COLUMNS=80 and 200 (a
test's stdout is not a terminal, so $COLUMNS is the width, as in a pipe with COLUMNS set). To
write them again after a deliberate change: RLPROBE_UPDATE_GOLDEN=1 python -m pytest tests/test_cli_output.py
and read the diff.
"""

from __future__ import annotations

import io
import os
import re
import time
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner, Result

from rlprobe.cli import cli
from rlprobe.cli import output
from rlprobe.cli.progress import Progress
from rlprobe.record.writer import RunWriter
from rlprobe.schemas import RunManifest

from conftest import make_run

GOLDEN = Path(__file__).resolve().parent / "golden" / "cli"
ANSI = re.compile(r"\x1b\[[0-9;]*m")


def invoke(*args: Any, columns: int | None = None, color: bool = False, env: dict[str, str] | None = None,
           input: str | None = None) -> Result:
    full_env = {"COLUMNS": str(columns) if columns else None, "NO_COLOR": None, **(env or {})}
    return CliRunner().invoke(cli, [str(a) for a in args], catch_exceptions=False, env=full_env, color=color, input=input)


@pytest.fixture
def texts_root(tmp_path: Path) -> Path:
    """Two runs whose samples hold long English text, CJK (two columns a character) and newlines."""
    root = tmp_path / "texts"
    for name, lang in (("en", "en"), ("zh", "zh")):
        make_run(root / name, 3, created_at=f"2024-01-0{1 if lang == 'en' else 2}T00:00:00+00:00")
        writer = RunWriter(root / name, RunManifest.model_validate_json((root / name / "manifest.json").read_text()))
        prompt = ("Solve step by step: what is the sum of the first hundred odd numbers? " * 3 if lang == "en"
                  else "请一步一步地解答：前一百个奇数的和是多少？" * 3)
        writer.write_samples([{"step": s, "sample_id": f"{name}-{s}", "rank": 0, "prompt_text": prompt,
                               "completion_text": f"line one\nline two of step {s} " + "x" * 80, "reward_total": s / 4,
                               "advantage": s / 4 - 0.25, "completion_len": 90 + s, "capture_reason": "top_k"}
                              for s in range(3)])
    return root


def _golden(name: str, text: str) -> None:
    path = GOLDEN / f"{name}.txt"
    if os.environ.get("RLPROBE_UPDATE_GOLDEN"):
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
    assert path.exists(), f"{path} is missing: RLPROBE_UPDATE_GOLDEN=1 writes it"
    assert text == path.read_text(encoding="utf-8"), f"{name} differs from {path}"


def _widest(text: str) -> int:
    return max(output.width_of(line) for line in text.splitlines())


GOLDEN_CASES = {
    "ls": lambda f: ["ls", f["nested"]],
    "query_steps": lambda f: ["query", f["finished"], "SELECT * FROM steps ORDER BY step LIMIT 3"],
    "samples_root": lambda f: ["samples", f["texts"], "-k", "4"],
}


@pytest.mark.parametrize("width", [80, 200])
@pytest.mark.parametrize("case", list(GOLDEN_CASES))
def test_golden_tables(case: str, width: int, nested_root: Path, finished_run: Path, texts_root: Path) -> None:
    fixtures = {"nested": nested_root, "finished": finished_run, "texts": texts_root}
    result = invoke(*GOLDEN_CASES[case](fixtures), columns=width)
    assert result.exit_code == 0, result.output
    assert _widest(result.stdout) <= width  # never wider than the terminal, wide characters counted
    _golden(f"{case}_{width}", result.stdout)


def test_a_table_too_wide_leaves_out_middle_columns_and_says_so(finished_run: Path) -> None:
    result = invoke("query", finished_run, "SELECT * FROM steps ORDER BY step", columns=80)
    lines = result.stdout.splitlines()
    assert lines[0].split()[0] == "run_id" and "…" in lines[0].split()
    assert re.search(r"\(10 rows; \d+ of 45 columns not shown: select fewer", lines[-1])
    assert _widest(result.stdout) <= 80


def test_in_a_pipe_without_columns_rows_keep_their_natural_width(finished_run: Path) -> None:
    result = invoke("query", finished_run, "SELECT * FROM steps ORDER BY step")
    lines = result.stdout.splitlines()
    assert "…" not in lines[0].split() and len(lines[0].split()) == 45  # every column, one line a row
    assert lines[-1] == "(10 rows)"


def test_cells_cut_to_the_display_width_of_wide_characters() -> None:
    assert output.width_of("奇数") == 4 and output.width_of("odd") == 3
    cut = output.cut("请一步一步地解答", 7)
    assert cut.endswith("…") and output.width_of(cut) <= 7
    assert output.cut("short", 10) == "short"
    table = output.render_table(["text", "n"], [("前一百个奇数的和是多少", 1), ("abc", 22)], width=16)
    assert all(output.width_of(line) <= 16 for line in table.splitlines())
    header, rule, first, second, count = table.splitlines()
    assert first.endswith(" 1") and second.endswith("22") and count == "(2 rows)"


def test_numbers_are_never_cut_text_is(tmp_path: Path) -> None:
    text = output.render_table(["name", "value"], [("x" * 100, 123456.789)], width=30)
    row = text.splitlines()[2]
    assert row.endswith("123457") and "…" in row


def test_severity_is_coloured_in_root_tables_and_findings(tmp_path: Path) -> None:
    from rlprobe.synth import write_run

    write_run(tmp_path / "root" / "bad", "KL_BLOWUP", n_steps=300, seed=1, samples_every=0)
    write_run(tmp_path / "root" / "ok", "healthy:steady", n_steps=200, seed=0, samples_every=0)
    result = invoke("doctor", tmp_path / "root", color=True)
    assert result.exit_code == 1
    assert "\x1b[31m\x1b[1mcritical\x1b[0m" in result.stdout  # the worst column, in red
    assert "\x1b[32mok\x1b[0m" in result.stdout
    result = invoke("doctor", tmp_path / "root" / "bad", color=True)
    assert "\x1b[31m\x1b[1mCRITICAL" in result.stdout


@pytest.mark.parametrize("how", ["NO_COLOR", "--no-color"])
def test_no_color_and_the_no_color_flag(tmp_path: Path, how: str) -> None:
    from rlprobe.synth import write_run

    write_run(tmp_path / "root" / "bad", "KL_BLOWUP", n_steps=300, seed=1, samples_every=0)
    write_run(tmp_path / "root" / "ok", "healthy:steady", n_steps=200, seed=0, samples_every=0)
    args = ["doctor", tmp_path / "root"] + (["--no-color"] if how == "--no-color" else [])
    result = invoke(*args, color=True, env={"NO_COLOR": "1"} if how == "NO_COLOR" else None)
    assert result.exit_code == 1 and "critical" in result.stdout
    assert not ANSI.search(result.stdout), result.stdout
    single = invoke("doctor", tmp_path / "root" / "bad", *(["--no-color"] if how == "--no-color" else []), color=True,
                    env={"NO_COLOR": "1"} if how == "NO_COLOR" else None)
    assert "CRITICAL" in single.stdout and not ANSI.search(single.stdout)


def test_colour_never_reaches_a_pipe(tmp_path: Path) -> None:
    from rlprobe.synth import write_run

    write_run(tmp_path / "bad", "KL_BLOWUP", n_steps=300, seed=1, samples_every=0)
    result = invoke("doctor", tmp_path / "bad")  # color=False: stdout is not a terminal
    assert "CRITICAL" in result.stdout and not ANSI.search(result.stdout)


class _Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_long_output_goes_through_the_pager_on_a_terminal(finished_run: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    paged: list[str] = []
    monkeypatch.setattr(output, "stdout_is_terminal", lambda: True)
    monkeypatch.setattr("click.echo_via_pager", lambda text, **kw: paged.append(text))
    monkeypatch.setattr("shutil.get_terminal_size", lambda *a: os.terminal_size((120, 20)))
    result = invoke("query", finished_run, "SELECT step FROM steps")  # 13 lines: fits a 20-line screen
    assert not paged and "(10 rows)" in result.stdout
    result = invoke("query", finished_run, "SELECT s.step FROM steps s, steps t")  # 100 rows
    assert len(paged) == 1 and "(100 rows, 40 shown" in paged[0] and result.stdout == ""
    paged.clear()
    result = invoke("query", finished_run, "SELECT s.step FROM steps s, steps t", "--no-pager")
    assert not paged and "(100 rows, 40 shown" in result.stdout


def test_the_progress_bar_draws_on_a_terminal_after_half_a_second_and_clears() -> None:
    stream = _Terminal()
    with Progress(True, stream=stream) as bar:
        bar.update("diagnosing run-a", 1, 4)
        time.sleep(Progress.DELAY_S + 4 * Progress.REFRESH_S)
    assert bar.drawn
    text = stream.getvalue()
    assert "diagnosing run-a" in text and "1/4" in text


def test_the_progress_bar_is_silent_in_pipes_and_for_quick_work() -> None:
    pipe = io.StringIO()
    with Progress(True, stream=pipe) as bar:
        bar.update("working", 1, 2)
        time.sleep(Progress.DELAY_S + 0.2)
    assert not bar.drawn and pipe.getvalue() == ""
    terminal = _Terminal()
    with Progress(True, stream=terminal) as bar:
        bar.update("quick", 1, 2)
    assert not bar.drawn and terminal.getvalue() == ""
    with Progress(False, stream=terminal) as bar:  # --json: never
        time.sleep(Progress.DELAY_S + 0.2)
    assert not bar.drawn and terminal.getvalue() == ""


def test_one_progress_system_and_no_hand_made_bars() -> None:
    cli_dir = Path(output.__file__).parent
    for path in cli_dir.glob("*.py"):
        text = path.read_text(encoding="utf-8")
        assert "click.progressbar" not in text, path.name
        if path.name != "progress.py":
            assert "\\r\\033[K" not in text and "threading.Thread(" not in text, path.name


def test_doctor_on_a_root_reports_progress_per_run(tmp_path: Path) -> None:
    from rlprobe.doctor import diagnose_path
    from rlprobe.synth import write_run

    for i in range(3):
        write_run(tmp_path / "root" / f"r{i}", "healthy:steady", n_steps=60, seed=i, samples_every=0)
    seen: list[tuple[str, int, int]] = []
    diagnoses = diagnose_path(tmp_path / "root", progress=lambda label, done, total: seen.append((label, done, total)))
    assert [(done, total) for _, done, total in seen] == [(0, 3), (1, 3), (2, 3)]
    assert [label for label, _, _ in seen] == [f"diagnosing {d.run_id}" for d in diagnoses]


def test_rich_is_not_imported_for_help_or_a_query_in_a_pipe(finished_run: Path) -> None:
    import subprocess
    import sys

    code = ("import sys; from rlprobe.cli import cli\n"
            "for args in (['--help'], ['query', sys.argv[1], 'SELECT 1'], ['query', sys.argv[1], 'SELECT 1', '--csv']):\n"
            "    try:\n        cli.main(args)\n    except SystemExit:\n        pass\n"
            "print('RICH' if any(m == 'rich' or m.startswith('rich.') for m in sys.modules) else 'NO RICH', file=sys.stderr)\n"
            "import rlprobe.doctor, rlprobe.store, rlprobe.record\n")
    proc = subprocess.run([sys.executable, "-c", code, str(finished_run)], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert proc.stderr.strip().splitlines()[-1] == "NO RICH"


def test_watch_prints_a_heartbeat_at_a_quiet_interval(tmp_path: Path) -> None:
    from rlprobe.synth import write_run

    write_run(tmp_path / "bad", "KL_BLOWUP", n_steps=300, seed=1, samples_every=0)
    result = invoke("watch", tmp_path / "bad", "--max-ticks", "4", "--poll", "0.3", "--heartbeat", "0.5")
    assert result.exit_code == 1
    beats = [line for line in result.stderr.splitlines() if "still watching" in line]
    assert beats, result.stderr
    assert re.search(r"step 300 reached \(300 steps\), 1 finding so far \(1 critical\)", beats[0]), beats[0]
    quiet = invoke("watch", tmp_path / "bad", "--max-ticks", "3", "--poll", "0.3", "--heartbeat", "0")
    assert "still watching" not in quiet.stderr


def test_watch_on_a_path_that_never_appears_exits_2(tmp_path: Path) -> None:
    result = invoke("watch", tmp_path / "typo", "--max-ticks", "3", "--poll", "0")
    assert result.exit_code == 2
    assert result.stderr.splitlines()[-1] == (f"rlprobe: {tmp_path / 'typo'} never appeared in 3 looks (0 s apart): "
                                              "check the path, or give --max-ticks more time")


def test_report_draws_its_stages_on_the_one_progress_bar(finished_run: Path, tmp_path: Path,
                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    import rlprobe.cli.report as report_cli

    seen: list[tuple[str, int, int]] = []

    class Recording(Progress):
        def update(self, label: str, done: int = 0, total: int = 0) -> None:
            seen.append((label, done, total))

    monkeypatch.setattr(report_cli, "Progress", Recording)
    result = invoke("report", finished_run, "--out", tmp_path / "r.html")
    assert result.exit_code == 0, result.output
    assert seen[0] == ("report: open", 0, 6) and seen[-1] == ("report: write", 5, 6)
    assert result.stderr == ""  # not a terminal: no bar
