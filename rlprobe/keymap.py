"""Metric names other tools log, mapped onto StepRecord fields.

One table serves the TRL callback (its `on_log` dicts), the importers (trainer_state.json's
log_history, JSONL/CSV dumps, console logs, tracker files) and every trainer's names (TRL, verl,
OpenRLHF, XTuner, home-grown loops), so a key means the same thing however a run reached us.
Keys not named here are kept, under `extra`, and reported as unmapped: nothing a user logged is
dropped silently.

Three kinds of entries, all data:

- FIELD_KEYS: a key that *is* a field (`completions/clipped_ratio` is `max_len_hit_frac`). When
  one dict carries several keys for the same field, the one listed first here wins, whatever
  order the dict has, and the others stay as extras.
- PAIR_DERIVATIONS: a field that two keys of the same dict determine exactly
  (`truncated_count / rollout_count` is `max_len_hit_frac`).
- RUN_DERIVATIONS: a field a key determines only at some values (`val/num_eos_tokens == 0`
  means no completion emitted EOS: `eos_rate` is 0). Those are applied to a whole run by
  `derive_run`, and only when they hold at every step that logged the key: a series that exists
  just where its value happens to be extreme would mislead every trend the doctor computes.

Nothing is derived that is not exact. See docs/import.md for every key and why it means what it
maps to.
"""

from __future__ import annotations

import math
import operator
import re
from dataclasses import dataclass, field
from typing import Any, Callable, Iterable, Mapping, Sequence

from rlprobe.schemas import STEP_FLOAT_FIELDS

