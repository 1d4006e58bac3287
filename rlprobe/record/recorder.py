"""Recorder: the training loop's side. Calls only enqueue; a daemon thread does all the work.

The hot path (log_step) is a length check and a deque append, so it costs about as much as
building the kwargs dict the caller already built. Validation, sampling, serialization and IO
all happen on the writer thread, which never lets an exception escape: a bad value becomes a
``bad_record`` event, a failed write is counted, retried and reported, and training goes on.
"""

from __future__ import annotations

import collections
import os
import random
import sys
import threading
import time
import traceback
import weakref
from pathlib import Path
from typing import Any, Iterable, Mapping

from rlprobe.record import handlers
from rlprobe.record.coerce import sample_row, step_row, to_int
from rlprobe.record.environment import capture_env as _capture_env
from rlprobe.record.lock import WriterLock
from rlprobe.record.sampling import SamplingConfig, select
from rlprobe.jsonsafe import json_safe, safe_str
from rlprobe.record.writer import PartialWrite, RunWriter, prewarm_parquet, yield_gil
from rlprobe.schemas import Event, RunManifest

_STEP, _SAMPLES, _FLUSH, _STOP = range(4)
_MISSING: Any = type("_Missing", (), {"__repr__": lambda self: "<missing>"})()  # an argument not given
_POLL_S = 0.2  # how often the writer thread drains the queue while records arrive (each wake costs the training thread GIL time)
_CLOSE_TIMEOUT_S = 30.0
_YIELD_EVERY_S = 0.0005  # the writer offers the GIL back this often while it turns records into rows
_CLOSE_RETRIES, _CLOSE_RETRY_S = 3, 0.1  # a close after failed writes tries again this often
_BAD_REPORTS_PER_FIELD = 3  # then repeats of the same bad field are only counted


# Every active recorder of this process, so a forked child can disarm them all (_after_fork).
_LIVE: "weakref.WeakSet[Recorder]" = weakref.WeakSet()


def _after_fork_in_child() -> None:
    for recorder in list(_LIVE):
        recorder._disarm_after_fork()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_after_fork_in_child)


