"""The docs cannot drift from the code.

- docs/cli.md is exactly what docs/gen_cli.py renders from the click commands.
- Every ```sql block of docs/sql.md runs, on one run directory, on a runs root, and in a plain
  DuckDB session given the script of `rlprobe sql`. The recordings are made by
  examples/train_loop.py, as the page says. SQL that must not run goes in ```text blocks.
- The ```python blocks of docs/sql.md and docs/api.md run, in order, in a fresh process.
"""

from __future__ import annotations

import importlib.util
import re
import subprocess
import sys
from pathlib import Path
from types import ModuleType

import duckdb
import pytest

import rlprobe
from rlprobe.store import init_script, resolve

ROOT = Path(__file__).resolve().parents[1]
DOCS = ROOT / "docs"


def _gen_cli() -> ModuleType:
    spec = importlib.util.spec_from_file_location("rlprobe_docs_gen_cli", DOCS / "gen_cli.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _blocks(page: str, lang: str) -> list[str]:
    """The fenced ```lang blocks of docs/<page>, in order."""
    text = (DOCS / page).read_text(encoding="utf-8")
    return re.findall(rf"^```{lang}\n(.*?)^```\s*$", text, flags=re.S | re.M)


# -- the CLI reference ----------------------------------------------------------------------


def test_cli_md_is_up_to_date() -> None:
    expected = _gen_cli().render()
    actual = (DOCS / "cli.md").read_text(encoding="utf-8")
    assert actual == expected, "docs/cli.md is stale: run `python docs/gen_cli.py`"


def test_cli_md_does_not_depend_on_the_terminal(monkeypatch: pytest.MonkeyPatch) -> None:
    gen = _gen_cli()
    monkeypatch.setenv("COLUMNS", "40")
    narrow = gen.render()
    monkeypatch.setenv("COLUMNS", "250")
    assert gen.render() == narrow


def test_cli_md_documents_every_command() -> None:
    from rlprobe.cli import cli

    text = (DOCS / "cli.md").read_text(encoding="utf-8")
    for name, command in cli.commands.items():
        if not command.hidden:
            assert f"\n## rlprobe {name}\n" in text
            assert f"Usage: rlprobe {name} " in text


def test_gen_cli_check_exit_codes(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    gen = _gen_cli()
    target = tmp_path / "cli.md"
    monkeypatch.setattr(gen, "CLI_MD", target)
    assert gen.main(["--check"]) == 1  # missing
    assert gen.main([]) == 0
    assert target.read_text(encoding="utf-8") == gen.render()
    assert gen.main(["--check"]) == 0
    target.write_text(target.read_text(encoding="utf-8") + "edited by hand\n", encoding="utf-8")
    assert gen.main(["--check"]) == 1
    assert "stale" in capsys.readouterr().err


def _anchors(page: Path) -> set[str]:
    """GitHub's anchors for the headings of a markdown page."""
    text = re.sub(r"^```.*?^```", "", page.read_text(encoding="utf-8"), flags=re.S | re.M)
    headings = re.findall(r"^#+ (.+)$", text, flags=re.M)
    return {re.sub(r"[^\w\- ]", "", h.strip().lower()).replace(" ", "-") for h in headings}


@pytest.mark.parametrize("page", sorted(p.name for p in DOCS.glob("*.md")))
def test_links_between_docs_resolve(page: str) -> None:
    text = (DOCS / page).read_text(encoding="utf-8")
    for target, anchor in re.findall(r"\]\(([\w./-]*\.md)?(?:#([\w-]+))?\)", text):
        path = DOCS / (target or page)
        assert path.exists(), f"{page} links to missing {target}"
        if anchor:
            assert anchor in _anchors(path), f"{page} links to {target or page}#{anchor}, which has no such heading"


# -- SQL examples ---------------------------------------------------------------------------

SQL_BLOCKS = _blocks("sql.md", "sql")


def _block_id(sql: str) -> str:
    words = re.sub(r"[^A-Za-z0-9_]+", "-", " ".join(sql.split()[:6])).strip("-")
    return words[:50]


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """runs/demo and runs/collapse, recorded exactly as docs/sql.md says."""
    runs_dir = tmp_path_factory.mktemp("docs") / "runs"
    for name, extra in (("demo", []), ("collapse", ["--lr", "8"])):
        subprocess.run(
            [sys.executable, str(ROOT / "examples" / "train_loop.py"), str(runs_dir / name), "--steps", "100", *extra],
            check=True,
            capture_output=True,
        )
    return runs_dir


@pytest.fixture(scope="module")
def connections(runs: Path) -> dict[str, duckdb.DuckDBPyConnection]:
    """One session per way of reading: a run, a root, a plain DuckDB given `rlprobe sql`'s script."""
    plain = duckdb.connect()
    plain.execute(init_script(resolve(runs)))
    return {"run": rlprobe.connect(runs / "demo"), "root": rlprobe.connect(runs), "plain-duckdb": plain}


def test_sql_md_has_runnable_examples() -> None:
    assert len(SQL_BLOCKS) >= 10


@pytest.mark.parametrize("sql", SQL_BLOCKS, ids=[f"{i:02d}-{_block_id(b)}" for i, b in enumerate(SQL_BLOCKS)])
@pytest.mark.parametrize("where", ["run", "root", "plain-duckdb"])
def test_sql_example_runs(connections: dict[str, duckdb.DuckDBPyConnection], sql: str, where: str) -> None:
    rows = connections[where].sql(sql).fetchall()
    assert isinstance(rows, list)


def test_sql_md_python_examples_run(runs: Path) -> None:
    """The Python snippets of sql.md, run where runs/ and views.sql exist, as the page sets up."""
    (runs.parent / "views.sql").write_text(init_script(resolve(runs)), encoding="utf-8")
    script = "\n\n".join(_blocks("sql.md", "python"))
    result = subprocess.run([sys.executable, "-c", script], cwd=runs.parent, capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr


# -- Python API examples --------------------------------------------------------------------


@pytest.mark.slow
def test_api_md_examples_run(tmp_path: Path) -> None:
    """The ```python blocks of api.md, in order, in one fresh process, in an empty folder."""
    blocks = _blocks("api.md", "python")
    assert len(blocks) >= 5
    script = "\n\n".join(blocks)
    result = subprocess.run([sys.executable, "-c", script], cwd=tmp_path, capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stderr


# -- examples/manual_loop.py --------------------------------------------------------------------


def test_manual_loop_records_verl_names_as_rlprobe_fields_and_the_guardian_halts_an_unanchored_run(tmp_path: Path) -> None:
    out = subprocess.run(
        [sys.executable, str(ROOT / "examples" / "manual_loop.py"), str(tmp_path / "run"), "--beta", "0", "--lr", "1"],
        check=True, capture_output=True, text=True,
    )
    assert "halted at step" in out.stdout and "KL_BLOWUP" in out.stdout
    reader = rlprobe.RunReader(tmp_path / "run")
    halts = reader.events("auto_halt")
    assert len(halts) == 1 and halts[0].data["signature_id"] == "KL_BLOWUP"
    steps = reader.steps_table()
    assert steps.num_rows == halts[0].step < 300  # stopped early, nothing after the halt
    for field in ("reward_mean", "entropy_mean", "kl_mean", "completion_len_mean", "max_len_hit_frac", "generation_time_s"):
        assert steps.column(field).null_count == 0, field