# Exact key -> StepRecord field, in order of preference within a field (first wins). Where TRL
# renamed a metric across versions, both names map.
FIELD_KEYS: dict[str, str] = {
    # -- reward ------------------------------------------------------------------------------
    "reward": "reward_mean",  # TRL GRPO/RLOO (mean total reward), OpenRLHF (reward model score)
    "critic/score/mean": "reward_mean",  # verl: the reward function's score, before any KL penalty
    "objective/scores": "reward_mean",  # TRL PPO/RLOO (<= 0.19): the reward model's score
    "rewards/mean": "reward_mean",  # XTuner RLTrainer "data statistics"
    "mean_reward": "reward_mean",
    "avg_reward": "reward_mean",
    "env/all/reward/total": "reward_mean",  # Tinker cookbook: mean total reward of the batch's episodes
    "reward_std": "reward_std",
    "std_reward": "reward_std",  # beside mean_reward (Stable-Baselines' evaluate_policy pair, loops)
    "critic/score/min": "reward_min",
    "rewards/min": "reward_min",
    "critic/score/max": "reward_max",
    "rewards/max": "reward_max",
    # -- KL to the reference model -----------------------------------------------------------
    # The KL term of a GRPO-style loss is to the reference (verl's actor/kl_loss, slime's
    # train/kl_loss; before its coefficient). Listed before a bare `kl`, so a dict holding both
    # reads the loss term: there `kl` is the old-vs-new policy KL (verl's ppo_kl exported flat).
    "kl_loss": "kl_mean",
    "kl": "kl_mean",  # TRL GRPO (per token), OpenRLHF (to the initial model; its use_kl_loss term too)
    "objective/kl": "kl_mean",  # TRL PPO/RLOO: summed over the sequence
    "actor/kl_loss": "kl_mean",  # verl with use_kl_loss (GRPO)
    "actor/reward_kl_penalty": "kl_mean",  # verl with use_kl_in_reward (PPO): the KL before beta
    "kl_div": "kl_mean",
    "kl_divergence": "kl_mean",
    # -- policy ------------------------------------------------------------------------------
    "entropy": "entropy_mean",  # TRL GRPO (per token)
    "policy/entropy_avg": "entropy_mean",  # TRL PPO (per token)
    "actor/entropy": "entropy_mean",  # verl
    "policy_entropy_mean": "entropy_mean",
    "objective/entropy": "entropy_mean",  # TRL PPO/RLOO: summed over the sequence; per token wins
    "entropy_loss": "entropy_mean",  # OpenRLHF logs the entropy itself; others its negation (abs)
    "actor/entropy_loss": "entropy_mean",  # older verl: the entropy itself
    "optim/entropy": "entropy_mean",  # Tinker cookbook: -mean logprob of the sampled tokens, per token
    "val/ratio": "ratio_mean",  # TRL PPO: pi/pi_old
    "clip_ratio/region_mean": "clip_fraction",  # TRL GRPO >= 0.18
    "clip_ratio": "clip_fraction",  # TRL GRPO < 0.18
    "policy/clipfrac_avg": "clip_fraction",  # TRL PPO
    "actor/pg_clipfrac": "clip_fraction",  # verl
    "ppo_clip_ratio": "clip_fraction",  # OpenRLHF
    "pg_clipfrac": "clip_fraction",  # slime (train/pg_clipfrac), verl's actor/pg_clipfrac exported flat
    "clip_frac": "clip_fraction",
    "clipfrac": "clip_fraction",
    # -- advantages and groups ---------------------------------------------------------------
    "critic/advantages/mean": "adv_mean",  # verl (token mean)
    "advantages/mean": "adv_mean",  # XTuner (token mean)
    "zero_advantage_fraction": "adv_zero_frac",
    "group_reward_std": "group_reward_std_mean",
    "frac_reward_zero_std": "zero_variance_group_frac",  # TRL GRPO >= 0.18
    "zero_std_group_ratio": "zero_variance_group_frac",
    "env/all/by_group/frac_mixed": "zero_variance_group_frac",  # Tinker cookbook: 1 - this (VALUE_TRANSFORMS)
    # -- value head (PPO) --------------------------------------------------------------------
    "loss/value_avg": "value_loss",  # TRL PPO
    "critic/vf_loss": "value_loss",  # verl
    "critic_loss": "value_loss",  # OpenRLHF
    "vf_loss": "value_loss",
    "critic/vf_explained_var": "value_explained_variance",  # verl
    "explained_variance": "value_explained_variance",
    "val/clipfrac_avg": "value_clip_fraction",  # TRL PPO
    "critic/vf_clipfrac": "value_clip_fraction",  # verl
    # -- optimization ------------------------------------------------------------------------
    "loss": "loss",
    "loss/policy_avg": "loss",  # TRL PPO
    "actor/pg_loss": "loss",  # verl
    "policy_loss": "loss",  # OpenRLHF
    "pg_loss": "loss",  # slime (train/pg_loss), verl's actor/pg_loss exported flat
    "learning_rate": "lr",
    "lr": "lr",
    "actor/lr": "lr",  # verl
    "actor_lr": "lr",  # OpenRLHF
    "optim/lr": "lr",  # Tinker cookbook
    "grad_norm": "grad_norm",
    "actor/grad_norm": "grad_norm",  # verl
    # -- generation --------------------------------------------------------------------------
    "completions/mean_length": "completion_len_mean",  # TRL GRPO >= 0.18
    "completion_length": "completion_len_mean",  # TRL GRPO < 0.18
    "response_length/mean": "completion_len_mean",  # verl
    "response_len/mean": "completion_len_mean",  # XTuner
    "response_length": "completion_len_mean",  # OpenRLHF
    "completion_length_mean": "completion_len_mean",
    "response_length_mean": "completion_len_mean",  # verl's response_length/mean exported flat
    "avg_gen_tokens": "completion_len_mean",
    "env/all/ac_tokens_per_turn": "completion_len_mean",  # Tinker cookbook: tokens per generation (turn)
    "completions/max_length": "completion_len_max",
    "response_length/max": "completion_len_max",
    "response_len/max": "completion_len_max",
    "response_length_max": "completion_len_max",
    "max_gen_tokens": "completion_len_max",
    # The share of completions that reached the generation length limit: TRL's clipped_ratio is
    # 1 - (completions holding EOS) / all, verl's clip_ratio is length == max_response_length.
    "completions/clipped_ratio": "max_len_hit_frac",
    "response_length/clip_ratio": "max_len_hit_frac",
    "response_clip_ratio": "max_len_hit_frac",  # OpenRLHF
    "truncated_rate": "max_len_hit_frac",
    # -- throughput (seconds) ----------------------------------------------------------------
    "step_time": "step_time_s",  # TRL >= 0.20
    "timing_s/step": "step_time_s",  # verl: the whole step
    "timing/step": "step_time_s",  # SkyRL
    "perf/step_time": "step_time_s",  # slime: waiting for the rollout plus training
    "time/total": "step_time_s",  # Tinker cookbook: the whole iteration (evaluations included, like verl's)
    "iter_time_s": "step_time_s",  # loops whose step is an iteration (`iteration`, `iter`), in seconds
    # Generation, or the rollout phase that holds it (where a trainer times the reward with it)
    "timing_s/gen": "generation_time_s",  # verl
    "timing/generate": "generation_time_s",  # SkyRL
    "perf/rollout_time": "generation_time_s",  # slime
    "rollout_time": "generation_time_s",
    "time/rollout": "generation_time_s",  # ROLL, home-grown loops
    "t_rollout": "generation_time_s",  # home-grown loops (time.time() differences)
    "timing_s/update_actor": "optimization_time_s",  # verl
    "timing/policy_train": "optimization_time_s",  # SkyRL
    "perf/train_time": "optimization_time_s",  # slime
    "t_train": "optimization_time_s",  # home-grown loops, beside t_rollout
    # -- train/inference mismatch: mean |trainer logprob - sampler logprob| of sampled tokens --
    "sampling/sampling_logp_difference/mean": "logprob_mismatch",  # TRL with vLLM
    "mismatch/mismatch_logprob_abs_diff": "logprob_mismatch",  # verl and XTuner rollout IS
}

