"""Everything the HTML report shows, gathered through the SQL views and the doctor.

The queries live in sql/v1/queries/report_*.sql; this module picks the series worth drawing,
ties each finding to the charts of the metrics it is about, and shapes plain dicts for the
template and for the JSON the page's script reads. Nothing here writes anywhere.
"""

from __future__ import annotations

import json
import math
import os
from dataclasses import dataclass, field
from typing import Any, Callable

from rlprobe.errors import NotARecording, NoStepsYet
from rlprobe.schemas import STEP_COLUMN_TYPES
from rlprobe.store import scope

# At most this many buckets per series: ~2 px per bucket on a wide screen, and a 100k-step run
# still fits in a few hundred kB of JSON.
BUCKETS = 2000
N_EXTREME = 25  # best and worst samples of the whole run
STEP_RANGES = 20  # the run cut into this many step ranges for the sample browser ...
PER_RANGE = 4  # ... with this many best and worst samples each
MAX_CHARS = 4000  # characters of a prompt or completion kept (the full length is shown)
EVENTS_PER_KIND = 2000  # drawn on the charts (a checkpoint every 50 steps of a 100k-step run) ...
EVENTS_LIMIT = 5000
EVENTS_IN_TABLE = 200  # ... but only this many of each kind listed in the table

# The series a post-mortem starts from, in the order they are drawn. A series the run did not
# log is left out; reward components share one chart.
KEY_SERIES: tuple[str, ...] = (
    "reward_mean",
    "kl_mean",
    "entropy_mean",
    "completion_len_mean",
    "max_len_hit_frac",
    "truncation_rate",
    "grad_norm",
    "clip_fraction",
    "zero_variance_group_frac",
    "loss",
    "step_time_s",
)
COMPONENTS = "reward_components"

# The series each signature is about, for a finding whose evidence names none of them.
SIGNATURE_SERIES: dict[str, tuple[str, ...]] = {
    "KL_BLOWUP": ("kl_mean", "kl_max"),
    "ENTROPY_COLLAPSE": ("entropy_mean",),
    "ENTROPY_BLOWUP": ("entropy_mean",),
    "REWARD_HACK_LENGTH": ("completion_len_mean", "reward_mean"),
    "FORMAT_GAMING": (COMPONENTS, "reward_mean"),
    "CLIP_SATURATION": ("clip_fraction",),
    "DEGENERATE_GROUPS": ("zero_variance_group_frac",),
    "ADV_COLLAPSE": ("adv_std", "adv_zero_frac"),
    "VALUE_DIVERGENCE": ("value_loss", "value_explained_variance"),
    "GRAD_PATHOLOGY": ("grad_norm",),
    "TRUNCATION_STARVE": ("max_len_hit_frac", "truncation_rate"),
    "REPETITION_SPIRAL": ("repetition_rate",),
    "REWARD_STD_DEATH": ("reward_std", "group_reward_std_mean"),
    "REF_POLICY_DRIFT_ASYMMETRY": ("kl_mean",),
    "THROUGHPUT_ROT": ("step_time_s",),
    "STALE_ROLLOUTS": ("batch_age",),
    "TRAIN_INFERENCE_MISMATCH": ("logprob_mismatch",),
    "REWARD_COLLAPSE": ("reward_mean",),
}

SEVERITY_COLOURS = {"critical": "#c62828", "warn": "#e08a00", "info": "#1f6fb2"}

STAGES = ("open", "diagnose", "series", "samples", "events", "write")
"""What render_report reports progress on, in order."""

Progress = Callable[[str], None]


