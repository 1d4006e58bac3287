"""The recording format in code: pydantic models, column names and the schema version.

This module is the only thing the write side and the read side share. Everything here is part
of the on-disk contract described in docs/format.md; changing the meaning or type of a field
is a breaking change and bumps SCHEMA_VERSION (see rlprobe/store/versions.py for migrations).

The models (RunManifest, StepRecord, SampleRecord, Event) are defined in rlprobe/models.py and
load on first use: the read side needs only the names and types below, and pydantic with the
models costs ~100 ms at every start of `rlprobe query` or `rlprobe doctor`. A field added to a
model is added to the names here too (tests/test_schemas_lazy.py fails until it is).
"""

from __future__ import annotations

import math
import uuid
from datetime import datetime, timezone
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from rlprobe.models import Event, RunManifest, SampleRecord, StepRecord

SCHEMA_VERSION = 1
"""Version of the recording format this package writes and the newest it reads."""

REWARD_COMPONENT_PREFIX = "reward_component."
EXTRA_PREFIX = "extra."

# Dict-valued fields and the prefix their keys get as flattened parquet columns.
FLATTENED_DICTS = {"reward_components": REWARD_COMPONENT_PREFIX, "extra": EXTRA_PREFIX}


def new_run_id() -> str:
    """A fresh, sortable, collision-resistant run id: UTC timestamp plus 8 random hex digits."""
    return datetime.now(timezone.utc).strftime("%Y%m%d-%H%M%S-") + uuid.uuid4().hex[:8]


_MODELS = ("RunManifest", "StepRecord", "SampleRecord", "Event")


def __getattr__(name: str) -> Any:
    """The pydantic models, imported with pydantic on first use (see the module docstring)."""
    if name in _MODELS:
        from rlprobe import models

        value = getattr(models, name)
        globals()[name] = value
        return value
    raise AttributeError(f"module 'rlprobe.schemas' has no attribute {name!r}")


STEP_FIELDS: tuple[str, ...] = (
    "step",
    # reward
    "reward_mean", "reward_std", "reward_min", "reward_max", "reward_components",
    # KL to the reference
    "kl_mean", "kl_max", "kl_positional",
    # policy
    "entropy_mean", "logprob_mean", "ratio_mean", "ratio_p95", "clip_fraction",
    # advantages
    "adv_mean", "adv_std", "adv_zero_frac",
    # GRPO groups
    "group_reward_std_mean", "zero_variance_group_frac",
    # PPO value head
    "value_loss", "value_explained_variance", "value_clip_fraction",
    # optimization
    "loss", "lr", "grad_norm", "grad_norm_post_clip", "nan_count", "inf_count", "weight_update_ratio",
    # generation
    "completion_len_mean", "completion_len_p95", "completion_len_max", "max_len_hit_frac", "eos_rate",
    "repetition_rate", "truncation_rate",
    # throughput
    "step_time_s", "generation_time_s", "optimization_time_s",
    # additive fields
    "batch_age", "logprob_mismatch", "wall_time",
    "extra",
)
"""Every StepRecord field in declaration order (dict fields included)."""

STEP_FLOAT_FIELDS: tuple[str, ...] = tuple(
    name for name in STEP_FIELDS if name not in ("step", "kl_positional") and name not in FLATTENED_DICTS
)
"""Scalar float columns of steps.parquet, in order."""

SAMPLE_FIELDS: tuple[str, ...] = (
    "step", "sample_id", "rank", "prompt_text", "completion_text", "completion_token_ids", "reward_total",
    "reward_components", "advantage", "logprob_mean", "kl_contribution", "completion_len", "truncated",
    "group_id", "capture_reason", "extra",
)
"""Every SampleRecord field in declaration order."""

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