# rlprobe's own names mean themselves (a recording exported with `rlprobe query --csv` and
# imported again); listed after the foreign names, which keep their mapping.
FIELD_KEYS.update({name: name for name in STEP_FLOAT_FIELDS if name not in FIELD_KEYS})

# A value that means its field only after a transform that is exact for every trainer naming it.
# Entropy is never negative: a trainer logs it as is (OpenRLHF, verl) or as the loss term that
# maximises it (its negation), and the absolute value is the entropy either way.
VALUE_TRANSFORMS: dict[str, Callable[[float], float]] = {
    "entropy_loss": abs,
    "actor/entropy_loss": abs,
    # Tinker: the share of groups whose rewards are not all the same; the rest are degenerate.
    "env/all/by_group/frac_mixed": lambda share_mixed: 1.0 - share_mixed,
}

# A time logged with its unit in the name (`step_time_seconds`, `rollout_time_s`) means the key
# without the unit, when that key is a time in seconds: see seconds_key.
SECONDS_SUFFIXES: tuple[str, ...] = ("_seconds", "_secs", "_sec", "_s")

# Keys that carry the step number rather than a metric, in order of preference.
STEP_KEYS: tuple[str, ...] = ("step", "global_step", "training/global_step", "train/global_step",
                              "update", "iteration", "iter")

# Per-sample checks a reward is built from, logged under a bare name: reward components.
COMPONENT_KEYS: dict[str, str] = {
    "accuracy": "accuracy",
    "format_rate": "format_rate",
}

# A trainer's keys under a training namespace mean what they mean bare: HF's W&B/TensorBoard
# callbacks, OpenRLHF and slime log `train/<key>`, loops that also evaluate `train_<key>` beside
# `eval_<key>`/`test_<key>` (which stay extras: evaluation is not the training step).
NAMESPACES: tuple[str, ...] = ("train/", "train_")


@dataclass(frozen=True)
class PairDerivation:
    """field = numerator / denominator, exact when both keys are logged in the same dict."""

    target: str
    numerator: str
    denominator: str
    why: str


PAIR_DERIVATIONS: tuple[PairDerivation, ...] = (
    PairDerivation("max_len_hit_frac", "truncated_count", "rollout_count",
                   "completions cut at the length limit out of all completions of the step"),
)


@dataclass(frozen=True)
class RunDerivation:
    """field = value wherever `source` equals `when`, applied only if it does at every step."""

    target: str
    source: str
    when: float
    value: float
    why: str


RUN_DERIVATIONS: tuple[RunDerivation, ...] = (
    # TRL PPO counts EOS tokens in the batch's responses. A count says nothing exact about the
    # share once it is above 0 (pad may be EOS, a response may hold several), but 0 means no
    # completion ended with EOS.
    RunDerivation("eos_rate", "val/num_eos_tokens", 0.0, 0.0,
                  "no EOS token in any response of the step (TRL PPO's val/num_eos_tokens is 0)"),
    # A reward std of 0, whether of the batch or the mean of the groups' stds, leaves every
    # group with equal rewards.
    RunDerivation("zero_variance_group_frac", "reward_std", 0.0, 1.0,
                  "reward_std is 0, so every group's rewards are equal"),
)

# Evaluation metrics (HF's eval_, OpenRLHF's eval/, verl's val-core/ and val-aux/, Tinker's and
# HF's test/ and test_): a dict holding nothing else is no training step (`_common.is_eval_only`);
# beside training keys they stay extras. TRL PPO's val/ holds training statistics (val/ratio): not here.
EVAL_PREFIXES: tuple[str, ...] = ("eval_", "eval/", "test_", "test/", "val-core/", "val-aux/")
EVAL_PREFIX_PATTERN = "^(" + "|".join(re.escape(p) for p in EVAL_PREFIXES) + ")"

