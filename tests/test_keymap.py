"""rlprobe.keymap: one table turns every tool's metric names into StepRecord fields."""

from __future__ import annotations

import math

import pytest

from rlprobe import keymap
from rlprobe.keymap import derive_run, infer_algorithm, map_metrics


def test_a_trl_log_splits_into_fields_components_and_extras() -> None:
    mapped = map_metrics(
        {
            "reward": 0.5,
            "kl": "0.01",
            "rewards/accuracy/mean": 0.75,  # TRL >= 0.17
            "rewards/format": 1.0,  # older TRL
            "rewards/accuracy/std": 0.1,  # not a mean: kept as an extra
            "global_step": 7.0,
            "note": "hello",
        }
    )
    assert mapped.step == 7
    assert mapped.fields == {"reward_mean": 0.5, "kl_mean": 0.01}
    assert mapped.components == {"accuracy": 0.75, "format": 1.0}
    assert mapped.extra == {"rewards/accuracy/std": 0.1}
    assert mapped.unmapped == ["rewards/accuracy/std"] and mapped.skipped == ["note"]


def test_every_step_maps_a_key_the_same_way_as_the_first() -> None:
    # What a key means is remembered per key; the second step must not differ from the first.
    logs = {"rewards/a/mean": 1.0, "rewards/b": 2.0, "rewards/c/d/mean": 3.0, "loss": math.nan}
    first, second = map_metrics(logs), map_metrics(logs)
    assert first.components == second.components == {"a": 1.0, "b": 2.0}
    assert first.extra == second.extra == {"rewards/c/d/mean": 3.0}
    assert math.isnan(second.fields["loss"])


