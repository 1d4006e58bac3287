"""write_run: record a synthetic run through rlprobe.Recorder, truth kept beside the recording."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any, Iterable, Mapping

import numpy as np

from rlprobe.record import Recorder, SamplingConfig
from rlprobe.synth.options import Options
from rlprobe.synth.run import Truth, make_run

TRUTH_FILE = "synth_truth.json"


def _step_rows(run: Any) -> list[dict[str, Any]]:
    """One log_step kwargs dict per step (NaN only where a logged value is a deliberate NaN)."""
    n = len(run.steps)
    cols: list[tuple[str, list[float], np.ndarray | None]] = []
    for name, arr in run.series.items():
        mask = run.masks.get(name)
        cols.append((name, arr.tolist(), mask))
    comps = [(name, arr.tolist()) for name, arr in run.components.items()]
    comps_mask = run.masks.get("reward_components")
    extra = [(name, arr.tolist()) for name, arr in run.extra.items()]
    klp = run.kl_positional
    klp_mask = run.masks.get("kl_positional")
    rows = []
    for i in range(n):
        row: dict[str, Any] = {}
        for name, values, mask in cols:
            if mask is None or mask[i]:
                row[name] = values[i]
        if comps and (comps_mask is None or comps_mask[i]):
            row["reward_components"] = {name: values[i] for name, values in comps}
        if extra:
            row["extra"] = {name: values[i] for name, values in extra}
        if klp is not None and (klp_mask is None or klp_mask[i]):
            row["kl_positional"] = klp[i].tolist()
        rows.append(row)
    return rows


def write_run(
    run_dir: str | os.PathLike[str],
    kind: str,
    n_steps: int = 500,
    seed: int = 0,
    algorithm: str | None = None,
    noise: float | None = None,
    samples_every: int = 1,
    group_size: int = 8,
    variant: str | None = None,
    options: Options | Mapping[str, Any] | Iterable[str] | None = None,
) -> Truth:
    """Record a synthetic run into run_dir (through the Recorder) and write synth_truth.json.

    Only the logged steps are recorded (a sparse log: every logging_steps-th); events between
    two logged steps are written with their own step.
    """
    path = Path(run_dir)
    if (path / "manifest.json").exists():
        raise FileExistsError(f"{path} already holds a recording; synth writes into a new directory only")
    if samples_every < 0:
        raise ValueError(f"samples_every must be >= 0 (0 = no samples), got {samples_every}")
    run = make_run(kind, n_steps=n_steps, seed=seed, algorithm=algorithm, noise=noise, group_size=group_size,
                   variant=variant, options=options)
    truth = run.truth
    rows = _step_rows(run)
    events: dict[int, list[tuple[str, str, dict[str, Any]]]] = {}
    for kind_, step, message, data in run.events:
        events.setdefault(step, []).append((kind_, message, data))
    n = truth.n_steps
    rec = Recorder(
        path,
        algorithm=truth.algorithm,
        model_name=run.model_name,
        trainer_config=run.trainer_config,
        capture_env=False,
        sampling=SamplingConfig(seed=seed),
        queue_size=max(8192, 2 * n + 64),
        steps_per_flush=1000,
        flush_interval_s=30.0,
        install_handlers=False,
    )
    try:
        rec.log_event("train_begin", step=0, message=f"{truth.algorithm} training of {run.model_name}", max_steps=n)
        previous = 0
        for i, step in enumerate(run.steps.tolist()):
            rec.log_step(step, **rows[i])
            if samples_every and step % samples_every == 0:
                rec.log_samples(step, run.samples(step))
            for at in range(previous + 1, step + 1):
                for kind_, message, data in events.get(at, ()):
                    rec.log_event(kind_, step=at, message=message, **data)
            previous = step
        rec.log_event("train_end", step=n, message="training finished")
    finally:
        rec.close()
    (path / TRUTH_FILE).write_text(json.dumps(truth.to_dict(), indent=2) + "\n", encoding="utf-8")
    return truth


def read_truth(run_dir: str | os.PathLike[str]) -> dict[str, Any]:
    """The ground truth a synthetic recording was written with (synth_truth.json)."""
    return json.loads((Path(run_dir) / TRUTH_FILE).read_text(encoding="utf-8"))
