"""Rank a run's captured samples (query_samples) and find the ones that drove an update (spike_drivers)."""

from __future__ import annotations

from typing import Any

from rlprobe.forensics._open import RunLike, opened
from rlprobe.forensics.errors import BadForensicsArgument

SORT_KEYS: dict[str, str] = {
    "reward": "reward_total",
    "advantage": "advantage",
    "kl": "kl_contribution",
    "length": "completion_len",
    "logprob": "logprob_mean",
}
"""The sort keys of query_samples and the sample column each one ranks by (a closed set: the SQL
maps each name to its column, so no text from the caller reaches the ORDER BY)."""


def step_range(around: int | None = None, window: int | None = None, step_from: int | None = None,
               step_to: int | None = None) -> tuple[int | None, int | None]:
    """The inclusive step range of `--around N --window K` or `--from A --to B` (not both)."""
    if around is not None and (step_from is not None or step_to is not None):
        raise BadForensicsArgument("--around/--window and --from/--to are two ways to give a step range: use one")
    if window is not None and around is None:
        raise BadForensicsArgument("--window needs --around N (the step it is centred on)")
    if window is not None and window < 0:
        raise BadForensicsArgument(f"--window must be >= 0, got {window}")
    if around is not None:
        w = 5 if window is None else window
        return around - w, around + w
    if step_from is not None and step_to is not None and step_from > step_to:
        raise BadForensicsArgument(f"--from {step_from} is after --to {step_to}: the range is empty")
    return step_from, step_to


def query_samples(run: RunLike, sort: str = "reward", step_from: int | None = None, step_to: int | None = None,
                  k: int = 10, ascending: bool = False) -> Any:
    """The k captured samples ranked by reward / advantage / kl / length / logprob, as a pyarrow Table.

    Highest first unless ascending; steps in [step_from, step_to] (inclusive, None = open end).
    Samples with no value for the key come last; ties break on step, rank, sample_id. Works on
    a run, a runs root (every run's samples ranked together) or a source rlprobe can import.
    The column `matched` counts the samples in the range before the limit.
    """
    from rlprobe.store import sqlfiles
    from rlprobe.store.engine import run as run_sql

    if sort not in SORT_KEYS:
        raise BadForensicsArgument(f"unknown sort key {sort!r}: one of {', '.join(SORT_KEYS)}")
    _check_k(k)
    step_from, step_to = step_range(step_from=step_from, step_to=step_to)
    params = {"sort": sort, "ascending": bool(ascending), "step_from": step_from, "step_to": step_to, "k": int(k)}
    with opened(run, one_run=False) as o:
        return run_sql(o.store.con, sqlfiles.query("samples_ranked"), params, "arrow")


def spike_drivers(run: RunLike, step: int, window: int = 5, k: int = 8) -> Any:
    """The k captured samples of steps [step - window, step + window] with the largest |advantage|.

    In a policy-gradient update each sample's log-probability gradient is scaled by its
    advantage, so these are the samples that pushed the policy hardest around a spike
    (positive advantage: made more likely; negative: less). Returns a pyarrow Table with
    abs_advantage, weight_share (share of the window's captured |advantage|), step_offset,
    and `matched` / `with_advantage` (samples in the window, and how many carry an advantage).
    """
    from rlprobe.store import sqlfiles
    from rlprobe.store.engine import run as run_sql

    _check_k(k)
    if window < 0:
        raise BadForensicsArgument(f"window must be >= 0, got {window}")
    with opened(run) as o:
        return run_sql(o.store.con, sqlfiles.query("samples_drivers"),
                       {"step": int(step), "window": int(window), "k": int(k)}, "arrow")


def _check_k(k: int) -> None:
    if k < 1:
        raise BadForensicsArgument(f"-k must be at least 1, got {k}")
