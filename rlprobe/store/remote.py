"""Runs in object storage: `s3://bucket/prefix` and other fsspec URLs, read by DuckDB through fsspec.

DuckDB's own httpfs extension is downloaded on first use, which an offline machine cannot do,
so the connection gets an fsspec filesystem registered instead (`register_filesystem`): the same
read_parquet / read_json / read_text calls and globs in sql/ then read the bucket. fsspec and
s3fs are imported only here, and only when a URL is opened, so local use never loads them.

Credentials and endpoint come from where the filesystem's own library looks for them: for S3,
the standard AWS variables and files (AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY, AWS_PROFILE,
AWS_ENDPOINT_URL, ...) or fsspec's configuration (FSSPEC_S3_ENDPOINT_URL, ~/.config/fsspec/).
"""

from __future__ import annotations

import re
from typing import Any

from rlprobe.errors import NotARecording, RecordingNotFound, RemoteStorageError

_SCHEME = re.compile(r"^([A-Za-z][A-Za-z0-9+.\-]*)://")
_RUN_FILES = ("manifest.json", "steps.parquet", "events.jsonl")


def scheme_of(path: object) -> str | None:
    """The URL scheme of path ('s3', 'gs', 'memory', ...), or None for a local path."""
    match = _SCHEME.match(str(path)) if isinstance(path, str) else None
    return match.group(1).lower() if match else None


class RemotePath(str):
    """A URL standing where a local Path would: str() is the URL; name, parent and / as for paths."""

    @property
    def name(self) -> str:
        """The last component of the URL."""
        return self.rstrip("/").rsplit("/", 1)[-1]

    @property
    def parent(self) -> "RemotePath":
        """The URL one level up (never above the bucket)."""
        head = self.rstrip("/")
        return RemotePath(head.rsplit("/", 1)[0]) if head.count("/") > 2 else RemotePath(head)

    def __truediv__(self, other: object) -> "RemotePath":
        return RemotePath(self.rstrip("/") + "/" + str(other).strip("/"))


def filesystem(url: str) -> Any:
    """A fresh fsspec filesystem for url's scheme, configured from the environment.

    Fresh (no instance cache) and without a listings cache, so each open sees the credentials
    in force now and the files written since the last query, as a local root does.
    """
    scheme = scheme_of(url) or "file"
    try:
        import fsspec
    except ImportError as exc:
        raise RemoteStorageError(f"{url}: reading object storage needs fsspec: pip install 'rlprobe[s3]'") from exc
    try:
        return fsspec.filesystem(scheme, skip_instance_cache=True, use_listings_cache=False)
    except ImportError as exc:
        raise RemoteStorageError(f"{url}: {_first_line(exc)} (for s3://, pip install 'rlprobe[s3]')") from exc
    except ValueError as exc:
        raise RemoteStorageError(f"{url}: fsspec knows no filesystem for {scheme}:// ({_first_line(exc)})") from exc


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__


def storage_error(url: str, exc: BaseException) -> Exception:
    """The RlprobeError a user can act on for a failed call to the storage behind url."""
    if isinstance(exc, FileNotFoundError):
        return RecordingNotFound(f"{url}: no such bucket, prefix or object")
    if isinstance(exc, PermissionError) or type(exc).__name__ in ("NoCredentialsError", "PartialCredentialsError"):
        return RemoteStorageError(
            f"{url}: access denied ({_first_line(exc)}); check the credentials "
            "(AWS_ACCESS_KEY_ID / AWS_SECRET_ACCESS_KEY / AWS_PROFILE for s3://) and the endpoint (AWS_ENDPOINT_URL)"
        )
    return RemoteStorageError(f"{url}: cannot reach the storage: {type(exc).__name__}: {_first_line(exc)}")


def classify(url: str) -> tuple[RemotePath, str]:
    """(the run or root URL, "run" or "root") for url, looking at the storage once."""
    fs = filesystem(url)
    base = url.rstrip("/")
    try:
        entries = fs.ls(base, detail=True)
    except Exception as exc:  # a third-party client: every failure becomes one line
        raise storage_error(url, exc) from exc
    key = fs._strip_protocol(base)  # noqa: SLF001 - fsspec's own way to compare with ls output
    if len(entries) == 1 and entries[0].get("type") == "file" and entries[0]["name"].rstrip("/") == key:
        name = base.rsplit("/", 1)[-1]
        if name in _RUN_FILES:
            return RemotePath(base).parent, "run"
        raise NotARecording(f"{url} is a file, not a recording: point at a run prefix or a prefix of runs")
    names = {e["name"].rstrip("/").rsplit("/", 1)[-1] for e in entries}
    if not names:
        raise RecordingNotFound(f"{url}: no such bucket, prefix or object")
    if names & {"manifest.json", "steps.parquet", "steps", "events.jsonl", "samples"}:
        return RemotePath(base), "run"
    return RemotePath(base), "root"


def register(con: Any, url: str) -> None:
    """Let DuckDB connection con read url's scheme through fsspec."""
    con.register_filesystem(filesystem(url))
