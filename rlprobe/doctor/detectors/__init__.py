"""The built-in catalog. Importing this package registers every detector."""

from rlprobe.doctor.detectors import generation, optimization, policy, reward  # noqa: F401
