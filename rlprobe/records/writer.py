"""The inference-records writer: group and disposition rows appended by a background thread.

Recording must never change or slow what it records, so ``record_group`` and
``record_disposition`` only put a row on a bounded queue (4,096 rows) and return; a full queue
drops the row and counts it. The checkpoint lineage and the protocol are read once, at
startup; if that fails, or the store cannot be opened, one error is logged and nothing further
is recorded. ``close()`` flushes the queue for at most 30 seconds.
"""

from __future__ import annotations

import atexit
import hashlib
import itertools
import json
import logging
import math
import os
import queue
import secrets
import threading
import time
import weakref
from pathlib import Path
from typing import Any, Mapping

from rlprobe.records.identity import canonical_json, lineage_of, protocol_digest

log = logging.getLogger("rlprobe.records")

QUEUE_SIZE = 4096
SHUTDOWN_TIMEOUT_S = 30.0
RESPONSE_POLICIES = ("off", "all", "sample")
_POLL_S = 0.05


class _Stop:
    """Sentinel that tells the writer thread the queue is closed."""


def _run_id() -> str:
    # an id from the environment is not the user's to fix: made a safe folder name part
    found = os.environ.get("BEAKER_WORKLOAD_ID") or ""
    safe = "".join(ch if ch.isalnum() or ch in "-_." else "_" for ch in found).strip(".")
    return safe or secrets.token_hex(6)


def _folder_part(value: str, what: str) -> str:
    """value if it can be (part of) one folder name below the store: no separator, no '.' or
    '..', no control character. Anything else could put the run outside the records root."""
    if (not isinstance(value, str) or not value or value in (".", "..") or "/" in value or "\\" in value
            or any(ord(ch) < 32 for ch in value)):
        raise ValueError(f"{what} must be a plain name (no '/', '\\', '.', '..' or control characters), not {value!r}")
    return value


