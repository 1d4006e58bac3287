"""Errors users can act on. Raised deep, turned into one line and an exit code at the CLI edge."""

from __future__ import annotations


class RlprobeError(Exception):
    """Base class: the message is one readable line saying what is wrong and what to do."""

    exit_code = 2


class RecordingNotFound(RlprobeError):
    """The path does not exist."""


class NotARecording(RlprobeError):
    """The path exists but holds no rlprobe recording (and no runs below it)."""


class SchemaTooNew(RlprobeError):
    """The recording was written by a newer rlprobe than this one."""


class CorruptRecording(RlprobeError):
    """A file of the recording cannot be parsed (for example a manifest that is not JSON)."""


class NoStepsYet(RlprobeError):
    """The recording exists but holds no steps yet."""


class QueryError(RlprobeError):
    """The SQL a user gave could not be run."""


class ToolMissing(RlprobeError):
    """An external program (such as the duckdb CLI) is not installed."""


class SourceUnreadable(RlprobeError):
    """A source given to `rlprobe import` is missing, of an unknown format, or holds no metrics."""


class ImportRefused(RlprobeError):
    """An import would overwrite a recording or write into its own source; nothing was written."""


class RecordsNotFound(RlprobeError):
    """A records store path holds no manifest-*.json or records-*.jsonl files."""


class RecordsAmbiguous(RlprobeError):
    """A records store holds several lineages or protocols and the command needs one of them."""


class SelectionMismatch(RlprobeError):
    """A selection table's SHA-256, lineage or protocol does not match the run loading it."""


class SelectionExhausted(RlprobeError):
    """A selection table excludes a whole dataset's worth of consecutive prompts."""


class RemoteStorageError(RlprobeError):
    """Object storage (s3://, ...) refused or could not serve a request: credentials, endpoint, a missing client library."""


class RecordingInUse(RlprobeError):
    """Another Recorder (in this process or another) is writing the same recording directory."""


class OutputRefused(RlprobeError):
    """An output path (--out) would write into a recording, or be read as part of one; nothing was written."""
