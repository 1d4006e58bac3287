"""The doctor: reads a recording and says what is wrong, since when, on what evidence, what to try.

All read-side: nothing here imports torch, threads of the recorder, or writes into a recording.
Names load on first use, so `from rlprobe.doctor.live import HaltPolicy` (what a training
process imports) does not pull in DuckDB.
"""

from __future__ import annotations

from importlib import import_module
from typing import Any

_LAZY = {
    "ConfigError": "rlprobe.doctor.config",
    "DoctorConfig": "rlprobe.doctor.config",
    "load_config": "rlprobe.doctor.config",
    "diagnose": "rlprobe.doctor.engine",
    "diagnose_path": "rlprobe.doctor.engine",
    "diagnose_view": "rlprobe.doctor.engine",
    "Diagnosis": "rlprobe.doctor.findings",
    "Finding": "rlprobe.doctor.findings",
    "Skipped": "rlprobe.doctor.findings",
    "rank": "rlprobe.doctor.findings",
    "HaltPolicy": "rlprobe.doctor.live",
    "RunWatcher": "rlprobe.doctor.live",
    "WebhookSink": "rlprobe.doctor.live",
    "webhook_sink": "rlprobe.doctor.live",
    # the post-mortem tools the spec lists beside the doctor; they live in their own packages
    "query_samples": "rlprobe.forensics",
    "spike_drivers": "rlprobe.forensics",
    "show_step": "rlprobe.forensics",
    "diff_runs": "rlprobe.diff",
    "RunDiff": "rlprobe.diff",
    "render_report": "rlprobe.report",
}

__all__ = sorted(_LAZY)


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        value = getattr(import_module(_LAZY[name]), name)
        globals()[name] = value
        return value
    raise AttributeError(f"module 'rlprobe.doctor' has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_LAZY))
