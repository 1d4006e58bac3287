"""The TRL integration, with real GRPO and RLOO trainers on a tiny random Llama, offline, on CPU.

Each test trains for a few steps (a tenth of a second each) with `attach` and then reads the
recording back the way a user would, through `rlprobe.RunReader`.
"""

from __future__ import annotations

import json
import math
import re
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("trl")

from rlprobe import RunReader, SamplingConfig  # noqa: E402
from rlprobe.doctor.live import HaltPolicy  # noqa: E402
from rlprobe.errors import ToolMissing  # noqa: E402
from rlprobe.integrations import tiny  # noqa: E402
from rlprobe.integrations.trl import _CountedSamples, _CountQueue, _TokenCounter, attach, build_samples, render  # noqa: E402

tiny.offline()

from trl import GRPOTrainer, RLOOTrainer  # noqa: E402

# A custom doctor detector that goes critical once the run passes step 4: a finding on demand,
# diagnosed by the real live doctor from the files the recorder wrote.
PAST_STEP_FOUR = """\
-- id: PAST_STEP_FOUR
-- severity: critical
-- explanation: The run went past step 4.
-- actions: Nothing; this detector exists for the tests
SELECT min(step) AS first_step, 0.95 AS confidence
FROM steps WHERE run_id = ? AND step > 4 HAVING count(*) > 0
"""


@pytest.fixture(scope="module")
def model_path(tmp_path_factory: pytest.TempPathFactory) -> str:
    return str(tiny.build_tiny_model(tmp_path_factory.mktemp("tiny-llama")))


@pytest.fixture()
def halting_config(tmp_path: Path) -> dict[str, Any]:
    folder = tmp_path / "detectors"
    folder.mkdir()
    (folder / "past_step_four.sql").write_text(PAST_STEP_FOUR)
    return {"doctor": {"custom_detectors": str(folder)}}


def grpo(model_path: str, tmp_path: Path, conversational: bool = False, **config: Any) -> GRPOTrainer:
    return GRPOTrainer(
        model=model_path,
        reward_funcs=[tiny.reward_short, tiny.reward_cat],
        args=tiny.grpo_config(tmp_path / "out", **config),
        train_dataset=tiny.tiny_dataset(conversational=conversational),
    )


def by_kind(reader: RunReader, kind: str) -> list[Any]:
    return reader.events(kind=kind)


