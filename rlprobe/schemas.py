"""The recording format in code: pydantic models, column names and the schema version.

This module is the only thing the write side and the read side share. Everything here is part
of the on-disk contract described in docs/format.md; changing the meaning or type of a field
is a breaking change and bumps SCHEMA_VERSION (see rlprobe/store/versions.py for migrations).
"""

from __future__ import annotations

import math
import time
import uuid
from datetime import datetime, timezone
from typing import Any, Optional

from pydantic import BaseModel, ConfigDict, Field, field_validator

SCHEMA_VERSION = 1
"""Version of the recording format this package writes and the newest it reads."""

REWARD_COMPONENT_PREFIX = "reward_component."
EXTRA_PREFIX = "extra."

# Dict-valued fields and the prefix their keys get as flattened parquet columns.
FLATTENED_DICTS = {"reward_components": REWARD_COMPONENT_PREFIX, "extra": EXTRA_PREFIX}


def new_run_id() -> str:
    """A fresh, sortable, collision-resistant run id: UTC timestamp plus 8 random hex digits."""
    return datetime.now(timezone.utc).strftime("%Y%m%d-%H%M%S-") + uuid.uuid4().hex[:8]


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


def _scalar_fields(model: type[BaseModel], exclude: set[str]) -> dict[str, Any]:
    return {
        name: f.annotation
        for name, f in model.model_fields.items()
        if name not in exclude and name not in FLATTENED_DICTS
    }


STEP_FIELDS: tuple[str, ...] = tuple(StepRecord.model_fields)
"""Every StepRecord field in declaration order (dict fields included)."""

STEP_FLOAT_FIELDS: tuple[str, ...] = tuple(
    name for name in _scalar_fields(StepRecord, {"step", "kl_positional"})
)
"""Scalar float columns of steps.parquet, in order."""

SAMPLE_FIELDS: tuple[str, ...] = tuple(SampleRecord.model_fields)

# Arrow/DuckDB type of each fixed sample column; kept here so writer and views agree.
SAMPLE_COLUMN_TYPES: dict[str, str] = {
    "step": "BIGINT",
    "sample_id": "VARCHAR",
    "rank": "BIGINT",
    "prompt_text": "VARCHAR",
    "completion_text": "VARCHAR",
    "completion_token_ids": "BIGINT[]",
    "reward_total": "DOUBLE",
    "advantage": "DOUBLE",
    "logprob_mean": "DOUBLE",
    "kl_contribution": "DOUBLE",
    "completion_len": "BIGINT",
    "truncated": "BOOLEAN",
    "group_id": "VARCHAR",
    "capture_reason": "VARCHAR",
}

STEP_COLUMN_TYPES: dict[str, str] = {
    "step": "BIGINT",
    **{name: "DOUBLE" for name in STEP_FLOAT_FIELDS},
    "kl_positional": "DOUBLE[]",
}

EVENT_COLUMN_TYPES: dict[str, str] = {
    "timestamp": "DOUBLE",
    "kind": "VARCHAR",
    "step": "BIGINT",
    "rank": "BIGINT",
    "message": "VARCHAR",
    "data": "JSON",
}


def is_finite_number(value: Any) -> bool:
    """True for a real number that is neither NaN nor infinite."""
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)


def flatten_dicts(row: dict[str, Any]) -> dict[str, Any]:
    """Replace dict fields with prefixed columns: ``{'extra': {'a': 1}}`` -> ``{'extra.a': 1}``."""
    flat = {k: v for k, v in row.items() if k not in FLATTENED_DICTS}
    for field, prefix in FLATTENED_DICTS.items():
        for key, value in (row.get(field) or {}).items():
            flat[prefix + key] = value
    return flat


def unflatten_dicts(row: dict[str, Any]) -> dict[str, Any]:
    """Inverse of flatten_dicts; NULL prefixed columns are left out of the rebuilt dicts."""
    out: dict[str, Any] = {field: {} for field in FLATTENED_DICTS}
    for key, value in row.items():
        for field, prefix in FLATTENED_DICTS.items():
            if key.startswith(prefix):
                if value is not None:
                    out[field][key[len(prefix):]] = value
                break
        else:
            out[key] = value
    return out
