"""The doctor behind the dashboard: every run diagnosed in the background, again when it grows.

One thread works through the runs whose files changed since their last diagnosis (a run's
fingerprint: steps, last step, last write, status, events), the runs a page is looking at first,
then live runs, then the most recently written, and hands each to the doctor's own process. A
live run is followed by a RunWatcher (the same as `rlprobe watch`: each look reads only the files
that are new), a closed or crashed one is diagnosed once with diagnose_path. A run the doctor
cannot read gets its error, never the thread's end. Only rlprobe.doctor's public API is used.
"""

from __future__ import annotations

import os
import threading
import time
from collections import OrderedDict
from dataclasses import dataclass, field
from typing import Any, Iterable

from rlprobe.ui.catalog import Catalog, fingerprint

MAX_WATCHERS = 16  # live runs followed incrementally; more are diagnosed from scratch (bounded memory)
WANTED_FOR_S = 30.0  # a run a page asked about stays first in line this long


@dataclass
class RunFindings:
    """What the doctor said about one run, and about which version of its files."""

    state: str = "pending"  # pending | ok | no steps | error
    version: str | None = None
    findings: list[dict[str, Any]] = field(default_factory=list)
    skipped: list[dict[str, str]] = field(default_factory=list)
    error: str | None = None
    diagnosed_at: float | None = None  # Unix seconds
    seconds: float | None = None  # how long the diagnosis took

    def summary(self) -> dict[str, Any]:
        """The runs table's cell: state, count, worst finding."""
        worst = self.findings[0] if self.findings else None
        return {"state": self.state, "count": len(self.findings), "error": self.error, "version": self.version,
                "worst": None if worst is None else {k: worst[k] for k in ("signature_id", "severity", "first_step", "confidence")},
                "signatures": sorted({f["signature_id"] for f in self.findings})}

    def as_dict(self) -> dict[str, Any]:
        """Everything, for a run page and the charts."""
        return {"state": self.state, "version": self.version, "findings": self.findings, "skipped": self.skipped,
                "error": self.error, "diagnosed_at": self.diagnosed_at, "seconds": self.seconds}


def _evidence_text(value: Any) -> str:
    import json

    if isinstance(value, float):
        return f"{value:.4g}"
    if isinstance(value, (dict, list)):
        return json.dumps(value, default=str)[:200]
    return str(value)


def finding_dict(i: int, finding: Any) -> dict[str, Any]:
    """A Finding as the page draws it, with the metrics it is about (to pick the charts it is shaded on)."""
    from rlprobe.report.data import SIGNATURE_SERIES

    metrics: list[str] = []
    metric = finding.evidence.get("metric")
    if isinstance(metric, str):
        metrics.append(metric)
    metrics += [m for m in SIGNATURE_SERIES.get(finding.signature_id, ()) if m not in metrics]
    return {
        "i": i, "signature_id": finding.signature_id, "severity": finding.severity, "confidence": finding.confidence,
        "first_step": finding.first_step, "last_step": finding.last_step, "explanation": finding.explanation,
        "evidence": [[k, _evidence_text(v)] for k, v in finding.evidence.items()],
        "evidence_keys": list(finding.evidence), "metrics": metrics,
        "actions": list(finding.suggested_actions), "samples": list(finding.links_to_samples),
    }


# -- the doctor's process ---------------------------------------------------------------------
# Diagnoses run in one child process: the detectors are Python and would hold the server's GIL
# for seconds; in a process of their own, at a somewhat lower priority, they take the CPU the server
# does not need and chart requests stay fast while a root is diagnosed. The process keeps a RunWatcher
# per live run between calls (module state below lives in the child only).
_WATCHERS: OrderedDict[str, Any] = OrderedDict()


DOCTOR_NICENESS = 5  # below the server, not so far below that a busy machine starves it


def _worker_started() -> None:
    try:
        os.nice(DOCTOR_NICENESS)
    except OSError:
        pass  # not allowed here: same priority as the server, still off its GIL


def diagnose_row(row: dict[str, Any], config_path: str | None) -> RunFindings:
    """What the doctor says about one runs-table row, now (runs in the doctor's process).

    A live run is read through its RunWatcher (only the files new since the last call); a closed
    or crashed one with diagnose_path. Errors become the result's error, never an exception.
    """
    from rlprobe.errors import NoStepsYet, RlprobeError

    t0 = time.perf_counter()
    result = RunFindings(version=fingerprint(row))
    try:
        diagnosis = _run_doctor(row, config_path) if row.get("steps_recorded") else None
        if diagnosis is None:
            result.state = "no steps"
        else:
            result.state = "ok"
            result.findings = [finding_dict(i, f) for i, f in enumerate(diagnosis.findings)]
            result.skipped = [{"signature_id": s.signature_id, "reason": s.reason} for s in diagnosis.skipped]
    except NoStepsYet:
        result.state = "no steps"
    except RlprobeError as exc:
        result.state, result.error = "error", str(exc)
    except Exception as exc:  # a doctor bug on one run must not stop the others' diagnoses
        result.state, result.error = "error", f"{type(exc).__name__}: {exc}"
    result.diagnosed_at = time.time()
    result.seconds = round(time.perf_counter() - t0, 3)
    return result


