"""The 19 failure signatures as edits of a healthy run's latent dynamics.

Each signature has ``prepare`` (run-level knobs it needs: algorithm, reward template, fields it
must log) and ``apply`` (draws a random onset, transition width, magnitude and variant, then
edits the latents with the correlated symptoms the real failure shows). Onsets are uniform in
about 20-70% of the run but at least ~15 steps in and with room for the symptom afterwards
(with the option onset=early: in the first 8-20% of the run).

The variants in ``EXTRA_VARIANTS`` (dead from the first step, episodes that end, a diverging
loss, a length bias present from step 1) are made only when asked for, by their own prepare
and apply (``VARIANT_SPECS``), so the default draw of every seed is what it always was. Their
onset is where the failure first holds in the latents (not where a ramp starts), and an episode
that ends says where (``ctx.holds``, ``ctx.episode_end``).
"""

from __future__ import annotations

import math
from typing import Any, Callable

import numpy as np

from rlprobe.synth._numeric import after, beta_moment, lognoise, norm_ppf, ramp
from rlprobe.synth.catalog import EXTRA_VARIANTS, PATHOLOGY_FIELDS
from rlprobe.synth.model import GROUP_FIELDS, Ctx, length_stats, pick_cap, set_algorithm


# --------------------------------------------------------------------------------------------
# helpers
# --------------------------------------------------------------------------------------------
def draw_onset(ctx: Ctx, lo: float = 0.2, hi: float = 0.7) -> int:
    """A random onset index: uniform in [lo, hi] of the run, >= ~15 steps in, room left after (onset=early: 8-20%)."""
    n = ctx.n
    if ctx.opts is not None and ctx.opts.onset == "early":  # the first 8-20% of the run, however short
        o = max(3, min(int(round(ctx.u(0.08, 0.2) * n)), n - max(8, int(0.2 * n))))
        ctx.onset = o
        return o
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
    # all_correct: polarised towards solved prompts with a third or more always failed. Beyond
    # about three quarters solved the degenerate groups are mostly solved prompts, which the
    # catalog reads as a saturated run (info), not a polarised one.
    tgt = ctx.u(0.55, 0.68) if ctx.variant == "all_correct" else min(ctx.u(0.04, 0.15), 0.8 * float(L["acc"][o]))
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
        ctx.holds_rule = "any"  # a NaN step makes its window's loss NaN and its nan_count non-zero
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
        # grad_norm is one step's value: a spike a sparse log never samples is not in the data,
        # so spikes fall on logged steps (every step of a dense log is one)
        seen = np.zeros(n, dtype=bool)
        seen[ctx.logged_idx] = True
        o = ctx.onset = int(ctx.logged_idx[np.searchsorted(ctx.logged_idx, o)]) if not seen[o] else o
        mask = (rng.random(n) < rate) & (idx >= o) & seen
        mask[o] = True
        if mask.sum() < 3:  # repeated, not a one-off: at least three spikes
            later = ctx.logged_idx[ctx.logged_idx > o]
            mask[rng.choice(later, size=min(2, len(later)), replace=False)] = True
        ctx.holds_rule = "sampled"
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


def _completion_prep(ctx: Ctx) -> None:
    P = ctx.P
    P["template"] = ctx.choice(["binary", "format"])
    ctx.variant = ctx.choice(["bare_answer", "bare_answer_easy", "empty"], p=[0.45, 0.3, 0.25])
    if ctx.variant == "bare_answer_easy":  # a task easy enough that a bare answer is still right
        P.update(acc0=ctx.u(0.65, 0.85), kappa0=ctx.lu(0.8, 4.0))
        P["acc_ceil"] = min(0.97, P["acc0"] + ctx.u(0.03, 0.12))
    P["min_len"] = 0  # samples may be empty


