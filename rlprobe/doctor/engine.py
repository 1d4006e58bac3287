"""Run the catalog over recordings: one SQL pass for the features, each detector decides, then
the one rule for symptoms (rlprobe.doctor.causes) and the ranking."""

from __future__ import annotations

import os
from typing import Any, Callable, Mapping

import duckdb
import pyarrow as pa

from rlprobe.doctor import session
from rlprobe.doctor.causes import apply_links
from rlprobe.doctor.config import DoctorConfig, load_config
from rlprobe.doctor.context import FEATURE_COLUMNS, DetectorContext, RawColumns, by_run, metric_features
from rlprobe.doctor.custom import run_custom_detectors
from rlprobe.doctor.findings import Diagnosis, Finding, Skipped, rank
from rlprobe.doctor.registry import all_detectors
from rlprobe.errors import NotARecording
from rlprobe.schemas import STEP_COLUMN_TYPES
from rlprobe.store.engine import Store, open_store, run
from rlprobe.store.sqlfiles import read_header

FEATURES_SQL = f"SELECT run_id, metric, {', '.join(FEATURE_COLUMNS)} FROM v1.doctor_features ORDER BY run_id, metric, i"


def _raw_loader(ask: Callable[[str, list[Any]], pa.Table], run_id: str) -> Callable[[], RawColumns]:
    """The run's step columns, read when a detector first wants them. Asked like a detector's
    statement: over a root, once for every run of the chunk (RootSession.ask), which costs one
    statement instead of one per run (each ~10 ms for a 5,000-step run)."""

    def load() -> RawColumns:
        return RawColumns(ask("SELECT * EXCLUDE (run_id) FROM v1.steps WHERE run_id = ? ORDER BY step", [run_id]))

    return load


def diagnose_connection(
    con: duckdb.DuckDBPyConnection,
    runs: list[dict[str, Any]],
    cfg: DoctorConfig,
    root: session.RootSession | None = None,
    progress: Callable[[str, int, int], None] | None = None,
    text: session.RunCopy | None = None,
) -> list[Diagnosis]:
    """Diagnose each run of `runs` over a connection whose views hold them (see rlprobe.doctor.session).

    Each detector runs once per run, causes before their symptoms; a detector that raises is
    listed as skipped with the error, never hiding the others' findings. Then every finding a
    declared cause explains is marked as its symptom, and the findings are ranked. progress,
    if given, is called as (label, runs done, runs in all) before each run. text, for a
    connection whose views read the doctor's copy of one run (session.materialize), gives a
    query that reads text the recording's samples and computes each feature view it reads once.
    """
    features_by_run = by_run(run(con, FEATURES_SQL)) if root is None else {}
    detectors = all_detectors()
    out = []

    def query(sql: str, params: list[Any]) -> pa.Table:
        if root is not None:
            with root.around(sql):
                return run(con, sql, params)
        if text is not None:
            with text.around(sql):
                return run(con, sql, params)
        return run(con, sql, params)

    # A built-in detector's statement about its run is asked once for a root's chunk where it
    # can be (RootSession.ask); a custom detector's SQL, the user's own, is asked as written.
    ask = root.ask if root is not None else query

    for done, info in enumerate(runs):
        run_id = info["run_id"]
        if progress is not None:
            progress(f"diagnosing {run_id}", done, len(runs))
        if root is not None:
            root.focus(run_id)
            features_by_run = root.features_by_run
        ctx = DetectorContext(run_id, metric_features(features_by_run.get(run_id)), ask, _raw_loader(ask, run_id),
                              int(info["steps"]), info.get("last_step"))
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
        findings = apply_links(findings, ctx.span_steps, ctx.stride)
        if cfg.custom_dir is not None:
            found, skipped = run_custom_detectors(cfg.custom_dir, query, run_id)
            findings += found
            diagnosis.skipped += skipped
        diagnosis.findings = rank(findings)
        out.append(diagnosis)
    return out