# Keys trainers document that look like a field but are not one: kept as extras, with why.
# (Anything else unmapped is simply unknown to rlprobe.) Exact keys, then key families.
KNOWN_EXTRAS: dict[str, str] = {
    "objective/rlhf_reward": "TRL PPO: the score minus the KL penalty; reward_mean is the score (objective/scores)",
    "objective/non_score_reward": "TRL PPO: the KL penalty term, -beta * KL",
    "policy/approxkl_avg": "TRL PPO: KL between the policy before and after an update, not to the reference",
    "approx_kl": "KL between the policy before and after an update (PPO's early-stop statistic), not to the reference",
    "ppo_kl": "OpenRLHF: KL between the policy before and after an update, not to the reference",
    "actor/ppo_kl": "verl: KL between the policy before and after an update, not to the reference",
    "vllm_kl": "OpenRLHF: KL between the trainer's and vLLM's logprobs; logprob_mismatch holds the mean |difference|",
    "val/num_eos_tokens": "TRL PPO: a count of EOS tokens in the batch, not a share (eos_rate only where it is 0 throughout)",
    "val/ratio_var": "TRL PPO: the variance of pi/pi_old",
    "rollout_entropy": "XTuner: entropy of the rollout engine's logprobs; entropy_mean is the trainer's",
    "sampling/sampling_logp_difference/max": "TRL: the largest |trainer - sampler| logprob gap; logprob_mismatch is the mean",
    "num_tokens": "TRL: tokens consumed so far (a running total)",
    "truncated_count": "a count; with rollout_count it gives max_len_hit_frac",
    "rollout_count": "a count; with truncated_count it gives max_len_hit_frac",
    "return": "OpenRLHF: the mean return (the value head's target)",
    "values": "OpenRLHF: the value head's mean prediction",
    "actor/pg_clipfrac_lower": "verl: the dual-clip lower bound's share; clip_fraction is actor/pg_clipfrac",
    "actor/kl_coef": "verl: the KL coefficient",
    "actor/reward_kl_penalty_coeff": "verl: the KL coefficient",
    "response/aborted_ratio": "verl: share of empty (aborted) responses",
    "max_ratio": "XTuner: the largest pi/pi_old of an optimizer step (its max over a rollout in max_ratio/max)",
    "max_ratio/max": "XTuner: the largest pi/pi_old of a rollout's optimizer steps",
    "grad_norm/max": "XTuner: the largest grad norm of a rollout's optimizer steps; grad_norm is their mean",
    "total_loss": "XTuner: the optimizer step's total loss; loss is its policy loss",
    "reduced_llm_loss": "XTuner: the loss reduced across ranks",
    "consumed_tokens": "XTuner: tokens of the optimizer step",
    "efficient_attn_ratio": "XTuner: packing efficiency",
    "optimizer_steps": "XTuner: optimizer steps in the rollout's update",
    "skipped_optimizer_steps": "XTuner: optimizer steps skipped because the grad norm exceeded its threshold",
    "seq_len_mean": "a mean sequence length: prompt and completion in most trainers (verl's global_seqlen, slime's "
                    "seq_lens), the completion alone in some loops; completion_len_mean needs the completion alone",
    "batch_size": "samples in the step's batch",
    "episode": "TRL PPO: samples seen so far",
    "epoch": "the Trainer's epoch counter",
    "training/epoch": "verl: the epoch counter (training/global_step is the step)",
    # A token count's name does not say over what it counts: per completion in some loops, the
    # batch's total in others and in every OpenAI-style usage record. Mapping it would be right
    # for one log and wrong by a factor of the batch size for the next.
    "completion_tokens": "a count of completion tokens, per completion in some loops and the batch's total in others "
                         "(OpenAI-style usage counts); its name does not say which, so it is not completion_len_mean",
    "total_length": "OpenRLHF: prompt and response tokens of a sample; completion_len_mean is response_length",
    "eps": "TRL PPO: episodes per second",
    "optim/kl_sample_train_v1": "Tinker cookbook: KL between the sampler's and the trainer's logprobs (their signed mean "
                                "difference), not to the reference; logprob_mismatch is the mean |difference|",
    "optim/kl_sample_train_v2": "Tinker cookbook: half the mean squared sampler-trainer logprob difference; "
                                "logprob_mismatch is the mean |difference|",
    "env/all/by_group/frac_all_good": "Tinker cookbook: degenerate groups that all succeeded; zero_variance_group_frac "
                                      "is 1 - env/all/by_group/frac_mixed, both kinds",
    "env/all/by_group/frac_all_bad": "Tinker cookbook: degenerate groups that all failed; zero_variance_group_frac "
                                     "is 1 - env/all/by_group/frac_mixed, both kinds",
}
KNOWN_EXTRA_FAMILIES: tuple[tuple[re.Pattern[str], str], ...] = (
    (re.compile(r"^rewards/[^/]+/std$"), "TRL: a reward function's std; its mean is the reward component"),
    (re.compile(r"^completions/(min|max|mean|min_terminated|max_terminated|mean_terminated)_(length|terminated_length)$|"
                r"^completions/min_length$"),
     "TRL: lengths of all completions (min) or of those that ended with EOS only"),
    (re.compile(r"^clip_ratio/(low|high)_(mean|min|max)$"),
     "TRL: one side of the clip region; clip_fraction is clip_ratio/region_mean, both sides"),
    (re.compile(r"^sampling/importance_sampling_ratio/"), "TRL: truncated importance weights between trainer and sampler"),
    (re.compile(r"^mismatch/"), "verl/XTuner train-inference statistics; logprob_mismatch is mismatch_logprob_abs_diff, "
                                "the mean |logprob difference| (what TRL logs)"),
    (re.compile(r"^critic/rewards/"), "verl: the score after the in-reward KL penalty; reward_mean is critic/score/mean"),
    (re.compile(r"^critic/(returns|values)/|^critic/vpred_mean$"), "verl: the value head's targets and predictions"),
    (re.compile(r"^critic/(grad_norm|lr)$"), "verl: the critic's optimizer; grad_norm and lr are the actor's"),
    (re.compile(r"^critic/advantages/(max|min)$|^advantages/(max|min)$"), "the advantages' range; adv_mean is the mean"),
    (re.compile(r"^(prompt_length|prompt_len)/|^response_length/min$|^response_len/(min|std)$|^response_length_non_aborted/"),
     "prompt lengths, and response-length statistics without a field"),
    (re.compile(r"^(timing_s|timing_per_token_ms|perf|timing|time)/"), "timings and throughput without a field"),
    (re.compile(r"^progress/"), "Tinker cookbook: progress counters (batch, done_frac)"),
    (re.compile(r"^env/all/(total_ac_tokens|total_ob_tokens|total_episodes|total_turns|turns_per_episode|ob_tokens_per_turn)$"),
     "Tinker cookbook: batch totals, turns and observation (prompt) tokens; completion_len_mean is env/all/ac_tokens_per_turn"),
    (re.compile(r"^global_seqlen/"), "verl: prompt and response tokens per data-parallel rank, before and after balancing; "
                                     "not a completion length"),
    (re.compile(EVAL_PREFIX_PATTERN), "evaluation metrics, not a training step's"),
)


