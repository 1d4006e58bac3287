"""The doctor's framework: config, custom SQL detectors, ranking, the CLI contract."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
from click.testing import CliRunner

from rlprobe import RunView
from rlprobe.cli import cli
from rlprobe.doctor import ConfigError, Finding, diagnose, diagnose_path, diagnose_view, load_config, rank
from rlprobe.doctor.registry import all_detectors
from rlprobe.record import Recorder


def record(path, n=200, **series):
    """A run whose metrics are given as functions of the step."""
    with Recorder(path, algorithm="grpo", capture_env=False, install_handlers=False, flush_interval_s=0.05) as rec:
        for step in range(1, n + 1):
            rec.log_step(step, **{name: fn(step) for name, fn in series.items()})
    return path


def steady(step):
    return 1.0 + 0.01 * ((step * 7919) % 13 - 6)


def collapsing(step):
    return steady(step) if step < 120 else 0.02


def test_a_healthy_run_has_no_findings_and_lists_what_it_could_not_check(tmp_path):
    run = record(tmp_path / "ok", entropy_mean=steady, loss=steady)
    (d,) = diagnose_path(run)
    assert d.findings == []
    skipped = {s.signature_id: s.reason for s in d.skipped}
    assert "KL_BLOWUP" in skipped and "logged none" in skipped["KL_BLOWUP"]
    assert "ENTROPY_COLLAPSE" not in skipped  # its input was logged, so it ran


def test_a_collapse_is_found_with_onset_evidence_and_actions(tmp_path):
    run = record(tmp_path / "bad", entropy_mean=collapsing)
    (finding,) = [f for f in diagnose(run) if f.signature_id == "ENTROPY_COLLAPSE"]
    assert finding.severity == "critical"
    assert 100 <= finding.first_step <= 125
    assert finding.evidence["entropy_baseline"] == pytest.approx(1.0, abs=0.05)
    assert finding.suggested_actions
    assert 0.5 <= finding.confidence <= 1.0


def test_diagnose_view_agrees_with_diagnose_on_disk(tmp_path):
    run = record(tmp_path / "bad", entropy_mean=collapsing)
    on_disk = [(f.signature_id, f.severity, f.first_step) for f in diagnose(run)]
    in_memory = [(f.signature_id, f.severity, f.first_step) for f in diagnose_view(RunView.load(run))]
    assert on_disk == in_memory and on_disk


def test_ranking_is_severity_then_confidence_then_earliest():
    def f(sig, sev, conf, step):
        return Finding(signature_id=sig, severity=sev, confidence=conf, first_step=step, explanation="x")

    ranked = rank([f("A", "warn", 0.9, 5), f("B", "critical", 0.6, 50), f("C", "critical", 0.6, 10), f("D", "critical", 0.8, 90)])
    assert [x.signature_id for x in ranked] == ["D", "C", "B", "A"]


def test_config_overrides_a_threshold_and_disables_a_detector(tmp_path):
    run = record(tmp_path / "bad", entropy_mean=collapsing)
    assert diagnose(run, config={"ENTROPY_COLLAPSE": {"enabled": False}}) == []
    strict = diagnose(run, config={"ENTROPY_COLLAPSE": {"ratio_warn": 0.01, "ratio_critical": 0.005}})
    assert not [x for x in strict if x.signature_id == "ENTROPY_COLLAPSE"]


def test_an_unknown_detector_or_key_is_an_error_naming_the_valid_ones(tmp_path):
    with pytest.raises(ConfigError, match="KL_BLOWUP"):
        load_config(config={"KL_BLOWPU": {"enabled": False}})
    with pytest.raises(ConfigError, match="ratio_warn"):
        load_config(config={"ENTROPY_COLLAPSE": {"ratio_wran": 0.1}})
    toml = tmp_path / "doctor.toml"
    toml.write_text("[ENTROPY_COLLAPSE]\nratio_warn = 'low'\n")
    with pytest.raises(ConfigError, match="must be a number"):
        load_config(toml)


def test_every_detector_has_a_docstring_and_defaults_that_the_config_accepts():
    detectors = all_detectors()
    assert len(detectors) >= 3
    for det in detectors.values():
        assert det.doc, f"{det.id} needs a docstring explaining the RL mechanics"
        load_config(config={det.id: dict(det.params)})


def test_a_custom_sql_detector_becomes_a_finding(tmp_path):
    run = record(tmp_path / "run", loss=lambda s: 0.5 if s < 150 else 20.0)
    folder = tmp_path / "detectors"
    folder.mkdir()
    (folder / "loss_above_ten.sql").write_text(
        "-- id: LOSS_ABOVE_TEN\n-- severity: warn\n-- explanation: The loss went above 10.\n"
        "-- actions: Lower the learning rate; Check the reward scale\n"
        "SELECT min(step) AS first_step, 0.9 AS confidence, max(loss) AS max_loss\n"
        "FROM steps WHERE run_id = ? AND loss > 10 HAVING count(*) > 0\n"
    )
    (tmp_path / "doctor.toml").write_text('[doctor]\ncustom_detectors = "detectors"\n')
    (finding,) = [f for f in diagnose(run, config_path=tmp_path / "doctor.toml") if f.signature_id == "LOSS_ABOVE_TEN"]
    assert finding.first_step == 150 and finding.evidence == {"max_loss": 20.0}
    assert finding.suggested_actions == ["Lower the learning rate", "Check the reward scale"]


def test_cli_doctor_exit_codes_follow_the_contract(tmp_path):
    ok = record(tmp_path / "ok", entropy_mean=steady)
    bad = record(tmp_path / "bad", entropy_mean=collapsing)
    runner = CliRunner()
    assert runner.invoke(cli, ["doctor", str(ok)]).exit_code == 0
    result = runner.invoke(cli, ["doctor", str(bad)])
    assert result.exit_code == 1 and "ENTROPY_COLLAPSE" in result.output
    payload = json.loads(runner.invoke(cli, ["doctor", str(bad), "--json"]).output)
    assert payload["findings"][0]["signature_id"] == "ENTROPY_COLLAPSE"
    assert {"signature_id", "reason"} <= set(payload["skipped"][0])


def test_cli_doctor_on_a_root_ranks_runs_by_their_worst_finding(tmp_path):
    record(tmp_path / "root" / "a-ok", entropy_mean=steady)
    record(tmp_path / "root" / "b-bad", entropy_mean=collapsing)
    result = CliRunner().invoke(cli, ["doctor", str(tmp_path / "root")])
    assert result.exit_code == 1
    lines = [line for line in result.output.splitlines() if "b-bad" in line or "a-ok" in line]
    assert "b-bad" in lines[0] and "critical" in lines[0]


@pytest.mark.parametrize("chunk_steps", [1_000_000, 700])  # one chunk; two runs per chunk
def test_a_root_is_diagnosed_exactly_as_its_runs_are_one_by_one(tmp_path, monkeypatch, chunk_steps):
    from rlprobe.doctor import session
    from rlprobe.synth import write_run

    monkeypatch.setattr(session, "CHUNK_STEPS", chunk_steps)

    for i, kind in enumerate(["healthy", "KL_BLOWUP", "ENTROPY_COLLAPSE", "REWARD_HACK_LENGTH", "DEGENERATE_GROUPS"]):
        write_run(tmp_path / "root" / f"team-{i % 2}" / kind, kind, n_steps=300, seed=40 + i)

    def summary(d):
        return [(f.signature_id, f.severity, f.confidence, f.first_step, f.links_to_samples) for f in d.findings], sorted(s.signature_id for s in d.skipped)

    together = {d.run_id: summary(d) for d in diagnose_path(tmp_path / "root")}
    alone = {d.run_id: summary(d) for run in sorted((tmp_path / "root").glob("*/*")) for d in diagnose_path(run)}
    assert together == alone
    assert sum(bool(findings) for findings, _ in together.values()) >= 4  # the pathological runs were seen


def test_cli_doctor_on_unusable_input_says_one_line_and_exits_2(tmp_path):
    (tmp_path / "empty").mkdir()
    for args in (["doctor", str(tmp_path / "missing")], ["doctor", str(tmp_path / "empty")]):
        proc = subprocess.run([sys.executable, "-m", "rlprobe", *args], capture_output=True, text=True)
        assert proc.returncode == 2
        assert len(proc.stderr.strip().splitlines()) == 1 and "Traceback" not in proc.stderr


def test_the_doctor_does_not_import_torch_or_the_recorder_threads(tmp_path):
    run = record(tmp_path / "run", entropy_mean=steady)
    code = (
        "import sys; from rlprobe.doctor import diagnose; diagnose(sys.argv[1]); "
        "bad = [m for m in ('torch', 'trl', 'rlprobe.record.recorder', 'rlprobe.record.handlers') if m in sys.modules]; "
        "print(bad); sys.exit(1 if bad else 0)"
    )
    proc = subprocess.run([sys.executable, "-c", code, str(run)], capture_output=True, text=True)
    assert proc.returncode == 0, proc.stdout + proc.stderr


def test_the_context_knows_which_fields_the_feature_sql_covers():
    from rlprobe.doctor.context import _FEATURED
    from rlprobe.store import sqlfiles

    (series,) = [f for f in sqlfiles.load(1) if f.name == "doctor_series"]
    unpivoted = {name.strip() for name in series.sql.split("IN (", 1)[1].split(")")[0].replace("\n", " ").split(",")}
    assert _FEATURED == unpivoted