def test_grpo_run_is_recorded_step_by_step_with_samples_and_events(model_path: str, tmp_path: Path) -> None:
    trainer = grpo(model_path, tmp_path, beta=0.1, max_steps=6, save_strategy="steps", save_steps=3)
    callback = attach(trainer, tmp_path / "run", capture_env=False)
    trainer.train()

    reader = RunReader(tmp_path / "run")
    assert reader.manifest.algorithm == "grpo"
    assert reader.manifest.model_name == model_path
    assert reader.manifest.trainer_config["beta"] == 0.1
    assert reader.manifest.trainer_config["num_generations"] == 4

    # One row per optimizer step with TRL's figures, keyed by global_step (TRL logs no step).
    steps = reader.steps()
    assert [s.step for s in steps] == [1, 2, 3, 4, 5, 6]
    trl_logs = {entry["step"]: entry for entry in trainer.state.log_history if "reward" in entry}
    for s in steps:
        logged = trl_logs[s.step]
        assert s.reward_mean == pytest.approx(logged["reward"])
        assert s.kl_mean == pytest.approx(logged["kl"])  # beta > 0: TRL logs kl
        assert s.entropy_mean == pytest.approx(logged["entropy"])
        assert s.lr == pytest.approx(logged["learning_rate"])
        assert s.completion_len_mean == pytest.approx(logged["completions/mean_length"])
        assert s.clip_fraction == pytest.approx(logged["clip_ratio/region_mean"])
        assert s.reward_components == pytest.approx(
            {"reward_short": logged["rewards/reward_short/mean"], "reward_cat": logged["rewards/reward_cat/mean"]}
        )
        assert s.extra["rewards/reward_cat/std"] == pytest.approx(logged["rewards/reward_cat/std"])
        assert s.extra["clip_ratio/high_max"] == pytest.approx(logged["clip_ratio/high_max"])
        # computed from the rollouts: TRL does not log these
        assert s.adv_std is not None and s.reward_min <= s.reward_mean <= s.reward_max
    # the run totals of the last log are not a step
    assert not [name for s in steps for name in s.extra if name.startswith("train_")]
    assert by_kind(reader, "train_end")[0].data["summary"]["train_loss"] == pytest.approx(trainer.state.log_history[-1]["train_loss"])

    # Samples: the whole generation batch (8 = 2 prompts x 4 generations) fits the default selection.
    samples = reader.samples()
    assert {s.step for s in samples} == {1, 2, 3, 4, 5, 6}
    first = [s for s in samples if s.step == 1]
    assert len(first) == 8
    for s in first:
        assert s.reward_total == pytest.approx(sum(s.reward_components.values()))  # weights are 1
        assert s.reward_components["reward_cat"] == (1.0 if "cat" in s.completion_text.split() else 0.0)
        assert s.completion_len == len(s.completion_text.split())  # a word-level tokenizer: a word is a token
    groups: dict[str, set[str]] = {}
    for s in first:
        groups.setdefault(s.group_id, set()).add(s.prompt_text)
    assert len(groups) == 2 and all(len(prompts) == 1 for prompts in groups.values())
    # GRPO advantages are centred within each group
    for gid in groups:
        assert sum(s.advantage for s in first if s.group_id == gid) == pytest.approx(0.0, abs=1e-3)

    assert [e.step for e in by_kind(reader, "checkpoint")] == [3, 6]
    assert by_kind(reader, "checkpoint")[0].data["path"].endswith("checkpoint-3")
    begin = by_kind(reader, "train_begin")[0]
    assert begin.data["reward_funcs"] == ["reward_short", "reward_cat"] and begin.data["num_generations"] == 4
    assert by_kind(reader, "shim_unavailable") == []
    assert callback.halted_by is None and callback.recorder.dropped == 0


def test_conversational_prompts_are_rendered_as_text(model_path: str, tmp_path: Path) -> None:
    trainer = grpo(model_path, tmp_path, conversational=True, max_steps=3)  # beta = 0: no kl
    attach(trainer, tmp_path / "run", capture_env=False, sampling=SamplingConfig(top_k=1, bottom_k=1, random_k=1, seed=0))
    trainer.train()

    reader = RunReader(tmp_path / "run")
    steps = reader.steps()
    assert all(s.kl_mean is None for s in steps)
    samples = reader.samples()
    # the recorder's selection, per step: the best, the worst and one drawn at random
    for s in steps:
        kept = {x.capture_reason: x for x in samples if x.step == s.step}
        assert sorted(kept) == ["bottom_k", "random", "top_k"]
        assert kept["top_k"].reward_total == pytest.approx(s.reward_max)
        assert kept["bottom_k"].reward_total == pytest.approx(s.reward_min)
        assert all(x.completion_len == len(x.completion_text.split()) for x in kept.values())
    assert samples and all(s.prompt_text.startswith("user: ") for s in samples)
    assert not any(s.completion_text.startswith("[") for s in samples)  # the text, not a repr of messages
    assert render([{"role": "assistant", "content": "a cat"}]) == "a cat"
    assert render([{"role": "system", "content": "be brief"}, {"role": "user", "content": [{"type": "image"}, {"type": "text", "text": "what is it?"}]}]) == (
        "system: be brief\nuser: <image> what is it?"
    )