def why_extra(key: str) -> str | None:
    """Why a key trainers document is kept as an extra rather than mapped, or None if unknown."""
    bare = next((key[len(p):] for p in NAMESPACES if key.startswith(p)), key)
    reason = KNOWN_EXTRAS.get(bare)
    if reason is not None:
        return reason
    for pattern, why in KNOWN_EXTRA_FAMILIES:
        if pattern.search(bare):
            return why
    return None


# Fields that name a training algorithm's own machinery; see infer_algorithm.
_VALUE_FIELDS = ("value_loss", "value_explained_variance", "value_clip_fraction")
_GROUP_FIELDS = ("zero_variance_group_frac", "group_reward_std_mean")

_FIELD_RANK: dict[str, int] = {key: i for i, key in enumerate(FIELD_KEYS)}
_STEP_RANK: dict[str, int] = {key: i for i, key in enumerate(STEP_KEYS)}
_PAIR_INPUTS = frozenset(k for d in PAIR_DERIVATIONS for k in (d.numerator, d.denominator))

# Per-reward-function means: TRL >= 0.17 logs rewards/<f>/mean, older TRL rewards/<f>.
_COMPONENT = re.compile(r"^rewards/(?P<name>[^/]+)(?:/mean)?$")

# A trainer logs the same few dozen keys every step: remember what the rules said about each,
# so a step costs dict lookups, not regex matches. Bounded, for importers that meet many keys.
_RESOLVED: dict[str, tuple[str, str] | None] = {}
_CACHE_SIZE = 4096


@dataclass
class MappedMetrics:
    """One metrics dict split into StepRecord fields, reward components and extras."""

    step: int | None = None
    fields: dict[str, float] = field(default_factory=dict)
    components: dict[str, float] = field(default_factory=dict)
    extra: dict[str, float] = field(default_factory=dict)
    unmapped: list[str] = field(default_factory=list)  # numeric keys kept under extra
    skipped: list[str] = field(default_factory=list)  # keys whose value is not a number
    shadowed: list[str] = field(default_factory=list)  # keys of a field a preferred key set: extra
    derived: list[str] = field(default_factory=list)  # fields computed from other keys
    keys: tuple[str, ...] = ()  # the dict's keys as logged (shared by every dict with the same keys)

    def step_kwargs(self) -> dict[str, Any]:
        """Keyword arguments for StepRecord / Recorder.log_step (without `step`)."""
        out: dict[str, Any] = dict(self.fields)
        if self.components:
            out["reward_components"] = dict(self.components)
        if self.extra:
            out["extra"] = dict(self.extra)
        return out


def to_float(value: Any) -> float | None:
    """A metric value as a float: numbers, numeric strings ('0.5', 'nan'), 0-d tensors; else None."""
    if type(value) is float:  # what a Trainer logs nearly always: answer it first
        return value
    if isinstance(value, bool):
        return float(value)
    if isinstance(value, (int, float)):
        return float(value)
    if isinstance(value, str):
        try:
            return float(value.strip())
        except ValueError:
            return None
    item = getattr(value, "item", None)  # numpy scalars, 0-d tensors: no torch import needed
    if callable(item):
        try:
            out = item()
        except (TypeError, ValueError, RuntimeError):
            return None
        return float(out) if isinstance(out, (int, float)) else None
    return None


def resolve(key: str) -> tuple[str, str] | None:
    """What a key means: ("field", name), ("component", name), ("step", key), or None (an extra)."""
    try:
        return _RESOLVED[key]
    except KeyError:
        pass
    found = _resolve_bare(key)
    if found is None:
        for prefix in NAMESPACES:
            if key.startswith(prefix):
                found = _resolve_bare(key[len(prefix):])
                break
    if len(_RESOLVED) >= _CACHE_SIZE:
        _RESOLVED.clear()
    _RESOLVED[key] = found
    return found