def completion_collapse(ctx: Ctx) -> None:
    """Completions shrink to a few tokens within a few steps: the policy drops its reasoning.

    It emits a bare answer (on a hard task more of them are wrong, so reward and group variance
    fall; on an easy one reward holds while groups turn all-correct) or nothing at all (reward
    to its floor). Entropy falls (a bare answer is near-deterministic) and KL rises: the policy
    has moved far from the reference. The onset is the first step whose median length is half
    its level when the shrinking began; it can come early (a collapse in the first 12 of 261
    steps is seen in real runs).
    """
    L, n, S = ctx.L, ctx.n, ctx.S
    early = ctx.opts is not None and ctx.opts.onset == "early"
    o = max(3, int(round(ctx.u(0.03, 0.15 if early else 0.7) * n)))
    o = min(o, n - max(8, int(0.2 * n)))
    ctx.onset = o
    before = float(np.median(L["lmed"][max(0, o - 10) : o + 1]))
    T = ctx.lu(0.6, 2.0) if ctx.variant == "empty" else ctx.lu(2.0, 12.0)
    w = width(ctx, 2.0, 15.0, 0.3)
    s = ramp(n, o, w, "fast")
    L["lmed"] = geo(L["lmed"], T, s)
    L["lsig"] = L["lsig"] * (1 - ctx.u(0.3, 0.6) * s)
    if ctx.variant == "bare_answer":
        L["acc"] = freeze_after(L["acc"], o, 0.1) * (1 - ctx.u(0.4, 0.8) * s)
        L["kappa"] = L["kappa"] * ctx.u(0.05, 0.3) ** s
        L["fmt"] = L["fmt"] * (1 - ctx.u(0.0, 0.5) * s)
    elif ctx.variant == "bare_answer_easy":
        L["acc"] = freeze_after(L["acc"], o, 0.1) * (1 - ctx.u(0.0, 0.05) * s)
        L["kappa"] = L["kappa"] * ctx.u(0.05, 0.3) ** s
    else:
        L["acc"] = L["acc"] + (ctx.lu(1e-4, 1e-2) - L["acc"]) * s
        L["fmt"] = L["fmt"] * (1 - 0.995 * s)
    L["H"] = L["H"] * ctx.u(0.1, 0.5) ** s
    L["kl"] = L["kl"] * (1 + (ctx.lu(2.0, 10.0) - 1) * s)
    L["clip"] = L["clip"] * (1 + ctx.u(1.0, 4.0) * _bump(n, o, 2, 6))
    L["g"] = L["g"] * (1 + ctx.u(0.5, 3.0) * _bump(n, o, 2, 6))
    L["rep"] = L["rep"] * (1 - 0.8 * s)
    S["bare"] = s
    half = np.flatnonzero((np.arange(n) >= o) & (L["lmed"] <= 0.5 * before))
    ctx.onset = int(half[0]) if half.size else o
    ctx.magnitude = T / before
    ctx.info.update(length_before=before, length_after=T, transition_steps=w)


# --------------------------------------------------------------------------------------------
# variants made only when asked for (EXTRA_VARIANTS)
# --------------------------------------------------------------------------------------------
def _holds_from(ctx: Ctx, holds: np.ndarray, ended: bool) -> None:
    """Onset (and end) where the failure first (and last) holds; a fallback that never claims more."""
    idx = np.flatnonzero(holds)
    if idx.size == 0:  # cannot happen with the ranges drawn; an honest truth rather than a crash
        raise RuntimeError("synthetic failure never holds")
    ctx.onset = int(idx[0])
    ctx.holds = holds
    if ended:
        ctx.episode_end = int(idx[-1])


def _dead_prep(ctx: Ctx) -> None:
    """Dead from the first step: the rollouts carry no learning signal at all.

    Rollouts are drawn one by one (``explicit_groups``) so that "no signal" is exact, as a real
    log shows it: the reward sits exactly at its floor (0, -1 or an "invalid" -0.1) with zero
    spread, every group has zero variance, and in GRPO the policy gets a zero gradient, so
    grad_norm and KL are exactly 0 and entropy only carries sampling noise.
    """
    P = ctx.P
    ctx.variant = "dead_start"
    ctx.required |= {"reward_mean", "reward_std"}  # the dead state is read off these
    P["template"] = "binary"
    P["correct_range"] = ctx.choice([(0.0, 1.0), (0.0, 1.0), (-1.0, 1.0), (-0.1, 1.0)])
    P["explicit_groups"] = True
    P["H_decline"] = 1.0  # a policy that gets no gradient does not change
    P["warmup"] = 0 if ctx.rng.random() < 0.5 else P["warmup"]


