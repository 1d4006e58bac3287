"""Every real log in ../shared/realdata/corpus imports, with the step numbering its README states.

The corpus README gives, for each file, "Logged points: N points, steps A..B (every K)": the
numbering a correct import recovers. This test reads those lines, so it holds the importer to
the README, not to numbers copied here. Skipped when the corpus is not present.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

import rlprobe
from rlprobe.importers import import_source
from rlprobe.importers.write import ImportReport
from shared_data import CORPUS  # ../shared, found from a worktree too

README = CORPUS / "README.md"

pytestmark = pytest.mark.skipif(not README.exists(), reason="../shared/realdata/corpus not present")

_SECTION = re.compile(r"^## \d+\. `(?P<file>[^`]+)`", re.M)
_POINTS = re.compile(r"\*\*Logged points:\*\* (?P<n>\d+) (?:points|rollouts)(?P<rest>[^\n]*)")
_RANGE = re.compile(r"(?:steps|updates) (?P<a>\d+)\.\.(?P<b>\d+)(?: \(every (?P<k>\d+)(?P<first>, first at \d+)?\))?")


def readme_points() -> dict[str, dict[str, int | None]]:
    """file -> {n, a, b, k} from the README's "Logged points" line of each section."""
    text = README.read_text(encoding="utf-8")
    out: dict[str, dict[str, int | None]] = {}
    sections = list(_SECTION.finditer(text))
    for i, section in enumerate(sections):
        body = text[section.end(): sections[i + 1].start() if i + 1 < len(sections) else len(text)]
        points = _POINTS.search(body)
        assert points, f"no Logged points line for {section['file']}"
        rng = _RANGE.search(points["rest"])
        out[section["file"]] = {
            "n": int(points["n"]),
            "a": int(rng["a"]) if rng else None,
            "b": int(rng["b"]) if rng else None,
            "k": int(rng["k"]) if rng and rng["k"] and not rng["first"] else None,
        }
    return out


POINTS = readme_points() if README.exists() else {}

# Keys of the corpus rlprobe neither maps nor knows (keymap.KNOWN_EXTRAS): each stays an extra,
# listed by the import. Both come from one home-grown loop (tonywang1990/gsm8k-grpo), whose
# seq_len_mean is a known extra (prompt counted or not is a trainer's choice) and whose
# t_rollout / t_train are the generation and optimization seconds.
UNKNOWN_KEYS = {
    "log_ratio_abs_mean",  # |log pi/pi_old|: how far the update moved, no field
    "asst_token_ratio",  # share of assistant tokens in the sequence
}


@pytest.fixture(scope="module")
def reports(tmp_path_factory: pytest.TempPathFactory) -> dict[str, tuple[ImportReport, Path]]:
    out = {}
    for name in POINTS:
        run = tmp_path_factory.mktemp("corpus") / "run"
        out[name] = (import_source(CORPUS / name, run), run)
    return out


def test_the_readme_describes_every_file() -> None:
    files = {p.name for p in CORPUS.iterdir()} - {"README.md", "labels.json"}
    assert set(POINTS) == files


@pytest.mark.parametrize("name", sorted(POINTS))
def test_every_log_imports_with_the_readme_step_numbering(name: str, reports: dict[str, tuple[ImportReport, Path]]) -> None:
    report, run = reports[name]
    expected = POINTS[name]
    steps = [r["step"] for r in rlprobe.RunReader(run).query("SELECT step FROM steps ORDER BY step").to_pylist()]
    assert len(steps) == expected["n"], report.step_rule
    if expected["a"] is not None:
        assert (steps[0], steps[-1]) == (expected["a"], expected["b"]), report.step_rule
    else:  # no range in the README: one step per rollout, numbered from 1
        assert steps == list(range(1, expected["n"] + 1))
    if expected["k"] is not None:
        assert steps == list(range(expected["a"], expected["b"] + 1, expected["k"])), report.step_rule
    assert report.step_rule


@pytest.mark.parametrize("name", sorted(POINTS))
def test_every_log_has_its_reward_and_no_unknown_key_but_the_listed_ones(name: str, reports: dict[str, tuple[ImportReport, Path]]) -> None:
    report, _ = reports[name]
    assert "reward_mean" in report.fields
    unknown = set(report.unmapped) - set(report.known_extra)
    assert unknown <= UNKNOWN_KEYS, f"keys neither mapped nor known: {sorted(unknown - UNKNOWN_KEYS)}"


def test_the_doctor_inputs_the_logs_carry_are_fields(reports: dict[str, tuple[ImportReport, Path]]) -> None:
    fields = {name: set(report.fields) for name, (report, _) in reports.items()}
    ppo = [n for n in fields if n.startswith("ppo_")]
    assert all({"value_loss", "kl_mean", "entropy_mean", "clip_fraction", "reward_mean"} <= fields[n] for n in ppo)
    assert all(reports[n][0].algorithm == "ppo" for n in ppo)
    # The dead PPO run's EOS count is 0 at every update: the only length signal it has.
    assert "eos_rate" in fields["ppo_trl_qwen25_0p5b_arith_v1_dead_noeos.json"]
    assert "eos_rate" not in fields["ppo_trl_qwen25_0p5b_arith_v2_flat.json"]
    # A home-grown loop's counts and names: truncation share, lengths, group statistics, components.
    countdown = reports["grpo_custom_sft_countdown_500step_slowlearn.jsonl"][0]
    assert {"max_len_hit_frac", "completion_len_mean", "zero_variance_group_frac", "group_reward_std_mean"} <= set(countdown.fields)
    assert countdown.components == ["accuracy", "format_rate"]
    loop = reports["grpo_qwen3_1p7b_gsm8k_baseline_learning.json"][0]
    assert {"generation_time_s", "optimization_time_s"} <= set(loop.fields) and "seq_len_mean" in loop.known_extra
    # TRL GRPO runs that log no group statistics (older TRL; a trainer_state without frac_reward_zero_std)
    for name in ("grpo_qwen35_9b_gsm8k_bandit_s45_klspike.log", "grpo_trl_qwen25coder_spider_text2sql_flat.json"):
        assert reports[name][0].algorithm == "grpo" and "TRL GRPOTrainer" in reports[name][0].algorithm_rule
    xtuner = reports["grpo_xtuner_qwen25_7b_32k_math_latecollapse.txt"][0]
    assert {"reward_mean", "entropy_mean", "grad_norm", "completion_len_mean", "logprob_mismatch"} <= set(xtuner.fields)
