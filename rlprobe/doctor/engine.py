"""Run the catalog over recordings: one SQL pass for the features, then each detector decides."""

from __future__ import annotations

import os
import re
from typing import Any, Callable, Iterable, Mapping

import duckdb
import numpy as np
import pyarrow as pa

from rlprobe.doctor.config import DoctorConfig, load_config
from rlprobe.doctor.context import FEATURE_COLUMNS, DetectorContext, MetricFeatures
from rlprobe.doctor.custom import run_custom_detectors
from rlprobe.doctor.findings import Diagnosis, Finding, Skipped, rank
from rlprobe.doctor.registry import all_detectors
from rlprobe.errors import NotARecording
from rlprobe.schemas import SAMPLE_COLUMN_TYPES, STEP_COLUMN_TYPES
from rlprobe.store import sqlfiles
from rlprobe.store.engine import new_connection, open_store, run

_FEATURES_SQL = "SELECT run_id, metric, {cols} FROM v1.doctor_features ORDER BY run_id, metric, i".format(
    cols=", ".join(FEATURE_COLUMNS)
)


def _split(table: pa.Table, key: str) -> dict[str, pa.Table]:
    """Consecutive row groups of a table sorted by key, as {key value: sub-table}."""
    if table.num_rows == 0:
        return {}
    keys = table.column(key).to_numpy(zero_copy_only=False)
    edges = np.flatnonzero(keys[1:] != keys[:-1]) + 1
    starts = np.concatenate([[0], edges])
    ends = np.concatenate([edges, [len(keys)]])
    return {str(keys[a]): table.slice(a, b - a) for a, b in zip(starts, ends)}


def _raw_loader(con: duckdb.DuckDBPyConnection, run_id: str) -> Callable[[], dict[str, np.ndarray]]:
    def load() -> dict[str, np.ndarray]:
        table = run(con, "SELECT * EXCLUDE (run_id) FROM v1.steps WHERE run_id = ? ORDER BY step", [run_id])
        out: dict[str, np.ndarray] = {}
        for name in table.column_names:
            col = table.column(name)
            if col.null_count == len(col):
                continue
            if pa.types.is_floating(col.type) or pa.types.is_integer(col.type):
                out[name] = col.to_numpy(zero_copy_only=False).astype(np.float64)
            else:
                out[name] = np.array(col.to_pylist(), dtype=object)
        return out

    return load


def _diagnose_connection(
    con: duckdb.DuckDBPyConnection,
    runs: list[dict[str, Any]],
    cfg: DoctorConfig,
    session: "_RootSession | None" = None,
) -> list[Diagnosis]:
    features_by_run = _split(run(con, _FEATURES_SQL), "run_id") if session is None else {}
    detectors = all_detectors()
    out = []

    def query(sql: str, params: list[Any]) -> pa.Table:
        if session is not None:
            session.cache_features_of(sql)
        return run(con, sql, params)

    for info in runs:
        run_id = info["run_id"]
        if session is not None:
            session.focus(run_id)
            features_by_run = session.features_by_run
        per_metric = {
            metric: MetricFeatures.from_table(metric, rows)
            for metric, rows in _split(features_by_run.get(run_id, pa.table({"metric": pa.array([], pa.string())})), "metric").items()
        }
        ctx = DetectorContext(run_id, per_metric, query, _raw_loader(con, run_id), int(info["steps"]), info.get("last_step"))
        diagnosis = Diagnosis(run_id=run_id, run_dir=info.get("run_dir"), steps=int(info["steps"]), last_step=info.get("last_step"))
        findings: list[Finding] = []
        for det_id, det in detectors.items():
            if det_id in cfg.disabled:
                diagnosis.skipped.append(Skipped(signature_id=det_id, reason="disabled in the doctor config"))
                continue
            reason = det.skip_reason(ctx)
            if reason is not None:
                diagnosis.skipped.append(Skipped(signature_id=det_id, reason=reason))
                continue
            try:
                finding = det.detect(ctx, cfg.for_detector(det_id, det.params))
            except Exception as exc:  # one broken detector must not hide the others' findings
                diagnosis.skipped.append(Skipped(signature_id=det_id, reason=f"detector error: {type(exc).__name__}: {exc}"))
                continue
            if finding is not None:
                findings.append(finding.model_copy(update={"run_id": run_id}))
        if cfg.custom_dir is not None:
            found, skipped = run_custom_detectors(cfg.custom_dir, query, run_id)
            findings += found
            diagnosis.skipped += skipped
        diagnosis.findings = rank(findings)
        out.append(diagnosis)
    return out