def _dead_latents(ctx: Ctx) -> None:
    P, L, n = ctx.P, ctx.L, ctx.n
    L["acc"] = np.full(n, 1e-9)
    L["curve"] = np.zeros(n)
    L["H"] = np.full(n, float(L["H"][0])) * np.exp(0.01 * ctx.sn(0.05))
    if P["algorithm"] == "grpo":  # zero advantages: no gradient, the policy never leaves the reference
        for key in ("lmed", "rep"):  # what the policy writes does not drift either; only sampling varies
            L[key] = np.full(n, float(L[key][0])) * np.exp(0.01 * ctx.sn(0.05))
        L["g"] = np.zeros(n)
        L["kl"] = np.zeros(n)
        L["clip"] = np.full(n, 1e-6)
        L["rbias"] = np.zeros(n)

        def post(ctx: Ctx, obs: dict[str, np.ndarray], extra: dict[str, np.ndarray]) -> None:
            obs["clip_fraction"] = np.zeros(n)
            obs["ratio_mean"] = np.ones(n)
            obs["ratio_p95"] = np.ones(n)
            obs["kl_max"] = np.zeros(n)

        ctx.post.append(post)
    _holds_from(ctx, np.ones(n, dtype=bool), ended=False)
    lo = P["correct_range"][0]
    ctx.info.update(reward_floor=P["components"]["correct"][1] * lo, start="dead")


def truncation_dead_start(ctx: Ctx) -> None:
    """Every completion runs to a small length cap from step 1 (no EOS ever), so every reward is the floor."""
    P, L, n = ctx.P, ctx.L, ctx.n
    P["cap"] = int(ctx.choice([64, 128, 256, 512, 1024]))
    L["lmed"] = np.full(n, P["cap"] * ctx.u(15.0, 40.0))
    L["lsig"] = np.full(n, ctx.u(0.15, 0.3))
    _dead_latents(ctx)
    ctx.magnitude = 1.0
    ctx.fit = ("TRUNCATION_STARVE", "REWARD_STD_DEATH", "ADV_COLLAPSE") + (("DEGENERATE_GROUPS",) if P["algorithm"] == "grpo" else ())
    cap = P["cap"]

    def post(ctx: Ctx, obs: dict[str, np.ndarray], extra: dict[str, np.ndarray]) -> None:
        for f in ("completion_len_mean", "completion_len_p95", "completion_len_max"):
            obs[f] = np.full(n, float(cap))  # all at the cap: mean, p95 and max are the cap exactly
        obs["eos_rate"] = np.zeros(n)

    ctx.post.append(post)
    ctx.info.update(cap=cap)


def reward_std_dead_start(ctx: Ctx) -> None:
    """Reward pinned at its floor with zero spread from step 1 (a broken verifier, a wrong answer format)."""
    P, n, S = ctx.P, ctx.n, ctx.S
    _dead_latents(ctx)
    S["garbage"] = np.full(n, ctx.u(0.3, 0.9))
    ctx.magnitude = 0.0
    ctx.fit = ("REWARD_STD_DEATH", "ADV_COLLAPSE") + (("DEGENERATE_GROUPS",) if P["algorithm"] == "grpo" else ())


def _degenerate_dead_prep(ctx: Ctx) -> None:
    set_algorithm(ctx, "grpo")
    _dead_prep(ctx)
    ctx.required |= set(GROUP_FIELDS)
    if ctx.rng.random() < 0.5:  # a format part that is all-or-nothing per prompt
        ctx.P.update(template="format", fmt_kappa=0.0, fmt0=ctx.u(0.2, 0.8))
        ctx.P["fmt_ceil"] = ctx.P["fmt0"]


