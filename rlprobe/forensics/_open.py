"""Open what a user pointed at for the forensic commands: a run, a root, or a source to import."""

from __future__ import annotations

import os
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any, Iterator, Union

from rlprobe.errors import NotARecording
from rlprobe.store.engine import Store

RunLike = Union[str, "os.PathLike[str]", Store]
"""A run directory (or a runs root where allowed), a source rlprobe can import, or an open Store."""


@dataclass
class Opened:
    """An open store and, when the path had to be imported first, the import report."""

    store: Store
    report: Any = None  # rlprobe.importers.ImportReport when imported


@contextmanager
def opened(run: RunLike, *, one_run: bool = True) -> Iterator[Opened]:
    """A store over run for the duration of the block; a source is imported to a temporary
    recording that is removed afterwards, so results must be fetched inside the block."""
    from rlprobe.store import open_store

    if isinstance(run, Store):
        _check_one_run(run, one_run, str(run.target.path))
        yield Opened(run)
        return
    from rlprobe.sources import as_recording

    with as_recording(run) as rec:
        store = open_store(rec.path)
        try:
            _check_one_run(store, one_run, os.fspath(run))
            yield Opened(store, rec.report)
        finally:
            store.con.close()


def _check_one_run(store: Store, one_run: bool, shown: str) -> None:
    if one_run and store.target.kind != "run":
        raise NotARecording(f"{shown} is a folder of runs: point at one run directory")
