"""What a path a user gave is: a recording (or a runs root) read as it is, or a source to import.

Every read command takes either. Telling a recording apart needs a look at a few file names;
telling which source a path is needs rlprobe.importers (its formats, the key map: ~50 ms of
imports), so that package is imported only when the path is not plainly a recording.

    with as_recording("runs/my-run") as rec:     # a recording: rec.path is the path, nothing imported
        ...
    with as_recording("train.log") as rec:       # a source: a temporary recording, removed afterwards
        ...
"""

from __future__ import annotations

import os
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterator

RECORDING_FILES = ("manifest.json", "steps.parquet", "steps", "events.jsonl", "samples")
"""What makes a directory a recording (docs/format.md); such a path is read, never imported."""

_OWN_FILES = ("manifest.json", "steps.parquet", "events.jsonl")  # a recording's files a user may point at


def is_recording_dir(path: Path) -> bool:
    """True when path is a folder holding any of a recording's files."""
    return any((path / name).exists() for name in RECORDING_FILES)


def reads_as_is(path: str | os.PathLike[str]) -> bool:
    """True when path is plainly not a source to import: a recording, a recording's own file, or
    nothing on the local disk (a URL, or a typo the store then names). A folder that is not a
    recording may be a runs root or a tracker's folder: only rlprobe.importers can tell."""
    p = Path(path).expanduser()
    if p.is_file():
        return p.name in _OWN_FILES
    if p.is_dir():
        return is_recording_dir(p)
    return True


def is_importable(path: str | os.PathLike[str]) -> bool:
    """rlprobe.importers.is_importable, without importing it for a recording."""
    if reads_as_is(path):
        return False
    from rlprobe.importers import is_importable as importable

    return importable(path)


@dataclass
class Recording:
    """A path the read side can open, and the import report when it had to be imported."""

    path: Path
    report: Any = None  # rlprobe.importers.ImportReport or RootReport, when imported

    def shown_as(self, run_dir: str) -> str:
        """The source a run directory of this recording came from (itself when nothing was imported)."""
        if self.report is None:
            return run_dir
        runs = getattr(self.report, "runs", None)  # a RootReport: one source per run
        if runs is None:
            return str(self.report.source)
        for run in runs:
            if os.path.realpath(run.run_dir) == os.path.realpath(run_dir):
                return str(run.source)
        return run_dir

    def torn_lines(self) -> list[str]:
        """One "(torn: ...)" line per source file whose cut-off tail was not imported: what a
        command that read an imported source says on stderr, whatever else it prints."""
        if self.report is None:
            return []
        from rlprobe.importers.write import torn_notes

        return [f"(torn: {note})" for note in torn_notes(self.report)]


@contextmanager
def as_recording(path: str | os.PathLike[str], **options: Any) -> Iterator[Recording]:
    """rlprobe.importers.as_recording (same options), without importing it for a recording."""
    if options.get("kind", "auto") == "auto" and reads_as_is(path):
        yield Recording(Path(path))
        return
    from rlprobe.importers import as_recording as importing

    with importing(path, **options) as rec:
        yield rec