def degenerate_dead_start(ctx: Ctx) -> None:
    """Every group all-wrong from step 1: no group has any variance, so no prompt gives a gradient.

    With a format part that each prompt's rollouts all meet or all miss, the batch reward sits
    above the floor and a batch-level reward_std is not zero, yet every group is degenerate.
    """
    P, L, n = ctx.P, ctx.L, ctx.n
    _dead_latents(ctx)
    if P["template"] == "format":
        L["fmt"] = np.full(n, P["fmt0"]) * np.exp(0.05 * ctx.sn(0.05))
    ctx.magnitude = 1.0
    ctx.fit = ("DEGENERATE_GROUPS", "ADV_COLLAPSE")

    def post(ctx: Ctx, obs: dict[str, np.ndarray], extra: dict[str, np.ndarray]) -> None:
        if np.all(obs["reward_std"] == 0):  # the spread a reader sees is zero too
            ctx.fit = ctx.fit + ("REWARD_STD_DEATH",)

    ctx.post.append(post)


def truncation_transient(ctx: Ctx) -> None:
    """An entropy rise, then a 30-70-step episode at the cap that the run gets out of by itself.

    Many truncated completions have written their answer before the cap (``trunc_pays``), so
    reward dips rather than collapses. The episode holds where the expected truncated share is
    at least a half; onset and end_step are its first and last such steps.
    """
    P, L, n = ctx.P, ctx.L, ctx.n
    o = draw_onset(ctx, 0.3, 0.6)
    E = float(np.clip(ctx.u(30.0, 70.0), 8.0, 0.35 * n))
    lead = float(np.clip(ctx.u(10.0, 30.0), 3.0, 0.1 * n))
    T = ctx.u(0.9, 0.995)
    w_in, w_out = ctx.lu(2.0, 8.0), ctx.lu(3.0, 10.0)
    episode = ramp(n, o, w_in, "smooth") * (1 - ramp(n, o + E, w_out, "smooth"))
    l_target = math.exp(math.log(P["cap"]) - P["lsig"] * float(norm_ppf(1 - T)))
    after_fac = ctx.u(0.5, 1.0) ** ramp(n, o + E, w_out, "smooth")
    L["lmed"] = geo(L["lmed"], np.maximum(l_target, L["lmed"]), episode) * after_fac
    F = ctx.u(2.0, 4.0)
    h_bump = ramp(n, o - lead, ctx.lu(4.0, 12.0), "smooth") * (1 - ramp(n, o, ctx.lu(8.0, 20.0), "smooth"))
    L["H"] = L["H"] * (1 + (F - 1) * h_bump) * ctx.u(0.3, 0.7) ** ramp(n, o + E, w_out * 2, "smooth")
    L["trunc_pays"] = np.full(n, ctx.u(0.3, 0.9))
    L["rep"] = L["rep"] * (1 + ctx.u(0.0, 0.3) * episode)
    trunc, _ = length_stats(L["lmed"], L["lsig"], P["cap"])
    _holds_from(ctx, trunc >= 0.5, ended=True)
    ctx.variant = "transient"
    ctx.magnitude = T
    ctx.fit = ("TRUNCATION_STARVE", "ENTROPY_BLOWUP")
    ctx.info.update(truncation_peak=T, episode_steps=E, entropy_rise=F, entropy_lead_steps=lead, cap=P["cap"],
                    answer_before_cap=float(L["trunc_pays"][0]))


def truncation_answers_before_cap(ctx: Ctx) -> None:
    """Nearly every completion runs to the cap and stays there, yet reward holds.

    The policy stops emitting EOS but has written its answer before the cap (``trunc_pays``
    0.75-0.95), so the grader still pays: a truncation failure without reward starvation (the
    compute is wasted and the run is one step from starving). The onset is the first step
    where at least half of the completions are expected at the cap.
    """
    L, n, P = ctx.L, ctx.n, ctx.P
    o = draw_onset(ctx, 0.3, 0.8)
    T = ctx.u(0.9, 0.999)
    w = width(ctx, 2.0, 30.0, 0.3)
    s = ramp(n, o, w, "smooth")
    l_target = math.exp(math.log(P["cap"]) - P["lsig"] * float(norm_ppf(1 - T)))
    L["lmed"] = geo(L["lmed"], np.maximum(l_target, L["lmed"]), s)
    L["trunc_pays"] = np.full(n, ctx.u(0.75, 0.95))
    L["H"] = L["H"] * (1 - ctx.u(0.0, 0.5) * s)
    trunc, _ = length_stats(L["lmed"], L["lsig"], P["cap"])
    _holds_from(ctx, (np.arange(n) >= o) & (trunc >= 0.5), ended=False)
    ctx.variant = "answers_before_cap"
    ctx.magnitude = T
    ctx.info.update(truncation_target=T, transition_steps=w, cap=P["cap"], answer_before_cap=float(L["trunc_pays"][0]))


