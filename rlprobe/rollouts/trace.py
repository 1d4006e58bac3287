"""RolloutTrace: append rollout events to a JSONL file off the caller's thread, or drop them.

The write side of the rollout trace. emit() stamps the event and puts it on a bounded queue; a
daemon thread appends queued lines in batches and flushes them to the OS, so a killed process
loses only what was still queued. A full queue drops the event and counts it: an async rollout
controller must never wait on a disk.
"""

from __future__ import annotations

import atexit
import json
import logging
import operator
import os
import queue
import threading
import time
import uuid
import weakref
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Optional

from rlprobe.jsonsafe import json_safe
from rlprobe.rollouts.batch_age import EVENTS, BatchAgeTracker, parse_line

log = logging.getLogger(__name__)

_RESERVED = frozenset({"t", "run_id", "event"})
_TRACKED = EVENTS - {"group_reserve", "group_admit", "group_seal", "weight_sync", "checkpoint_publish", "checkpoint_restore"}
_BATCH_LINES = 512
_CLOSE_TIMEOUT_S = 30.0

_process_run_id: tuple[int, str] | None = None


def process_run_id() -> str:
    """The trace run id of this process: new for each process (a fork gets its own)."""
    global _process_run_id
    pid = os.getpid()
    if _process_run_id is None or _process_run_id[0] != pid:
        stamp = datetime.now(timezone.utc).strftime("%Y%m%d-%H%M%S-")
        _process_run_id = (pid, stamp + uuid.uuid4().hex[:8])
    return _process_run_id[1]


def _default(value: Any) -> Any:
    try:
        return operator.index(value)  # numpy integers stay integers (versions, token counts)
    except TypeError:
        pass
    try:
        return float(value)
    except (TypeError, ValueError):
        return str(value)


def _dumps(record: dict[str, Any]) -> str:
    try:
        return json.dumps(record, allow_nan=False, default=_default)
    except ValueError:  # NaN or inf: strict JSON has no spelling for them
        return json.dumps(json_safe(record), allow_nan=False, default=str)


class RolloutTrace:
    """Append rollout events to a JSONL file off the caller's thread, or drop them."""

    def __init__(self, path: Optional[str | os.PathLike[str]], queue_size: int = 65536,
                 track_batch_age: bool = True) -> None:
        """Open path for appending; None makes every call a no-op.

        queue_size bounds the events waiting for the writer thread; beyond it emit() drops
        and counts (``dropped``). With track_batch_age, the trace computes each trained step's
        batch age as events are emitted (``batch_age(step)``), seeded from what the file
        already holds so a resumed run sees the runs before it.
        """
        self.path = Path(path) if path is not None else None
        self.run_id = process_run_id()
        self.dropped = 0
        self.write_failures = 0
        self.last_write_error: str | None = None
        self._closed = False
        self._lock = threading.Lock()
        self._tracker: BatchAgeTracker | None = None
        if self.path is None:
            return
        self.path.parent.mkdir(parents=True, exist_ok=True)
        if track_batch_age:
            self._tracker = BatchAgeTracker()
            if self.path.exists():
                with open(self.path, "rb") as fh:
                    for raw in fh:
                        event = parse_line(raw)
                        if event is not None:
                            self._tracker.observe(event)
        self._file = open(self.path, "a", encoding="utf-8")
        self._start_on_new_line()
        self._queue: queue.Queue[Any] = queue.Queue(maxsize=max(1, int(queue_size)))
        self._thread = threading.Thread(target=self._write_lines, name="rlprobe-rollout-trace", daemon=True)
        self._thread.start()
        ref = weakref.ref(self)
        self._atexit = lambda: (lambda t: t.close() if t is not None else None)(ref())
        atexit.register(self._atexit)

    def _start_on_new_line(self) -> None:
        # A writer killed mid-line leaves a torn last line; without a newline our first event
        # would be glued to it and be unreadable too.
        assert self.path is not None
        size = self.path.stat().st_size
        if size:
            with open(self.path, "rb") as fh:
                fh.seek(size - 1)
                if fh.read(1) != b"\n":
                    self._file.write("\n")
                    self._file.flush()

    @property
    def enabled(self) -> bool:
        """Whether events are written (a path was given and the trace is not closed)."""
        return self.path is not None and not self._closed

    def emit(self, event: str, **fields: Any) -> None:
        """Queue one event, stamped with the current wall-clock time.

        An unknown event name raises ValueError (a typo should fail in tests, traced or not);
        values are never checked here. Never blocks: a full queue drops the event.
        """
        if event not in EVENTS:
            raise ValueError(f"unknown rollout trace event {event!r}: expected one of {', '.join(sorted(EVENTS))}")
        reserved = _RESERVED.intersection(fields)
        if reserved:
            raise ValueError(f"rollout trace field(s) {sorted(reserved)} are set by emit() itself")
        if self.path is None or self._closed:
            return
        record = {"t": time.time(), "run_id": self.run_id, "event": event, **fields}
        line = _dumps(record)  # now, so later changes to a passed list cannot leak into the line
        if self._tracker is not None and event in _TRACKED:
            with self._lock:  # reads the values now, so a list changed later cannot matter
                self._tracker.observe(record)
        try:
            self._queue.put_nowait(line)
        except queue.Full:
            with self._lock:
                self.dropped += 1

    def batch_age(self, step: int) -> float | None:
        """The batch age of a step this trace saw trained (train_step), or None.

        The token-weighted number of policy updates between generating a token and training
        on it; log it with ``recorder.log_step(step, batch_age=trace.batch_age(step))``.
        """
        if self._tracker is None:
            return None
        with self._lock:
            return self._tracker.batch_age(step)

    def flush(self, timeout_s: float | None = _CLOSE_TIMEOUT_S) -> bool:
        """Wait until every queued event has been written; False if timeout_s ran out."""
        if self.path is None or self._closed or not self._thread.is_alive():
            return True
        done = threading.Event()
        try:
            self._queue.put(done, timeout=timeout_s)
        except queue.Full:
            return False
        return done.wait(timeout_s)

    def close(self) -> None:
        """Write every queued event, then stop the writer and close the file."""
        if self.path is None or self._closed:
            return
        self._closed = True
        try:
            self._queue.put(None, timeout=_CLOSE_TIMEOUT_S)
        except queue.Full:
            log.warning("rollout trace %s: writer stuck; queued events are lost", self.path)
        self._thread.join(_CLOSE_TIMEOUT_S)
        if not self._thread.is_alive():
            self._file.close()
        atexit.unregister(self._atexit)
        if self.dropped:
            log.warning("rollout trace %s: %d events dropped (queue full)", self.path, self.dropped)

    def __enter__(self) -> "RolloutTrace":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    def _write_lines(self) -> None:
        """Append queued events in batches until close queues None."""
        while True:
            item = self._queue.get()
            batch: list[str] = []
            waiters: list[threading.Event] = []
            stop = False
            while True:
                if item is None:
                    stop = True
                elif isinstance(item, threading.Event):
                    waiters.append(item)
                else:
                    batch.append(item)
                if stop or len(batch) >= _BATCH_LINES:
                    break
                try:
                    item = self._queue.get_nowait()
                except queue.Empty:
                    break
            if batch:
                try:
                    self._file.write("\n".join(batch) + "\n")
                    self._file.flush()
                except (OSError, ValueError) as exc:  # disk full, closed file: count, keep going
                    with self._lock:
                        self.write_failures += 1
                        self.dropped += len(batch)
                        self.last_write_error = f"{type(exc).__name__}: {exc}"
            for waiter in waiters:
                waiter.set()
            if stop:
                return
