"""rlprobe: a flight recorder and doctor for RL fine-tuning of language models.

Names are loaded on first use, so ``import rlprobe`` stays cheap and the read side never pulls
in the recorder's threads (and vice versa).
"""

from __future__ import annotations

from importlib import import_module
from typing import Any

__version__ = "0.1.0"

_LAZY = {
    "Recorder": "rlprobe.record",
    "SamplingConfig": "rlprobe.record",
    "RunWriter": "rlprobe.record",
    "connect": "rlprobe.store",
    "RunReader": "rlprobe.store",
    "RunView": "rlprobe.store",
    "list_runs": "rlprobe.store",
    "load_manifest": "rlprobe.store",
    "SampleRecord": "rlprobe.schemas",
    "StepRecord": "rlprobe.schemas",
    "RunManifest": "rlprobe.schemas",
    "Event": "rlprobe.schemas",
    "diagnose": "rlprobe.doctor",
    "query_samples": "rlprobe.forensics",
    "spike_drivers": "rlprobe.forensics",
    "show_step": "rlprobe.forensics",
    "diff_runs": "rlprobe.diff",
    "RunDiff": "rlprobe.diff",
    "render_report": "rlprobe.report",
}

__all__ = sorted(_LAZY) + ["__version__"]


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        value = getattr(import_module(_LAZY[name]), name)
        globals()[name] = value
        return value
    raise AttributeError(f"module 'rlprobe' has no attribute {name!r}")
