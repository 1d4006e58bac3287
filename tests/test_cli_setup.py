"""Set-up without traps: the README's quickstart installs from the clone without [dev] and shows a
critical finding with exit code 1; nothing tells a user to install or upgrade from PyPI's
`rlprobe` (another project); the CPU torch index is stated."""

from __future__ import annotations

import re
import shlex
from pathlib import Path

import duckdb
import pytest
from click.testing import CliRunner

from rlprobe.cli import cli
from rlprobe.errors import UPGRADE_HINT
from rlprobe.store import init_script, resolve

ROOT = Path(__file__).resolve().parents[1]
README = (ROOT / "README.md").read_text(encoding="utf-8")


def _quickstart() -> list[str]:
    section = README.split("## Quickstart", 1)[1].split("\n## ", 1)[0]
    block = re.search(r"```bash\n(.*?)```", section, flags=re.S)
    assert block, "the quickstart has a bash block"
    return [line for line in block.group(1).splitlines() if line.strip()]


def test_the_quickstart_is_two_commands_that_need_no_dev_extra() -> None:
    install, run = _quickstart()
    assert "pip install -e ." in install and "[dev]" not in install and "pip install rlprobe" not in install
    assert "rlprobe doctor" in run and "$?" in run


def test_the_quickstart_shows_a_critical_finding_and_exit_code_1(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    _, run = _quickstart()
    commands = [shlex.split(part) for part in re.split(r"&&|;", run) if part.strip().startswith("rlprobe")]
    (synth, doctor) = commands
    runner = CliRunner()
    assert runner.invoke(cli, synth[1:], catch_exceptions=False).exit_code == 0
    result = runner.invoke(cli, doctor[1:], catch_exceptions=False, env={"NO_COLOR": "1"})
    assert result.exit_code == 1, result.output
    assert re.search(r"^CRITICAL ", result.stdout, flags=re.M)
    shown = README.split("## Quickstart", 1)[1].split("\n## ", 1)[0]
    assert "exit code: 1" in shown and "CRITICAL" in shown  # what the README says it prints


def _pip_installs(text: str) -> list[str]:
    """Every `pip install ...` in text, up to the end of its backticks or line."""
    return [m.group(0) for m in re.finditer(r"pip install[^`\n]*", text)]


def _takes_pypis_rlprobe(command: str) -> bool:
    """True for `pip install [-U] rlprobe[...]` (a name pip looks up on PyPI), not `-e .`, `.` or `rlprobe @ git+...`."""
    words = [w for w in command.split()[2:] if not w.startswith("-")]
    if not words:
        return False
    target = words[0].strip("\"'`().,;")
    return re.fullmatch(r"rlprobe(\[[\w,]+\])?", target) is not None and not (len(words) > 1 and words[1] == "@")


def test_no_install_step_takes_pypis_rlprobe() -> None:
    # PyPI's "rlprobe" is another project: rlprobe comes from the clone (-e . / .) or a git URL;
    # the two traps the README names, in one sentence, are the only mentions
    sources = {"README.md": README, **{f"rlprobe/cli/{p.name}": p.read_text(encoding="utf-8")
                                       for p in sorted((ROOT / "rlprobe" / "cli").glob("*.py"))}}
    bad = {}
    for name, text in sources.items():
        text = text.replace("never `pip install rlprobe` (or `pip install -U rlprobe`)", "")
        hits = [c for c in _pip_installs(text) if _takes_pypis_rlprobe(c)]
        if hits:
            bad[name] = hits
    assert not bad, bad
    assert "never `pip install rlprobe` (or `pip install -U rlprobe`)" in README


def test_the_upgrade_message_names_the_right_way_to_upgrade() -> None:
    texts = {p: (ROOT / p).read_text(encoding="utf-8") for p in
             ("rlprobe/store/versions.py", "sql/v1/sources/10_src_manifest.sql", "rlprobe/spark/sources.py", "docs/format.md")}
    assert not [p for p, text in texts.items() if "pip install -U rlprobe" in text]
    # one wording, Python's constant written out in the SQL plain DuckDB runs and quoted in the docs
    assert "git pull && pip install -e ." in UPGRADE_HINT and 'pip install --force-reinstall "rlprobe @ git+' in UPGRADE_HINT
    assert f"CREATE OR REPLACE MACRO v1.upgrade_hint() AS\n    '{UPGRADE_HINT}';" in texts["sql/v1/sources/10_src_manifest.sql"]
    assert f"reads up to v1: {UPGRADE_HINT}\n" in texts["docs/format.md"]
    assert "UPGRADE_HINT" in texts["rlprobe/store/versions.py"] and "UPGRADE_HINT" in texts["rlprobe/spark/sources.py"]


def test_a_newer_recording_says_how_to_upgrade(tmp_path: Path) -> None:
    # the message a user meets, from the CLI (Python's check) and from the SQL alone (plain DuckDB)
    run = tmp_path / "x"
    run.mkdir()
    (run / "manifest.json").write_text('{"schema_version": 2, "run_id": "x"}')
    result = CliRunner().invoke(cli, ["query", str(run), "SELECT 1"])
    assert result.exit_code == 2
    assert result.stderr.strip().endswith(f"reads up to v1: {UPGRADE_HINT}") and result.stderr.count("\n") == 1
    con = duckdb.connect()
    con.execute(init_script(resolve(run)))
    with pytest.raises(duckdb.Error, match=re.escape(f"reads up to v1: {UPGRADE_HINT}")):
        con.execute("SELECT * FROM v1.src_manifest").fetchall()


def test_the_cpu_torch_index_is_stated_and_gpu_users_keep_theirs() -> None:
    index = "--index-url https://download.pytorch.org/whl/cpu"
    pyproject = (ROOT / "pyproject.toml").read_text(encoding="utf-8")
    assert index in README and "GPU" in README
    assert "https://download.pytorch.org/whl/cpu" in pyproject and "GPU" in pyproject
    assert index in (ROOT / "docs" / "trl.md").read_text(encoding="utf-8")


def test_the_install_section_says_how_to_install_from_a_git_url() -> None:
    section = README.split("## Install", 1)[1].split("\n## ", 1)[0]
    assert 'pip install "rlprobe @ git+' in section and "git clone" in section