def _finite(value: Any) -> Any:
    """value with every non-finite float replaced by None, containers copied."""
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, Mapping):
        return {k: _finite(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_finite(v) for v in value]
    return value


def text_sampled(observation_id: str, rate: float) -> bool:
    """Whether a group's response text is kept under responses = "sample": a fixed function of
    its observation_id, so the choice is reproducible and takes whole groups."""
    digest = hashlib.sha256(observation_id.encode("utf-8")).digest()
    return int.from_bytes(digest[:8], "big") / 2**64 < rate


class RecordsWriter:
    """Writes ``<root>/<lineage>/<run name>-<run id>/manifest-<attempt>.json`` and
    ``records-<attempt>.jsonl`` from a bounded queue on a background thread.

    Example:
        writer = RecordsWriter("/data/records", run_name="grpo-math", checkpoint="models/base",
                               protocol=build_protocol({"temperature": 1.0}), rollout_seed=1)
        oid = writer.record_group(row)            # never blocks; None if dropped
        writer.record_disposition(oid, "consumed", staleness=0)
        writer.close()                            # flushes for at most 30 s
    """

    def __init__(
        self,
        root: str | os.PathLike[str],
        *,
        run_name: str,
        checkpoint: str | os.PathLike[str],
        protocol: Mapping[str, Any],
        run_id: str | None = None,
        start_rollout_id: int = 0,
        fresh: bool = True,
        rollout_seed: int | None = None,
        deterministic_inference: bool | None = None,
        selection_sha256: str | None = None,
        prompt_data: str | None = None,
        responses: str = "off",
        response_sample_rate: float | None = None,
        queue_size: int = QUEUE_SIZE,
        shutdown_timeout_s: float = SHUTDOWN_TIMEOUT_S,
        source: str = "train",
    ) -> None:
        if responses not in RESPONSE_POLICIES:
            raise ValueError(f"responses must be one of {RESPONSE_POLICIES}, not {responses!r}")
        if (responses == "sample") != (response_sample_rate is not None):
            raise ValueError("response_sample_rate is required with, and only with, responses='sample'")
        if response_sample_rate is not None and not 0 < response_sample_rate <= 1:
            raise ValueError("response_sample_rate must be in (0, 1]")
        self.responses = responses
        self.response_sample_rate = response_sample_rate
        self.shutdown_timeout_s = shutdown_timeout_s
        self.run_name = _folder_part(run_name, "run_name")
        self.run_id = _folder_part(run_id, "run_id") if run_id is not None else _run_id()
        self.attempt = secrets.token_hex(6)
        self.queued = 0
        self.written = 0
        self.dropped = 0
        self.failed = 0
        self.enabled = False
        self.manifest: dict[str, Any] = {}
        self.run_dir: Path | None = None
        self.records_path: Path | None = None
        self._ids = itertools.count()
        self._lock = threading.Lock()
        self._queue: queue.Queue[Any] = queue.Queue(maxsize=queue_size)
        self._closed = threading.Event()
        self._thread: threading.Thread | None = None
        self._fh: Any = None
        try:
            lineage, basis = lineage_of(checkpoint)
            protocol = dict(protocol)
            if deterministic_inference is None:
                deterministic_inference = bool(protocol.get("sglang_enable_deterministic_inference", False))
            self.run_dir = Path(root) / _folder_part(lineage, "the checkpoint lineage") / f"{run_name}-{self.run_id}"
            self.run_dir.mkdir(parents=True, exist_ok=True)
            self.manifest = {
                "source": source,
                "run": {"name": run_name, "id": self.run_id, "attempt": self.attempt,
                        "start_rollout_id": int(start_rollout_id), "checkpoint": str(checkpoint),
                        "fresh": bool(fresh)},
                "lineage": lineage,
                "basis": basis,
                "weights_hashed": False,
                "protocol": protocol,
                "protocol_digest": protocol_digest(protocol),
                "rollout_seed": rollout_seed,
                "deterministic_inference": bool(deterministic_inference),
                "selection_sha256": selection_sha256,
                "prompt_data": prompt_data,
                "writer": {"queue_size": queue_size, "responses": responses,
                           "response_sample_rate": response_sample_rate,
                           "shutdown_timeout_s": shutdown_timeout_s},
                "created_at": time.time(),
            }
            manifest_path = self.run_dir / f"manifest-{self.attempt}.json"
            tmp = self.run_dir / f".manifest-{self.attempt}.json.tmp"
            tmp.write_text(json.dumps(self.manifest, indent=2, sort_keys=True) + "\n", encoding="utf-8")
            os.replace(tmp, manifest_path)
            self.records_path = self.run_dir / f"records-{self.attempt}.jsonl"
            self._fh = open(self.records_path, "a", encoding="utf-8")
        except Exception as exc:  # recording must never stop training: say so once, then stay off
            log.error("inference records are off for this process: %s: %s", type(exc).__name__, exc)
            return
        self.enabled = True
        self._thread = threading.Thread(target=self._run, name="rlprobe-records", daemon=True)
        self._thread.start()
        ref = weakref.ref(self)
        atexit.register(lambda: (w := ref()) is not None and w.close())

    @property
    def lineage(self) -> str | None:
        """The lineage this process records under (None when recording is off)."""
        return self.manifest.get("lineage")

    @property
    def pending(self) -> int:
        """Rows accepted but not yet written or failed."""
        return self.queued - self.written - self.failed

    def counters(self) -> dict[str, int]:
        """queued, written, dropped, failed and pending row counts."""
        return {"queued": self.queued, "written": self.written, "dropped": self.dropped,
                "failed": self.failed, "pending": self.pending}

    def metrics(self) -> dict[str, int]:
        """The counters under the metric names a trainer logs."""
        c = self.counters()
        return {"rollout/records/queued_total": c["queued"], "rollout/records/written_total": c["written"],
                "rollout/records/dropped_total": c["dropped"], "rollout/records/failed_total": c["failed"],
                "rollout/records/pending": c["pending"]}

    def new_observation_id(self) -> str:
        """An observation_id unique in the store: this attempt's id and a sequence number."""
        return f"{self.attempt}-{next(self._ids)}"

    def record_group(self, row: Mapping[str, Any]) -> str | None:
        """Queue one scored group; returns its observation_id, or None if it was not queued.

        The response text policy is applied here: off removes every response's text, sample
        keeps whole groups chosen by observation_id, all keeps what the row holds.
        """
        if not self.enabled or self._closed.is_set():
            return None
        out = dict(row)
        out["kind"] = "group"
        oid = str(out.get("observation_id") or self.new_observation_id())
        out["observation_id"] = oid
        keep = self.responses == "all" or (
            self.responses == "sample" and text_sampled(oid, self.response_sample_rate or 0.0))
        responses = []
        for response in out.get("responses") or []:
            response = dict(response)
            if not keep:
                response.pop("response", None)
            responses.append(response)
        out["responses"] = responses
        out["responses_included"] = bool(keep and any("response" in r for r in responses))
        return oid if self._put(out) else None

    def record_disposition(self, observation_id: str, disposition: str, staleness: int | None = None) -> bool:
        """Queue how a passed group left the completed queue: consumed or expired, with its staleness."""
        if disposition not in ("consumed", "expired"):
            raise ValueError(f"disposition must be 'consumed' or 'expired', not {disposition!r}")
        if not self.enabled or self._closed.is_set():
            return False
        return self._put({"kind": "disposition", "observation_id": observation_id,
                          "disposition": disposition, "staleness": staleness})

    def _put(self, row: dict[str, Any]) -> bool:
        try:
            self._queue.put_nowait(row)
        except queue.Full:
            with self._lock:
                self.dropped += 1
            return False
        with self._lock:
            self.queued += 1
        return True

    def _run(self) -> None:
        while True:
            try:
                row = self._queue.get(timeout=_POLL_S)
            except queue.Empty:
                if self._closed.is_set():
                    break
                continue
            self._write(row)
            if self._queue.empty():
                self._flush_file()
        self._flush_file()

    def _write(self, row: Mapping[str, Any]) -> None:
        try:
            try:
                line = canonical_json(row)
            except ValueError:  # NaN or inf somewhere: JSON has neither, so they become null
                line = canonical_json(_finite(row))
            self._write_line(line)
        except Exception as exc:
            with self._lock:
                self.failed += 1
            if self.failed == 1:
                log.error("an inference record could not be written: %s: %s", type(exc).__name__, exc)
            return
        with self._lock:
            self.written += 1

    def _write_line(self, line: str) -> None:
        # one write call per line, so a killed process leaves at most one torn final line
        self._fh.write(line + "\n")

    def _flush_file(self) -> None:
        try:
            if self._fh is not None:
                self._fh.flush()
        except Exception as exc:
            log.error("inference records could not be flushed: %s", exc)

    def flush(self, timeout_s: float | None = None) -> bool:
        """Wait until the queue is written (at most timeout_s); True if nothing is pending."""
        deadline = time.monotonic() + (self.shutdown_timeout_s if timeout_s is None else timeout_s)
        while self.pending > 0 and time.monotonic() < deadline and self._thread is not None and self._thread.is_alive():
            time.sleep(0.005)
        return self.pending == 0

    def close(self, timeout_s: float | None = None) -> dict[str, int]:
        """Stop accepting rows, flush the queue for at most timeout_s (default 30 s), and close.

        Rows still queued at the deadline stay counted as pending: the thread is a daemon and
        is abandoned rather than allowed to hold up the process's exit.
        """
        if self._thread is None:
            return self.counters()
        timeout = self.shutdown_timeout_s if timeout_s is None else timeout_s
        self._closed.set()
        self._thread.join(timeout)
        if not self._thread.is_alive() and self._fh is not None:
            self._fh.close()
            self._fh = None
        if self.pending:
            log.error("inference records: %d rows were still queued after %.1f s and are lost", self.pending, timeout)
        return self.counters()

    def __enter__(self) -> "RecordsWriter":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()
