"""What a trainer's logger keeps of the per-step values: every step, or one point per window.

HF's Trainer (and TRL on top of it) logs every ``logging_steps`` steps. What it prints for a
window is the mean of the per-step metrics it accumulated (rewards, lengths, KL, entropy, clip
ratios, even the "max" keys, which TRL averages too), while ``grad_norm`` and the learning rate
are the values of the logged step alone. ``loss`` is the window mean in the HF Trainer and the
logged step's own loss in many custom loops. Counters add up; cumulative values (tokens,
epoch, wall time) are read at the logged step.
"""

from __future__ import annotations

import numpy as np

SINGLE_STEP = frozenset({"grad_norm", "grad_norm_post_clip", "lr", "weight_update_ratio", "wall_time"})
SUMMED = frozenset({"nan_count", "inf_count"})
AT_STEP = frozenset({"num_tokens", "epoch"})


def logged_indices(n: int, stride: int) -> np.ndarray:
    """0-based indices of the logged steps: steps stride, 2*stride, ... (all steps if stride is 1)."""
    return np.arange(stride - 1, n, stride)


def thin(values: np.ndarray, stride: int, how: str) -> np.ndarray:
    """One value per window of ``stride`` steps: mean | step (the window's last) | sum.

    A NaN inside a window makes its mean and sum NaN, as an average of a NaN loss is in a real
    log; a single-step value is NaN only if the logged step's own value is.
    """
    if stride == 1:
        return values
    points = len(values) // stride
    x = np.asarray(values, dtype=np.float64)[: points * stride]
    x = x.reshape((points, stride) + x.shape[1:])
    if how == "step":
        return x[:, -1].copy()
    if how == "sum":
        return x.sum(axis=1)
    return x.mean(axis=1)


def how_logged(name: str, loss: str) -> str:
    """How a field's window becomes its logged value (``loss`` is the Options.loss choice)."""
    if name in SINGLE_STEP or name in AT_STEP or (name == "loss" and loss == "step"):
        return "step"
    if name in SUMMED:
        return "sum"
    return "mean"


def points_hold(holds: np.ndarray, stride: int, rule: str) -> np.ndarray:
    """Per logged point, whether the data it logs shows a failure that holds at ``holds`` steps.

    majority: at least half the window's steps hold (a window mean shows it); any: one step
    does (an event: a NaN makes the window's loss NaN); sampled: the logged step itself does
    (a value of one step, like grad_norm).
    """
    if stride == 1:
        return holds
    points = len(holds) // stride
    w = np.asarray(holds, dtype=bool)[: points * stride].reshape(points, stride)
    if rule == "sampled":
        return w[:, -1].copy()
    if rule == "any":
        return w.any(axis=1)
    return w.mean(axis=1) >= 0.5