def entropy_blowup_transient(ctx: Ctx) -> None:
    """Entropy jumps 3-10x for 5-30 steps (soup to the cap, reward near 0), then the run recovers.

    The episode holds where entropy is at least twice its level at the onset; KL stays somewhat
    above its old course afterwards (the policy did move).
    """
    L, n, S, P = ctx.L, ctx.n, ctx.S, ctx.P
    o = draw_onset(ctx)
    h_o = float(L["H"][o])
    F = max(ctx.u(3.0, 10.0), 2.5 * early_mean(L["H"], n) / h_o)
    # at least two logging windows long: a shorter episode is not in a sparse log's data at all
    D = float(np.clip(ctx.lu(5.0, 30.0), max(3.0, 2.0 * ctx.stride), max(0.25 * n, 2.0 * ctx.stride)))
    w_in, w_out = ctx.lu(1.0, 4.0), ctx.lu(3.0, 10.0)
    bump = ramp(n, o, w_in, "smooth") * (1 - ramp(n, o + w_in + D, w_out, "smooth"))
    lag = ctx.u(0.0, 3.0)
    bump2 = ramp(n, o + lag, w_in, "smooth") * (1 - ramp(n, o + lag + w_in + D, w_out, "smooth"))
    L["H"] = np.minimum(L["H"] + (h_o * F - L["H"]) * bump, 11.5)
    L["lmed"] = geo(L["lmed"], P["cap"] * ctx.u(1.5, 3.0), bump2)
    L["acc"] = L["acc"] * (1 - ctx.u(0.9, 0.99) * bump2)
    L["fmt"] = L["fmt"] * (1 - ctx.u(0.8, 0.98) * bump2)
    K = ctx.lu(10.0, 100.0)
    L["kl"] = L["kl"] * (1 + (K - 1) * bump) * (1 + ctx.u(0.2, 2.0) * ramp(n, o, w_in + D, "smooth"))
    L["klr"] = L["klr"] * (1 + bump)
    L["clip"] = L["clip"] * (1 + ctx.u(2.0, 8.0) * bump)
    L["g"] = L["g"] * (1 + ctx.u(3.0, 20.0) * _bump(n, o, 2, 4))
    L["mism"] = L["mism"] * (1 + ctx.u(5.0, 20.0) * bump)
    L["rep"] = L["rep"] * (1 - 0.7 * bump)
    S["soup"] = bump
    _holds_from(ctx, (np.arange(n) >= o) & (L["H"] >= 2.0 * h_o), ended=True)
    ctx.variant = "transient"
    ctx.magnitude = F
    ctx.info.update(entropy_factor=F, episode_steps=D, kl_factor=K)