def _resolve_bare(key: str) -> tuple[str, str] | None:
    if key in STEP_KEYS:
        return ("step", key)
    target = FIELD_KEYS.get(key)
    if target is not None:
        return ("field", key)
    timed = seconds_key(key)
    if timed is not None:
        return ("field", timed)
    if key in COMPONENT_KEYS:
        return ("component", COMPONENT_KEYS[key])
    component = _component_of(key)
    return ("component", component) if component is not None else None


def seconds_key(key: str) -> str | None:
    """The key a time logged with its unit in its name stands for: `step_time_seconds` is `step_time`
    (TRL's name, seconds), `rollout_time_s` is `rollout_time`; None unless that key is a time in seconds."""
    for suffix in SECONDS_SUFFIXES:
        if key.endswith(suffix):
            stem = key[: -len(suffix)]
            for candidate in (stem, stem + "_s"):
                if candidate != key and FIELD_KEYS.get(candidate, "").endswith("_time_s"):
                    return candidate
    return None


def map_metrics(metrics: Mapping[str, Any]) -> MappedMetrics:
    """Split a logged metrics dict (TRL, HF Trainer, verl, OpenRLHF names) into StepRecord parts."""
    keys = tuple(metrics)
    plan = _PLANS.get(keys)
    if plan is None:
        plan = _plan(keys)
    values = list(metrics.values())
    if not set(map(type, values)) <= _FLOAT_ONLY:  # what trackers and Trainers log nearly always: floats
        values = [to_float(v) for v in values]
        if None in values:
            return _map_slowly(metrics)  # a non-number changes which key wins: decide key by key
    if plan.step_index is not None and not math.isfinite(values[plan.step_index]):
        return _map_slowly(metrics)
    fields = dict(zip(plan.field_names, plan.pick_fields(values)))
    for i, target, transform in plan.transformed:
        fields[target] = transform(values[i])
    out = MappedMetrics(None, fields, dict(zip(plan.component_names, plan.pick_components(values))),
                        dict(zip(plan.extra_names, plan.pick_extra(values))), list(plan.unmapped), [],
                        list(plan.shadowed), [], plan.keys)
    if plan.step_index is not None:
        out.step = int(values[plan.step_index])
    if plan.pairs:
        _derive_pairs(out, {keys[i]: values[i] for i in plan.pairs})
    return out


_FLOAT_ONLY = frozenset({float})


def _picker(indices: Sequence[int]) -> Callable[[Sequence[float]], Sequence[float]]:
    """values -> the values at indices, in that order (operator.itemgetter, which returns a bare item for one index)."""
    if not indices:
        return lambda values: ()
    if len(indices) == 1:
        only = indices[0]
        return lambda values: (values[only],)
    return operator.itemgetter(*indices)


@dataclass(frozen=True)
class _Plan:
    """How a dict with these keys, in this order, all numbers, maps: decided once per key set.

    Compiled to pickers (which values go to the fields, components and extras, by position) and
    the names they go under, so a dict costs a few C-level calls, not a loop over its keys.
    """

    field_names: tuple[str, ...]
    pick_fields: Callable[[Sequence[float]], Sequence[float]]
    transformed: tuple[tuple[int, str, Callable[[float], float]], ...]  # fields whose value is transformed
    component_names: tuple[str, ...]
    pick_components: Callable[[Sequence[float]], Sequence[float]]
    extra_names: tuple[str, ...]
    pick_extra: Callable[[Sequence[float]], Sequence[float]]
    unmapped: tuple[str, ...]
    shadowed: tuple[str, ...]
    step_index: int | None
    pairs: tuple[int, ...]
    keys: tuple[str, ...]


# Trainers log the same keys every step: one plan per distinct key tuple (bounded like _RESOLVED).
_PLANS: dict[tuple[str, ...], _Plan] = {}


def _plan(keys: tuple[str, ...]) -> _Plan:
    mapped = _map_slowly({k: 0.0 for k in keys}, indices=True)
    index = {k: i for i, k in enumerate(keys)}
    fields = [(index[key], target, VALUE_TRANSFORMS.get(_bare(key))) for target, key in mapped.field_keys.items()]
    components = [(index[key], name) for key, name in mapped.component_keys]
    extra = [index[k] for k in mapped.extra]
    plan = _Plan(
        field_names=tuple(target for _, target, _ in fields),
        pick_fields=_picker([i for i, _, _ in fields]),
        transformed=tuple((i, target, transform) for i, target, transform in fields if transform is not None),
        component_names=tuple(name for _, name in components),
        pick_components=_picker([i for i, _ in components]),
        extra_names=tuple(keys[i] for i in extra),
        pick_extra=_picker(extra),
        unmapped=tuple(mapped.unmapped),
        shadowed=tuple(mapped.shadowed),
        step_index=index[mapped.step_key] if mapped.step_key is not None else None,
        pairs=tuple(index[k] for k in keys if k in _PAIR_INPUTS),
        keys=keys,
    )
    if len(_PLANS) >= _CACHE_SIZE:
        _PLANS.clear()
    _PLANS[keys] = plan
    return plan


