"""The one progress display of the CLI: a rich progress bar on stderr for work that takes a while.

Silent in pipes and captured output (stderr not a terminal), when the command prints JSON, and
for work that ends within half a second (a bar that flashes by is noise). A thread draws it, so
a single long call (opening a big root) still shows that it is working; the library reports
through a callback, update(label, done, total): total 0 shows a spinner without a bar. rich is
imported only when a bar is really drawn, so fast commands never pay for it.
"""

from __future__ import annotations

import sys
import threading
from typing import Any

from rlprobe.cli.output import colour_wanted


class Progress:
    """A context manager; update(label, done, total) sets what the bar shows next (thread-safe)."""

    DELAY_S = 0.5
    REFRESH_S = 0.1

    def __init__(self, enabled: bool = True, label: str = "working", stream: Any = None) -> None:
        self.stream = stream if stream is not None else sys.stderr
        try:
            tty = self.stream.isatty()
        except (AttributeError, ValueError):
            tty = False
        self.enabled = enabled and tty
        self.colour = colour_wanted()  # read here: the drawing thread has no click context
        self.state: tuple[str, int, int] = (label, 0, 0)
        self.drawn = False
        self._done = threading.Event()
        self._thread: threading.Thread | None = None

    def update(self, label: str, done: int = 0, total: int = 0) -> None:
        """Show label, and done of total when total > 0 (the library's progress callback)."""
        self.state = (label, done, total)

    def __call__(self, label: str, done: int = 0, total: int = 0) -> None:
        self.update(label, done, total)

    def __enter__(self) -> "Progress":
        if self.enabled:
            self._thread = threading.Thread(target=self._draw, name="rlprobe-progress", daemon=True)
            self._thread.start()
        return self

    def __exit__(self, *exc: Any) -> None:
        self._done.set()
        if self._thread is not None:
            self._thread.join()

    def _draw(self) -> None:
        if self._done.wait(self.DELAY_S):
            return
        from rich.console import Console
        from rich.progress import BarColumn, SpinnerColumn, TextColumn, TimeElapsedColumn
        from rich.progress import Progress as RichProgress

        console = Console(file=self.stream, force_terminal=True, no_color=not self.colour, highlight=False)
        bar = RichProgress(SpinnerColumn(), TextColumn("{task.description}"), BarColumn(),
                           TextColumn("{task.fields[count]}"), TimeElapsedColumn(),
                           console=console, transient=True, auto_refresh=False)
        task = bar.add_task("", total=None, count="")
        bar.start()
        self.drawn = True
        try:
            while not self._done.is_set():
                label, done, total = self.state
                bar.update(task, description=label, completed=min(done, total) if total else 0,
                           total=total or None, count=f"{done}/{total}" if total else "")
                bar.refresh()
                self._done.wait(self.REFRESH_S)
        finally:
            bar.stop()