def _runs_of(con: duckdb.DuckDBPyConnection) -> list[dict[str, Any]]:
    table = run(
        con,
        "SELECT run_id, run_dir, steps_recorded AS steps, last_step FROM v1.runs "
        "WHERE steps_recorded > 0 ORDER BY run_dir",
    )
    return table.to_pylist()


def _create_features(con: duckdb.DuckDBPyConnection) -> None:
    """Create the doctor's feature views (sql/v*/detectors/) over v1.steps and v1.samples."""
    for f in sqlfiles.load(max(sqlfiles.versions())):
        if f.kind == "feature":
            run(con, f.sql, fetch="none")


_ORDER = {"steps": "run_id, step", "samples": "run_id"}


def _materialize(con: duckdb.DuckDBPyConnection) -> None:
    """Read the steps and samples once (detectors query them many times), sorted by run so a
    per-run filter skips other runs' row groups, then build the feature views over the copies."""
    for view, order in _ORDER.items():
        run(con, f"CREATE OR REPLACE TEMP TABLE doctor_{view} AS SELECT * FROM v1.{view} ORDER BY {order}", fetch="none")
        run(con, f"CREATE OR REPLACE VIEW v1.{view} AS SELECT * FROM doctor_{view}", fetch="none")
    _create_features(con)


def _restore_recorded_views(con: duckdb.DuckDBPyConnection) -> None:
    """Point v1.steps and v1.samples at the recording again (sql/v*/views), not at a copy."""
    for f in sqlfiles.load(max(sqlfiles.versions())):
        if f.kind == "view" and f.name in _ORDER:
            run(con, f.sql, fetch="none")


# Runs whose steps add up to about this many are diagnosed together: one feature pass, one pass
# per feat_* view. It bounds the memory of the window passes on a root of thousands of runs.
_CHUNK_STEPS = 1_000_000
_IN_CHUNK = "list_contains(getvariable('rlprobe_doctor_runs'), run_id)"
_IN_RUN = "run_id = getvariable('rlprobe_doctor_run')"