def test_build_samples_reads_a_trl_completion_buffer() -> None:
    logs = {
        "prompt": ["2+2?", "2+2?", "3+3?", "3+3?"],
        "completion": ["4", "5", [{"role": "assistant", "content": "6"}], "six"],
        "rewards": {"correct": [1.0, 0.0, 1.0, math.nan], "short": [1.0, 1.0, 1.0, 0.5]},  # NaN: not scored
        "advantages": [0.5, -0.5, 0.25, -0.25],
        "extra": {"entropy": [0.1, 0.2, 0.3, None]},
    }
    samples, stats = build_samples(3, logs, num_generations=2, reward_names=["correct", "short"], reward_weights=[2.0, 1.0])

    assert samples[0] == {
        "prompt_text": "2+2?",
        "completion_text": "4",
        "reward_total": 3.0,  # 2.0 * 1.0 + 1.0 * 1.0
        "reward_components": {"correct": 1.0, "short": 1.0},
        "advantage": 0.5,
        "group_id": "3-0",
        "extra": {"entropy": 0.1},
    }
    assert samples[2]["completion_text"] == "6" and samples[2]["group_id"] == "3-1"
    assert samples[3]["reward_total"] == 0.5 and samples[3]["reward_components"] == {"short": 0.5}
    assert "extra" not in samples[3] and "completion_len" not in samples[3]  # no tokenizer given
    # what TRL does not log: the reward range, the advantages' spread, the mean std within a group
    assert (stats["reward_min"], stats["reward_max"]) == (0.5, 3.0)
    assert stats["adv_mean"] == 0.0 and stats["adv_std"] == pytest.approx(math.sqrt(0.15625))
    assert stats["group_reward_std_mean"] == pytest.approx((math.sqrt(2.0) + math.sqrt(2 * 1.25**2)) / 2)


