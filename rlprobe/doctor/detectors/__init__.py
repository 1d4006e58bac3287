"""The built-in detectors, one function per catalog signature. Importing this package binds them."""

from rlprobe.doctor.detectors import generation, optimization, policy, reward  # noqa: F401
