"""The storage layer named in the API reference: readers, the synchronous writer, run listing.

RunWriter is loaded only when asked for, so importing the readers never imports the writer.
"""

from __future__ import annotations

from typing import Any

from rlprobe.store import RunReader, RunView, list_runs, load_manifest

__all__ = ["RunReader", "RunView", "RunWriter", "list_runs", "load_manifest"]


def __getattr__(name: str) -> Any:
    if name == "RunWriter":
        from rlprobe.record.writer import RunWriter

        return RunWriter
    raise AttributeError(f"module 'rlprobe.storage' has no attribute {name!r}")