class Recorder:
    """Record one training run into ``run_dir`` (see docs/api.md for every argument).

    A recorder belongs to the process that made it. In a forked child (a multiprocessing pool
    worker, say) it is inert: the writer thread did not survive the fork, and the exit hooks and
    files are the parent's. A child that must record makes a Recorder of its own.
    """

    def __init__(
        self,
        run_dir: str | os.PathLike[str],
        algorithm: str | None = None,
        run_id: str | None = None,
        model_name: str | None = None,
        trainer_config: Mapping[str, Any] | None = None,
        world_size: int = 1,
        rank: int = 0,
        capture_env: bool = True,
        sampling: SamplingConfig | None = None,
        queue_size: int = 8192,
        flush_interval_s: float = 5.0,
        steps_per_flush: int = 200,
        install_handlers: bool = True,
        record_all_ranks: bool = False,
        name: str | None = None,
        tags: Iterable[str] | str = (),
    ) -> None:
        self.rank = rank
        self.active = rank == 0 or record_all_ranks
        self._pid = os.getpid()
        self._dropped = 0
        self._closed = not self.active
        self.write_failures = 0
        self.last_write_error: str | None = None
        self.run_id: str | None = run_id
        self.run_dir: Path | None = None
        self.sampling = sampling or SamplingConfig()
        if not self.active:
            return  # inert: nothing written, no thread, no handlers, every method a no-op
        if queue_size < 1 or steps_per_flush < 1 or flush_interval_s <= 0:
            raise ValueError("queue_size and steps_per_flush must be >= 1 and flush_interval_s > 0")
        root = Path(run_dir)
        self.run_dir = root if rank == 0 else root / f"rank-{rank:03d}"
        manifest_kwargs: dict[str, Any] = {
            "algorithm": algorithm,
            "model_name": model_name,
            "world_size": world_size,
            "trainer_config": json_safe(dict(trainer_config or {})),  # "verbatim", as JSON can hold it
            "environment": _capture_env() if capture_env else {},
            "name": None if name is None else str(name),
            "tags": [tags] if isinstance(tags, str) else [str(t) for t in tags],
        }
        if run_id is not None:
            manifest_kwargs["run_id"] = run_id
        self._writer_lock = WriterLock(self.run_dir)  # before anything is read or written (RecordingInUse)
        try:
            self._writer = RunWriter(self.run_dir, RunManifest(**manifest_kwargs), rank=rank)
        except BaseException:
            self._writer_lock.release()
            raise
        self.run_id = self._writer.manifest.run_id
        self._rng = random.Random(self.sampling.seed)
        self._queue: collections.deque[tuple[Any, ...]] = collections.deque()
        self._queue_size = queue_size
        self._flush_interval_s = flush_interval_s
        self._steps_per_flush = steps_per_flush
        self._wake = threading.Event()
        # True while the writer thread sleeps because the queue stayed empty: the next log_*
        # call wakes it (once) instead of the writer waking every _POLL_S to find nothing.
        self._idle = False
        self._close_lock = threading.Lock()
        self._pending_steps: list[dict[str, Any]] = []
        self._pending_samples: list[dict[str, Any]] = []
        # sample ids are <step>-<rank>-<n>; a resumed recording continues n where it stopped
        self._samples_logged = self._writer.max_sample_serial() + 1 if self._writer.resumed else 0
        self._reported_drops = 0
        self._bad_seen: dict[tuple[str, str], int] = {}
        self._bad_suppressed: dict[tuple[str, str], int] = {}
        self._last_flush = time.monotonic()
        self._trouble_since: int | None = None  # write_failures when the current failure episode began
        opened: dict[str, Any] = {"pid": os.getpid()}
        if self._writer.resumed:
            # The original manifest stays (a recording is never rewritten); say what was asked.
            opened.update(requested_run_id=run_id, algorithm=algorithm, model_name=model_name, name=name,
                          tags=manifest_kwargs["tags"])
        self.log_event("recorder_open", message="resumed" if self._writer.resumed else "", **opened)
        self._thread = threading.Thread(target=self._run, name=f"rlprobe-writer-{self.run_id}", daemon=True)
        self._handlers = handlers.install(self) if install_handlers else None
        _LIVE.add(self)
        self._thread.start()

    def _disarm_after_fork(self) -> None:
        """In a forked child: record nothing and close nothing (the exit hooks disarm themselves)."""
        self._closed = True
        self._queue = collections.deque()  # the parent's pending records are the parent's to write
        self._writer_lock.forget()

    # -- the training loop's API ----------------------------------------------------------
    # step, samples and kind are positional-only, so a metric or data key of the same name
    # (log_step(1, **{"step": 2}), log_event("x", kind="y")) is a bad value the writer thread
    # reports, never a TypeError in the training loop.
    def log_step(self, step: Any = _MISSING, /, **metrics: Any) -> None:
        """Record per-step scalars. Never blocks and never raises on bad values."""
        if self._closed:
            return
        if len(self._queue) < self._queue_size:
            self._queue.append((_STEP, step, metrics, time.time()))
            if self._idle:
                self._wake_idle_writer()
        else:
            self._dropped += 1

    def log_samples(self, step: Any = _MISSING, samples: Any = _MISSING, /, select: Any = True, **misplaced: Any) -> None:
        """Record per-sample forensics; the recorder takes ownership of the dicts."""
        if self._closed:
            return
        if len(self._queue) < self._queue_size:
            self._queue.append((_SAMPLES, step, samples, select, misplaced))
            if self._idle:
                self._wake_idle_writer()
        else:
            self._dropped += 1

    def _wake_idle_writer(self) -> None:
        """The first record after the queue stayed empty wakes the sleeping writer thread."""
        self._idle = False
        self._wake.set()

    def log_event(self, kind: Any = _MISSING, /, step: Any = None, message: Any = "", **data: Any) -> None:
        """Record a sparse event, written to disk immediately; never raises."""
        if self._closed:
            return
        if kind is _MISSING:
            kind = data.pop("kind", "event")
        self._write_event(kind, step, message, data)

    def _write_event(self, kind: Any, step: Any, message: Any, data: dict[str, Any]) -> None:
        """Write one event line. Whatever kind, message and data hold (lone surrogates, objects
        whose str() raises, a dict that contains itself), the event is written as valid JSON."""
        try:
            fields = json_safe(data)
            if step is not None:
                try:
                    step = to_int(step)
                except Exception:  # keep the event, say what was wrong with its step
                    fields["bad_step"] = safe_str(step)[:80]
                    step = None
            event = Event.model_construct(
                timestamp=time.time(), kind=safe_str(kind), step=step, rank=self.rank,
                message=safe_str(message), data=fields,
            )
            self._writer.append_event(event)
        except Exception as exc:  # a full disk (OSError) or anything else: counted, never raised
            self.write_failures += 1
            self.last_write_error = f"events.jsonl: {type(exc).__name__}: {exc}"
            if getattr(self, "_thread", None) is not None:  # not the constructor's own recorder_open
                self._trouble()

    def flush(self, timeout: float = 5.0) -> bool:
        """Persist everything logged so far; True when it is on disk within timeout."""
        if self._closed or not self._thread.is_alive():
            return not self.active or self._closed
        done = threading.Event()
        self._queue.append((_FLUSH, done))  # control items are never dropped
        self._wake.set()
        return done.wait(timeout) and self.last_write_error is None

    def close(self) -> None:
        """Drain, flush and compact part files into steps.parquet. Idempotent."""
        if not self.active or os.getpid() != self._pid:
            return  # inert, or a forked child: the parent closes its own recording
        with self._close_lock:
            if self._closed:
                return
            self._closed = True
            self._queue.append((_STOP,))
            self._wake.set()
            if self._thread is not threading.current_thread():
                self._thread.join(_CLOSE_TIMEOUT_S)
            if self._thread.is_alive():
                self._write_event("recorder_close", None, "writer thread did not finish in time; parts left uncompacted", {})
            else:
                try:
                    self._writer.compact()
                except Exception as exc:  # close() never raises
                    # Parts stay readable; a later close() or resume compacts them.
                    self.write_failures += 1
                    self.last_write_error = f"compaction: {type(exc).__name__}: {safe_str(exc)}"
                self._write_event("recorder_close", None, "", {
                    "dropped": self._dropped,
                    "write_failures": self.write_failures,
                    "last_write_error": self.last_write_error,
                })
            if self._handlers is not None:
                self._handlers.uninstall()
            _LIVE.discard(self)
            if not self._thread.is_alive():  # a writer still running keeps the folder until the process ends
                self._writer_lock.release()

    @property
    def dropped(self) -> int:
        """Records dropped because the queue was full (or writes kept failing)."""
        return self._dropped

    def __enter__(self) -> "Recorder":
        return self

    def __exit__(self, exc_type: Any, exc: BaseException | None, tb: Any) -> None:
        if isinstance(exc, KeyboardInterrupt):
            self.record_interrupt()
        elif exc is not None and not isinstance(exc, SystemExit):
            self.record_crash(exc_type, exc, tb)
        self.close()

    def record_interrupt(self) -> None:
        """Write an interrupted event: the run was stopped with Ctrl-C (KeyboardInterrupt)."""
        self.log_event("interrupted", message="KeyboardInterrupt (Ctrl-C): stopped before the end")

    def record_crash(self, exc_type: Any, exc: BaseException, tb: Any) -> None:
        """Write a crash event with the traceback (used by the exit handlers)."""
        text = "".join(traceback.format_exception(exc_type, exc, tb))
        self.log_event("crash", message=f"{exc_type.__name__}: {exc}", traceback=text)

    # -- the writer thread ----------------------------------------------------------------
    def _run(self) -> None:
        try:
            prewarm_parquet()
        except Exception:
            pass
        stopping = False
        arrived = True  # records came since the last look: look again in _POLL_S
        while not stopping:
            if arrived:
                self._wake.wait(_POLL_S)
            else:
                # The queue stayed empty a whole poll: sleep until the next flush is due (a failed
                # write is retried then) or a flush interval, unless a log_* call, flush() or
                # close() wakes the writer first. The flag is set before the queue is looked at
                # again, so a record appended in between either is seen here or wakes the wait.
                self._idle = True
                if not self._queue:
                    self._wake.wait(self._idle_timeout())
                self._idle = False
            self._wake.clear()
            arrived = bool(self._queue)
            waiters: list[threading.Event] = []
            offered = time.perf_counter()
            while self._queue:
                if time.perf_counter() - offered > _YIELD_EVERY_S:
                    yield_gil()  # the training thread's next call must not wait a switch interval
                    offered = time.perf_counter()
                item = self._queue.popleft()
                kind = item[0]
                if kind == _FLUSH:
                    waiters.append(item[1])
                elif kind == _STOP:
                    stopping = True
                else:
                    try:
                        (self._accept_step if kind == _STEP else self._accept_samples)(*item[1:])
                    except Exception as exc:  # the writer thread must outlive any record
                        self._bad_record("step" if kind == _STEP else "samples", item[1], [f"{type(exc).__name__}: {safe_str(exc)}"])
                if len(self._pending_steps) >= self._steps_per_flush:
                    self._persist()
            due = time.monotonic() - self._last_flush >= self._flush_interval_s
            if waiters or stopping or due:
                self._persist()
            if stopping:
                self._last_tries()
            for done in waiters:
                done.set()

    def _idle_timeout(self) -> float:
        """Seconds the idle writer may sleep: until pending rows are due to be written, else
        a flush interval (nothing is pending, so nothing is due)."""
        if not (self._pending_steps or self._pending_samples):
            return self._flush_interval_s
        return max(0.0, self._last_flush + self._flush_interval_s - time.monotonic())

    def _last_tries(self) -> None:
        """At close: retry a failed write a few times, then count what is still pending as dropped.

        Nothing may disappear without entering `dropped` and an event: rows still pending when
        close gives up are counted here, before the recorder_close event reports the total.
        """
        for _ in range(_CLOSE_RETRIES):
            if not (self._pending_steps or self._pending_samples):
                return
            time.sleep(_CLOSE_RETRY_S)
            self._persist()
        lost = len(self._pending_steps) + len(self._pending_samples)
        if lost:
            self._pending_steps, self._pending_samples = [], []
            self._dropped += lost
            self._reported_drops = self._dropped
            self._write_event("recorder_drops", None, f"{lost} records dropped: writes still failing at close", {
                "total": self._dropped, "cause": "close", "last_write_error": self.last_write_error,
            })

    def _accept_step(self, step: Any, metrics: dict[str, Any], wall_time: float) -> None:
        if step is _MISSING:
            if "step" not in metrics:
                self._bad_record("step", None, ["step: missing (log_step(step, **metrics))"])
                return
            step = metrics.pop("step")  # log_step(step=5, ...): the step given by name
        try:
            row, problems = step_row(step, metrics, wall_time)
        except Exception as exc:  # a metrics object so odd that even inspecting it fails
            row, problems = None, [f"{type(exc).__name__}: {exc}"]
        if problems:
            self._bad_record("step", step, problems)
        if row is not None:
            self._pending_steps.append(row)

    def _accept_samples(self, step: Any, samples: Any, do_select: Any, misplaced: dict[str, Any]) -> None:
        # log_samples(step=5, samples=[...]): the arguments given by name
        step = misplaced.pop("step", None) if step is _MISSING else step
        samples = misplaced.pop("samples", None) if samples is _MISSING else samples
        try:
            if misplaced:
                self._bad_record("samples", step, [f"{safe_str(k)[:60]}: not an argument of log_samples" for k in misplaced])
            step = to_int(step)
            samples = list(samples)
            picks = select(samples, self.sampling, self._rng) if bool(do_select) else [(i, "all") for i in range(len(samples))]
        except Exception as exc:
            self._bad_record("samples", step, [f"{type(exc).__name__}: {safe_str(exc)}"])
            return
        problems: list[str] = []
        for index, reason in picks:
            row, row_problems = sample_row(samples[index], step, self.rank)
            problems += row_problems
            if row is None:
                continue
            row.setdefault("sample_id", f"{step}-{self.rank}-{self._samples_logged + index}")
            row["capture_reason"] = reason
            self._pending_samples.append(row)
        self._samples_logged += len(samples)
        if problems:
            self._bad_record("samples", step, problems)

    def _bad_record(self, what: str, step: Any, problems: list[str]) -> None:
        """Report bad values; a field that is bad every step is reported a few times, then counted."""
        fresh = []
        for problem in problems:
            key = (what, problem.split(":", 1)[0])
            seen = self._bad_seen.get(key, 0)
            self._bad_seen[key] = seen + 1
            if seen < _BAD_REPORTS_PER_FIELD:
                fresh.append(problem)
            else:
                self._bad_suppressed[key] = self._bad_suppressed.get(key, 0) + 1
        if fresh:
            step_int = step if isinstance(step, int) and not isinstance(step, bool) else None
            self._write_event("bad_record", step_int, f"{what}: " + "; ".join(fresh[:10]), {"problems": fresh[:50]})

    def _report_suppressed(self) -> None:
        if self._bad_suppressed:
            counts = {f"{what}.{field}": n for (what, field), n in sorted(self._bad_suppressed.items())}
            self._write_event("bad_record", None, f"{sum(counts.values())} more bad values (repeats not reported one by one)", {"repeats": counts})
            self._bad_suppressed = {}

    def _persist(self) -> None:
        """Write pending steps and samples; on failure keep them (bounded) for the next try."""
        self._last_flush = time.monotonic()
        if self._dropped > self._reported_drops:
            self._write_event("recorder_drops", None, f"{self._dropped - self._reported_drops} records dropped: queue full", {"total": self._dropped})
            self._reported_drops = self._dropped
        self._report_suppressed()
        ok = True
        if self._pending_steps:
            ok &= self._try_write(self._writer.write_steps, "_pending_steps")
        if self._pending_samples:
            ok &= self._try_write(self._writer.write_samples, "_pending_samples")
        for what, step, reason in self._writer.take_rejected():
            self._bad_record(what, step, [f"row left out: {reason}"])
        if ok:
            self.last_write_error = None
            if self._trouble_since is not None:
                self._say(f"writes work again after {self.write_failures - self._trouble_since} failed attempts "
                          f"({self._dropped} records dropped in all)")
                self._trouble_since = None

    def _trouble(self) -> None:
        """One stderr line when writes start failing (a full disk is otherwise silent)."""
        if self._trouble_since is None:
            self._trouble_since = self.write_failures - 1
            self._say(f"writes are failing ({self.last_write_error}); training goes on, and up to queue_size "
                      "rows of each kind are kept and retried at every flush")

    def _say(self, text: str) -> None:
        try:
            sys.stderr.write(f"rlprobe: recording {self.run_dir}: {text}\n")
            sys.stderr.flush()
        except Exception:
            pass  # a closed or broken stderr is not the recorder's to fix

    def _try_write(self, write: Any, attr: str) -> bool:
        rows = getattr(self, attr)
        try:
            write(rows)
        except Exception as exc:  # ENOSPC, EIO, a permissions change: training must go on
            if isinstance(exc, PartialWrite):
                del rows[: exc.written]  # already on disk: retrying them would duplicate
            self.write_failures += 1
            self.last_write_error = f"{type(exc).__name__}: {exc}"
            self._trouble()
            self._write_event("write_failed", None, self.last_write_error or "", {"rows_pending": len(rows)})
            overflow = len(rows) - self._queue_size
            if overflow > 0:  # a disk that stays full must not grow memory without bound
                del rows[:overflow]
                self._dropped += overflow
                self._write_event("recorder_drops", None, f"{overflow} records dropped: writes keep failing", {"total": self._dropped, "cause": "write_failed"})
                self._reported_drops = self._dropped
            return False
        setattr(self, attr, [])
        return True
