"""Healthy run families: the baseline plus the traps that make naive detectors fire."""

from __future__ import annotations

from typing import Callable

import numpy as np

from rlprobe.synth._numeric import ramp
from rlprobe.synth.catalog import FAMILY_FIELDS
from rlprobe.synth.model import GROUP_FIELDS, Ctx, pick_cap, set_algorithm


def _noop(ctx: Ctx) -> None:
    return None


def _reasoning_prep(ctx: Ctx) -> None:
    P = ctx.P
    P.update(template=ctx.choice(["binary", "format", "xml"]), L0=ctx.lu(100.0, 600.0), acc0=ctx.u(0.05, 0.4), len_dip=0.0)
    P["acc_ceil"] = min(0.95, P["acc0"] + ctx.u(0.25, 0.55))


def reasoning_growth(ctx: Ctx) -> None:
    """Length grows 1.5-3.5x in step with accuracy (R1-style); step time follows length."""
    L, P = ctx.L, ctx.P
    F = ctx.u(1.5, 3.5)
    shape = np.clip(0.7 * L["curve"] + 0.3 * ctx.x, 0, 1)
    L["lmed"] = L["lmed"] * F**shape
    P["cap"] = pick_cap(L["lmed"], P["lsig"], ctx.u(1.9, 2.8))
    L["kl"] = L["kl"] * (1 + ctx.u(0.2, 1.0) * shape)
    L["rep"] = L["rep"] * (1 + ctx.u(0.0, 0.3) * shape)
    L["sample_corr_len"] = np.full(ctx.n, ctx.u(-0.3, 0.0))
    ctx.info.update(length_factor=F)


def _warmup_prep(ctx: Ctx) -> None:
    ctx.P["warmup"] = max(5, int(round(ctx.u(0.02, 0.08) * ctx.n)))


def warmup_transient(ctx: Ctx) -> None:
    """Early spikes in grad norm, KL, entropy and clipping while the LR warms up, then they settle."""
    L, n, P = ctx.L, ctx.n, ctx.P
    W = P["warmup"]
    peak = W * ctx.u(0.3, 1.0)
    b = ramp(n, 0, peak, "smooth") * np.exp(-np.maximum(np.arange(n) - peak, 0) / max(2.0, W * ctx.u(0.3, 0.8)))
    g_amp, h_amp = ctx.u(1.5, 5.0), ctx.u(0.3, 1.2)
    L["g"] = L["g"] * (1 + g_amp * b)
    L["g"][:3] *= ctx.u(1.5, 4.0)
    L["kl"] = L["kl"] + P["kl_end"] * ctx.u(0.1, 0.4) * b
    L["H"] = L["H"] * (1 + h_amp * b)
    L["clip"] = np.minimum(L["clip"] * (1 + ctx.u(1.0, 4.0) * b), 0.2)
    L["lmed"] = L["lmed"] * (1 + ctx.u(-0.2, 0.3) * b)
    ctx.info.update(warmup_steps=W, grad_spike=g_amp + 1, entropy_spike=h_amp + 1)


def _noisy_prep(ctx: Ctx) -> None:
    ctx.P["sig_g"] = ctx.u(0.4, 0.6) / min(ctx.noise, 1.0)  # heavy tails whatever the run's noise


def noisy_grad(ctx: Ctx) -> None:
    """Heavy-tailed grad norms plus one or two isolated spikes (8-40x), each a single step."""
    n, rng = ctx.n, ctx.rng
    k = int(ctx.choice([1, 1, 2]))
    lo, hi = max(1, int(0.1 * n)), max(2, int(0.95 * n))
    # grad_norm is one step's value: a spike a sparse log never samples is not a trap, so
    # spikes fall on logged steps (every step of a dense log is one)
    steps = ctx.logged_idx[(ctx.logged_idx >= lo) & (ctx.logged_idx < hi)]
    where = np.sort(rng.choice(steps, size=min(k, len(steps)), replace=False))
    sizes = rng.uniform(8.0, 40.0, len(where))
    ctx.info.update(spike_steps=[int(i) + 1 for i in where], spike_sizes=[float(s) for s in sizes])

    def post(ctx: Ctx, obs: dict[str, np.ndarray], extra: dict[str, np.ndarray]) -> None:
        obs["grad_norm"][where] *= sizes
        obs["grad_norm_post_clip"] = np.minimum(obs["grad_norm"], ctx.P["max_grad_norm"])
        obs["loss"][where] += rng.normal(0, 1, len(where)) * ctx.P["loss_sd"] * 6

    ctx.post.append(post)