class _RootSession:
    """Diagnosing many runs over one connection.

    Runs are taken in chunks of about _CHUNK_STEPS steps. For a chunk the features pass runs
    once over all its runs; then v1.steps and v1.samples are narrowed to the run being
    diagnosed, so a detector's follow-up query costs one run, not the root; and a `feat_*` view
    is computed for the whole chunk the first time a detector asks for it (one pass), then
    served from that table filtered by run.
    """

    _FEAT = re.compile(r"\bv1\.(feat_\w+)")

    def __init__(self, con: duckdb.DuckDBPyConnection, runs: list[dict[str, Any]], chunk_steps: int | None = None) -> None:
        self.con = con
        chunk_steps = chunk_steps or _CHUNK_STEPS
        self.chunk_of: dict[str, int] = {}
        self.chunks: list[list[str]] = []
        self.chunk_dirs: list[list[str]] = []
        size = 0
        for info in runs:
            if not self.chunks or size + int(info["steps"]) > chunk_steps and self.chunks[-1]:
                self.chunks.append([])
                self.chunk_dirs.append([])
                size = 0
            if info["run_id"] not in self.chunk_of:
                self.chunks[-1].append(info["run_id"])
                self.chunk_of[info["run_id"]] = len(self.chunks) - 1
            # a run_id in two folders is read from both, in the chunk it first came in
            self.chunk_dirs[self.chunk_of[info["run_id"]]].append(info["run_dir"])
            size += int(info["steps"])
        self.current: int | None = None
        self.features_by_run: dict[str, pa.Table] = {}
        self.cached: set[str] = set()

    def _point(self, views: Iterable[str], table_prefix: str, where: str) -> None:
        for view in views:
            run(self.con, f"CREATE OR REPLACE VIEW v1.{view} AS SELECT * FROM {table_prefix}{view} WHERE {where}", fetch="none")

    def _load_chunk(self, index: int) -> None:
        for name in self.cached:
            run(self.con, f"DROP TABLE IF EXISTS doctor_cache_{name}", fetch="none")
        self.cached = set()
        self.current = index
        run(self.con, "SET VARIABLE rlprobe_doctor_runs = ?", [self.chunks[index]], fetch="none")
        # Only this chunk's runs are read (their folders alone are listed), and only they are
        # held in memory: a root of thousands of runs costs one chunk's memory, not the root's.
        _restore_recorded_views(self.con)
        run(self.con, "SET VARIABLE rlprobe_scope = ?::VARCHAR[]", [self.chunk_dirs[index]], fetch="none")
        try:
            for view, order in _ORDER.items():
                run(self.con, f"CREATE OR REPLACE TEMP TABLE doctor_{view} AS SELECT * FROM v1.{view} "
                              f"WHERE {_IN_CHUNK} ORDER BY {order}", fetch="none")
        finally:
            run(self.con, "RESET VARIABLE rlprobe_scope", fetch="none")
        self._point(("steps", "samples"), "doctor_", _IN_CHUNK)
        _create_features(self.con)
        self.features_by_run = _split(run(self.con, _FEATURES_SQL), "run_id")
        self._point(("steps", "samples"), "doctor_", _IN_RUN)

    def focus(self, run_id: str) -> None:
        """Point the narrowed views at one run (computing its chunk's features first if needed)."""
        if self.chunk_of[run_id] != self.current:
            self._load_chunk(self.chunk_of[run_id])
        run(self.con, "SET VARIABLE rlprobe_doctor_run = ?", [run_id], fetch="none")

    def cache_features_of(self, sql: str) -> None:
        """Compute (once, for every run of the chunk) the feat_* views a detector query reads."""
        names = [n for n in dict.fromkeys(self._FEAT.findall(sql)) if n not in self.cached]
        if not names:
            return
        # widen everything a feat_* view may read to the chunk for the one pass
        self._point(("steps", "samples"), "doctor_", _IN_CHUNK)
        for name in sorted(self.cached):
            run(self.con, f"CREATE OR REPLACE VIEW v1.{name} AS SELECT * FROM doctor_cache_{name}", fetch="none")
        try:
            for name in names:
                run(self.con, f"CREATE OR REPLACE TEMP TABLE doctor_cache_{name} AS SELECT * FROM v1.{name} ORDER BY run_id", fetch="none")
                self.cached.add(name)
        finally:
            self._point(("steps", "samples"), "doctor_", _IN_RUN)
            self._point(sorted(self.cached), "doctor_cache_", _IN_RUN)


def diagnose_path(path: str | os.PathLike[str], config_path: str | os.PathLike[str] | None = None, config: Mapping[str, Any] | None = None,
                  strict: bool = False) -> list[Diagnosis]:
    """Diagnose a run or every run below a root; runs without steps are left out.

    A root is read once and its features computed in one SQL pass per chunk of runs (about a
    million steps); each detector's follow-up queries then see only the run being diagnosed.
    A run of a root whose files cannot be read is left out with a BrokenRunWarning naming the
    file (rlprobe.store.health); strict=True raises instead.
    """
    cfg = load_config(config_path, config)
    store = open_store(path, strict=strict)

    def diagnose_all() -> list[Diagnosis]:
        _restore_recorded_views(store.con)  # a pass that met a broken run may have pointed them at copies
        runs = _runs_of(store.con)
        if not runs:
            raise NotARecording(f"{path} has no steps recorded yet: nothing to diagnose")
        if len(runs) == 1:
            _materialize(store.con)
            return _diagnose_connection(store.con, runs, cfg)
        return _diagnose_connection(store.con, runs, cfg, _RootSession(store.con, runs))

    return store.tolerate(diagnose_all)