def test_more_distinct_keys_than_the_cache_holds_still_map(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(keymap, "_CACHE_SIZE", 4)
    monkeypatch.setattr(keymap, "_RESOLVED", {})
    for round_ in range(2):
        mapped = map_metrics({f"rewards/f{i}/mean": float(i) for i in range(10)} | {f"other/{i}": 1.0 for i in range(10)})
        assert mapped.components == {f"f{i}": float(i) for i in range(10)}, round_
        assert len(mapped.extra) == 10
    assert len(keymap._RESOLVED) <= 4


def test_the_preferred_key_of_a_field_wins_whatever_the_dict_order() -> None:
    # TRL PPO logs both: the per-token entropy is comparable across lengths, the sequence sum is not.
    a = map_metrics({"objective/entropy": 25.9, "policy/entropy_avg": 0.34})
    b = map_metrics({"policy/entropy_avg": 0.34, "objective/entropy": 25.9})
    assert a.fields == b.fields == {"entropy_mean": 0.34}
    assert a.extra == b.extra == {"objective/entropy": 25.9}  # the other spelling is kept, not dropped
    assert a.shadowed == b.shadowed == ["objective/entropy"]


def test_trl_ppo_keys() -> None:
    mapped = map_metrics({
        "objective/kl": 8.48, "objective/scores": -0.1, "objective/rlhf_reward": -0.52, "objective/non_score_reward": -0.42,
        "policy/approxkl_avg": 0.17, "policy/clipfrac_avg": 0.064, "loss/policy_avg": 0.036, "loss/value_avg": 8.69,
        "val/clipfrac_avg": 0.0, "policy/entropy_avg": 0.34, "val/ratio": 0.96, "val/ratio_var": 3.6e-8,
        "val/num_eos_tokens": 0, "lr": 5e-06, "episode": 4, "step": 1,
    })
    assert mapped.step == 1
    assert mapped.fields == {"kl_mean": 8.48, "reward_mean": -0.1, "clip_fraction": 0.064, "loss": 0.036, "value_loss": 8.69,
                             "value_clip_fraction": 0.0, "entropy_mean": 0.34, "ratio_mean": 0.96, "lr": 5e-06}
    # The KL between consecutive policies and the score net of the KL penalty have no field.
    assert set(mapped.extra) == {"objective/rlhf_reward", "objective/non_score_reward", "policy/approxkl_avg",
                                 "val/ratio_var", "val/num_eos_tokens", "episode"}


def test_verl_keys() -> None:
    mapped = map_metrics({
        "critic/score/mean": 0.4, "critic/rewards/mean": 0.38, "critic/advantages/mean": 0.0, "critic/vf_loss": 0.2,
        "critic/vf_explained_var": 0.5, "actor/entropy": 0.9, "actor/pg_loss": -0.01, "actor/pg_clipfrac": 0.02,
        "actor/ppo_kl": 0.001, "actor/reward_kl_penalty": 0.03, "actor/grad_norm": 0.4, "response_length/mean": 300.0,
        "response_length/clip_ratio": 0.1, "mismatch/mismatch_logprob_abs_diff": 0.015, "training/global_step": 12,
    })
    assert mapped.step == 12
    assert mapped.fields == {"reward_mean": 0.4, "adv_mean": 0.0, "value_loss": 0.2, "value_explained_variance": 0.5,
                             "entropy_mean": 0.9, "loss": -0.01, "clip_fraction": 0.02, "kl_mean": 0.03, "grad_norm": 0.4,
                             "completion_len_mean": 300.0, "max_len_hit_frac": 0.1, "logprob_mismatch": 0.015}
    assert set(mapped.extra) == {"critic/rewards/mean", "actor/ppo_kl"}  # score net of the KL penalty; policy-change KL


def test_openrlhf_keys_and_the_sign_of_its_entropy() -> None:
    mapped = map_metrics({"policy_loss": 0.01, "actor_lr": 5e-7, "ppo_clip_ratio": 0.03, "ppo_kl": 0.001, "kl": 0.02,
                          "reward": 0.5, "return": 0.4, "response_length": 420.0, "response_clip_ratio": 0.25,
                          "critic_loss": 0.3, "entropy_loss": 1.1})
    assert mapped.fields == {"loss": 0.01, "lr": 5e-7, "clip_fraction": 0.03, "kl_mean": 0.02, "reward_mean": 0.5,
                             "completion_len_mean": 420.0, "max_len_hit_frac": 0.25, "value_loss": 0.3, "entropy_mean": 1.1}
    # A loop that logs the entropy term of its loss (the negated entropy) reads as the same entropy.
    assert map_metrics({"entropy_loss": -1.1}).fields == {"entropy_mean": 1.1}


def test_tracker_namespaces_are_read_through() -> None:
    mapped = map_metrics({"train/reward": 0.7, "train/rewards/accuracy_reward/mean": 0.6, "train/global_step": 30,
                          "train/my_thing": 1.0, "eval/reward": 0.5})
    assert (mapped.step, mapped.fields, mapped.components) == (30, {"reward_mean": 0.7}, {"accuracy_reward": 0.6})
    assert mapped.unmapped == ["train/my_thing", "eval/reward"]


def test_home_grown_loop_keys() -> None:
    mapped = map_metrics({"mean_reward": 0.93, "accuracy": 0.65, "format_rate": 0.75, "avg_gen_tokens": 503.5,
                          "max_gen_tokens": 951, "group_reward_std": 0.36, "frac_reward_zero_std": 0.25,
                          "truncated_count": 5, "rollout_count": 20, "approx_kl": 0.0, "update": 3})
    assert mapped.step == 3
    assert mapped.fields == {"reward_mean": 0.93, "completion_len_mean": 503.5, "completion_len_max": 951.0,
                             "group_reward_std_mean": 0.36, "zero_variance_group_frac": 0.25, "max_len_hit_frac": 0.25}
    assert mapped.derived == ["max_len_hit_frac"]  # 5 of 20 completions hit the cap
    assert mapped.components == {"accuracy": 0.65, "format_rate": 0.75}
    # approx_kl is the KL between the old and the updated policy, not the KL to the reference.
    assert set(mapped.extra) == {"truncated_count", "rollout_count", "approx_kl"}


def test_a_logged_share_wins_over_the_derived_one() -> None:
    mapped = map_metrics({"truncated_rate": 0.2, "truncated_count": 5, "rollout_count": 20})
    assert mapped.fields == {"max_len_hit_frac": 0.2} and mapped.derived == []
    assert "max_len_hit_frac" not in map_metrics({"truncated_count": 5, "rollout_count": 0}).fields


def test_eos_rate_from_a_count_only_when_it_is_zero_at_every_step() -> None:
    dead = [map_metrics({"val/num_eos_tokens": 0, "objective/scores": -0.1}) for _ in range(3)]
    notes = derive_run(dead)
    assert [e.fields["eos_rate"] for e in dead] == [0.0, 0.0, 0.0] and "eos_rate" in notes[0]

    # A count above 0 says nothing exact; zeros alone would make a series of only its extremes.
    mixed = [map_metrics({"val/num_eos_tokens": n}) for n in (0, 7, 0)]
    notes = derive_run(mixed)
    assert not any("eos_rate" in e.fields for e in mixed) and "not derived" in notes[0]


def test_every_group_is_degenerate_when_reward_std_is_zero_throughout() -> None:
    dead = [map_metrics({"reward": -0.1, "reward_std": 0.0}) for _ in range(4)]
    derive_run(dead)
    assert {e.fields["zero_variance_group_frac"] for e in dead} == {1.0}
    logged = [map_metrics({"reward_std": 0.0, "frac_reward_zero_std": 0.5})]
    derive_run(logged)
    assert logged[0].fields["zero_variance_group_frac"] == 0.5  # what the trainer logged is never replaced


def test_algorithm_from_the_key_set() -> None:
    def fields(logged: dict[str, float]) -> set[str]:
        return set(map_metrics(logged).fields)

    assert infer_algorithm(fields({"objective/scores": 0.1, "loss/value_avg": 8.7}))[0] == "ppo"
    assert infer_algorithm(fields({"critic_loss": 0.3, "frac_reward_zero_std": 0.5}))[0] == "ppo"  # a critic decides
    assert infer_algorithm(fields({"reward": 0.5, "frac_reward_zero_std": 0.2}))[0] == "grpo"
    assert infer_algorithm(fields({"train/frac_reward_zero_std": 0.2}))[0] == "grpo"
    assert infer_algorithm(fields({"reward": 0.5, "loss": 0.1})) == (None, "")


def test_timing_keys_of_several_trainers() -> None:
    timings = {"timing_s/gen": "generation_time_s", "timing/generate": "generation_time_s", "perf/rollout_time": "generation_time_s",
               "rollout_time": "generation_time_s", "time/rollout": "generation_time_s", "t_rollout": "generation_time_s",
               "timing/step": "step_time_s", "perf/step_time": "step_time_s", "t_train": "optimization_time_s",
               "timing/policy_train": "optimization_time_s", "perf/train_time": "optimization_time_s"}
    for key, target in timings.items():
        assert map_metrics({key: 2.5}).fields == {target: 2.5}, key
    # tonywang1990/gsm8k-grpo: per-step rollout and training seconds; seq_len_mean stays an extra, and says why
    mapped = map_metrics({"step": 1, "reward_mean": 0.1, "seq_len_mean": 253.0, "t_rollout": 2.54, "t_train": 5.25})
    assert mapped.fields == {"reward_mean": 0.1, "generation_time_s": 2.54, "optimization_time_s": 5.25}
    assert mapped.extra == {"seq_len_mean": 253.0} and "prompt and completion" in keymap.why_extra("seq_len_mean")


def test_a_time_with_its_unit_in_its_name() -> None:
    for key, target in {"step_time_seconds": "step_time_s", "step_time_sec": "step_time_s", "rollout_time_s": "generation_time_s",
                        "t_train_secs": "optimization_time_s", "iter_time_s": "step_time_s", "iter_time_seconds": "step_time_s",
                        "time/total": "step_time_s"}.items():
        assert map_metrics({key: 2.5}).fields == {target: 2.5}, key
    # Only a time in seconds: a throughput per second, a cumulative elapsed time or a bare iter_time
    # (milliseconds in nanoGPT-style loops) are no step time.
    assert map_metrics({"samples_per_sec": 3.0, "elapsed_s": 80.0, "iter_time": 250.0, "loss_s": 1.0}).fields == {}


def test_a_training_namespace_is_read_through_and_evaluation_is_not() -> None:
    mapped = map_metrics({"train_reward": 0.7, "train_reward_std": 0.38, "train_loss": 0.2, "train_step": 4,
                          "eval_reward": 0.6, "test_reward": 0.5, "train/kl_loss": 0.01, "train/pg_clipfrac": 0.02})
    assert mapped.step == 4
    assert mapped.fields == {"reward_mean": 0.7, "reward_std": 0.38, "loss": 0.2, "kl_mean": 0.01, "clip_fraction": 0.02}
    assert mapped.unmapped == ["eval_reward", "test_reward"]
    assert keymap.why_extra("test_reward") == keymap.why_extra("eval_reward") == "evaluation metrics, not a training step's"


def test_the_kl_term_of_the_loss_is_the_kl_to_the_reference() -> None:
    # verl's names exported flat: kl is its ppo_kl (old vs new policy), kl_loss its KL-to-reference loss term.
    mapped = map_metrics({"kl": 1e-5, "kl_loss": 0.0012, "pg_loss": -0.01, "response_length_mean": 1828.0,
                          "response_length_max": 8192.0, "zero_std_group_ratio": 0.375})
    assert mapped.fields == {"kl_mean": 0.0012, "loss": -0.01, "completion_len_mean": 1828.0, "completion_len_max": 8192.0,
                             "zero_variance_group_frac": 0.375}
    assert mapped.shadowed == ["kl"] and mapped.extra == {"kl": 1e-5}
    assert map_metrics({"kl": 0.03}).fields == {"kl_mean": 0.03}  # alone, kl keeps its TRL/OpenRLHF meaning


def test_tinker_cookbook_keys() -> None:
    mapped = map_metrics({"step": 2, "env/all/reward/total": 0.6, "env/all/ac_tokens_per_turn": 2517.4, "optim/entropy": 0.53,
                          "optim/lr": 4e-5, "env/all/by_group/frac_mixed": 0.75, "env/all/by_group/frac_all_good": 0.25,
                          "optim/kl_sample_train_v1": 0.001, "time/total": 381.2, "time/train": 60.3, "progress/batch": 2})
    assert mapped.fields == pytest.approx({"reward_mean": 0.6, "completion_len_mean": 2517.4, "entropy_mean": 0.53, "lr": 4e-5,
                                           "zero_variance_group_frac": 0.25, "step_time_s": 381.2})
    assert all(keymap.why_extra(k) for k in mapped.unmapped)  # the rest are known extras, each with why
    assert "sampler" in keymap.why_extra("optim/kl_sample_train_v1")
    assert infer_algorithm(mapped.fields)[0] == "grpo"


@pytest.mark.parametrize("key, why", [
    ("completion_tokens", "per completion in some loops and the batch's total in others"),
    ("total_length", "prompt and response tokens"),
    ("global_seqlen/balanced_max", "per data-parallel rank"),
    ("training/epoch", "epoch counter"),
    ("env/all/total_ac_tokens", "ac_tokens_per_turn"),
    ("env/all/ob_tokens_per_turn", "observation (prompt) tokens"),
])
def test_keys_that_look_like_a_length_or_a_step_but_are_not_one_stay_extras_with_why(key: str, why: str) -> None:
    """A token count that may be a batch total, prompt-and-response lengths, counters: no field, and the report says why."""
    from pathlib import Path

    mapped = map_metrics({"step": 3, "reward": 0.5, key: 41.5})
    assert mapped.fields == {"reward_mean": 0.5} and mapped.extra == {key: 41.5}
    assert why in keymap.why_extra(key)
    assert f"`{key}`" in (Path(__file__).resolve().parents[1] / "docs" / "import.md").read_text() or key.startswith("global_seqlen/")


def test_std_reward_beside_mean_reward() -> None:
    assert map_metrics({"mean_reward": 0.9, "std_reward": 0.16}).fields == {"reward_mean": 0.9, "reward_std": 0.16}


def test_trl_grpo_key_sets_mean_grpo() -> None:
    older = {"loss": 0.0, "grad_norm": 0.1, "learning_rate": 1e-6, "completion_length": 230.0, "kl": 0.05,
             "reward": 0.4, "reward_std": 0.3, "rewards/reward_fn": 0.4, "epoch": 0.1}  # TRL < 0.17, no frac_reward_zero_std
    newer = {"reward": 0.4, "reward_std": 0.2, "rewards/reward_func/mean": 0.4, "rewards/reward_func/std": 0.45, "kl": 0.001,
             "completions/mean_length": 400.0, "clip_ratio/region_mean": 0.0}  # a TRL trainer_state's log_history
    for logged in (older, newer, {f"train/{k}": v for k, v in older.items()}):
        mapped = map_metrics(logged)
        algorithm, why = infer_algorithm(mapped.fields, mapped.keys)
        assert algorithm == "grpo" and "TRL GRPOTrainer" in why
    dpo = map_metrics({"rewards/chosen": 1.0, "rewards/rejected": -1.0, "reward": 0.0})  # no reward_std: not GRPO
    assert infer_algorithm(dpo.fields, dpo.keys) == (None, "")
    ppo = map_metrics({**older, "loss/value_avg": 3.0})  # a value loss decides
    assert infer_algorithm(ppo.fields, ppo.keys)[0] == "ppo"


def trl_steps(stds: list[float], **extra: float) -> list[keymap.MappedMetrics]:
    return [map_metrics({"reward": 0.5, "reward_std": s, "rewards/correct": 0.5, **extra}) for s in stds]


@pytest.mark.parametrize("group_size, mixed_std", [(2, math.sqrt(0.5)), (3, math.sqrt(1 / 3))])
def test_degenerate_groups_from_trl_reward_std_in_groups_of_two_or_three(group_size: int, mixed_std: float) -> None:
    # 8 groups, k of them mixed: TRL logs the mean of the groups' sample stds, k/8 of a mixed group's std.
    steps = trl_steps([k / 8 * mixed_std for k in (0, 2, 5, 8)])
    notes = keymap.derive_degenerate_groups(steps, group_size, binary_rewards=True)
    assert [e.fields["zero_variance_group_frac"] for e in steps] == pytest.approx([1.0, 0.75, 0.375, 0.0])
    assert all("zero_variance_group_frac" in e.derived for e in steps) and f"groups of {group_size}" in notes[0]


def test_degenerate_groups_are_not_derived_where_that_is_not_exact() -> None:
    def refused(steps: list[keymap.MappedMetrics], group_size: int | None, binary: bool = True) -> str:
        notes = keymap.derive_degenerate_groups(steps, group_size, binary)
        assert not any("zero_variance_group_frac" in e.fields for e in steps)
        return notes[0] if notes else ""

    assert refused(trl_steps([0.3]), None) == "" and refused(trl_steps([0.3]), 2, binary=False) == ""  # not told
    assert "mixed groups' stds differ" in refused(trl_steps([0.3]), 4)  # 1 of 4 and 2 of 4 succeed: 0.5 vs 0.577
    assert "not one that" in refused(trl_steps([0.3, 0.8]), 2)  # above 1/sqrt(2): the rewards are not binary
    loop = [map_metrics({"reward_mean": 0.5, "reward_std": 0.3, "accuracy": 0.5})]  # a loop's reward_std: the batch's?
    assert "not TRL GRPOTrainer's" in refused(loop, 2)
    logged = trl_steps([0.3], frac_reward_zero_std=0.25)  # TRL >= 0.18 logs the share: it is kept
    assert keymap.derive_degenerate_groups(logged, 2, True) == [] and logged[0].fields["zero_variance_group_frac"] == 0.25


@pytest.mark.parametrize("logged", [
    {"reward": 0.5, "objective/entropy": 25.9, "policy/entropy_avg": 0.34, "step": 3, "my": 1.0},
    {"policy/entropy_avg": 0.34, "objective/entropy": 25.9, "entropy_loss": -1.0, "truncated_count": 2, "rollout_count": 8},
    {"step": math.nan, "global_step": 4, "reward": "0.25", "note": "text", "rewards/a/mean": 1.0, "rewards/a": 2.0},
    {"train/reward": 1.0, "reward": 2.0, "train/global_step": 5, "iteration": 9},
    {"env/all/by_group/frac_mixed": 0.5, "train_reward": 0.1, "kl": 0.2, "kl_loss": 0.3, "step_time_seconds": 9.0, "iter": 2},
])
def test_the_compiled_plan_maps_like_the_key_by_key_rules(logged: dict) -> None:
    # map_metrics compiles one plan per key set; whatever the values, it must agree with the rules.
    fast, slow = map_metrics(logged), keymap._map_slowly(logged)
    for part in ("step", "fields", "components", "extra", "unmapped", "skipped", "shadowed", "derived"):
        assert getattr(fast, part) == getattr(slow, part), part
    again = map_metrics({k: (v + 1 if isinstance(v, float) and not math.isnan(v) else v) for k, v in logged.items()})
    assert set(again.fields) == set(fast.fields)


def test_docs_import_md_lists_every_key_and_derivation() -> None:
    from pathlib import Path

    text = (Path(__file__).resolve().parents[1] / "docs" / "import.md").read_text()
    missing = [k for k, f in keymap.FIELD_KEYS.items() if k != f and f"`{k}`" not in text]
    missing += [k for k in (*keymap.STEP_KEYS, *keymap.COMPONENT_KEYS, *keymap.VALUE_TRANSFORMS) if f"`{k}`" not in text]
    missing += [f"{d.numerator}/{d.denominator}" for d in keymap.PAIR_DERIVATIONS
                if f"`{d.numerator} / {d.denominator}`" not in text]
    missing += [d.source for d in keymap.RUN_DERIVATIONS if f"`{d.source}`" not in text or f"`{d.target}`" not in text]
    missing += [k for k in keymap.KNOWN_EXTRAS if f"`{k}`" not in text]  # "Known keys kept as extras" says why
    assert missing == []
