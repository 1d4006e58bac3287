"""What each option (rlprobe.synth.options) does to a run, at the stage of the build it acts on.

``prepare`` sets run-level knobs (after the kind's own prepare, before the baseline),
``shape_latents`` edits latents (after the kind's apply), ``edit_observed`` edits the logged
values (after the kind's post hooks) and ``fields`` decides what is logged where. Every draw
comes from ``ctx.orng``, the options' own stream, so a plain run (``Options()``) consumes
nothing and is exactly the run it always was.
"""

from __future__ import annotations

import math

import numpy as np

from rlprobe.synth._numeric import beta_moment, lognoise
from rlprobe.synth.model import GROUP_FIELDS, ROLLOUT_FIELDS, Ctx

_PROMPTS = (1, 2, 4, 5, 8, 16)
_PPO_BATCH = (4, 8, 16, 32, 64)


def _u(ctx: Ctx, lo: float, hi: float) -> float:
    return float(ctx.orng.uniform(lo, hi))


def _lu(ctx: Ctx, lo: float, hi: float) -> float:
    return float(math.exp(ctx.orng.uniform(math.log(lo), math.log(hi))))


def _pick(ctx: Ctx, options: tuple | list) -> object:
    return options[int(ctx.orng.integers(len(options)))]


def zero_variance_frac(acc: float, kappa: float, G: int) -> float:
    """Expected share of groups of G binary rollouts that are all right or all wrong."""
    a, k = np.array([acc]), np.array([kappa])
    return float(beta_moment(a, k, G)[0] + beta_moment(1 - a, k, G)[0])


def kappa_for(acc: float, target: float, G: int) -> float:
    """The prompt-difficulty concentration that gives ``target`` zero-variance groups at accuracy acc.

    Low concentration polarises prompts (each always or never solved: every group degenerate),
    high concentration makes them alike (acc^G + (1-acc)^G degenerate); the share falls
    monotonically in between, so a bisection in log space finds it (or the nearest end).
    """
    lo, hi = math.log(0.01), math.log(1e4)
    for _ in range(60):
        mid = 0.5 * (lo + hi)
        if zero_variance_frac(acc, math.exp(mid), G) > target:
            lo = mid
        else:
            hi = mid
    return math.exp(0.5 * (lo + hi))


