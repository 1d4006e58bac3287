"""The 18 failure signatures as edits of a healthy run's latent dynamics.

Each signature has ``prepare`` (run-level knobs it needs: algorithm, reward template, fields it
must log) and ``apply`` (draws a random onset, transition width, magnitude and variant, then
edits the latents with the correlated symptoms the real failure shows). Onsets are uniform in
about 20-70% of the run but at least ~15 steps in and with room for the symptom afterwards.
"""

from __future__ import annotations

import math
from typing import Any, Callable

import numpy as np

from rlprobe.synth._numeric import after, beta_moment, lognoise, norm_ppf, ramp
from rlprobe.synth.catalog import PATHOLOGY_FIELDS
from rlprobe.synth.model import Ctx, pick_cap, set_algorithm


# --------------------------------------------------------------------------------------------
# helpers
# --------------------------------------------------------------------------------------------
def draw_onset(ctx: Ctx, lo: float = 0.2, hi: float = 0.7) -> int:
    """A random onset index: uniform in [lo, hi] of the run, >= ~15 steps in, room left after."""
    n = ctx.n
    o = int(round(ctx.u(lo, hi) * n))
    o = max(o, min(15, n // 3))
    o = min(o, n - max(8, int(0.2 * n)))
    o = max(o, 3)
    ctx.onset = o
    return o


def width(ctx: Ctx, lo: float, hi: float, frac: float = 0.5) -> float:
    """A transition width in steps: log-uniform in [lo, hi], at most frac of what is left of the run."""
    room = ctx.n - (ctx.onset or 0)
    return float(np.clip(ctx.lu(lo, hi), 1.0, max(1.0, frac * room)))


def progress_after(ctx: Ctx, o: int) -> np.ndarray:
    """0 until the onset, then rising linearly to 1 at the last step."""
    return after(ctx.n, o) / max(ctx.n - 1 - o, 1)


def early_mean(a: np.ndarray, n: int) -> float:
    """Mean of the first ~10% of a series (at least 3 values)."""
    return float(np.mean(a[: max(3, n // 10)]))


def freeze_after(a: np.ndarray, o: int, keep: float) -> np.ndarray:
    """After index o, keep only ``keep`` of the series' further movement (a stall)."""
    out = a.copy()
    out[o:] = a[o] + (a[o:] - a[o]) * keep
    return out


def geo(a: np.ndarray, target: np.ndarray | float, s: np.ndarray) -> np.ndarray:
    """Geometric interpolation from a towards target by s in [0, 1]."""
    return np.exp(np.log(np.maximum(a, 1e-12)) * (1 - s) + np.log(np.maximum(target, 1e-12)) * s)


def _bump(n: int, start: float, rise: float, fall: float) -> np.ndarray:
    return ramp(n, start, rise, "fast") * (1 - ramp(n, start + rise, fall, "smooth"))


# --------------------------------------------------------------------------------------------
# signatures
# --------------------------------------------------------------------------------------------
def _kl_prep(ctx: Ctx) -> None:
    if ctx.P["beta"] == 0:
        ctx.P["beta"] = ctx.lu(0.005, 0.1)


def kl_blowup(ctx: Ctx) -> None:
    """KL grows exponentially or jumps then keeps growing; kl_max faster; clip, grad norm up; reward sags late."""
    L, n = ctx.L, ctx.n
    o = draw_onset(ctx)
    d = progress_after(ctx, o)
    ctx.variant = ctx.choice(["exponential", "jump"], p=[0.6, 0.4])
    if ctx.variant == "exponential":
        F = ctx.lu(8.0, 100.0)
        mult = F ** (d ** ctx.u(1.0, 1.4))
        ctx.info["final_factor"] = F
    else:
        J, F2 = ctx.u(4.0, 25.0), ctx.u(1.5, 4.0)
        wj = width(ctx, 1.0, 5.0, 0.2)
        mult = (1 + (J - 1) * ramp(n, o, wj, "fast")) * F2**d
        ctx.info.update(jump_factor=J, jump_steps=wj)
        F = J * F2
    ctx.magnitude = F
    sev = np.log(mult) / math.log(F)
    L["kl"] = L["kl"] * mult
    L["klr"] = L["klr"] * (1 + ctx.u(1.0, 4.0) * ramp(n, o, max(3.0, 0.3 * (n - o))))
    L["clip"] = L["clip"] * (1 + ctx.u(0.5, 2.0) * sev)
    L["g"] = L["g"] * (1 + ctx.u(0.3, 2.0) * sev)
    L["H"] = L["H"] * (1 + ctx.u(-0.4, 0.6) * sev)
    L["acc"] = L["acc"] * (1 - ctx.u(0.0, 0.3) * sev**2)
    L["mism"] = L["mism"] * (1 + ctx.u(0.0, 1.0) * sev)


def entropy_collapse(ctx: Ctx) -> None:
    """Entropy falls to 3-15% of its early level; groups polarise, learning stalls, lengths homogenise."""
    L, n, S = ctx.L, ctx.n, ctx.S
    o = draw_onset(ctx)
    rho = ctx.u(0.03, 0.15)
    ctx.magnitude = rho
    e0 = early_mean(L["H"], n)
    w = width(ctx, 10.0, 300.0, 0.6)
    s = ramp(n, o, w, ctx.choice(["smooth", "fast", "linear"]))
    target = rho * e0 * (1 - 0.2 * progress_after(ctx, o))
    L["H"] = geo(L["H"], np.minimum(target, L["H"]), s)
    ctx.info.update(entropy_ratio_vs_early=rho, transition_steps=w)
    L["mism"] = L["mism"] * np.sqrt(np.maximum(L["H"] / np.maximum(L["H"][o], 1e-9), 0) ** s)
    L["kappa"] = L["kappa"] * ctx.u(0.08, 0.3) ** s
    L["acc"] = freeze_after(L["acc"], o, 0.15) * (1 - ctx.u(0.0, 0.12) * s)
    L["lsig"] = L["lsig"] * (1 - ctx.u(0.2, 0.5) * s)
    L["lmed"] = L["lmed"] * np.exp(ctx.u(-0.3, 0.1) * s)
    L["clip"] = L["clip"] * (1 - ctx.u(0.3, 0.8) * s)
    L["kl"] = L["kl"] * (1 + ctx.u(0.2, 1.2) * s)
    L["rep"] = L["rep"] * (1 + ctx.u(0.2, 1.0) * s)
    S["ident"] = s * ctx.u(0.6, 0.95)


def _hack_prep(ctx: Ctx) -> None:
    ctx.P.update(template="judge", log_components=True, w_judge=1.0)


def reward_hack_length(ctx: Ctx) -> None:
    """Length grows 1.8-5x while a judge component rises with it and correctness stays flat or falls."""
    L, n, S, P = ctx.L, ctx.n, ctx.S, ctx.P
    o = draw_onset(ctx)
    F = ctx.u(1.8, 5.0)
    ctx.magnitude = F
    w = max(5.0, ctx.u(0.25, 0.7) * (n - o))
    s = ramp(n, o, w, "smooth")
    L["lmed"] = L["lmed"] * F**s
    P["cap"] = pick_cap(L["lmed"], P["lsig"], ctx.u(1.8, 2.6))
    j_hi = ctx.u(0.82, 0.95)
    L["judge"] = L["judge"] + (j_hi - L["judge"]) * s
    # the hack pays: whatever correctness loses, the judge's gain more than covers
    w_c, span = P["components"]["correct"][1], P["correct_range"][1] - P["correct_range"][0]
    gain = P["components"]["judge"][1] * (j_hi - float(L["judge"][o]))
    max_drop = min(0.3, 0.6 * gain / max(w_c * span * float(L["acc"][o]), 1e-6))
    ctx.variant = "correctness_falls" if max_drop >= 0.1 and ctx.rng.random() < 0.5 else "correctness_flat"
    drop = ctx.u(0.0, 0.04) if ctx.variant == "correctness_flat" else ctx.u(0.1, max_drop)
    L["acc"] = freeze_after(L["acc"], o, 0.1) * (1 - drop * s)
    L["rep"] = L["rep"] * (1 + ctx.u(0.2, 0.8) * s)
    L["kl"] = L["kl"] * (1 + ctx.u(0.3, 1.5) * s)
    L["H"] = L["H"] * (1 - ctx.u(0.0, 0.3) * s)
    L["sample_corr_len"] = L["sample_corr_len"] * (1 - s) + s * ctx.u(0.2, 0.35)
    S["pad"] = s
    ctx.info.update(length_factor=F, transition_steps=w, correctness_drop=drop)


def _format_prep(ctx: Ctx) -> None:
    P = ctx.P
    P.update(template=ctx.choice(["format", "xml"]), w_format=ctx.choice([0.5, 1.0, 1.0, 2.0]), log_components=True)
    P.update(fmt0=ctx.u(0.1, 0.45), fmt_tau=ctx.u(0.4, 1.5))
    P["fmt_ceil"] = P["fmt0"] + ctx.u(0.1, 0.35)


def format_gaming(ctx: Ctx) -> None:
    """The format component pins at its ceiling; correctness stagnates or falls (as far as format pays)."""
    L, n, S = ctx.L, ctx.n, ctx.S
    o = draw_onset(ctx)
    w = width(ctx, 5.0, 60.0, 0.4)
    s = ramp(n, o, w, "smooth")
    f_top = ctx.u(0.985, 0.999)
    L["fmt"] = L["fmt"] + (f_top - L["fmt"]) * s
    # the policy games the format because it pays: correctness may only fall as far as the
    # format gain covers, so total reward holds or rises
    P = ctx.P
    w_c, span = P["components"]["correct"][1], P["correct_range"][1] - P["correct_range"][0]
    gain = P["components"]["format"][1] * (f_top - float(L["fmt"][o]))
    if "xml" in P["components"]:
        gain += P["components"]["xml"][1] * 0.5 * 0.65 * (f_top - float(L["fmt"][o]))
    max_drop = min(0.6, 1.2 * gain / max(w_c * span * float(L["acc"][o]), 1e-6))
    ctx.variant = "falls" if max_drop >= 0.2 and ctx.rng.random() < 0.5 else "stagnates"
    drop = ctx.u(0.0, 0.05) if ctx.variant == "stagnates" else ctx.u(0.2, max_drop)
    s2 = ramp(n, o, w * ctx.u(1.0, 4.0), "smooth")
    L["acc"] = freeze_after(L["acc"], o, 0.1) * (1 - drop * s2)
    ctx.magnitude = drop
    if ctx.rng.random() < 0.6:
        L["lmed"] = L["lmed"] * ctx.u(0.35, 0.8) ** s
    L["H"] = L["H"] * (1 - ctx.u(0.1, 0.35) * s)
    S["fmtonly"] = s * ctx.u(0.5, 0.9)
    ctx.info.update(format_ceiling=f_top, correctness_drop=drop, transition_steps=w)


def clip_saturation(ctx: Ctx) -> None:
    """The clip fraction jumps to a sustained 0.25-0.6; ratio_p95 up, KL grows faster, learning slows."""
    L, n = ctx.L, ctx.n
    o = draw_onset(ctx)
    C = ctx.u(0.25, 0.6)
    ctx.magnitude = C
    w = width(ctx, 3.0, 40.0, 0.3)
    s = ramp(n, o, w, "smooth")
    L["clip"] = geo(L["clip"], C * np.exp(0.05 * ctx.sn(0.05)), s)
    L["rbias"] = L["rbias"] + ctx.u(-0.02, 0.03) * s
    L["kl"] = L["kl"] * (1 + ctx.u(0.5, 1.5) * s * progress_after(ctx, o))
    L["g"] = L["g"] * (1 + ctx.u(0.5, 2.0) * s)
    L["H"] = L["H"] * (1 + ctx.u(-0.3, 0.2) * s)
    L["acc"] = freeze_after(L["acc"], o, ctx.u(0.2, 0.6))
    ctx.info.update(clip_level=C, transition_steps=w)


def _degenerate_prep(ctx: Ctx) -> None:
    set_algorithm(ctx, "grpo")
    P = ctx.P
    ctx.variant = ctx.choice(["all_correct", "all_wrong"])
    P["template"] = ctx.choice(["binary", "format"])
    if ctx.variant == "all_correct":
        P.update(acc0=ctx.u(0.2, 0.45), kappa0=ctx.lu(1.5, 6.0))
        P["acc_ceil"] = P["acc0"] + ctx.u(0.1, 0.3)
    else:  # a hard task: low accuracy, prompts of similar difficulty until the groups polarise
        P.update(acc0=ctx.u(0.1, 0.25), kappa0=ctx.lu(5.0, 15.0))
        P["acc_ceil"] = P["acc0"] + ctx.u(0.05, 0.2)


def degenerate_groups(ctx: Ctx) -> None:
    """Groups polarise (Beta concentration -> ~0): mostly all-correct or all-wrong, zero within-group variance."""
    L, n, S, P = ctx.L, ctx.n, ctx.S, ctx.P
    o = draw_onset(ctx)
    w = width(ctx, 8.0, 150.0, 0.5)
    s = ramp(n, o, w, "smooth")
    k_end = ctx.u(0.03, 0.2)
    L["kappa"] = geo(L["kappa"], k_end, s)
    tgt = ctx.u(0.72, 0.9) if ctx.variant == "all_correct" else min(ctx.u(0.04, 0.15), 0.8 * float(L["acc"][o]))
    L["acc"] = L["acc"] + (tgt - L["acc"]) * s
    L["fmt"] = L["fmt"] + (0.997 - L["fmt"]) * s
    L["H"] = L["H"] * ctx.u(0.45, 0.8) ** s
    L["clip"] = L["clip"] * (1 - 0.5 * s)
    S["ident"] = s * ctx.u(0.3, 0.7)
    G = P["G"]
    zvf_end = float(beta_moment(np.array([tgt]), np.array([k_end]), G)[0] + beta_moment(np.array([1 - tgt]), np.array([k_end]), G)[0])
    ctx.magnitude = zvf_end
    ctx.info.update(expected_zero_variance_frac=zvf_end, accuracy_target=tgt, transition_steps=w)


def _adv_prep(ctx: Ctx) -> None:
    ctx.P["whiten"] = False


def adv_collapse(ctx: Ctx) -> None:
    """Advantages are scaled to ~0 (or zeroed) while rewards keep their variance; learning, grads and clipping stall."""
    L, n, P = ctx.L, ctx.n, ctx.P
    o = draw_onset(ctx)
    ctx.variant = ctx.choice(["scaled", "zeroed"])
    ppo = P["algorithm"] == "ppo"
    w = width(ctx, 10.0, 100.0, 0.4) if ppo else width(ctx, 1.0, 15.0, 0.3)
    s = ramp(n, o, w, "fast")
    if ctx.variant == "scaled":
        a_end, z_end = ctx.lu(0.003, 0.05), ctx.u(0.6, 0.95)
    else:
        a_end, z_end = ctx.lu(1e-4, 5e-3), ctx.u(0.95, 1.0)
    ctx.magnitude = a_end
    L["adv_scale"] = a_end**s
    L["adv_zero_min"] = z_end * s
    L["pg_scale"] = a_end**s
    L["acc"] = freeze_after(L["acc"], o, 0.05)
    L["H"] = np.where(np.arange(n) >= o, L["H"][o] * (L["H"] / L["H"][o]) ** 0.1, L["H"])
    L["lmed"] = np.where(np.arange(n) >= o, L["lmed"][o] * (L["lmed"] / L["lmed"][o]) ** 0.2, L["lmed"])
    kl_o = L["kl"][o]
    if P["beta"] > 0:
        decay = kl_o * (0.5 + 0.5 * np.exp(-after(n, o) / max(5.0, 0.3 * (n - o))))
        L["kl"] = np.where(np.arange(n) >= o, decay, L["kl"])
        g_fac = ctx.u(0.03, 0.2)
    else:
        L["kl"] = np.where(np.arange(n) >= o, kl_o * (L["kl"] / np.maximum(kl_o, 1e-12)) ** 0.1, L["kl"])
        g_fac = ctx.lu(0.003, 0.03)
    L["g"] = L["g"] * g_fac**s
    L["clip"] = L["clip"] * 0.05**s
    if ppo:
        L["ev"] = L["ev"] + (ctx.u(0.95, 0.995) - L["ev"]) * s
    ctx.info.update(adv_scale=a_end, adv_zero_frac=z_end, transition_steps=w)


def _value_prep(ctx: Ctx) -> None:
    set_algorithm(ctx, "ppo")


def value_divergence(ctx: Ctx) -> None:
    """Explained variance falls below 0 while value_loss runs away (5-200x) and value clipping saturates."""
    L, n = ctx.L, ctx.n
    o = draw_onset(ctx, 0.25, 0.7)
    w = width(ctx, 10.0, 200.0, 0.6)
    s = ramp(n, o, w, "convex")
    ev_end = ctx.u(-1.5, -0.05)
    L["ev"] = L["ev"] + (ev_end - L["ev"]) * s
    F = ctx.lu(5.0, 200.0)
    ctx.magnitude = F
    L["vloss"] = L["vloss"] * F**s
    L["vclip"] = L["vclip"] + (ctx.u(0.3, 0.8) - L["vclip"]) * s
    L["g"] = L["g"] * (1 + ctx.u(1.0, 5.0) * s)
    L["acc"] = freeze_after(L["acc"], o, 0.3) * (1 - ctx.u(0.0, 0.15) * s)
    L["clip"] = L["clip"] * (1 + ctx.u(0.3, 1.5) * s)
    ctx.info.update(explained_variance_end=ev_end, value_loss_factor=F, transition_steps=w)


def grad_pathology(ctx: Ctx) -> None:
    """NaN/Inf steps with NaN loss (nan), repeated violent spikes (spikes), or exponential grad-norm growth (growth)."""
    L, n, rng = ctx.L, ctx.n, ctx.rng
    o = draw_onset(ctx)
    ctx.variant = ctx.choice(["nan", "spikes", "growth"], p=[0.4, 0.3, 0.3])
    idx = np.arange(n)
    if ctx.variant == "nan":
        p0, p1 = ctx.u(0.02, 0.1), ctx.u(0.15, 0.8)
        prob = p0 + (p1 - p0) * ramp(n, o, max(3.0, (n - o) * ctx.u(0.3, 1.0)), "linear")
        mask = (rng.random(n) < prob) & (idx >= o)
        mask[o] = True
        is_nan = rng.random(n) < 0.6
        counts = np.floor(np.exp(rng.uniform(math.log(50), math.log(5e6), n)))
        L["g"] = L["g"] * (1 + ctx.u(0.5, 4.0) * ramp(n, o, width(ctx, 3.0, 30.0, 0.3)))
        L["acc"] = L["acc"] * (1 - ctx.u(0.0, 0.3) * ramp(n, o, max(3.0, 0.5 * (n - o))))
        ctx.magnitude = p1
        ctx.info.update(nan_rate_start=p0, nan_rate_end=p1, nan_steps=int(mask.sum()))

        def post(ctx: Ctx, obs: dict[str, np.ndarray], extra: dict[str, np.ndarray]) -> None:
            nan_steps, inf_steps = mask & is_nan, mask & ~is_nan
            obs["nan_count"] = np.where(nan_steps, counts, 0.0)
            obs["inf_count"] = np.where(inf_steps, counts, 0.0)
            obs["loss"] = np.where(nan_steps, np.nan, np.where(inf_steps & (rng.random(n) < 0.5), np.inf, obs["loss"]))
            for f in ("grad_norm", "grad_norm_post_clip", "weight_update_ratio"):
                obs[f] = np.where(nan_steps, np.nan, np.where(inf_steps, np.inf, obs[f]))
            for k, i in enumerate(np.flatnonzero(mask)):
                if k >= 200:
                    break
                what = "nan" if is_nan[i] else "inf"
                ctx.events.append(("nan_detected", int(i) + 1, f"{what} in gradients; step skipped",
                                   {"nan_count": int(obs["nan_count"][i]), "inf_count": int(obs["inf_count"][i])}))

        ctx.post.append(post)
    elif ctx.variant == "spikes":
        rate, M = ctx.u(0.03, 0.15), ctx.lu(15.0, 200.0)
        mask = (rng.random(n) < rate) & (idx >= o)
        mask[o] = True
        if mask.sum() < 3:  # repeated, not a one-off: at least three spikes
            mask[rng.choice(np.arange(o + 1, n), size=min(2, n - o - 1), replace=False)] = True
        size = M * lognoise(rng, n, 0.5)
        # each spike knocks the policy a little: KL ratchets up, entropy takes a random walk
        kicks = np.cumsum(np.where(mask, rng.uniform(0.5, 1.5, n), 0.0))
        L["kl"] = L["kl"] * (1 + ctx.u(0.3, 2.0) * kicks / max(kicks[-1], 1e-9))
        walk = np.cumsum(np.where(mask, rng.normal(0, 1, n), 0.0)) / math.sqrt(max(int(mask.sum()), 1))
        L["H"] = L["H"] * np.exp(0.15 * walk)
        L["clip"] = np.where(mask, np.minimum(L["clip"] * 4, 0.5), L["clip"])
        ctx.magnitude = M
        ctx.info.update(spike_rate=rate, spike_factor_median=M, spikes=int(mask.sum()))

        def post(ctx: Ctx, obs: dict[str, np.ndarray], extra: dict[str, np.ndarray]) -> None:
            obs["grad_norm"] = np.where(mask, obs["grad_norm"] * size, obs["grad_norm"])
            obs["grad_norm_post_clip"] = np.minimum(obs["grad_norm"], ctx.P["max_grad_norm"])
            bump = rng.normal(0, 1, n) * ctx.P["loss_sd"] * np.sqrt(size) * 3
            obs["loss"] = np.where(mask, obs["loss"] + bump, obs["loss"])

        ctx.post.append(post)
    else:
        F = ctx.lu(30.0, 1000.0)
        d = progress_after(ctx, o)
        growth = F ** (d ** ctx.u(1.0, 1.5))
        L["g"] = L["g"] * growth
        L["pg_scale"] = np.sqrt(growth)
        L["acc"] = L["acc"] * (1 - ctx.u(0.0, 0.3) * d**2)
        L["H"] = L["H"] * (1 + ctx.u(0.0, 0.5) * d**2)
        L["kl"] = L["kl"] * (1 + ctx.u(0.0, 1.0) * d**2)
        ctx.magnitude = F
        ctx.info.update(growth_factor=F)


def truncation_starve(ctx: Ctx) -> None:
    """Median length climbs until 30-90% of completions hit the cap; reward falls with the truncated share."""
    L, n, P = ctx.L, ctx.n, ctx.P
    o = draw_onset(ctx)
    T = ctx.u(0.3, 0.9)
    ctx.magnitude = T
    w = width(ctx, 10.0, 200.0, 0.5)
    s = ramp(n, o, w, "smooth")
    l_target = math.exp(math.log(P["cap"]) - P["lsig"] * float(norm_ppf(1 - T)))
    l_target = l_target * (1 + 0.08 * progress_after(ctx, o))
    L["lmed"] = geo(L["lmed"], np.maximum(l_target, L["lmed"]), s)
    L["H"] = L["H"] * (1 + ctx.u(-0.1, 0.25) * s)
    L["rep"] = L["rep"] * (1 + ctx.u(0.0, 0.3) * s)
    ctx.info.update(truncation_target=T, transition_steps=w, cap=P["cap"])


def repetition_spiral(ctx: Ctx) -> None:
    """repetition_rate climbs (convex) to 0.25-0.8; length up, entropy and reward down; texts loop."""
    L, n, S = ctx.L, ctx.n, ctx.S
    o = draw_onset(ctx)
    R = ctx.u(0.25, 0.8)
    ctx.magnitude = R
    w = width(ctx, 20.0, 400.0, 0.7)
    s = ramp(n, o, w, "convex")
    L["rep"] = L["rep"] + (R - L["rep"]) * s
    L["lmed"] = L["lmed"] * (1 + ctx.u(0.2, 1.0) * s)
    L["H"] = L["H"] * (1 - ctx.u(0.15, 0.5) * s)
    L["acc"] = L["acc"] * (1 - ctx.u(0.2, 0.6) * s)
    L["kl"] = L["kl"] * (1 + ctx.u(0.2, 1.0) * s)
    S["loop"] = s
    ctx.info.update(repetition_target=R, transition_steps=w)


def _std_death_prep(ctx: Ctx) -> None:
    P = ctx.P
    P["template"] = ctx.choice(["binary", "format"])
    ctx.variant = ctx.choice(["saturated", "collapsed"])
    if ctx.variant == "collapsed":  # a hard task on which the policy settles on one wrong answer
        P.update(acc0=ctx.u(0.04, 0.2), curve_tau=ctx.u(0.3, 1.0))
        P["acc_ceil"] = P["acc0"] + ctx.u(0.03, 0.15)


def reward_std_death(ctx: Ctx) -> None:
    """Reward variance dies: everything right (saturated) or everything wrong (collapsed), entropy low."""
    L, n, S = ctx.L, ctx.n, ctx.S
    o = draw_onset(ctx)
    w = width(ctx, 5.0, 100.0, 0.5)
    s = ramp(n, o, w, "smooth")
    if ctx.variant == "saturated":
        tgt, ftgt = 1 - ctx.lu(1e-4, 2e-3), 0.9995
    else:
        tgt, ftgt = ctx.lu(1e-5, 2e-3), ctx.choice([0.0005, 0.9995])
        L["lmed"] = L["lmed"] * ctx.u(0.3, 1.0) ** s
        S["garbage"] = 0.9 * s
    L["acc"] = L["acc"] + (tgt - L["acc"]) * s
    L["fmt"] = L["fmt"] + (ftgt - L["fmt"]) * s
    L["kappa"] = geo(L["kappa"], 50.0, s)
    L["lsig"] = L["lsig"] * (1 - 0.4 * s)
    e0 = early_mean(L["H"], n)
    fac = np.maximum(ctx.u(0.3, 0.6), 0.2 * e0 / np.maximum(L["H"], 1e-9))
    L["H"] = L["H"] * np.minimum(fac, 1.0) ** s
    L["clip"] = L["clip"] * (1 - 0.7 * s)
    S["ident"] = s * ctx.u(0.7, 0.95)
    ctx.info.update(accuracy_target=tgt, transition_steps=w)
    end = int(min(n - 1, o + w))

    def post(ctx: Ctx, obs: dict[str, np.ndarray], extra: dict[str, np.ndarray]) -> None:
        before = float(np.median(obs["reward_std"][max(0, o - max(5, o // 3)) : o + 1]))
        late = float(np.median(obs["reward_std"][end:])) if end < n else float(obs["reward_std"][-1])
        ctx.magnitude = late / max(before, 1e-9)
        ctx.info["reward_std_ratio"] = ctx.magnitude

    ctx.post.append(post)


def _drift_prep(ctx: Ctx) -> None:
    if ctx.P["beta"] == 0:
        ctx.P["kl_monitor"] = True


def ref_policy_drift(ctx: Ctx) -> None:
    """KL concentrates in 1-2 positional buckets (start, end or middle) and rises a little overall."""
    L, n, S, P = ctx.L, ctx.n, ctx.S, ctx.P
    o = draw_onset(ctx)
    k = ctx.choice([1, 2])
    where = ctx.choice(["start", "end", "middle"], p=[0.5, 0.35, 0.15])
    if where == "start":
        buckets = [0] if k == 1 else [0, 1]
    elif where == "end":
        buckets = [7] if k == 1 else [6, 7]
    else:
        b = int(ctx.rng.integers(1, 6))
        buckets = [b] if k == 1 else [b, b + 1]
    share = ctx.u(0.6, 0.95)
    ctx.magnitude = share
    w = width(ctx, 3.0, 50.0, 0.3)
    s = ramp(n, o, w, "smooth")
    base = L["posw"][0]
    target = base.copy()
    rest = [b for b in range(8) if b not in buckets]
    target[rest] = base[rest] / base[rest].sum() * (1 - share)
    split = ctx.rng.dirichlet([4.0] * len(buckets))
    target[buckets] = share * split
    L["posw"] = (1 - s)[:, None] * base[None, :] + s[:, None] * target[None, :]
    L["kl"] = L["kl"] * (1 + ctx.u(0.2, 1.0) * s)
    L["klr"] = L["klr"] * (1 + ctx.u(0.5, 2.0) * s)
    S["artifact"] = s * ctx.u(0.3, 0.8)
    P["artifact_start"] = where != "end"
    ctx.variant = where
    ctx.info.update(buckets=buckets, share=share, transition_steps=w)


def _rot_prep(ctx: Ctx) -> None:
    ctx.P.update(len_d1=ctx.u(-0.08, 0.08), len_dip=0.0)
    ctx.variant = ctx.choice(["generation", "overhead"], p=[0.7, 0.3])
    if ctx.variant == "generation":
        ctx.required.add("generation_time_s")


def throughput_rot(ctx: Ctx) -> None:
    """Generation (or host overhead) time creeps up so step_time grows 1.5-4x at constant length."""
    L, n = ctx.L, ctx.n
    o = draw_onset(ctx)
    F = ctx.u(1.5, 4.0)
    ctx.magnitude = F
    s = ramp(n, o, max(5.0, (n - o) * ctx.u(0.6, 1.0)), ctx.choice(["linear", "convex"]))
    total = L["tgen"][o] + L["topt"][o] + L["tover"][o]
    key = "tgen" if ctx.variant == "generation" else "tover"
    m = 1 + (F - 1) * total / L[key][o]
    L[key] = L[key] * (1 + (m - 1) * s)
    ctx.info.update(step_time_factor=F)
    if ctx.variant == "overhead":
        def post(ctx: Ctx, obs: dict[str, np.ndarray], extra: dict[str, np.ndarray]) -> None:
            extra["gpu_mem_gb"] = np.minimum(extra["gpu_mem_gb"] + ctx.u(5, 20) * s, 80.0)

        ctx.post.append(post)


def entropy_blowup(ctx: Ctx) -> None:
    """Entropy jumps 3-20x in a few steps, length runs to the cap, reward falls to ~0, KL explodes."""
    L, n, S, P = ctx.L, ctx.n, ctx.S, ctx.P
    o = draw_onset(ctx)
    F = ctx.u(3.0, 20.0)
    w = width(ctx, 2.0, 10.0, 0.3)
    s = ramp(n, o, w, "smooth")
    settle = ctx.u(0.5, 1.0)
    F = max(F, 2.5 * early_mean(L["H"], n) / (float(L["H"][o]) * settle))  # far above the early level too
    ctx.magnitude = F
    Fi = F * (1 - (1 - settle) * ramp(n, o + w + ctx.lu(3, 20), ctx.lu(5, 30)))
    L["H"] = np.minimum(L["H"] + (L["H"][o] * Fi * np.exp(0.05 * ctx.sn(0.02)) - L["H"]) * s, 11.5)
    lag = ctx.u(0.0, 4.0)
    s2 = ramp(n, o + lag, width(ctx, 2.0, 8.0, 0.3), "smooth")
    L["lmed"] = geo(L["lmed"], P["cap"] * ctx.u(1.5, 3.0), s2)
    L["acc"] = L["acc"] + (ctx.u(0.0, 0.02) - L["acc"]) * s2
    L["fmt"] = L["fmt"] + (ctx.u(0.0, 0.05) - L["fmt"]) * s2
    L["kl"] = L["kl"] * (1 + (ctx.lu(50.0, 500.0) - 1) * s)
    L["klr"] = L["klr"] * (1 + s)
    L["clip"] = L["clip"] * (1 + ctx.u(2.0, 8.0) * _bump(n, o, 2, 5)) * (1 - (1 - ctx.u(0.2, 1.0)) * s2)
    L["g"] = L["g"] * (1 + ctx.u(3.0, 20.0) * _bump(n, o, 2, 4))
    L["mism"] = L["mism"] * (1 + ctx.u(5.0, 20.0) * s)
    L["rep"] = L["rep"] * (1 - 0.7 * s)
    S["soup"] = s
    ctx.info.update(entropy_factor=F, settle=settle, transition_steps=w)


def _stale_prep(ctx: Ctx) -> None:
    ctx.P["async"] = True
    ctx.P["a0"] = ctx.u(0.3, 1.0)


def stale_rollouts(ctx: Ctx) -> None:
    """Batch age rises to 4-10 (or jumps to 3-8); ratio_mean drifts, clipping rises, learning slows."""
    L, n = ctx.L, ctx.n
    o = draw_onset(ctx)
    ctx.variant = ctx.choice(["rising", "jump"], p=[0.65, 0.35])
    if ctx.variant == "rising":
        A = ctx.u(4.0, 10.0)
        s = ramp(n, o, max(5.0, (n - o) * ctx.u(0.3, 0.9)), "linear")
    else:
        A = ctx.u(3.0, 8.0)
        s = ramp(n, o, width(ctx, 1.0, 4.0, 0.2), "fast")
    ctx.magnitude = A
    L["age"] = L["age"] + (A - L["age"]) * s
    L["rbias"] = L["rbias"] + ctx.choice([-1.0, 1.0]) * ctx.u(0.01, 0.06) * s
    L["clip"] = np.minimum(L["clip"] * (1 + ctx.u(1.0, 4.0) * s), 0.35)
    L["kl"] = L["kl"] * (1 + ctx.u(0.1, 0.6) * s)
    L["acc"] = freeze_after(L["acc"], o, ctx.u(0.3, 0.7))
    L["H"] = L["H"] * (1 + ctx.u(-0.2, 0.2) * s)
    ctx.info.update(batch_age_target=A)


def _mismatch_prep(ctx: Ctx) -> None:
    ctx.P["vllm"] = True
    ctx.P["m0"] = ctx.lu(5e-4, 8e-3)


def train_inference_mismatch(ctx: Ctx) -> None:
    """logprob_mismatch drifts (or jumps) from ~1e-3 to 0.03-0.2; ratios and clipping follow."""
    L, n = ctx.L, ctx.n
    o = draw_onset(ctx)
    M = ctx.u(0.03, 0.2)
    ctx.magnitude = M
    ctx.variant = ctx.choice(["drift", "jump"], p=[0.65, 0.35])
    if ctx.variant == "drift":
        s = ramp(n, o, max(5.0, (n - o) * ctx.u(0.3, 0.8)), ctx.choice(["linear", "convex"]))
        L["mism"] = geo(L["mism"], M, s)
    else:
        s = ramp(n, o, width(ctx, 1.0, 3.0, 0.2), "fast")
        L["mism"] = geo(L["mism"], M / ctx.u(1.0, 1.5), s) * (1 + 0.5 * progress_after(ctx, o))
    L["clip"] = np.minimum(L["clip"] * (1 + ctx.u(0.5, 2.0) * s), 0.3)
    L["rbias"] = L["rbias"] + ctx.u(-0.01, 0.01) * s
    L["acc"] = freeze_after(L["acc"], o, ctx.u(0.3, 0.8)) * (1 - ctx.u(0.0, 0.15) * s**2)
    L["H"] = L["H"] * (1 + ctx.u(0.0, 0.3) * s)
    ctx.info.update(mismatch_target=M)


def _collapse_prep(ctx: Ctx) -> None:
    P = ctx.P
    P.update(curve="exp", curve_tau=ctx.u(0.08, 0.3), acc0=ctx.u(0.05, 0.35))
    P["acc_ceil"] = min(0.95, P["acc0"] + ctx.u(0.3, 0.6))


def reward_collapse(ctx: Ctx) -> None:
    """Correctness falls by 50-90% within a few steps and stays down; entropy and KL up, a grad spike."""
    L, n, S = ctx.L, ctx.n, ctx.S
    o = draw_onset(ctx, 0.35, 0.75)
    D = ctx.u(0.5, 0.9)
    ctx.magnitude = D
    w = width(ctx, 2.0, max(3.0, 0.03 * n), 0.2)
    w = min(w, 20.0)
    s = ramp(n, o, w, "fast")
    acc_o = float(L["acc"][o])
    rec = ctx.u(0.0, 0.15)
    post_level = acc_o * (1 - D) + rec * D * acc_o * ramp(n, o + w, max(5.0, n - o - w), "linear")
    wiggle = L["acc"] - np.convolve(L["acc"], np.ones(5) / 5, mode="same")
    L["acc"] = np.clip(L["acc"] * (1 - s) + (post_level + wiggle) * s, 0.001, 0.999)
    L["fmt"] = L["fmt"] * (1 - ctx.u(0.3, 0.9) * D * s)
    L["judge"] = L["judge"] * (1 - 0.7 * D * s)
    L["H"] = L["H"] * (1 + ctx.u(0.2, 1.2) * s)
    L["kl"] = L["kl"] * (1 + ctx.u(0.5, 2.0) * s)
    L["g"] = L["g"] * (1 + ctx.u(4.0, 20.0) * _bump(n, o - 1, 2, ctx.lu(2, 8)))
    L["lmed"] = L["lmed"] * np.exp(ctx.u(-0.6, 0.5) * s)
    S["garbage"] = s * ctx.u(0.4, 0.8)
    ctx.info.update(reward_drop=D, recovery=rec, transition_steps=w)


def _noop(ctx: Ctx) -> None:
    """Nothing to prepare."""
    return None


# id -> (prepare, apply, forced algorithm or None)
SPECS: dict[str, tuple[Callable[[Ctx], None], Callable[[Ctx], None], str | None]] = {
    "KL_BLOWUP": (_kl_prep, kl_blowup, None),
    "ENTROPY_COLLAPSE": (_noop, entropy_collapse, None),
    "REWARD_HACK_LENGTH": (_hack_prep, reward_hack_length, None),
    "FORMAT_GAMING": (_format_prep, format_gaming, None),
    "CLIP_SATURATION": (_noop, clip_saturation, None),
    "DEGENERATE_GROUPS": (_degenerate_prep, degenerate_groups, "grpo"),
    "ADV_COLLAPSE": (_adv_prep, adv_collapse, None),
    "VALUE_DIVERGENCE": (_value_prep, value_divergence, "ppo"),
    "GRAD_PATHOLOGY": (_noop, grad_pathology, None),
    "TRUNCATION_STARVE": (_noop, truncation_starve, None),
    "REPETITION_SPIRAL": (_noop, repetition_spiral, None),
    "REWARD_STD_DEATH": (_std_death_prep, reward_std_death, None),
    "REF_POLICY_DRIFT_ASYMMETRY": (_drift_prep, ref_policy_drift, None),
    "THROUGHPUT_ROT": (_rot_prep, throughput_rot, None),
    "ENTROPY_BLOWUP": (_noop, entropy_blowup, None),
    "STALE_ROLLOUTS": (_stale_prep, stale_rollouts, None),
    "TRAIN_INFERENCE_MISMATCH": (_mismatch_prep, train_inference_mismatch, None),
    "REWARD_COLLAPSE": (_collapse_prep, reward_collapse, None),
}


def prepare(ctx: Ctx, sig: str) -> None:
    """Run-level knobs and required fields of a signature (before the baseline is built)."""
    ctx.required |= set(PATHOLOGY_FIELDS[sig])
    SPECS[sig][0](ctx)


def apply(ctx: Ctx, sig: str) -> dict[str, Any]:
    """Edit the healthy latents into the signature's failure."""
    SPECS[sig][1](ctx)
    return ctx.info
