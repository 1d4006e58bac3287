"""Run names and tags: given to the Recorder or to `rlprobe import`, kept in the manifest, shown
by the runs view, `rlprobe ls` and the report. A recording without them is named by its run_id."""

from __future__ import annotations

import json
from pathlib import Path

from click.testing import CliRunner

import rlprobe
from rlprobe.cli import cli
from rlprobe.store import open_store

from conftest import make_run
from recorder_helpers import FAST, events


def ls_json(path: Path) -> list[dict]:
    result = CliRunner().invoke(cli, ["ls", str(path), "--json"], catch_exceptions=False)
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout)


def test_a_recorders_name_and_tags_reach_the_manifest_the_runs_view_and_ls(tmp_path: Path) -> None:
    with rlprobe.Recorder(tmp_path / "r", run_id="r1", name="lr 3e-6, no KL", tags=["sweep-3", "baseline"],
                          install_handlers=False, **FAST) as rec:
        rec.log_step(0, reward_mean=0.1)
    manifest = json.loads((tmp_path / "r" / "manifest.json").read_text())
    assert (manifest["name"], manifest["tags"]) == ("lr 3e-6, no KL", ["sweep-3", "baseline"])
    rows = open_store(tmp_path).rows("SELECT run_id, name, tags FROM runs")[2]
    assert rows == [("r1", "lr 3e-6, no KL", ["sweep-3", "baseline"])]
    (listed,) = ls_json(tmp_path)
    assert (listed["name"], listed["tags"]) == ("lr 3e-6, no KL", ["sweep-3", "baseline"])
    manifest_model = rlprobe.RunReader(tmp_path / "r").manifest
    assert manifest_model is not None and (manifest_model.name, manifest_model.tags) == ("lr 3e-6, no KL", ["sweep-3", "baseline"])


def test_one_string_is_one_tag(tmp_path: Path) -> None:
    with rlprobe.Recorder(tmp_path / "r", tags="baseline", install_handlers=False, **FAST):
        pass
    assert json.loads((tmp_path / "r" / "manifest.json").read_text())["tags"] == ["baseline"]


def test_a_recording_without_a_name_is_named_by_its_run_id(tmp_path: Path) -> None:
    make_run(tmp_path / "old", 3, run_id="old-run")  # the manifest has no name or tags at all
    manifest = json.loads((tmp_path / "old" / "manifest.json").read_text())
    manifest.pop("name", None)
    manifest.pop("tags", None)
    (tmp_path / "old" / "manifest.json").write_text(json.dumps(manifest))
    assert open_store(tmp_path).rows("SELECT run_id, name, tags FROM runs")[2] == [("old-run", "old-run", [])]
    table = CliRunner().invoke(cli, ["ls", str(tmp_path)], catch_exceptions=False).stdout.splitlines()
    assert table[0].split()[:3] == ["run_id", "name", "status"] and table[2].split()[:3] == ["old-run", "old-run", "closed"]


def test_resuming_keeps_the_first_name_and_says_what_was_asked(tmp_path: Path) -> None:
    with rlprobe.Recorder(tmp_path / "r", name="first", install_handlers=False, **FAST):
        pass
    with rlprobe.Recorder(tmp_path / "r", name="second", tags=["x"], install_handlers=False, **FAST):
        pass
    assert json.loads((tmp_path / "r" / "manifest.json").read_text())["name"] == "first"
    resumed = [e for e in events(tmp_path / "r", "recorder_open") if e["message"] == "resumed"]
    assert resumed and (resumed[0]["data"]["name"], resumed[0]["data"]["tags"]) == ("second", ["x"])


def test_import_takes_a_name_and_tags(tmp_path: Path) -> None:
    source = tmp_path / "metrics.jsonl"
    source.write_text('{"step": 1, "reward": 0.5}\n{"step": 2, "reward": 0.6}\n')
    result = CliRunner().invoke(cli, ["import", str(source), str(tmp_path / "runs" / "imp"), "--name", "from a log",
                                      "--tag", "imported", "--tag", "sweep 2"], catch_exceptions=False)
    assert result.exit_code == 0, result.output
    (listed,) = ls_json(tmp_path / "runs")
    assert (listed["name"], listed["tags"], listed["steps"]) == ("from a log", ["imported", "sweep 2"], 2)
    assert source.read_text().count("\n") == 2  # the source is only read


def test_a_folder_of_runs_imports_with_the_tags_on_each_and_the_name_then_its_folder(tmp_path: Path) -> None:
    from test_import_trackers import write_tb_run  # skips without tensorboard

    write_tb_run(tmp_path / "logs" / "a", range(1, 6))
    write_tb_run(tmp_path / "logs" / "sweep" / "b", range(1, 4))
    result = CliRunner().invoke(cli, ["import", str(tmp_path / "logs"), str(tmp_path / "runs"), "--name", "tb", "--tag", "imported"],
                                catch_exceptions=False)
    assert result.exit_code == 0, result.output
    assert sorted((r["name"], r["tags"][0]) for r in ls_json(tmp_path / "runs")) == [("tb a", "imported"), ("tb b", "imported")]


def test_the_report_header_shows_the_name_and_tags_escaped(tmp_path: Path) -> None:
    from rlprobe.report import render_report

    with rlprobe.Recorder(tmp_path / "r", run_id="r1", name="<b>bold</b> run", tags=["<i>t</i>"],
                          install_handlers=False, **FAST) as rec:
        for step in range(30):
            rec.log_step(step, reward_mean=0.1 * step, kl_mean=0.01)
    html = render_report(tmp_path / "r", tmp_path / "report.html").read_text()
    assert "<h1>&lt;b&gt;bold&lt;/b&gt; run <small class=\"run-id\">r1</small></h1>" in html
    assert '<span class="tag">&lt;i&gt;t&lt;/i&gt;</span>' in html and "<b>bold" not in html