def _custom_sql(cfg: DoctorConfig) -> list[str]:
    """The SQL of each custom detector (what step columns they may read; their headers are
    checked when they run, as before)."""
    if cfg.custom_dir is None:
        return []
    out = []
    for path in sorted(cfg.custom_dir.glob("*.sql")):
        try:
            out.append(read_header(path)[1])
        except (OSError, UnicodeError):
            out.append("SELECT *")  # every column; the detector's own run says what is wrong with the file
    return out


def _runs_of(con: duckdb.DuckDBPyConnection) -> list[dict[str, Any]]:
    table = run(
        con,
        "SELECT run_id, run_dir, steps_recorded AS steps, last_step FROM v1.runs "
        "WHERE steps_recorded > 0 ORDER BY run_dir",
    )
    return table.to_pylist()


def diagnose_path(path: str | os.PathLike[str], config_path: str | os.PathLike[str] | None = None, config: Mapping[str, Any] | None = None,
                  strict: bool = False, progress: Callable[[str, int, int], None] | None = None) -> list[Diagnosis]:
    """Diagnose a run or every run below a root; runs without steps are left out.

    A root is read once and its features computed in one SQL pass per chunk of runs (about a
    quarter of a million steps); each detector's follow-up queries then see only the run being
    diagnosed, and those of a shape that allows it are asked once for the chunk, each run
    handed its rows (rlprobe.doctor.batch).
    A run of a root whose files cannot be read is left out with a BrokenRunWarning naming the
    file (rlprobe.store.health); strict=True raises instead. progress (label, runs done, runs in
    all) is called before each run, for a progress bar.
    """
    return diagnose_store(open_store(path, strict=strict), load_config(config_path, config), progress, shown_as=str(path))


def diagnose_store(store: Store, cfg: DoctorConfig, progress: Callable[[str, int, int], None] | None = None,
                   shown_as: str | None = None) -> list[Diagnosis]:
    """diagnose_path over a store already open. For one run, its v1.steps then stands for the
    doctor's sorted copy of it (the step columns of session.step_columns), so a caller reading
    the same run next (the report) does not read the files again, and v1.samples for the
    recording's samples (the doctor's copy of them has no text); session.point_at_recording
    points both back at the files. shown_as names the recording in errors (default: its path)."""

    def diagnose_all() -> list[Diagnosis]:
        session.point_at_recording(store.con)  # a pass that met a broken run may have pointed them at copies
        runs = _runs_of(store.con)
        if not runs:
            raise NotARecording(f"{shown_as or store.target.path} has no steps recorded yet: nothing to diagnose")
        columns = session.step_columns(_custom_sql(cfg))
        if len(runs) == 1:
            text = session.materialize(store.con, columns=columns)
            try:
                return diagnose_connection(store.con, runs, cfg, progress=progress, text=text)
            finally:
                text.restore()
        return diagnose_connection(store.con, runs, cfg, session.RootSession(store.con, runs, FEATURES_SQL, columns=columns),
                                   progress=progress)

    return store.tolerate(diagnose_all)


def diagnose(run_dir: str | os.PathLike[str], config_path: str | os.PathLike[str] | None = None, config: Mapping[str, Any] | None = None) -> list[Finding]:
    """The full catalog over one recording: ranked findings."""
    diagnoses = diagnose_path(run_dir, config_path, config)
    if len(diagnoses) != 1:
        raise NotARecording(f"{run_dir} holds {len(diagnoses)} runs; diagnose one run, or use diagnose_path for a root")
    return diagnoses[0].findings


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
    con = session.in_memory(steps, samples)
    runs = run(
        con,
        "SELECT run_id, NULL AS run_dir, count(*) AS steps, max(step) AS last_step FROM v1.steps GROUP BY run_id ORDER BY run_id",
    ).to_pylist()
    return diagnose_connection(con, runs, cfg)


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
