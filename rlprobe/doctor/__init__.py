"""The doctor: reads a recording and says what is wrong, since when, on what evidence, what to try.

All read-side: nothing here imports torch, threads of the recorder, or writes into a recording.
"""

from __future__ import annotations

from rlprobe.doctor.config import ConfigError, DoctorConfig, load_config
from rlprobe.doctor.engine import diagnose, diagnose_path, diagnose_view
from rlprobe.doctor.findings import Diagnosis, Finding, Skipped, rank

__all__ = [
    "ConfigError", "Diagnosis", "DoctorConfig", "Finding", "Skipped",
    "diagnose", "diagnose_path", "diagnose_view", "load_config", "rank",
]