def _bare(key: str) -> str:
    meaning = resolve(key)
    return meaning[1] if meaning is not None else key


@dataclass
class _Decided(MappedMetrics):
    """map_metrics' result plus which key decided each part (what a plan records)."""

    field_keys: dict[str, str] = field(default_factory=dict)
    component_keys: list[tuple[str, str]] = field(default_factory=list)
    step_key: str | None = None


def _map_slowly(metrics: Mapping[str, Any], indices: bool = False) -> Any:
    """map_metrics key by key: what a plan compiles, and the path for dicts with non-numbers."""
    out = _Decided()
    holder: dict[str, tuple[int, str, float]] = {}  # field -> (rank, key, value as logged)
    step_rank = len(STEP_KEYS)
    pair_values: dict[str, float] = {}
    for key, raw in metrics.items():
        value = to_float(raw)
        if value is None:
            out.skipped.append(key)
            continue
        if key in _PAIR_INPUTS:
            pair_values[key] = value
        meaning = resolve(key)
        if meaning is None:
            out.extra[key] = value
            out.unmapped.append(key)
            continue
        kind, name = meaning
        if kind == "step":
            rank = _STEP_RANK[name]
            if math.isfinite(value) and rank < step_rank:
                out.step, out.step_key, step_rank = int(value), key, rank
            continue
        if kind == "component":
            out.components[name] = value
            out.component_keys.append((key, name))
            continue
        target, rank = FIELD_KEYS[name], _FIELD_RANK[name]
        held = holder.get(target)
        if held is not None and held[0] < rank:  # a preferred key holds the field: this one is an extra
            out.extra[key] = value
            out.shadowed.append(key)
            continue
        if held is not None:  # this key is preferred over the one that came first
            out.extra[held[1]] = held[2]
            out.shadowed.append(held[1])
        transform = VALUE_TRANSFORMS.get(name)
        out.fields[target] = transform(value) if transform is not None else value
        out.field_keys[target] = key
        holder[target] = (rank, key, value)
    if indices:
        return out
    if pair_values:
        _derive_pairs(out, pair_values)
    return MappedMetrics(step=out.step, fields=out.fields, components=out.components, extra=out.extra,
                         unmapped=out.unmapped, skipped=out.skipped, shadowed=out.shadowed, derived=out.derived,
                         keys=tuple(metrics))


def _derive_pairs(out: MappedMetrics, values: Mapping[str, float]) -> None:
    for rule in PAIR_DERIVATIONS:
        if rule.target in out.fields or rule.numerator not in values or rule.denominator not in values:
            continue
        num, den = values[rule.numerator], values[rule.denominator]
        if math.isfinite(num) and math.isfinite(den) and den > 0:
            out.fields[rule.target] = num / den
            out.derived.append(rule.target)


def derive_run(entries: Sequence[MappedMetrics]) -> list[str]:
    """Apply RUN_DERIVATIONS to a whole run in place; one note per field derived (or refused).

    A rule applies only when the field is not logged at any step and its condition holds at
    every step that logged the source key; then every such step gets the field.
    """
    notes: list[str] = []
    for rule in RUN_DERIVATIONS:
        if any(rule.target in e.fields for e in entries):
            continue
        carriers = [(e, _logged(e, rule.source)) for e in entries]
        carriers = [(e, v) for e, v in carriers if v is not None]
        if not carriers:
            continue
        if all(v == rule.when for _, v in carriers):
            for e, _ in carriers:
                e.fields[rule.target] = rule.value
                e.derived.append(rule.target)
            notes.append(f"{rule.target} = {rule.value:g} at all {len(carriers)} steps: {rule.why}")
        elif any(v == rule.when for _, v in carriers):
            notes.append(f"{rule.target} not derived from {rule.source}: it is {rule.when:g} at some steps only, "
                         "and a value at the other steps is not exact")
    return notes


def _logged(entry: MappedMetrics, key: str) -> float | None:
    """The value a dict logged for key: a field of that name, else the extra."""
    value = entry.fields.get(key) if key in entry.fields else entry.extra.get(key)
    return value


def _bare_key(key: str) -> str:
    return next((key[len(p):] for p in NAMESPACES if key.startswith(p)), key)


def is_trl_grpo_key_set(keys: Iterable[str]) -> bool:
    """True for the keys TRL's GRPOTrainer logs at every step, in every version: `reward`, `reward_std`
    and a mean per reward function (`rewards/<f>`, `rewards/<f>/mean` from 0.17).

    TRL's PPO and its old RLOO log objective/scores instead, its DPO-style trainers rewards/chosen
    without reward_std; its new RLOO logs the same keys as GRPO (a sibling: group baselines).
    """
    bare = {_bare_key(k) for k in keys}
    return {"reward", "reward_std"} <= bare and any(_COMPONENT.match(k) for k in bare)