def _saturation_prep(ctx: Ctx) -> None:
    P = ctx.P
    P.update(template=ctx.choice(["binary", "format"]), curve="sigmoid", curve_center=ctx.u(0.4, 0.65),
             curve_width=ctx.u(0.05, 0.12), acc_ceil=ctx.u(0.9, 0.96), acc0=ctx.u(0.2, 0.5), kappa0=ctx.lu(2.5, 8.0))


def _easy_prep(ctx: Ctx) -> None:
    set_algorithm(ctx, "grpo")
    P = ctx.P
    P.update(template=ctx.choice(["binary", "format"]), acc0=ctx.u(0.82, 0.93), kappa0=ctx.lu(0.4, 3.0),
             H_decline=ctx.u(2.0, 3.5), L0=ctx.lu(150.0, 400.0), fmt0=ctx.u(0.9, 0.97), fmt_ceil=ctx.u(0.97, 0.995))
    P["acc_ceil"] = min(0.985, P["acc0"] + ctx.u(0.02, 0.08))
    if ctx.rng.random() < 0.7:
        P["beta"] = 0.0
    ctx.required |= set(GROUP_FIELDS)


def _sparse_prep(ctx: Ctx) -> None:
    ctx.P["profile"] = "sparse"


def _short_prep(ctx: Ctx) -> None:
    P = ctx.P
    P["curve_tau"] = ctx.u(0.1, 0.4)
    if ctx.rng.random() < 0.5:
        P["warmup"] = max(2, int(round(ctx.u(0.05, 0.2) * ctx.n)))


def _ppo_prep(ctx: Ctx) -> None:
    set_algorithm(ctx, "ppo")


def _async_prep(ctx: Ctx) -> None:
    P = ctx.P
    P.update(**{"async": True, "vllm": True, "a0": ctx.u(0.5, 2.0), "clip0": ctx.lu(0.02, 0.1)})


def async_offpolicy(ctx: Ctx) -> None:
    """Steady off-policy lag: slightly biased ratios, a steady mismatch with spikes."""
    ctx.L["rbias"] = ctx.L["rbias"] + ctx.u(-0.005, 0.005)


# family -> (prepare, apply, forced algorithm or None)
FAMILIES: dict[str, tuple[Callable[[Ctx], None], Callable[[Ctx], None], str | None]] = {
    "steady": (_noop, _noop, None),
    "reasoning_growth": (_reasoning_prep, reasoning_growth, None),
    "warmup_transient": (_warmup_prep, warmup_transient, None),
    "noisy_grad": (_noisy_prep, noisy_grad, None),
    "late_saturation": (_saturation_prep, _noop, None),
    "easy_task": (_easy_prep, _noop, "grpo"),
    "sparse_logging": (_sparse_prep, _noop, None),
    "short": (_short_prep, _noop, None),
    "ppo": (_ppo_prep, _noop, "ppo"),
    "async_offpolicy": (_async_prep, async_offpolicy, None),
}


def prepare(ctx: Ctx, family: str) -> None:
    """Run-level knobs and required fields of a healthy family."""
    ctx.required |= set(FAMILY_FIELDS[family])
    if family == "late_saturation" and ctx.P["algorithm"] == "grpo":
        ctx.required |= set(GROUP_FIELDS)
    FAMILIES[family][0](ctx)


def apply(ctx: Ctx, family: str) -> None:
    """Edit the baseline latents into the family's shape."""
    FAMILIES[family][1](ctx)