def _run_doctor(row: dict[str, Any], config_path: str | None) -> Any:
    from rlprobe.doctor import RunWatcher, diagnose_path

    run_id, run_dir = row["run_id"], row["run_dir"]
    if row.get("status") != "live":
        watcher = _WATCHERS.pop(run_id, None)
        if watcher is not None:
            watcher.close()
        return diagnose_path(run_dir, config_path=config_path)[0]
    watcher = _WATCHERS.pop(run_id, None)
    if watcher is None:
        watcher = RunWatcher(run_dir, config_path=config_path)
    _WATCHERS[run_id] = watcher  # most recently used last
    while len(_WATCHERS) > MAX_WATCHERS:
        _, oldest = _WATCHERS.popitem(last=False)
        oldest.close()
    diagnosis = watcher.diagnose()
    if diagnosis is None and watcher.last_error:
        from rlprobe.errors import QueryError

        raise QueryError(watcher.last_error)
    return diagnosis


class Doctor:
    """Diagnoses the catalog's runs, one at a time, in a child process (see the module docstring)."""

    def __init__(self, catalog: Catalog, config_path: str | os.PathLike[str] | None = None, poll_s: float = 2.0) -> None:
        self.catalog = catalog
        self.config_path = None if config_path is None else str(config_path)
        self.poll_s = poll_s
        self.diagnoses = 0
        self._results: dict[str, RunFindings] = {}
        self._wanted: dict[str, float] = {}
        self._lock = threading.Lock()
        self._wake = threading.Event()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._pool: Any = None

    # -- what pages call --------------------------------------------------------------------
    def get(self, run_id: str) -> RunFindings:
        """The latest findings of a run (state 'pending' before its first diagnosis)."""
        with self._lock:
            return self._results.get(run_id) or RunFindings()

    def want(self, run_ids: Iterable[str]) -> None:
        """Put these runs first in line (a page is showing them)."""
        now = time.monotonic()
        with self._lock:
            for run_id in run_ids:
                self._wanted[run_id] = now
        self._wake.set()

    def start(self) -> None:
        """Start the background thread (once); it starts the doctor's process on first need."""
        if self._thread is None:
            self._thread = threading.Thread(target=self._loop, name="rlprobe-ui-doctor", daemon=True)
            self._thread.start()

    def stop(self, timeout_s: float = 10.0) -> None:
        """Stop the thread and the doctor's process."""
        self._stop.set()
        self._wake.set()
        if self._thread is not None:
            self._thread.join(timeout_s)
        if self._pool is not None:
            self._pool.shutdown(wait=True, cancel_futures=True)
            self._pool = None

    def drain(self) -> int:
        """Diagnose every run that needs it, now, waiting for each (tests, benchmarks); how many were."""
        done = 0
        while (row := self._next()) is not None:
            self._diagnose(row)
            done += 1
        return done

    # -- the thread -------------------------------------------------------------------------
    def _loop(self) -> None:
        while not self._stop.is_set():
            try:
                row = self._next()
            except Exception:  # listing the runs failed (the root vanished?): try again later
                row = None
            if row is None:
                self._wake.wait(self.poll_s)
                self._wake.clear()
                continue
            self._diagnose(row)

    def _next(self) -> dict[str, Any] | None:
        listing = self.catalog.runs()
        now = time.monotonic()
        with self._lock:
            wanted = {k for k, t in self._wanted.items() if now - t < WANTED_FOR_S}
            self._wanted = {k: self._wanted[k] for k in wanted}
            todo = [r for r in listing.rows
                    if r.get("status") != "broken" and (self._results.get(r["run_id"]) or RunFindings()).version != fingerprint(r)]
        if not todo:
            return None
        todo.sort(key=lambda r: (r["run_id"] not in wanted, r.get("status") != "live", -(r.get("last_write_at") or 0.0)))
        return todo[0]

    def _diagnose(self, row: dict[str, Any]) -> None:
        from concurrent.futures import ProcessPoolExecutor
        from concurrent.futures.process import BrokenProcessPool
        from multiprocessing import get_context

        with self._lock:
            if self._pool is None:
                # spawn, not fork: this process runs threads (the server's, DuckDB's)
                self._pool = ProcessPoolExecutor(max_workers=1, mp_context=get_context("spawn"), initializer=_worker_started)
            pool = self._pool
        try:
            result = pool.submit(diagnose_row, dict(row), self.config_path).result()
        except BrokenProcessPool as exc:  # the process died (out of memory, a crash in a library)
            with self._lock:
                self._pool = None
            result = RunFindings(version=fingerprint(row), state="error", error=f"the doctor's process died: {exc}",
                                 diagnosed_at=time.time())
        with self._lock:
            self._results[row["run_id"]] = result
            self.diagnoses += 1
