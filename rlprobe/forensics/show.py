"""show_step: everything recorded at and around one step of a run."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from rlprobe.forensics._open import RunLike, opened
from rlprobe.forensics.errors import BadForensicsArgument, StepNotRecorded

# What a terminal shows of the window when the run logged them, in this order: the series a
# reader scans first when something spiked (the JSON form has every column).
KEY_METRICS: tuple[str, ...] = (
    "reward_mean", "reward_std", "kl_mean", "entropy_mean", "loss", "grad_norm", "clip_fraction",
    "adv_std", "completion_len_mean", "zero_variance_group_frac", "value_loss", "lr",
)


@dataclass
class StepDetail:
    """One step of a run: its metrics, the steps around it, the events there and its samples."""

    run_id: str
    run_dir: str
    status: str
    step: int
    metrics: dict[str, Any]
    window: list[dict[str, Any]]
    events: list[dict[str, Any]]
    samples: list[dict[str, Any]]
    samples_at_step: int
    window_from: int
    window_to: int
    metric_names: list[str] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready dict (NaN and inf as strings)."""
        from rlprobe.jsonsafe import json_safe

        return json_safe(self.__dict__)


def _present(row: dict[str, Any]) -> dict[str, Any]:
    """The columns a step actually logged (NULL means never logged, not zero)."""
    return {k: v for k, v in row.items() if v is not None and k != "run_id"}


def show_step(run: RunLike, step: int, window: int = 5, max_samples: int = 10) -> StepDetail:
    """The step's metrics, the window [step - window, step + window], its events and up to
    max_samples of its captured samples (best reward first); StepNotRecorded names the
    nearest recorded steps when the run has no row for step."""
    from rlprobe.store import sqlfiles
    from rlprobe.store.engine import run as run_sql

    if window < 0:
        raise BadForensicsArgument(f"--window must be >= 0, got {window}")
    if max_samples < 0:
        raise BadForensicsArgument(f"--max-samples must be >= 0, got {max_samples}")
    lo, hi = step - window, step + window
    with opened(run) as o:
        con = o.store.con
        rows = run_sql(con, sqlfiles.query("show_steps"), {"step_from": lo, "step_to": hi}, "arrow").to_pylist()
        at = [r for r in rows if r["step"] == step]
        if not at:
            _raise_not_recorded(con, run, step)
        info = run_sql(con, sqlfiles.query("show_run"), {}, "rows")[2]
        run_id, run_dir, status = info[0] if info else (at[0]["run_id"], str(o.store.target.path), "unknown")
        events = run_sql(con, sqlfiles.query("show_events"), {"step_from": lo, "step_to": hi}, "arrow").to_pylist()
        for e in events:
            if isinstance(e.get("data"), str):
                try:
                    e["data"] = json.loads(e["data"])
                except ValueError:
                    pass
        samples: list[dict[str, Any]] = []
        if max_samples:
            params = {"sort": "reward", "ascending": False, "step_from": step, "step_to": step, "k": max_samples}
            samples = run_sql(con, sqlfiles.query("samples_ranked"), params, "arrow").to_pylist()
            # the ranking counted the step's samples: a count of its own would open every shard again
            total = samples[0]["matched"] if samples else 0
        else:
            total = run_sql(con, sqlfiles.query("show_sample_count"), {"step": step}, "rows")[2][0][0]
    names = [c for c in rows[0] if c not in ("run_id", "step", "wall_time") and any(r[c] is not None for r in rows)]
    return StepDetail(
        run_id=run_id, run_dir=run_dir if o.report is None else str(run), status=status, step=step,
        metrics=_present(at[0]), window=[{"step": r["step"], **{n: r[n] for n in names}} for r in rows],
        events=events, samples=samples, samples_at_step=int(total), window_from=lo, window_to=hi,
        metric_names=names,
    )


def _raise_not_recorded(con: Any, run: RunLike, step: int) -> None:
    from rlprobe.store import sqlfiles
    from rlprobe.store.engine import run as run_sql

    below, above, first, last, n = run_sql(con, sqlfiles.query("show_nearest"), {"step": step}, "rows")[2][0]
    if not n:
        raise StepNotRecorded(f"{_name(run)} has no steps recorded yet")
    near = " and ".join(str(s) for s in (below, above) if s is not None)
    raise StepNotRecorded(f"step {step} was not recorded in {_name(run)}; nearest recorded: {near} "
                          f"({n} steps from {first} to {last})")


def _name(run: RunLike) -> str:
    from rlprobe.store.engine import Store

    return str(run.target.path) if isinstance(run, Store) else str(run)