@dataclass
class ReportData:
    """One run's report, before rendering: header, findings, charts, samples, events."""

    run: dict[str, Any]
    findings: list[dict[str, Any]]
    skipped: list[dict[str, str]]
    charts: list[dict[str, Any]]
    samples: list[dict[str, Any]]
    events: list[dict[str, Any]]
    other_metrics: list[str] = field(default_factory=list)
    step_lo: int | None = None
    step_hi: int | None = None
    downsampled: bool = False

    def chart_payload(self) -> dict[str, Any]:
        """What the page's script draws: charts, finding overlays, events with a step."""
        return {
            "charts": self.charts,
            "findings": [
                {"i": f["i"], "sig": f["signature_id"], "severity": f["severity"], "colour": f["colour"],
                 "first": f["first_step"], "last": f["last_step"]}
                for f in self.findings
            ],
            "events": [{"step": e["at_step"], "kind": e["kind"], "message": e["message"][:80]}
                       for e in self.events if e["at_step"] is not None and e["kind"] not in _QUIET_EVENTS],
            "step_lo": self.step_lo,
            "step_hi": self.step_hi,
        }


# Lifecycle and bookkeeping events: listed in the table, not drawn across every chart.
_QUIET_EVENTS = frozenset({"recorder_open", "recorder_close", "bad_record"})


def _query(con: Any, name: str, params: dict[str, Any]) -> Any:
    from rlprobe.store import sqlfiles
    from rlprobe.store.engine import run

    return run(con, sqlfiles.query(name), params or None)


# The step columns the charts are drawn from before anything else is known (a regular
# expression for the variable rlprobe_columns), and the logged columns that are not series.
_CHARTED_PREFIXES = ("reward_component.",)
_CHARTED = scope.columns_pattern((), STEP_COLUMN_TYPES, _CHARTED_PREFIXES)
_NOT_SERIES = frozenset({"step", "wall_time", "kl_positional"})


def _narrowed(con: Any, columns: str, read: Callable[[], Any]) -> Any:
    """read() with the step and sample files read for the columns matching columns alone
    (sql/v1/sources/00_paths.sql: rlprobe_columns)."""
    from rlprobe.store.engine import run

    run(con, "SET VARIABLE rlprobe_columns = ?", [columns], "none")
    try:
        return read()
    finally:
        run(con, "RESET VARIABLE rlprobe_columns", None, "none")


def _num(value: Any) -> float | None:
    """A JSON-safe number rounded to 6 significant digits (the page draws, it does not compute)."""
    if value is None:
        return None
    v = float(value)
    if not math.isfinite(v):
        return None
    return float(f"{v:.6g}")


def _json_text(text: str | None) -> Any:
    if not text:
        return {}
    try:
        return json.loads(text)
    except ValueError:
        return text


def _finding_series(finding: Any, present: set[str], components: list[str]) -> list[str]:
    """The series a finding is about: its evidence's 'metric', its signature's usual series, and
    the series its evidence keys are named after (kl_mean_baseline -> kl_mean)."""
    found: list[str] = []

    def add(name: str) -> None:
        if name.startswith("reward_component."):
            name = COMPONENTS
        if (name in present or (name == COMPONENTS and components)) and name not in found:
            found.append(name)

    metric = finding.evidence.get("metric")
    if isinstance(metric, str):
        add(metric)
    for name in SIGNATURE_SERIES.get(finding.signature_id, ()):
        add(name)
    names = sorted(present, key=len, reverse=True)  # longest first: kl_max before kl
    for key in finding.evidence:
        for name in names:
            if key == name or key.startswith(name + "_"):
                add(name)
                break
    return found


def _chart(chart_id: str, title: str, metrics: list[str], labels: list[str], cols_by_metric: dict[str, dict[str, list[Any]]]) -> dict[str, Any]:
    """One chart: a shared x (each bucket's first step) and per series mean, min and max."""
    first_step: dict[int, int] = {}
    for m in metrics:
        for b, step in zip(cols_by_metric[m]["bucket"], cols_by_metric[m]["step"]):
            first_step[b] = min(first_step.get(b, step), step)
    buckets = sorted(first_step)
    index = {b: i for i, b in enumerate(buckets)}
    series = []
    for m, label in zip(metrics, labels):
        cols = cols_by_metric[m]
        values = {}
        for key, column in (("mean", "mean"), ("min", "vmin"), ("max", "vmax")):
            out: list[float | None] = [None] * len(buckets)
            for b, v in zip(cols["bucket"], cols[column]):
                out[index[b]] = _num(v)
            values[key] = out
        series.append({"metric": m, "label": label, **values, "nonfinite": int(sum(cols["n_nonfinite"]))})
    banded = len(metrics) == 1 and max(cols_by_metric[metrics[0]]["n"], default=1) > 1
    return {"id": chart_id, "title": title, "x": [first_step[b] for b in buckets], "series": series,
            "banded": banded, "findings": []}