def _grpo_shape(ctx: Ctx) -> None:
    P = ctx.P
    P["algorithm"] = "grpo"
    G = ctx.group_size
    options = [g for g in (4, 8, 16, 32, 64) if 32 <= g * G <= 1024] or [max(1, 256 // G)]
    P["G"], P["n_groups"] = G, int(_pick(ctx, options))
    P["N"] = P["G"] * P["n_groups"]


def prepare(ctx: Ctx) -> None:
    """Run-level knobs of the options: task, reward granularity, reward_std kind, a length-biased judge."""
    o, P = ctx.opts, ctx.P
    if o.task != "default":
        if P["algorithm"] != "grpo":
            _grpo_shape(ctx)
        ctx.required |= set(GROUP_FIELDS)
        # an easy task's zero-variance share is a property of its correctness alone: a format
        # part would break up its all-right groups, so easy tasks are graded right/wrong only
        P["template"] = "binary" if o.reward != "default" or o.task == "easy" else str(_pick(ctx, ("binary", "format")))
        P.update(fmt0=_u(ctx, 0.9, 0.97), fmt_ceil=_u(ctx, 0.97, 0.995))
    if o.task == "easy":  # nearly solved from the start: most groups all-right, some all-wrong
        P["acc0"] = _u(ctx, 0.8, 0.95)
        P["acc_ceil"] = min(0.99, P["acc0"] + _u(ctx, 0.01, 0.05))
        target = _u(ctx, 0.6, 0.9)
        P["kappa0"] = kappa_for(P["acc0"], target, ctx.group_size)
        ctx.info["zero_variance_target"] = target
    elif o.task == "saturating":  # solved early: reward at its ceiling for most of the run
        P.update(curve="exp", curve_tau=_u(ctx, 0.06, 0.2), acc0=_u(ctx, 0.2, 0.5), acc_ceil=_u(ctx, 0.93, 0.99),
                 kappa0=_lu(ctx, 1.0, 4.0))
    if o.spike != "none":  # the trap is a KL and a grad-norm value at one step: both are logged
        P["kl_monitor"] = True
        ctx.required |= {"kl_mean", "grad_norm"}
    if o.length_bias != "none":
        P.update(template="judge", log_components=True, w_judge=1.0)
        ctx.required.add("reward_components")
    if o.reward != "default":
        _binary(ctx)
    if o.reward_std != "auto":
        P["reward_std_force"] = o.reward_std if P["algorithm"] == "grpo" else "batch"


def _binary(ctx: Ctx) -> None:
    """0/1 correctness with small groups and few prompts, rollouts drawn one by one."""
    o, P = ctx.opts, ctx.P
    P["template"] = "binary"
    P["correct_range"] = (0.0, 1.0)
    P["explicit_groups"] = True
    if P["algorithm"] == "grpo":
        G = ctx.group_size
        fits = [p for p in _PROMPTS if 4 <= G * p <= 128] or [max(1, 16 // G)]
        prompts = o.prompts or int(_pick(ctx, fits))
        P["G"], P["n_groups"] = G, prompts
    else:
        P["G"] = 1
        P["n_groups"] = o.prompts or int(_pick(ctx, _PPO_BATCH))
    P["N"] = P["G"] * P["n_groups"]
    if o.reward == "sparse":  # a hard task: a success now and then, slowly a few more
        P["acc0"] = _u(ctx, 0.01, 0.08)
        P["acc_ceil"] = P["acc0"] + _u(ctx, 0.0, 0.08)
        P["kappa0"] = _lu(ctx, 2.0, 10.0)
    ctx.info.update(group_size=P["G"], prompts=P["n_groups"])


def shape_latents(ctx: Ctx) -> None:
    """Latent edits of the options (after the kind's own apply)."""
    if ctx.opts.length_bias != "none":  # the judge prefers longer completions from step 1, unexploited
        corr = _u(ctx, 0.2, 0.35)
        ctx.L["sample_corr_len"] = np.full(ctx.n, corr)
        ctx.info["length_bias_corr"] = corr


def edit_observed(ctx: Ctx, obs: dict[str, np.ndarray]) -> None:
    """Logged-value edits of the options: alternating grad norms, a one-step spike, placeholders."""
    o, n, P = ctx.opts, ctx.n, ctx.P
    if o.updates == 2:
        # the second update of a batch re-uses it after the first moved the policy onto it:
        # its gradient is a small remainder, ~1e-3 of the first in the logs that show this
        # (a batch with no signal gives no gradient to either update)
        second = np.arange(1, n, 2)
        first = second - 1
        ratio = _lu(ctx, 1e-3, 1e-2)
        shrink = ratio * lognoise(ctx.orng, len(second), 0.3)
        obs["grad_norm"][second] = obs["grad_norm"][first] * shrink
        obs["grad_norm_post_clip"] = np.minimum(obs["grad_norm"], P["max_grad_norm"])
        obs["weight_update_ratio"][second] = obs["weight_update_ratio"][first] * shrink
        obs["loss"][second] = np.where(obs["grad_norm"][first] == 0, 0.0, obs["loss"][second])
        ctx.info["second_update_grad_ratio"] = ratio
    if o.spike != "none":
        lo, hi = int(0.1 * n), max(int(0.1 * n) + 1, int(0.9 * n))
        steps = ctx.logged_idx[(ctx.logged_idx >= lo) & (ctx.logged_idx < hi)]
        j = int(_pick(ctx, list(steps)))
        kl_med = float(np.median(obs["kl_mean"]))
        kf, gf = _u(ctx, 30.0, 100.0), _u(ctx, 200.0, 800.0)
        obs["kl_mean"][j] = kl_med * kf if kl_med > 0 else _u(ctx, 1.0, 5.0)
        obs["kl_max"][j] = max(obs["kl_max"][j] * kf, obs["kl_mean"][j])
        obs["grad_norm"][j] = float(np.median(obs["grad_norm"])) * gf or _u(ctx, 10.0, 60.0)
        obs["grad_norm_post_clip"][j] = min(obs["grad_norm"][j], P["max_grad_norm"])
        loss_sd = float(np.std(obs["loss"][np.isfinite(obs["loss"])])) or P["loss_sd"]
        obs["loss"][j] += _u(ctx, 5.0, 20.0) * loss_sd
        obs["clip_fraction"][j] = min(0.5, obs["clip_fraction"][j] * _u(ctx, 3.0, 10.0))
        ctx.info.update(spike_step=j + 1, spike_kl_factor=kf, spike_grad_factor=gf)
    for name in o.placeholders:  # the trainer writes 0 there on every step; nothing is measured
        obs[name] = np.zeros(n)
        if name == "kl_mean":
            obs["kl_max"] = np.zeros(n)


def fields(ctx: Ctx, chosen: set[str]) -> tuple[set[str], dict[str, np.ndarray]]:
    """What the options add to or take from the logged fields, and the masks they need."""
    o = ctx.opts
    chosen = set(chosen) | set(o.placeholders)
    if "kl_mean" in o.placeholders:  # a placeholder KL has no max and no positional split
        chosen -= {"kl_max", "kl_positional"}
    masks: dict[str, np.ndarray] = {}
    if o.updates == 2:  # rollout keys on the first update of each batch only
        first = (np.arange(ctx.n) % 2) == 0
        for name in ROLLOUT_FIELDS:
            if name in chosen:
                masks[name] = first
    return chosen, masks
