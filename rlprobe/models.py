"""The pydantic models of the recording format, as rlprobe.schemas exports them.

rlprobe.schemas loads this module on first use of a model (the recorder, RunReader, an import):
pydantic and building these models cost ~100 ms that a query or the doctor, which need only the
column names and types, never pay. The models are the contract in code, with the names and types
in rlprobe.schemas; tests/test_schemas_lazy.py checks that the two agree.
"""

from __future__ import annotations

import time
from datetime import datetime, timezone
from typing import Any, Optional

from pydantic import BaseModel, ConfigDict, Field, field_validator

from rlprobe.schemas import SCHEMA_VERSION, new_run_id


class RunManifest(BaseModel):
    """manifest.json: written once, atomically, when a recording starts."""

    model_config = ConfigDict(extra="allow")

    schema_version: int = SCHEMA_VERSION
    run_id: str = Field(default_factory=new_run_id)
    created_at: str = Field(default_factory=lambda: datetime.now(timezone.utc).isoformat())
    algorithm: Optional[str] = None
    model_name: Optional[str] = None
    world_size: int = 1
    trainer_config: dict[str, Any] = Field(default_factory=dict)
    environment: dict[str, Any] = Field(default_factory=dict)
    # additive: what a person calls the run ("lr 3e-6, no KL") and labels to group runs by; a
    # recording without them is shown by its run_id
    name: Optional[str] = None
    tags: list[str] = Field(default_factory=list)

    @field_validator("tags", mode="before")
    @classmethod
    def _one_tag_is_a_list(cls, value: Any) -> Any:
        """tags="baseline" means one tag, not eight one-letter ones."""
        return [value] if isinstance(value, str) else value


class StepRecord(BaseModel):
    """One optimizer step. Everything except ``step`` is optional; absent means "not logged"."""

    model_config = ConfigDict(extra="forbid")

    step: int
    # reward
    reward_mean: Optional[float] = None
    reward_std: Optional[float] = None
    reward_min: Optional[float] = None
    reward_max: Optional[float] = None
    reward_components: dict[str, float] = Field(default_factory=dict)
    # KL to the reference
    kl_mean: Optional[float] = None
    kl_max: Optional[float] = None
    kl_positional: Optional[list[float]] = None
    # policy
    entropy_mean: Optional[float] = None
    logprob_mean: Optional[float] = None
    ratio_mean: Optional[float] = None
    ratio_p95: Optional[float] = None
    clip_fraction: Optional[float] = None
    # advantages
    adv_mean: Optional[float] = None
    adv_std: Optional[float] = None
    adv_zero_frac: Optional[float] = None
    # GRPO groups
    group_reward_std_mean: Optional[float] = None
    zero_variance_group_frac: Optional[float] = None
    # PPO value head
    value_loss: Optional[float] = None
    value_explained_variance: Optional[float] = None
    value_clip_fraction: Optional[float] = None
    # optimization
    loss: Optional[float] = None
    lr: Optional[float] = None
    grad_norm: Optional[float] = None
    grad_norm_post_clip: Optional[float] = None
    nan_count: Optional[float] = None
    inf_count: Optional[float] = None
    weight_update_ratio: Optional[float] = None
    # generation
    completion_len_mean: Optional[float] = None
    completion_len_p95: Optional[float] = None
    completion_len_max: Optional[float] = None
    max_len_hit_frac: Optional[float] = None
    eos_rate: Optional[float] = None
    repetition_rate: Optional[float] = None
    truncation_rate: Optional[float] = None
    # throughput
    step_time_s: Optional[float] = None
    generation_time_s: Optional[float] = None
    optimization_time_s: Optional[float] = None
    # additive fields (no version bump: see the versioning policy)
    batch_age: Optional[float] = None
    logprob_mismatch: Optional[float] = None
    wall_time: Optional[float] = None  # unix seconds at log_step; set by the recorder
    # anything numeric that is not a known field
    extra: dict[str, float] = Field(default_factory=dict)


class SampleRecord(BaseModel):
    """One captured rollout: prompt, completion and what the update made of it."""

    model_config = ConfigDict(extra="forbid")

    step: int
    sample_id: Optional[str] = None
    rank: int = 0
    prompt_text: Optional[str] = None
    completion_text: Optional[str] = None
    completion_token_ids: Optional[list[int]] = None
    reward_total: Optional[float] = None
    reward_components: dict[str, float] = Field(default_factory=dict)
    advantage: Optional[float] = None
    logprob_mean: Optional[float] = None
    kl_contribution: Optional[float] = None
    completion_len: Optional[int] = None
    truncated: Optional[bool] = None
    group_id: Optional[str] = None
    capture_reason: Optional[str] = None
    extra: dict[str, float] = Field(default_factory=dict)

    @field_validator("group_id", mode="before")
    @classmethod
    def _group_id_as_text(cls, value: Any) -> Any:
        # Trainers use ints, strings or uuids for groups; text is the one type that holds all.
        return None if value is None else str(value)


class Event(BaseModel):
    """One line of events.jsonl: sparse, append-only, written immediately."""

    model_config = ConfigDict(extra="forbid")

    timestamp: float = Field(default_factory=time.time)
    kind: str
    step: Optional[int] = None
    rank: int = 0
    message: str = ""
    data: dict[str, Any] = Field(default_factory=dict)
