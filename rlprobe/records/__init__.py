"""Inference records: the outcome of every scored rollout group, in a shared store.

Write side (standard library only): RecordsWriter, group_from_samples, the identity hashes, and
the selection loader and filter a run uses. Read side (DuckDB): summarize and build_selection,
imported on first use so a training process never loads DuckDB.
"""

from __future__ import annotations

from typing import Any

from rlprobe.records.groups import group_from_samples, groups_from_batch, prompt_identity
from rlprobe.records.identity import (
    build_protocol,
    checkpoint_inventory,
    input_key,
    lineage_of,
    policy_scope,
    protocol_digest,
    query_sha256,
    task_key,
    validity,
)
from rlprobe.records.selection import SelectionFilter, SelectionTable, load_selection
from rlprobe.records.writer import RecordsWriter

__all__ = [
    "RecordsWriter", "group_from_samples", "groups_from_batch", "prompt_identity", "build_protocol",
    "checkpoint_inventory", "input_key", "lineage_of", "policy_scope", "protocol_digest", "query_sha256",
    "task_key", "validity", "SelectionFilter", "SelectionTable", "load_selection", "summarize",
    "build_selection", "upper_bound",
]


def __getattr__(name: str) -> Any:
    if name == "summarize":
        from rlprobe.records.summary import summarize
        return summarize
    if name in ("build_selection", "upper_bound"):
        from rlprobe.records import select
        return getattr(select, name)
    raise AttributeError(name)
