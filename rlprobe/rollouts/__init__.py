"""The rollout trace: per-rollout events of an async RL controller, and the batch age they give.

``RolloutTrace`` writes ``rollout_trace.jsonl`` (one JSON line per event, off the caller's
thread); ``batch_age_by_step`` and friends compute, in pure Python, how many policy updates old
each trained token was; ``rlprobe.rollouts.views`` reads traces through the SQL views
``rollout_events`` and ``batch_age``. Names load on first use, so the read side never imports
the writer's thread machinery and the writer never imports duckdb.
"""

from __future__ import annotations

from importlib import import_module
from typing import Any

_LAZY = {
    "RolloutTrace": "rlprobe.rollouts.trace",
    "process_run_id": "rlprobe.rollouts.trace",
    "ROLLOUT_TRACE_FILENAME": "rlprobe.rollouts.batch_age",
    "BATCH_AGE_TOKENS_METRIC": "rlprobe.rollouts.batch_age",
    "BATCH_AGE_VERSION_SUM_METRIC": "rlprobe.rollouts.batch_age",
    "EVENTS": "rlprobe.rollouts.batch_age",
    "RefitCuts": "rlprobe.rollouts.batch_age",
    "BatchAgeTracker": "rlprobe.rollouts.batch_age",
    "StepAge": "rlprobe.rollouts.batch_age",
    "read_events": "rlprobe.rollouts.batch_age",
    "tokens_by_version": "rlprobe.rollouts.batch_age",
    "batch_age_group_metrics": "rlprobe.rollouts.batch_age",
    "pop_batch_age": "rlprobe.rollouts.batch_age",
    "batch_age_by_step": "rlprobe.rollouts.batch_age",
    "batch_age_rows": "rlprobe.rollouts.batch_age",
    "batch_age_for_step": "rlprobe.rollouts.batch_age",
    "open_traces": "rlprobe.rollouts.views",
    "batch_age_table": "rlprobe.rollouts.views",
    "TraceUnreadable": "rlprobe.rollouts.views",
}

__all__ = sorted(_LAZY)


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        value = getattr(import_module(_LAZY[name]), name)
        globals()[name] = value
        return value
    raise AttributeError(f"module 'rlprobe.rollouts' has no attribute {name!r}")