def infer_algorithm(fields: Iterable[str], keys: Iterable[str] = ()) -> tuple[str | None, str]:
    """The algorithm a run's logged fields (and keys) name, and why: a value function means PPO, group
    statistics or TRL's GRPO key set GRPO."""
    names = set(fields)
    value = [f for f in _VALUE_FIELDS if f in names]
    if value:
        return "ppo", f"a value function is trained ({', '.join(value)} logged)"
    group = [f for f in _GROUP_FIELDS if f in names]
    if group:
        return "grpo", f"group-relative reward statistics are logged ({', '.join(group)}): GRPO or a sibling (RLOO, DAPO)"
    if is_trl_grpo_key_set(keys):
        return "grpo", ("TRL GRPOTrainer's keys are logged (reward, reward_std, rewards/<f> per reward function) and no "
                        "value function: GRPO or a sibling (TRL's RLOO logs the same)")
    return None, ""


# The sample std (torch.std, Bessel-corrected: what TRL's GRPOTrainer computes per group) of a
# group of G rewards in {0, 1} that holds both outcomes. With G = 2 or 3 every mixed group has
# this same std (1 success of 2; 1 or 2 of 3), and a degenerate group has 0; from G = 4 on, mixed
# groups differ (1 of 4: 0.5, 2 of 4: 0.577), so a mean std no longer counts them.
MIXED_GROUP_STD: dict[int, float] = {2: math.sqrt(1 / 2), 3: math.sqrt(1 / 3)}


def derive_degenerate_groups(entries: Sequence[MappedMetrics], group_size: int | None, binary_rewards: bool) -> list[str]:
    """zero_variance_group_frac from TRL's reward_std, where that is exact; one note on what was done.

    TRL's GRPOTrainer logs reward_std as the mean over groups of each group's sample std. With
    rewards in {0, 1} (binary_rewards: the user says so; a log cannot show it) and groups of
    G = 2 or 3 (group_size), a group's std is 0 when degenerate and MIXED_GROUP_STD[G] when mixed,
    so the mean std is MIXED_GROUP_STD[G] times the share of mixed groups, and
    zero_variance_group_frac = 1 - reward_std / MIXED_GROUP_STD[G] at each step. A mean over
    several batches (a logging interval) stays exact: the share is linear in the std.

    Applied only when the field is not logged, the run carries TRL's GRPO key set (so reward_std
    is that mean of group sample stds) and every step's reward_std is one groups of G binary
    rewards can give (at most MIXED_GROUP_STD[G]) with a mean reward in [0, 1].
    """
    if group_size is None or not binary_rewards or not entries:
        return []
    if any("zero_variance_group_frac" in e.fields for e in entries):
        return []
    keys = {k for keyset in {id(e.keys): e.keys for e in entries}.values() for k in keyset}
    if not is_trl_grpo_key_set(keys):
        return ["zero_variance_group_frac not derived from --group-size and --binary-rewards: reward_std is not "
                "TRL GRPOTrainer's (its keys reward, reward_std and rewards/<f> are not all logged), so whether it is "
                "a mean of group stds, and which std, is unknown"]
    mixed = MIXED_GROUP_STD.get(group_size)
    if mixed is None:
        return [f"zero_variance_group_frac not derived: in groups of {group_size} binary rewards the mixed groups' stds "
                "differ (from 4 on: 1 success of 4 gives 0.5, 2 of 4 give 0.577), so a mean std does not count them"]
    carriers = [e for e in entries if "reward_std" in e.fields]
    worst = max((e.fields["reward_std"] for e in carriers), default=0.0)
    means = [e.fields["reward_mean"] for e in carriers if "reward_mean" in e.fields]
    if not carriers or not all(math.isfinite(e.fields["reward_std"]) for e in carriers) or worst > mixed * (1 + 1e-6) \
            or any(not 0.0 <= m <= 1.0 for m in means):
        return [f"zero_variance_group_frac not derived: reward_std (up to {worst:.4g}) or the mean reward is not one that "
                f"groups of {group_size} binary rewards can give (a group's std is 0 or {mixed:.4f}, the reward in [0, 1])"]
    for e in carriers:
        e.fields["zero_variance_group_frac"] = max(0.0, 1.0 - e.fields["reward_std"] / mixed)
        e.derived.append("zero_variance_group_frac")
    return [f"zero_variance_group_frac = 1 - reward_std / {mixed:.4f} at all {len(carriers)} steps: rewards in {{0, 1}} in "
            f"groups of {group_size}, where a group's sample std is 0 (degenerate) or {mixed:.4f} (mixed), and TRL's "
            "reward_std is their mean over groups"]


def _component_of(key: str) -> str | None:
    """The reward function a rewards/<f>[/mean] key names, else None."""
    match = _COMPONENT.match(key)
    return match.group("name") if match else None
