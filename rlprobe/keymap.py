"""Metric names other tools log, mapped onto StepRecord fields.

One table serves the TRL callback (its `on_log` dicts), the importers (trainer_state.json's
log_history, JSONL/CSV dumps, console logs) and verl-style dumps, so a key means the same thing
however a run reached us. Keys not named here are kept, under `extra`, and reported as unmapped:
nothing a user logged is dropped silently.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field
from typing import Any, Mapping

from rlprobe.schemas import STEP_FLOAT_FIELDS

# Exact key -> StepRecord field. Where TRL renamed a metric across versions, both names map.
FIELD_KEYS: dict[str, str] = {
    # TRL GRPO / RLOO (>= 0.14) and their older spellings
    "reward": "reward_mean",
    "reward_std": "reward_std",
    "kl": "kl_mean",
    "entropy": "entropy_mean",
    "clip_ratio/region_mean": "clip_fraction",
    "clip_ratio": "clip_fraction",
    "completions/mean_length": "completion_len_mean",
    "completion_length": "completion_len_mean",
    "completions/max_length": "completion_len_max",
    "completions/clipped_ratio": "max_len_hit_frac",
    "frac_reward_zero_std": "zero_variance_group_frac",
    "grad_norm": "grad_norm",
    "loss": "loss",
    "learning_rate": "lr",
    "step_time": "step_time_s",
    # TRL with vLLM: |trainer logprob - sampler logprob| of the sampled tokens
    "sampling/sampling_logp_difference/mean": "logprob_mismatch",
    # TRL PPO / older RLOO
    "objective/kl": "kl_mean",
    "objective/entropy": "entropy_mean",
    "objective/scores": "reward_mean",
    "policy/entropy_avg": "entropy_mean",
    "policy/clipfrac_avg": "clip_fraction",
    "loss/value_avg": "value_loss",
    "val/clipfrac_avg": "value_clip_fraction",
    "val/ratio": "ratio_mean",
    "lr": "lr",
    # verl
    "actor/entropy": "entropy_mean",
    "actor/kl_loss": "kl_mean",
    "actor/pg_clipfrac": "clip_fraction",
    "actor/grad_norm": "grad_norm",
    "actor/lr": "lr",
    "actor/pg_loss": "loss",
    "critic/score/mean": "reward_mean",
    "critic/score/max": "reward_max",
    "critic/score/min": "reward_min",
    "critic/advantages/mean": "adv_mean",
    "critic/vf_loss": "value_loss",
    "critic/vf_explained_var": "value_explained_variance",
    "critic/vf_clipfrac": "value_clip_fraction",
    "response_length/mean": "completion_len_mean",
    "response_length/max": "completion_len_max",
    "response_length/clip_ratio": "max_len_hit_frac",
    "timing_s/step": "step_time_s",
    "timing_s/gen": "generation_time_s",
    "timing_s/update_actor": "optimization_time_s",
}

# rlprobe's own names mean themselves (a recording exported with `rlprobe query --csv` and
# imported again); listed after the foreign names, which keep their mapping.
FIELD_KEYS.update({name: name for name in STEP_FLOAT_FIELDS if name not in FIELD_KEYS})

# Keys that carry the step number rather than a metric.
STEP_KEYS: tuple[str, ...] = ("step", "global_step", "training/global_step")

# Per-reward-function means: TRL >= 0.17 logs rewards/<f>/mean, older TRL rewards/<f>.
_COMPONENT = re.compile(r"^rewards/(?P<name>[^/]+)(?:/mean)?$")

# A trainer logs the same few dozen keys every step: remember what the regex said about each,
# so a step costs dict lookups, not regex matches. Bounded, for importers that meet many keys.
_COMPONENT_OF: dict[str, str | None] = {}
_COMPONENT_CACHE_SIZE = 4096


@dataclass
class MappedMetrics:
    """One metrics dict split into StepRecord fields, reward components and extras."""

    step: int | None = None
    fields: dict[str, float] = field(default_factory=dict)
    components: dict[str, float] = field(default_factory=dict)
    extra: dict[str, float] = field(default_factory=dict)
    unmapped: list[str] = field(default_factory=list)  # numeric keys kept under extra
    skipped: list[str] = field(default_factory=list)  # keys whose value is not a number

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


def map_metrics(metrics: Mapping[str, Any]) -> MappedMetrics:
    """Split a logged metrics dict (TRL, HF Trainer, verl names) into StepRecord parts."""
    out = MappedMetrics()
    for key, raw in metrics.items():
        value = to_float(raw)
        if value is None:
            out.skipped.append(key)
            continue
        if key in STEP_KEYS:
            if math.isfinite(value):
                out.step = int(value)
            continue
        target = FIELD_KEYS.get(key)
        if target is not None:
            # the first spelling wins when a dict carries both an old and a new name
            out.fields.setdefault(target, value)
            continue
        component = _component_of(key)
        if component is not None:
            out.components[component] = value
            continue
        out.extra[key] = value
        out.unmapped.append(key)
    return out


def _component_of(key: str) -> str | None:
    """The reward function a rewards/<f>[/mean] key names, else None (cached per key)."""
    try:
        return _COMPONENT_OF[key]
    except KeyError:
        pass
    match = _COMPONENT.match(key)
    name = match.group("name") if match else None
    if len(_COMPONENT_OF) >= _COMPONENT_CACHE_SIZE:
        _COMPONENT_OF.clear()
    _COMPONENT_OF[key] = name
    return name