def diagnose(run_dir: str | os.PathLike[str], config_path: str | os.PathLike[str] | None = None, config: Mapping[str, Any] | None = None) -> list[Finding]:
    """The full catalog over one recording: ranked findings."""
    diagnoses = diagnose_path(run_dir, config_path, config)
    if len(diagnoses) != 1:
        raise NotARecording(f"{run_dir} holds {len(diagnoses)} runs; diagnose one run, or use diagnose_path for a root")
    return diagnoses[0].findings


def in_memory_connection(steps: pa.Table, samples: pa.Table | None = None) -> duckdb.DuckDBPyConnection:
    """A connection whose v1.steps (and v1.samples) are the given tables, with the doctor's features."""
    con = new_connection()
    con.execute("CREATE SCHEMA v1")
    con.register("rlprobe_steps_input", steps)
    con.execute("CREATE VIEW v1.steps AS SELECT * FROM rlprobe_steps_input")
    if samples is None:
        samples = pa.table({"run_id": pa.array([], pa.string())})
    for name, sql_type in SAMPLE_COLUMN_TYPES.items():  # every column the samples view has on disk
        if name not in samples.column_names:
            arrow_type = {"BIGINT": pa.int64(), "DOUBLE": pa.float64(), "BOOLEAN": pa.bool_(), "BIGINT[]": pa.list_(pa.int64())}.get(sql_type, pa.string())
            samples = samples.append_column(name, pa.nulls(samples.num_rows, arrow_type))
    con.register("rlprobe_samples_input", samples)
    con.execute("CREATE VIEW v1.samples AS SELECT * FROM rlprobe_samples_input")
    _create_features(con)
    return con


def diagnose_tables(steps: pa.Table, samples: pa.Table | None = None, config: Mapping[str, Any] | None = None) -> list[Diagnosis]:
    """Diagnose runs held in memory: steps (and samples) tables with a run_id column.

    Columns follow the steps and samples views; known step columns that are missing are
    added as NULL, so a table with only the metrics a run logged is fine.
    """
    cfg = load_config(None, config)
    present = set(steps.column_names)
    n = steps.num_rows
    for name, sql_type in STEP_COLUMN_TYPES.items():
        if name not in present:
            arrow_type = pa.list_(pa.float64()) if sql_type == "DOUBLE[]" else pa.float64()
            steps = steps.append_column(name, pa.nulls(n, arrow_type))
    con = in_memory_connection(steps, samples)
    runs = run(
        con,
        "SELECT run_id, NULL AS run_dir, count(*) AS steps, max(step) AS last_step FROM v1.steps GROUP BY run_id ORDER BY run_id",
    ).to_pylist()
    return _diagnose_connection(con, runs, cfg)


def diagnose_view(view: Any, config: Mapping[str, Any] | None = None) -> list[Finding]:
    """The full catalog over an in-memory RunView (what live diagnosis uses)."""
    run_id = (view.manifest.run_id if view.manifest is not None else None) or "run"
    n = len(view.steps)
    columns: dict[str, pa.Array] = {"run_id": pa.array([run_id] * n, pa.string()), "step": pa.array(view.steps, pa.int64())}
    for name in view.names:
        series = view.series(name)
        if series.dtype == object:
            columns[name] = pa.array([None if v is None else list(v) for v in series], pa.list_(pa.float64()))
        else:
            columns[name] = pa.array(series, pa.float64(), from_pandas=False)
    samples = None
    try:
        samples = view.samples
    except Exception:  # an in-memory view may have no recording behind it
        samples = None
    if samples is not None and "run_id" in samples.column_names:
        samples = samples.set_column(samples.column_names.index("run_id"), "run_id", pa.array([run_id] * samples.num_rows, pa.string()))
    return diagnose_tables(pa.table(columns), samples, config)[0].findings