@pytest.fixture(scope="module")
def bpe_tokenizer() -> Any:
    """A byte-level BPE tokenizer trained on the spot: merges, unicode and whitespace runs, like an LLM's."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    backend = Tokenizer(models.BPE())
    backend.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    backend.decoder = decoders.ByteLevel()
    corpus = ["the cat sat on the mat", "héllo wörld 🐈 cats", "def f(x):\n    return x + 1"] * 20
    trainer = trainers.BpeTrainer(vocab_size=300, special_tokens=["<eos>"], initial_alphabet=pre_tokenizers.ByteLevel.alphabet())
    backend.train_from_iterator(corpus, trainer)
    return PreTrainedTokenizerFast(tokenizer_object=backend, eos_token="<eos>")


COMPLETIONS = ["the cat", "", "héllo 🐈🐈 wörld", "the cat", "  spaced\n\n  out  ", "<eos> after", "def f(x):\n    return x + 1"]


def test_completion_len_is_the_tokenizers_own_count(bpe_tokenizer: Any) -> None:
    # However rlprobe counts (the trainer's tokenizer, or a private copy on the recorder's writer
    # thread; each distinct text once), the count is what the tokenizer itself says, and what
    # rlprobe counted before with backend.encode_batch.
    expected = [len(bpe_tokenizer(text, add_special_tokens=False)["input_ids"]) for text in COMPLETIONS]
    before = [len(e.ids) for e in bpe_tokenizer.backend_tokenizer.encode_batch(COMPLETIONS, add_special_tokens=False)]
    assert expected == before == [2, 0, 6, 2, 16, 7, 10]

    assert _TokenCounter(bpe_tokenizer).lengths(COMPLETIONS) == expected
    private = _TokenCounter(bpe_tokenizer, private_copy=True)
    assert private.private and private.lengths(COMPLETIONS) == expected

    class SlowTokenizer:  # no Rust backend: called the transformers way
        def __call__(self, texts: list[str], **kwargs: Any) -> Any:
            return bpe_tokenizer(texts, **kwargs)

    assert _TokenCounter(SlowTokenizer(), private_copy=True).lengths(COMPLETIONS) == expected
    assert _TokenCounter(None).lengths(COMPLETIONS) is None  # no tokenizer: no completion_len


def test_a_truncation_left_on_the_trainers_tokenizer_does_not_shorten_completion_len(bpe_tokenizer: Any) -> None:
    expected = [len(bpe_tokenizer(text, add_special_tokens=False)["input_ids"]) for text in COMPLETIONS]
    bpe_tokenizer.backend_tokenizer.enable_truncation(3)  # what a user's own tokenizer call may leave behind
    try:
        assert _TokenCounter(bpe_tokenizer, private_copy=True).lengths(COMPLETIONS) == expected
    finally:
        bpe_tokenizer.backend_tokenizer.no_truncation()


def test_kept_samples_are_counted_when_the_recorder_reads_them(bpe_tokenizer: Any) -> None:
    def tokens(text: str) -> int:
        return len(bpe_tokenizer(text, add_special_tokens=False)["input_ids"])

    queue = _CountQueue(_TokenCounter(bpe_tokenizer, private_copy=True))
    step_1 = [{"completion_text": text} for text in COMPLETIONS]
    step_2 = [{"completion_text": "the mat"}]
    counted_1, counted_2 = _CountedSamples(step_1, queue), _CountedSamples(step_2, queue)
    assert "completion_len" not in step_1[0]  # nothing counted on the training thread

    read: list[dict[str, Any]] = []
    writer = threading.Thread(target=lambda: read.extend(counted_1))  # as the recorder's writer thread does
    writer.start()
    writer.join()
    assert read == step_1 and [s["completion_len"] for s in read] == [tokens(t) for t in COMPLETIONS]
    assert step_2[0]["completion_len"] == tokens("the mat")  # the step queued behind it: one tokenizer call
    assert list(counted_1) == read and list(counted_2) == step_2  # reading again changes nothing


def test_a_step_pushed_out_of_the_count_queue_counts_itself(bpe_tokenizer: Any) -> None:
    queue = _CountQueue(_TokenCounter(bpe_tokenizer, private_copy=True))
    steps = [_CountedSamples([{"completion_text": "the cat " * i}], queue) for i in range(100)]  # more than it holds
    assert [s["completion_len"] for s in steps[0]] == [len(bpe_tokenizer("", add_special_tokens=False)["input_ids"])]
    assert all(list(step)[0]["completion_len"] == len(bpe_tokenizer("the cat " * i, add_special_tokens=False)["input_ids"]) for i, step in enumerate(steps))


def test_rloo_is_recorded_as_rloo(model_path: str, tmp_path: Path) -> None:
    trainer = RLOOTrainer(
        model=model_path,
        reward_funcs=[tiny.reward_short, tiny.reward_cat],
        args=tiny.rloo_config(tmp_path / "out", max_steps=3, beta=0.05),
        train_dataset=tiny.tiny_dataset(),
    )
    attach(trainer, tmp_path / "run", capture_env=False)
    trainer.train()

    reader = RunReader(tmp_path / "run")
    assert reader.manifest.algorithm == "rloo"
    steps = reader.steps()
    assert [s.step for s in steps] == [1, 2, 3]
    assert all(s.kl_mean is not None and s.reward_mean is not None for s in steps)
    assert {s.step for s in reader.samples()} == {1, 2, 3}
    assert all(s.advantage is not None for s in reader.samples())


def test_attach_writes_the_runs_name_and_tags_to_the_manifest(model_path: str, tmp_path: Path) -> None:
    # issue 15, item 7: what `rlprobe ls`, the report and `rlprobe ui` show for the run
    trainer = grpo(model_path, tmp_path, max_steps=2)
    attach(trainer, tmp_path / "run", name="lr 3e-6, beta 0.04", tags=["sweep-2", "grpo"], capture_env=False)
    trainer.train()

    manifest = json.loads((tmp_path / "run" / "manifest.json").read_text())
    assert (manifest["name"], manifest["tags"]) == ("lr 3e-6, beta 0.04", ["sweep-2", "grpo"])
    assert manifest["algorithm"] == "grpo"  # the trainer's own fields are still filled in beside them
    from rlprobe.store import open_store

    # the runs view (rlprobe ls, the report, rlprobe ui) reads them from there
    assert open_store(tmp_path / "run").rows("SELECT name, tags FROM runs")[2] == [("lr 3e-6, beta 0.04", ["sweep-2", "grpo"])]


def test_attach_takes_one_string_as_one_tag(model_path: str, tmp_path: Path) -> None:
    trainer = grpo(model_path, tmp_path, max_steps=1)
    attach(trainer, tmp_path / "run", tags="baseline", capture_env=False)
    trainer.train()
    manifest = json.loads((tmp_path / "run" / "manifest.json").read_text())
    assert (manifest["name"], manifest["tags"]) == (None, ["baseline"])


def test_a_batch_reused_across_steps_is_logged_once(model_path: str, tmp_path: Path) -> None:
    # num_iterations=2: each generation batch trains two optimizer steps (1-2, 3-4, 5-6).
    trainer = grpo(model_path, tmp_path, num_iterations=2, max_steps=6)
    attach(trainer, tmp_path / "run", capture_env=False)
    trainer.train()

    reader = RunReader(tmp_path / "run")
    assert [s.step for s in reader.steps()] == [1, 2, 3, 4, 5, 6]
    samples = reader.samples()
    assert sorted({s.step for s in samples}) == [1, 3, 5]
    assert len(samples) == 3 * 8


class _BufferElsewhere:
    """What a future TRL might hold instead of the dict of deques: it works for TRL, not for us."""

    def __init__(self, logs: Any) -> None:
        self._inner = logs

    def __getitem__(self, key: str) -> Any:
        return self._inner[key]


def test_without_the_completion_buffer_scalars_are_still_recorded(model_path: str, tmp_path: Path) -> None:
    trainer = grpo(model_path, tmp_path, max_steps=3)
    trainer._logs = _BufferElsewhere(trainer._logs)
    attach(trainer, tmp_path / "run", capture_env=False)
    trainer.train()

    reader = RunReader(tmp_path / "run")
    assert [s.step for s in reader.steps()] == [1, 2, 3]
    assert all(s.reward_mean is not None for s in reader.steps())
    assert reader.samples() == []
    shim = by_kind(reader, "shim_unavailable")
    assert len(shim) == 1 and "_logs" in shim[0].message


def test_the_live_doctor_halts_training_through_the_policy(model_path: str, tmp_path: Path, halting_config: dict[str, Any]) -> None:
    trainer = grpo(model_path, tmp_path, max_steps=20)
    callback = attach(trainer, tmp_path / "run", halt=True, diagnose_every=2, doctor_config=halting_config, capture_env=False)
    trainer.train()

    # At step 6 the doctor sees steps 1-5 (step 6's scalars are logged after on_step_end), goes
    # critical, and the trainer stops after finishing step 6.
    assert trainer.state.global_step == 6
    assert callback.halted_by.signature_id == "PAST_STEP_FOUR"
    reader = RunReader(tmp_path / "run")
    assert reader.steps()[-1].step == 6
    halt = by_kind(reader, "auto_halt")
    assert len(halt) == 1 and halt[0].step == 6
    assert halt[0].data == {"signature": "PAST_STEP_FOUR", "severity": "critical", "confidence": 0.95, "first_step": 5}
    assert by_kind(reader, "train_end")[0].data["halted_by"] == "PAST_STEP_FOUR"
    assert [e.step for e in reader.events() if e.kind in ("auto_halt", "train_end", "recorder_close")] == [6, 6, None]


def test_a_policy_that_does_not_match_never_halts(model_path: str, tmp_path: Path, halting_config: dict[str, Any]) -> None:
    seen: list[Any] = []
    trainer = grpo(model_path, tmp_path, max_steps=8)
    callback = attach(
        trainer, tmp_path / "run", halt=HaltPolicy(signatures=frozenset({"KL_BLOWUP"})), on_finding=seen.append,
        diagnose_every=2, doctor_config=halting_config, capture_env=False,
    )
    trainer.train()

    assert trainer.state.global_step == 8 and callback.halted_by is None
    # The tiny random model's completions may also draw built-in findings (every one at the length
    # cap); the custom one is what this test follows.
    assert [f.signature_id for f in seen if f.signature_id == "PAST_STEP_FOUR"] == ["PAST_STEP_FOUR"]  # reported once, when first seen
    reader = RunReader(tmp_path / "run")
    assert by_kind(reader, "auto_halt") == []
    live = [(e.step, e.data["signature"]) for e in by_kind(reader, "live_finding")]
    assert [x for x in live if x[1] == "PAST_STEP_FOUR"] == [(6, "PAST_STEP_FOUR")]


def test_an_on_finding_that_raises_does_not_stop_training(model_path: str, tmp_path: Path, halting_config: dict[str, Any]) -> None:
    def on_finding(finding: Any) -> None:
        raise RuntimeError("my pager is down")

    trainer = grpo(model_path, tmp_path, max_steps=8)
    attach(trainer, tmp_path / "run", on_finding=on_finding, diagnose_every=2, doctor_config=halting_config, capture_env=False)
    trainer.train()

    assert trainer.state.global_step == 8
    reader = RunReader(tmp_path / "run")
    # one failure per finding reported (the tiny model may draw built-in ones too), each recorded
    failed = by_kind(reader, "on_finding_failed")
    assert failed and all(e.message == "RuntimeError: my pager is down" for e in failed)
    assert [e.data["signature"] for e in failed].count("PAST_STEP_FOUR") == 1
    assert len(failed) == len(by_kind(reader, "live_finding"))
    assert [s.step for s in reader.steps()] == list(range(1, 9))


def test_a_nan_loss_is_an_event_once_per_stretch(model_path: str, tmp_path: Path) -> None:
    trainer = grpo(model_path, tmp_path, max_steps=1)
    callback = attach(trainer, tmp_path / "run", capture_env=False)
    state, control = trainer.state, trainer.control
    for step, loss in [(1, 0.5), (2, math.nan), (3, math.nan), (4, 0.4), (5, math.inf)]:
        state.global_step = step
        callback.on_log(trainer.args, state, control, logs={"loss": loss, "grad_norm": 1.0})
    callback.on_train_end(trainer.args, state, control)

    reader = RunReader(tmp_path / "run")
    assert [(e.step, e.data["metric"], e.data["value"]) for e in by_kind(reader, "nan_detected")] == [(2, "loss", "nan"), (5, "loss", "inf")]
    assert math.isnan(reader.steps()[1].loss)  # the value is kept too


def test_a_second_train_call_resumes_the_recording(model_path: str, tmp_path: Path) -> None:
    trainer = grpo(model_path, tmp_path, max_steps=2)
    attach(trainer, tmp_path / "run", capture_env=False)
    trainer.train()
    trainer.args.max_steps = 4
    trainer.train(resume_from_checkpoint=False)

    reader = RunReader(tmp_path / "run")
    assert [e.kind for e in reader.events() if e.kind.startswith(("recorder_", "train_"))] == [
        "recorder_open", "train_begin", "train_end", "recorder_close",
        "recorder_open", "train_begin", "train_end", "recorder_close",
    ]
    assert [e.message for e in by_kind(reader, "recorder_open")] == ["", "resumed"]
    # A fresh train() counts from step 1 again; the steps view keeps the latest row of a step.
    second_run = [entry for entry in trainer.state.log_history if "reward" in entry]
    assert [s.step for s in reader.steps()] == [1, 2, 3, 4]
    assert [s.reward_mean for s in reader.steps()] == pytest.approx([entry["reward"] for entry in second_run])


def test_attach_without_trl_says_what_to_install(model_path: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    trainer = grpo(model_path, tmp_path, max_steps=1)
    monkeypatch.setitem(sys.modules, "trl", None)  # import trl now raises ImportError
    with pytest.raises(ToolMissing, match=r'pip install "rlprobe\[trl\]"'):
        attach(trainer, tmp_path / "run")
    assert not (tmp_path / "run").exists()


DISTRIBUTED_SCRIPT = """
import os, sys
from pathlib import Path
from rlprobe.integrations import tiny
tiny.offline()
from trl import GRPOTrainer
from rlprobe.integrations.trl import attach