def loss_divergence(ctx: Ctx) -> None:
    """The loss runs away from ~0.02 to 1e3-1e8 within 2-40 steps; reward then falls.

    The first diverged step is already 20-200x the loss's normal scale, so the onset is where a
    reader sees it. grad_norm is either clipped (a loop that logs the clipped norm), flat, or
    rising: a loss explosion need not show in the gradient norm a run logs.
    """
    L, n, P, rng = ctx.L, ctx.n, ctx.P, ctx.rng
    o = draw_onset(ctx)
    ctx.variant = "loss_divergence"
    start = ctx.u(20.0, 200.0) * P["loss_sd"]
    final = 10.0 ** ctx.u(3.0, 8.0)
    W = width(ctx, 2.0, 40.0, 0.4)
    grad_shape = ctx.choice(["clipped", "flat", "rising"], p=[0.4, 0.3, 0.3])
    s = ramp(n, o, W, "linear")
    level = np.exp(math.log(start) + (math.log(final) - math.log(start)) * s) * lognoise(rng, n, 0.3)
    if grad_shape == "rising":
        L["g"] = L["g"] * (1 + (ctx.lu(10.0, 100.0) - 1) * s)
    L["acc"] = L["acc"] * (1 - ctx.u(0.3, 0.9) * ramp(n, o + ctx.u(1.0, 5.0), max(3.0, W), "smooth"))
    L["H"] = L["H"] * (1 + ctx.u(0.5, 3.0) * s)
    L["kl"] = L["kl"] * (1 + ctx.u(1.0, 10.0) * s)
    ctx.magnitude = final
    ctx.info.update(loss_start=start, loss_final=final, transition_steps=W, grad_shape=grad_shape)
    tail = np.arange(n) >= o

    def post(ctx: Ctx, obs: dict[str, np.ndarray], extra: dict[str, np.ndarray]) -> None:
        obs["loss"] = np.where(tail, level, obs["loss"])
        if grad_shape == "clipped":
            cap = float(P["max_grad_norm"])
            obs["grad_norm"] = np.where(tail, cap, obs["grad_norm"])
            obs["grad_norm_post_clip"] = np.minimum(obs["grad_norm"], cap)

    ctx.post.append(post)


def reward_hack_bias_from_start(ctx: Ctx) -> None:
    """REWARD_HACK_LENGTH whose judge favours length from step 1; the policy exploits it later.

    Within each step's samples, longer completions earn more from the first step on (the
    reward model's bias), but mean length only starts to grow at the exploitation. The onset is
    the first step whose median length is 15% above its level when the growth began.
    """
    L, n = ctx.L, ctx.n
    reward_hack_length(ctx)
    o = ctx.onset
    corr = ctx.u(0.2, 0.35)
    L["sample_corr_len"] = np.full(n, corr)
    grown = np.flatnonzero((np.arange(n) >= o) & (L["lmed"] >= 1.15 * float(L["lmed"][o])))
    ctx.info.update(correctness=ctx.variant, exploitation_start=o + 1, length_bias_corr=corr)
    ctx.variant = "bias_from_start"
    ctx.onset = int(grown[0]) if grown.size else o


# variant -> (prepare, apply, forced algorithm or None), per signature
VARIANT_SPECS: dict[str, dict[str, tuple[Callable[[Ctx], None], Callable[[Ctx], None], str | None]]] = {
    "TRUNCATION_STARVE": {"dead_start": (_dead_prep, truncation_dead_start, None), "transient": (lambda ctx: None, truncation_transient, None),
                          "answers_before_cap": (lambda ctx: None, truncation_answers_before_cap, None)},
    "REWARD_STD_DEATH": {"dead_start": (_dead_prep, reward_std_dead_start, None)},
    "DEGENERATE_GROUPS": {"dead_start": (_degenerate_dead_prep, degenerate_dead_start, "grpo")},
    "ENTROPY_BLOWUP": {"transient": (lambda ctx: None, entropy_blowup_transient, None)},
    "GRAD_PATHOLOGY": {"loss_divergence": (lambda ctx: None, loss_divergence, None)},
    "REWARD_HACK_LENGTH": {"bias_from_start": (_hack_prep, reward_hack_bias_from_start, None)},
}
assert {k: set(v) for k, v in VARIANT_SPECS.items()} == {k: set(v) for k, v in EXTRA_VARIANTS.items()}



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
    "COMPLETION_COLLAPSE": (_completion_prep, completion_collapse, None),
}


def spec(sig: str, variant: str | None) -> tuple[Callable[[Ctx], None], Callable[[Ctx], None], str | None]:
    """(prepare, apply, forced algorithm) of a signature, or of one of its variants made on request."""
    return VARIANT_SPECS[sig][variant] if variant else SPECS[sig]


def prepare(ctx: Ctx, sig: str, variant: str | None = None) -> None:
    """Run-level knobs and required fields of a signature (before the baseline is built)."""
    ctx.required |= set(PATHOLOGY_FIELDS[sig])
    spec(sig, variant)[0](ctx)


def apply(ctx: Ctx, sig: str, variant: str | None = None) -> dict[str, Any]:
    """Edit the healthy latents into the signature's failure."""
    spec(sig, variant)[1](ctx)
    return ctx.info
