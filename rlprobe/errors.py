"""Errors users can act on. Raised deep, turned into one line and an exit code at the CLI edge."""

from __future__ import annotations


class RlprobeError(Exception):
    """Base class: the message is one readable line saying what is wrong and what to do."""

    exit_code = 2


class RecordingNotFound(RlprobeError):
    """The path does not exist."""


class NotARecording(RlprobeError):
    """The path exists but holds no rlprobe recording (and no runs below it)."""


# How to upgrade, in every message that asks for it. PyPI's "rlprobe" is another project, so
# rlprobe is upgraded where it was installed from (README, Install). The same words are written
# out in sql/v1/sources/10_src_manifest.sql, which plain DuckDB runs without Python
# (tests/test_cli_setup.py checks that they match).
UPGRADE_HINT = ('upgrade rlprobe (in its clone: git pull && pip install -e .; installed from a git URL: '
                'pip install --force-reinstall "rlprobe @ git+<url>@<new commit>")')


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


class RlprobeWarning(UserWarning):
    """Base class: something was read around (and said so); the result is still right for what it covers."""


class BrokenRunWarning(RlprobeWarning):
    """A run below a root could not be read and was left out; the others were read (see Store.broken)."""
