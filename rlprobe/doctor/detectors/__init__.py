"""The built-in catalog. Importing this package registers every detector."""

from rlprobe.doctor.detectors import policy  # noqa: F401
