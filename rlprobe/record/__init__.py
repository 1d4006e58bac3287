"""The write side: Recorder (threaded), RunWriter (synchronous), sampling, exit handlers."""

from rlprobe.record.recorder import Recorder
from rlprobe.record.sampling import SamplingConfig
from rlprobe.record.writer import RunWriter

__all__ = ["Recorder", "RunWriter", "SamplingConfig"]
