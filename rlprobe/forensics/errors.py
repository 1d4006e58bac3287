"""Errors of the forensic commands, each one line a user can act on (exit code 2)."""

from __future__ import annotations

from rlprobe.errors import RlprobeError


class StepNotRecorded(RlprobeError):
    """The step asked for is not among the run's recorded steps."""


class BadForensicsArgument(RlprobeError, ValueError):
    """An argument of a forensic query is out of its range or of an unknown value."""
