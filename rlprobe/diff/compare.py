"""diff_runs: what differs between two runs, and from when."""

from __future__ import annotations

import json
import os
from contextlib import ExitStack
from typing import Any, Callable, Optional

import numpy as np

from rlprobe.diff.models import ConfigChange, Divergence, PromptGap, RunDiff, RunSide
from rlprobe.diff.stats import MIN_BASELINE, first_departure
from rlprobe.errors import RlprobeError
from rlprobe.forensics._open import RunLike, opened

Progress = Callable[[str, int, int], None]
"""progress(label, done, total): called as the diff advances; total 0 for a stage with no count
(the CLI draws a bar with it)."""

# Not metrics of the training: the wall clock always differs between two runs.
_NOT_METRICS = frozenset({"run_id", "step", "wall_time", "kl_positional"})


class BadDiffArgument(RlprobeError, ValueError):
    """z_thresh or sustain out of range."""


def flatten_config(config: Any, prefix: str = "") -> dict[str, Any]:
    """A nested trainer_config as dotted keys ({"opt": {"lr": 1}} -> {"opt.lr": 1}); lists stay values."""
    if not isinstance(config, dict):
        return {prefix: config} if prefix else {}
    out: dict[str, Any] = {}
    for key, value in config.items():
        name = f"{prefix}.{key}" if prefix else str(key)
        if isinstance(value, dict) and value:
            out.update(flatten_config(value, name))
        else:
            out[name] = value
    return out


def config_delta(a: dict[str, Any] | None, b: dict[str, Any] | None) -> list[ConfigChange]:
    """The flattened keys whose values differ, sorted by key (equal values are left out)."""
    fa, fb = flatten_config(a or {}), flatten_config(b or {})
    changes = []
    for key in sorted(set(fa) | set(fb)):
        if key in fa and key in fb:
            if _canonical(fa[key]) != _canonical(fb[key]):
                changes.append(ConfigChange(key=key, a=fa[key], b=fb[key]))
        else:
            changes.append(ConfigChange(key=key, a=fa.get(key), b=fb.get(key), only_in="a" if key in fa else "b"))
    return changes


def _canonical(value: Any) -> str:
    # 1 and 1.0 are the same setting; JSON text compares lists and nested values structurally
    if isinstance(value, bool) or value is None:
        return json.dumps(value)
    if isinstance(value, (int, float)):
        return repr(float(value))
    return json.dumps(value, sort_keys=True, default=str)


def diff_runs(run_a: RunLike, run_b: RunLike, z_thresh: float = 4.0, sustain: int = 5, max_prompt_gaps: int = 20,
              progress: Optional[Progress] = None) -> RunDiff:
    """Compare run B with run A: config delta, first sustained divergence per metric, per-prompt gaps.

    Metrics are joined on step (runs of different lengths are compared where they overlap);
    a metric's divergence is the first step where b - a leaves its own early band by z_thresh
    robust spreads, on one side, for `sustain` consecutive common steps (see rlprobe.diff.stats).
    Prompt gaps compare the mean reward of each prompt text captured in both runs, largest
    first. Either run may be live, crashed, or a source rlprobe can import.
    """
    if not (z_thresh > 0 and np.isfinite(z_thresh)):
        raise BadDiffArgument(f"--z-thresh must be a positive number, got {z_thresh}")
    if sustain < 1:
        raise BadDiffArgument(f"--sustain must be at least 1, got {sustain}")
    if max_prompt_gaps < 0:
        raise BadDiffArgument(f"max_prompt_gaps must be >= 0, got {max_prompt_gaps}")
    tick = progress or (lambda label, done, total: None)
    with ExitStack() as stack:
        tick("opening A", 0, 0)
        oa = stack.enter_context(opened(run_a))
        tick("opening B", 0, 0)
        ob = stack.enter_context(opened(run_b))
        side_a, config_a = _side(oa, run_a)
        side_b, config_b = _side(ob, run_b)
        tick("reading steps", 0, 0)
        steps_a, steps_b = _steps(oa.store), _steps(ob.store)
        tick("reading samples", 0, 0)
        prompts_a, prompts_b = _prompt_rewards(oa.store), _prompt_rewards(ob.store)
    result = RunDiff(a=side_a, b=side_b, z_thresh=z_thresh, sustain=sustain, overlap_steps=0,
                     config_delta=config_delta(config_a, config_b))
    _compare_metrics(result, steps_a, steps_b, z_thresh, sustain, tick)
    tick("comparing prompts", 0, 0)
    result.prompt_gaps, result.shared_prompts = _prompt_gaps(prompts_a, prompts_b, max_prompt_gaps)
    return result