def _by_metric(table: Any) -> dict[str, dict[str, list[Any]]]:
    """The series query's rows as columns per metric (it returns them ordered by metric, bucket);
    a metric with no finite value and nothing non-finite is left out."""
    cols = table.to_pydict()
    out: dict[str, dict[str, list[Any]]] = {}
    start = 0
    metrics = cols["metric"]
    for i in range(1, len(metrics) + 1):
        if i == len(metrics) or metrics[i] != metrics[start]:
            part = {k: v[start:i] for k, v in cols.items() if k != "metric"}
            if any(v is not None for v in part["mean"]) or any(part["n_nonfinite"]):
                out[metrics[start]] = part
            start = i
    return out


def gather(run_path: str | os.PathLike[str], *, config_path: str | os.PathLike[str] | None = None,
           shown_as: str | None = None, progress: Progress | None = None) -> ReportData:
    """Read one run (live, crashed, closed or imported) into a ReportData."""
    from rlprobe.doctor import session
    from rlprobe.doctor.config import load_config
    from rlprobe.doctor.engine import diagnose_store
    from rlprobe.store import open_store

    tick = progress or (lambda stage: None)
    store = open_store(run_path)
    if store.target.kind != "run":
        raise NotARecording(f"{run_path} is a runs root: a report covers one run, point at one of its run directories")
    header = _query(store.con, "report_run", {}).to_pylist()
    if not header:
        raise NotARecording(f"{run_path} holds no rlprobe recording")
    info = header[0]
    run_id = info["run_id"]
    if not info.get("steps_recorded"):
        raise NoStepsYet(f"{run_path} has no steps recorded yet: nothing to report")
    info["trainer_config"] = _json_text(info.get("trainer_config"))
    info["environment"] = _json_text(info.get("environment"))
    if shown_as is not None:
        info["run_dir"] = shown_as
    tick("open")

    # over this store: its steps view then reads the doctor's copy of the run (the columns a
    # chart may draw, and what custom detectors name), not the files again
    diagnoses = diagnose_store(store, load_config(config_path, None), shown_as=str(store.target.path))
    diagnosis = diagnoses[0]
    tick("diagnose")

    # Only the columns a chart may draw are read (the fixed ones and the reward components:
    # the doctor's copy holds them); the rest of what the run logged (its extra.* metrics,
    # thousands in a wide run) is named from the files' footers, and read only for the charts
    # it gets.
    series = {"run_id": run_id, "buckets": BUCKETS}
    rows_by_metric = _by_metric(_narrowed(store.con, _CHARTED, lambda: _query(store.con, "report_series", series)))
    files = _query(store.con, "report_step_files", {}).column("filename").to_pylist()
    logged = set(_query(store.con, "report_metric_names", {"files": files}).column("metric").to_pylist()) if files else set()
    present = set(rows_by_metric) | {m for m in logged - _NOT_SERIES if m not in STEP_COLUMN_TYPES and not m.startswith(_CHARTED_PREFIXES)}
    components = sorted(m for m in present if m.startswith("reward_component."))
    wanted: list[str] = []
    for name in KEY_SERIES:
        if name in present:
            wanted.append(name)
        if name == "reward_mean" and components:
            wanted.append(COMPONENTS)
    finding_series = [_finding_series(f, present, components) for f in diagnosis.findings]
    for names in finding_series:
        wanted += [n for n in names if n not in wanted]
    if not wanted:  # a run that logged none of the usual names (an import of custom metrics)
        wanted = sorted(present - set(components))[: len(KEY_SERIES)]
    unread = [n for n in wanted if n != COMPONENTS and n not in rows_by_metric]
    if unread:  # not in the doctor's copy: read from the files
        session.point_at_recording(store.con)
        names = scope.columns_pattern(unread, ("step", "wall_time", "kl_positional"))
        rows_by_metric.update(_by_metric(_narrowed(store.con, names, lambda: _query(store.con, "report_series", series))))
        wanted = [n for n in wanted if n == COMPONENTS or n in rows_by_metric]  # named in a footer, NULL in every row
    charts: list[dict[str, Any]] = []
    chart_of: dict[str, int] = {}
    for name in wanted:
        if name == COMPONENTS:
            labels = [c.split(".", 1)[1] for c in components]
            chart = _chart("c-components", "reward components", components, labels, rows_by_metric)
        else:
            chart = _chart(f"c-{len(charts)}", name, [name], [name], rows_by_metric)
        chart_of[name] = len(charts)
        charts.append(chart)
    shown = set(components) | {n for n in wanted if n != COMPONENTS}
    other = sorted(present - shown)
    tick("series")

    findings: list[dict[str, Any]] = []
    cited: list[str] = []
    for i, (f, names) in enumerate(zip(diagnosis.findings, finding_series)):
        on = [chart_of[n] for n in names if n in chart_of] or ([0] if charts else [])
        for c in on:
            charts[c]["findings"].append(i)
        findings.append({
            "i": i, "signature_id": f.signature_id, "severity": f.severity, "colour": SEVERITY_COLOURS[f.severity],
            "confidence": f.confidence, "first_step": f.first_step, "last_step": f.last_step,
            "explanation": f.explanation, "evidence": [(k, _evidence_text(v)) for k, v in f.evidence.items()],
            "actions": list(f.suggested_actions), "sample_ids": list(f.links_to_samples),
            "charts": [charts[c]["title"] for c in on],
        })
        cited += [s for s in f.links_to_samples if s not in cited]

    samples = _query(store.con, "report_samples", {
        "run_id": run_id, "n_extreme": N_EXTREME, "ranges": STEP_RANGES, "per_range": PER_RANGE,
        "max_chars": MAX_CHARS, "cited": cited,
    }).to_pylist()
    sample_index: dict[str, int] = {}
    for n, s in enumerate(samples):
        s["n"] = n
        s["components"] = [(k.split(".", 1)[1], s[k]) for k in s if k.startswith("reward_component.") and s[k] is not None]
        s["extras"] = [(k.split(".", 1)[1], s[k]) for k in s if k.startswith("extra.") and s[k] is not None]
        s["cited_by"] = [f["i"] for f in findings if s["sample_id"] in f["sample_ids"]]
        sample_index.setdefault(s["sample_id"], n)
    for f in findings:
        f["samples"] = [(sid, sample_index.get(sid)) for sid in f["sample_ids"]]
    tick("samples")

    events = _narrowed(store.con, _CHARTED, lambda: _query(  # the steps it reads for their clock: step and wall_time
        store.con, "report_events", {"run_id": run_id, "per_kind": EVENTS_PER_KIND, "limit": EVENTS_LIMIT})).to_pylist()
    seen: dict[str, int] = {}
    for e in events:
        seen[e["kind"]] = seen.get(e["kind"], 0) + 1
        e["in_table"] = seen[e["kind"]] <= EVENTS_IN_TABLE
    tick("events")
    steps = [x for c in charts for x in (c["x"][:1] + c["x"][-1:])]
    return ReportData(
        run=info,
        findings=findings,
        skipped=[{"signature_id": s.signature_id, "reason": s.reason} for s in diagnosis.skipped],
        charts=charts,
        samples=samples,
        events=events,
        other_metrics=other,
        step_lo=info.get("first_step") if info.get("first_step") is not None else (min(steps) if steps else None),
        step_hi=info.get("last_step") if info.get("last_step") is not None else (max(steps) if steps else None),
        downsampled=any(c["banded"] for c in charts) or any(len(c["x"]) >= BUCKETS for c in charts),
    )


def _evidence_text(value: Any) -> str:
    if isinstance(value, float):
        return f"{value:.4g}"
    if isinstance(value, (dict, list)):
        return json.dumps(value, default=str)[:200]
    return str(value)