model, detectors, out = sys.argv[1:4]
trainer = GRPOTrainer(model=model, reward_funcs=[tiny.reward_short],
                      args=tiny.grpo_config(Path(out) / "trainer", per_device_train_batch_size=4, ddp_backend="gloo"),
                      train_dataset=tiny.tiny_dataset())
callback = attach(trainer, Path(out) / "run", halt=True, diagnose_every=2,
                  doctor_config={"doctor": {"custom_detectors": detectors}}, capture_env=False)
trainer.train()
halted_by = callback.halted_by.signature_id if callback.halted_by else None
print(f"rank {os.environ['RANK']} of {trainer.args.world_size} stopped at {trainer.state.global_step} halted_by {halted_by}", flush=True)
"""


@pytest.mark.slow
def test_two_ranks_stop_together_when_rank_zero_halts(model_path: str, tmp_path: Path, halting_config: dict[str, Any]) -> None:
    # Only rank 0 diagnoses; if the other rank did not learn of the halt it would wait in the
    # next gather forever (the timeout below turns that into a failure).
    script = tmp_path / "train.py"
    script.write_text(DISTRIBUTED_SCRIPT)
    detectors = halting_config["doctor"]["custom_detectors"]
    command = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node", "2", str(script), model_path, detectors, str(tmp_path)]
    done = subprocess.run(command, capture_output=True, text=True, timeout=300, cwd=tmp_path)
    assert done.returncode == 0, done.stderr[-3000:]
    # the two ranks share stdout, so another process's output may land on the same line
    lines = sorted(re.findall(r"rank \d of 2 stopped at \d+ halted_by \w+", done.stdout))
    assert lines == ["rank 0 of 2 stopped at 6 halted_by PAST_STEP_FOUR", "rank 1 of 2 stopped at 6 halted_by None"]

    reader = RunReader(tmp_path / "run")
    assert reader.manifest.world_size == 2
    assert [e.step for e in by_kind(reader, "auto_halt")] == [6]
    # rank 0 logs the batch TRL gathered from both ranks: 2 prompts x 4 generations per step
    assert {s.step for s in reader.samples()} == set(range(1, 7))
    assert len(reader.samples(step_from=1, step_to=1)) == 8


def test_the_module_imports_without_transformers_and_attach_says_what_to_install(tmp_path: Path) -> None:
    code = (
        "import sys; sys.modules['transformers'] = sys.modules['trl'] = None\n"
        "from rlprobe.errors import ToolMissing\n"
        "from rlprobe.integrations.trl import attach\n"
        "try:\n"
        "    attach(object(), 'run')\n"
        "except ToolMissing as exc:\n"
        "    print(exc)\n"
        "print(sorted(m for m in ('torch', 'duckdb') if m in sys.modules))\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=tmp_path, timeout=60)
    assert done.returncode == 0, done.stderr
    message, imported = done.stdout.splitlines()
    assert 'pip install "rlprobe[trl]"' in message
    assert imported == "[]"
    assert not (tmp_path / "run").exists()


def test_grpo_groups_become_inference_records_when_a_writer_is_given(model_path: str, tmp_path: Path) -> None:
    from rlprobe.records import RecordsWriter, build_protocol, summarize

    checkpoint = tmp_path / "checkpoint"
    checkpoint.mkdir()
    (checkpoint / "config.json").write_text("{}")
    writer = RecordsWriter(tmp_path / "records", run_name="tiny-grpo", checkpoint=checkpoint,
                           protocol=build_protocol({"temperature": 1.0}), responses="all")
    trainer = grpo(model_path, tmp_path, max_steps=3)
    attach(trainer, tmp_path / "run", capture_env=False, records=writer)
    trainer.train()
    counters = writer.close()

    assert counters["dropped"] == counters["failed"] == counters["pending"] == 0
    lines = [json.loads(line) for path in (tmp_path / "records").rglob("records-*.jsonl") for line in path.read_text().splitlines()]
    groups = [row for row in lines if row["kind"] == "group"]
    consumed = [row for row in lines if row["kind"] == "disposition"]
    per_step = trainer.args.per_device_train_batch_size * trainer.args.gradient_accumulation_steps // trainer.num_generations
    assert len(groups) == 3 * per_step and len(consumed) == len(groups)
    assert {len(g["responses"]) for g in groups} == {trainer.num_generations}
    assert {d["disposition"] for d in consumed} == {"consumed"}
    assert {g["observation_id"] for g in groups} == {d["observation_id"] for d in consumed}
    # the rewards recorded are the ones the recording's samples hold
    recorded = {s.reward_total for s in RunReader(tmp_path / "run").samples()}
    assert {r["reward"] for g in groups for r in g["responses"]} >= recorded
    assert RunReader(tmp_path / "run").events(kind="train_end")[0].data["records"]["written"] == 2 * len(groups)
    summarize(tmp_path / "records", tmp_path / "summary")
    prompts = [json.loads(line) for line in (tmp_path / "summary" / "prompts.jsonl").read_text().splitlines()]
    assert sum(p["groups"]["total"] for p in prompts) == len(groups)  # rlprobe records summarize reads them