def _side(o: Any, given: RunLike) -> tuple[RunSide, dict[str, Any] | None]:
    from rlprobe.store import sqlfiles
    from rlprobe.store.engine import Store
    from rlprobe.store.engine import run as run_sql

    rows = run_sql(o.store.con, sqlfiles.query("diff_run_info"), None, "arrow").to_pylist()
    info = rows[0] if rows else {"run_id": o.store.target.path.name, "run_dir": str(o.store.target.path)}
    shown = str(given.target.path) if isinstance(given, Store) else os.fspath(given)
    config = info.get("trainer_config")
    config = json.loads(config) if isinstance(config, str) else config
    side = RunSide(
        run_id=info["run_id"], run_dir=shown if o.report is not None else info["run_dir"],
        algorithm=info.get("algorithm"), model_name=info.get("model_name"), status=info.get("status"),
        steps=info.get("steps_recorded") or 0, first_step=info.get("first_step"), last_step=info.get("last_step"),
        imported=o.report is not None,
    )
    return side, config if isinstance(config, dict) else None


def _steps(store: Any) -> dict[str, np.ndarray]:
    """step -> column arrays (float64, NaN where not logged) of the metrics the run logged at least once."""
    import pyarrow as pa
    import pyarrow.compute as pc

    from rlprobe.store import sqlfiles
    from rlprobe.store.engine import run as run_sql

    table = run_sql(store.con, sqlfiles.query("diff_steps"), None, "arrow")
    out: dict[str, np.ndarray] = {"step": table.column("step").to_numpy(zero_copy_only=False).astype(np.int64)}
    for name, type_ in zip(table.column_names, table.schema.types):
        if name in _NOT_METRICS or not (pa.types.is_floating(type_) or pa.types.is_integer(type_)):
            continue
        column = table.column(name)
        if column.null_count == len(column):
            continue  # a fixed column of the views the run never logged
        out[name] = pc.cast(column, pa.float64()).to_numpy(zero_copy_only=False)
    return out


def _compare_metrics(result: RunDiff, a: dict[str, np.ndarray], b: dict[str, np.ndarray], z_thresh: float,
                     sustain: int, tick: Progress) -> None:
    common_steps, ia, ib = np.intersect1d(a["step"], b["step"], assume_unique=True, return_indices=True)
    result.overlap_steps = int(common_steps.size)
    if common_steps.size:
        result.overlap_from, result.overlap_to = int(common_steps[0]), int(common_steps[-1])
    names_a, names_b = set(a) - {"step"}, set(b) - {"step"}
    result.only_in_a, result.only_in_b = sorted(names_a - names_b), sorted(names_b - names_a)
    shared = sorted(names_a & names_b)
    divergences = []
    for done, name in enumerate(shared):
        tick("comparing metrics", done, len(shared))
        va, vb = a[name][ia], b[name][ib]
        both = np.isfinite(va) & np.isfinite(vb)  # sparse metrics: only the steps both logged
        if both.sum() < MIN_BASELINE:
            result.too_short.append(name)
            continue
        steps, va, vb = common_steps[both], va[both], vb[both]
        found = first_departure(va, vb, z_thresh, sustain)
        if abs(found.level) > z_thresh * found.noise:
            result.apart_from_start.append(name)
        if found.index is None:
            result.unchanged.append(name)
            continue
        i = found.index
        after = np.abs(found.z[i:])
        peak = i + int(np.argmax(after))
        divergences.append(Divergence(
            metric=name, first_step=int(steps[i]), direction="b_higher" if found.z[i] > 0 else "b_lower",
            z=float(found.z[i]), peak_z=float(found.z[peak]), peak_step=int(steps[peak]),
            a_value=float(va[i]), b_value=float(vb[i]), baseline_diff=found.level, noise=found.noise,
            baseline_steps=(int(steps[0]), int(steps[found.baseline_n - 1])), overlap=int(steps.size),
        ))
    tick("comparing metrics", len(shared), len(shared))
    result.divergences = sorted(divergences, key=lambda d: (d.first_step, -abs(d.z), d.metric))


def _prompt_rewards(store: Any) -> Any:
    from rlprobe.store import sqlfiles
    from rlprobe.store.engine import run as run_sql

    return run_sql(store.con, sqlfiles.query("diff_prompt_rewards"), None, "arrow")


def _prompt_gaps(prompts_a: Any, prompts_b: Any, k: int) -> tuple[list[PromptGap], int]:
    """Join the two runs' per-prompt rewards in a connection of their own (the views of each
    store are bound to that store's run, so the join cannot happen in either)."""
    from rlprobe.store import sqlfiles
    from rlprobe.store.engine import new_connection
    from rlprobe.store.engine import run as run_sql

    if not k or not prompts_a.num_rows or not prompts_b.num_rows:
        return [], _count_shared(prompts_a, prompts_b)
    con = new_connection()
    try:
        con.register("prompts_a", prompts_a)
        con.register("prompts_b", prompts_b)
        rows = run_sql(con, sqlfiles.query("diff_prompt_gaps"), {"k": int(k)}, "arrow").to_pylist()
    finally:
        con.close()
    shared = rows[0]["shared"] if rows else 0
    return [PromptGap(**{k_: v for k_, v in r.items() if k_ != "shared"}) for r in rows], int(shared)


def _count_shared(prompts_a: Any, prompts_b: Any) -> int:
    if not prompts_a.num_rows or not prompts_b.num_rows:
        return 0
    return len(set(prompts_a.column("prompt_text").to_pylist()) & set(prompts_b.column("prompt_text").to_pylist()))
