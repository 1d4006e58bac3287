"""The generative model of a run: run-level knobs, latent dynamics, and what gets logged.

A run is built in four stages, all vectorised over steps:

1. ``draw_params``: run-level knobs (model, task, batch shape, optimiser, absolute levels).
2. ``baseline``: latent per-step quantities of a healthy run (accuracy, prompt-difficulty
   concentration, format compliance, entropy, KL, median length, clip level, grad scale,
   timings, ...). Healthy families and pathologies then edit the latents.
3. ``observe``: turns latents into the logged StepRecord series, with the sampling noise a real
   batch has (binomial group counts, finite-batch means, lognormal jitter), the length
   statistics of a capped lognormal, GRPO group statistics from Beta moments, and so on.
4. ``choose_fields``: which optional fields this run logs (a logging profile) and how often.
"""

from __future__ import annotations

import math
from typing import Any, Callable

import numpy as np

from rlprobe.schemas import STEP_FLOAT_FIELDS
from rlprobe.synth._numeric import (
    beta_moment,
    logit,
    lognoise,
    loguniform,
    norm_cdf,
    norm_ppf,
    sigmoid,
    smooth_noise,
)
from rlprobe.synth.text import ANSWER_FORMATS

MODELS = [  # name, entropy range (nats/token as trainers log it), lora?
    ("Qwen/Qwen2.5-7B-Instruct", (0.08, 0.4), True),
    ("Qwen/Qwen2.5-1.5B-Instruct", (0.15, 0.6), False),
    ("Qwen/Qwen2.5-Math-7B", (0.3, 1.2), False),
    ("Qwen/Qwen3-4B-Base", (0.4, 1.5), False),
    ("meta-llama/Llama-3.1-8B-Instruct", (0.1, 0.5), True),
    ("meta-llama/Llama-3.2-3B-Instruct", (0.2, 0.8), True),
    ("deepseek-ai/DeepSeek-R1-Distill-Qwen-1.5B", (0.3, 1.0), False),
    ("google/gemma-2-2b-it", (0.3, 1.6), True),
    ("mistralai/Mistral-7B-Instruct-v0.3", (0.2, 0.9), True),
    ("allenai/OLMo-2-1124-7B-SFT", (0.5, 2.5), False),
]
CAPS = (256, 384, 512, 768, 1024, 1536, 2048, 3072, 4096, 6144, 8192, 12288, 16384, 32768)
COMPONENT_NAMES = {
    "correct": ("correct", "accuracy", "correctness", "accuracy_reward", "math_verify", "answer_match"),
    "format": ("format", "format_reward", "strict_format", "tags"),
    "xml": ("xml_count", "soft_format", "xmlcount_reward"),
    "judge": ("rm_score", "judge", "quality", "helpfulness", "reasoning_quality"),
}

# Every scalar StepRecord field the generator can produce (wall_time is always written).
GEN_FIELDS = tuple(name for name in STEP_FLOAT_FIELDS if name != "wall_time")
GROUP_FIELDS = ("group_reward_std_mean", "zero_variance_group_frac")
VALUE_FIELDS = ("value_loss", "value_explained_variance", "value_clip_fraction")
KL_FIELDS = ("kl_mean", "kl_max", "kl_positional")
# Fields that describe a rollout batch: with two optimizer updates per batch they are logged on
# the batch's first update only (the second update re-uses the batch and generates nothing).
ROLLOUT_FIELDS = (
    "reward_mean", "reward_std", "reward_min", "reward_max", "group_reward_std_mean", "zero_variance_group_frac",
    "completion_len_mean", "completion_len_p95", "completion_len_max", "max_len_hit_frac", "eos_rate",
    "repetition_rate", "truncation_rate", "generation_time_s", "reward_components",
)
TRL_FIELDS = (
    "reward_mean", "reward_std", "kl_mean", "entropy_mean", "clip_fraction", "completion_len_mean",
    "completion_len_max", "truncation_rate", "zero_variance_group_frac", "grad_norm", "lr", "loss",
    "step_time_s", "logprob_mismatch", "batch_age",
)


class Ctx:
    """Everything about one synthetic run while it is being built."""

    def __init__(self, rng: np.random.Generator, n: int, noise: float, group_size: int,
                 opts: Any = None, orng: np.random.Generator | None = None, logged_idx: np.ndarray | None = None) -> None:
        self.rng = rng
        self.opts = opts  # Options (rlprobe.synth.options); None only for code that builds a Ctx by hand
        self.orng = orng if orng is not None else rng  # options draw from their own stream, so plain runs never change
        self.logged_idx = logged_idx if logged_idx is not None else np.arange(n)  # 0-based indices of the logged steps
        self.stride = int(self.logged_idx[1] - self.logged_idx[0]) if len(self.logged_idx) > 1 else 1
        self.n = n
        self.i = np.arange(n, dtype=np.float64)
        self.x = (self.i + 1.0) / n  # progress in (0, 1]
        self.noise = noise
        self.group_size = group_size
        self.P: dict[str, Any] = {}
        self.L: dict[str, Any] = {}
        self.S: dict[str, np.ndarray] = {}  # per-step text-style intensities for samples
        self.required: set[str] = set()
        self.info: dict[str, Any] = {}
        self.post: list[Callable[["Ctx", dict[str, np.ndarray]], None]] = []
        self.events: list[tuple[str, int, str, dict[str, Any]]] = []
        self.onset: int | None = None  # 0-based index of the onset step
        self.variant: str | None = None
        self.magnitude: float | None = None
        # where the failure holds, per step, when that is not simply "from the onset on" (an
        # episode that ends, a failure seen only at some steps); None: every step from the onset
        self.holds: np.ndarray | None = None
        self.holds_rule = "majority"  # how a logged window shows it: majority | any (an event) | sampled (one step)
        self.episode_end: int | None = None  # 0-based last step of an episode that ended (None: it lasts)
        self.fit: tuple[str, ...] = ()  # other signatures that are a correct diagnosis too

    # small conveniences used by families and pathologies
    def u(self, lo: float, hi: float) -> float:
        """One uniform draw."""
        return float(self.rng.uniform(lo, hi))

    def lu(self, lo: float, hi: float) -> float:
        """One log-uniform draw."""
        return loguniform(self.rng, lo, hi)

    def choice(self, options: Any, p: Any = None) -> Any:
        """One of options (optionally weighted by p)."""
        idx = self.rng.choice(len(options), p=p)
        return options[int(idx)]

    def sn(self, corr_frac: float = 0.05, min_corr: float = 3.0) -> np.ndarray:
        """Smooth unit noise correlated over a fraction of the run."""
        return smooth_noise(self.rng, self.n, max(min_corr, corr_frac * self.n))


# ---------------------------------------------------------------------------------------------
# 1. run-level knobs
# ---------------------------------------------------------------------------------------------
def draw_params(ctx: Ctx, algorithm: str | None) -> None:
    """Draw the run-level knobs (prepare hooks may override them before baseline())."""
    P, n = ctx.P, ctx.n
    P["algorithm"] = algorithm or ("ppo" if ctx.rng.random() < 0.2 else "grpo")
    model, h_range, lora = MODELS[int(ctx.rng.integers(len(MODELS)))]
    P["model"], P["lora"] = model, lora
    P["H0"] = ctx.lu(*h_range) * ctx.lu(0.6, 1.8)
    P["H_decline"] = ctx.u(1.2, 3.8)
    P["H_tau"], P["H_alpha"] = ctx.u(0.03, 0.3), ctx.u(0.2, 0.8)
    P["sigH"] = ctx.u(0.03, 0.14)
    P["template"] = ctx.choice(["binary", "format", "xml", "judge"], p=[0.3, 0.4, 0.15, 0.15])
    P["correct_range"] = (-1.0, 1.0) if ctx.rng.random() < 0.15 else (0.0, 1.0)
    P["w_format"] = ctx.choice([0.1, 0.2, 0.5, 1.0])
    P["w_judge"] = ctx.choice([0.5, 1.0])
    P["log_components"] = ctx.rng.random() < 0.85
    P["acc0"] = ctx.u(0.05, 0.55)
    P["acc_ceil"] = min(0.97, P["acc0"] + ctx.u(0.12, 0.55))
    P["curve"] = ctx.choice(["exp", "exp", "sigmoid", "log"])
    P["curve_tau"], P["curve_center"], P["curve_width"] = ctx.u(0.08, 0.5), ctx.u(0.15, 0.5), ctx.u(0.04, 0.12)
    P["kappa0"] = ctx.lu(0.8, 6.0)
    P["fmt0"], P["fmt_ceil"], P["fmt_tau"] = ctx.u(0.2, 0.9), ctx.u(0.93, 0.995), ctx.u(0.02, 0.15)
    P["judge_sd"] = ctx.u(0.08, 0.2)
    P["beta"] = 0.0 if ctx.rng.random() < 0.35 else ctx.lu(1e-3, 0.1)
    P["kl_monitor"] = ctx.rng.random() < 0.3  # logs KL even with beta = 0
    P["kl_end"], P["kl_p"], P["klr"] = ctx.lu(0.002, 0.15), ctx.u(0.5, 1.0), ctx.lu(4.0, 30.0)
    P["sig_kl"] = ctx.u(0.06, 0.2)
    P["lr_peak"] = ctx.lu(5e-6, 2e-4) if lora else ctx.lu(3e-7, 3e-6)
    P["warmup"] = 0 if ctx.rng.random() < 0.25 else max(1, int(round(ctx.u(0.01, 0.1) * n)))
    P["schedule"] = ctx.choice(["constant", "cosine", "linear"], p=[0.5, 0.3, 0.2])
    P["max_grad_norm"] = ctx.choice([1.0, 1.0, 1.0, 0.5, 0.2, 10.0])
    P["eps_clip"] = 0.2
    P["eps_clip_high"] = 0.28 if ctx.rng.random() < 0.25 else 0.2
    P["std_norm"] = ctx.rng.random() < 0.8
    P["whiten"] = ctx.rng.random() < 0.6
    P["L0"], P["lsig"] = ctx.lu(60.0, 900.0), ctx.u(0.25, 0.6)
    P["len_d1"], P["len_dip"], P["len_tau"] = ctx.u(-0.3, 0.35), (ctx.u(0.05, 0.25) if ctx.rng.random() < 0.4 else 0.0), ctx.u(0.05, 0.2)
    P["cap_z"] = ctx.u(2.4, 3.3)
    P["rep0"] = ctx.lu(0.01, 0.08)
    P["clip0"] = ctx.lu(5e-4, 0.1)
    P["g0"], P["gtrend"], P["sig_g"] = ctx.lu(0.03, 3.0), ctx.u(-0.7, 0.5), ctx.u(0.15, 0.4)
    P["loss_sd"] = ctx.lu(0.005, 0.05)
    P["tgen0"], P["topt_ratio"], P["tover"] = ctx.lu(2.0, 120.0), ctx.u(0.2, 1.2), ctx.u(0.1, 3.0)
    P["sig_t"], P["spike_rate"], P["first_mult"] = ctx.u(0.02, 0.08), ctx.lu(0.001, 0.02), ctx.u(1.5, 4.0)
    P["ckpt_every"] = max(10, int(ctx.choice([50, 100, 200, 250, 500, 1000]) * (1 if n >= 400 else 0.2)))
    P["ckpt_cost"] = ctx.u(3.0, 60.0)
    P["async"] = ctx.rng.random() < 0.25
    P["a0"] = ctx.u(0.3, 1.5)
    P["vllm"] = ctx.rng.random() < 0.5
    P["m0"] = ctx.lu(7e-4, 1e-2)
    P["ev_start"], P["ev_final"], P["ev_tau"] = ctx.u(-0.4, 0.15), ctx.u(0.35, 0.9), ctx.u(0.03, 0.15)
    P["v0"], P["v_decl"], P["vclip0"] = ctx.lu(0.02, 2.0), ctx.u(0.2, 0.7), ctx.u(0.02, 0.2)
    P["vf_coef"] = ctx.choice([0.1, 0.5, 1.0])
    P["pos_gamma"] = ctx.u(-0.8, 0.8)
    P["profile"] = ctx.choice(["full", "trl", "custom"], p=[0.35, 0.35, 0.3])
    P["answer_format"] = ANSWER_FORMATS[int(ctx.rng.integers(len(ANSWER_FORMATS)))]
    P["chat"] = ctx.rng.random() < 0.7
    P["dataset_size"] = int(ctx.choice([7473, 12000, 40000, 7500, 17000]))
    P["wur_target"] = ctx.lu(1e-4, 3e-3)
    P["start_time"] = 1.70e9 + float(ctx.rng.uniform(0, 6e7))
    _batch_shape(ctx)


def _batch_shape(ctx: Ctx) -> None:
    P = ctx.P
    if P["algorithm"] == "grpo":
        G = ctx.group_size
        options = [g for g in (4, 8, 16, 32, 64) if 32 <= g * G <= 1024] or [max(1, 256 // G)]
        P["G"], P["n_groups"] = G, int(ctx.choice(options))
    else:
        P["G"], P["n_groups"] = 1, int(ctx.choice([64, 128, 256, 512]))
    P["N"] = P["G"] * P["n_groups"]


def set_algorithm(ctx: Ctx, algorithm: str) -> None:
    """Force the algorithm (and the batch shape that goes with it)."""
    ctx.P["algorithm"] = algorithm
    _batch_shape(ctx)


# ---------------------------------------------------------------------------------------------
# 2. healthy latent dynamics
# ---------------------------------------------------------------------------------------------
def learning_curve(x: np.ndarray, P: dict[str, Any]) -> np.ndarray:
    """0 at the start rising to 1 at the end: exponential, sigmoid ('aha') or logarithmic."""
    kind, tau = P["curve"], P["curve_tau"]
    if kind == "sigmoid":
        c, w = P["curve_center"], P["curve_width"]
        s = sigmoid((x - c) / w)
        s0, s1 = sigmoid((0 - c) / w), sigmoid((1 - c) / w)
        return (s - s0) / (s1 - s0)
    if kind == "log":
        return np.log1p(x / tau) / math.log1p(1 / tau)
    return (1 - np.exp(-x / tau)) / (1 - math.exp(-1 / tau))


def lr_schedule(n: int, peak: float, warmup: int, schedule: str) -> np.ndarray:
    """Linear warm-up, then constant, cosine or linear decay."""
    i = np.arange(n, dtype=np.float64)
    lr = np.full(n, peak)
    if warmup > 0:
        lr = np.where(i < warmup, peak * (i + 1) / warmup, lr)
    rest = np.clip((i - warmup) / max(n - warmup, 1), 0, 1)
    if schedule == "cosine":
        lr = np.where(i >= warmup, peak * 0.5 * (1 + np.cos(np.pi * rest)), lr)
    elif schedule == "linear":
        lr = np.where(i >= warmup, peak * (1 - rest), lr)
    return np.maximum(lr, peak * 1e-3) if schedule != "constant" else lr


def pick_cap(lmed: np.ndarray, lsig: float, z: float) -> int:
    """The smallest common max-completion-length that keeps the longest stretch mostly untruncated."""
    need = float(np.max(lmed)) * math.exp(z * lsig)
    return next((c for c in CAPS if c >= need), CAPS[-1])


def baseline(ctx: Ctx) -> None:
    """Healthy latent dynamics from the run-level knobs."""
    P, L, x, n = ctx.P, ctx.L, ctx.x, ctx.n
    curve = learning_curve(x, P)
    L["curve"] = curve
    L["acc"] = np.clip(P["acc0"] + (P["acc_ceil"] - P["acc0"]) * curve + 0.02 * ctx.sn(0.08), 0.001, 0.999)
    L["kappa"] = P["kappa0"] * np.exp(0.15 * ctx.sn(0.1))
    fcurve = 1 - np.exp(-x / P["fmt_tau"])
    L["fmt"] = np.clip(P["fmt0"] + (P["fmt_ceil"] - P["fmt0"]) * fcurve + 0.01 * ctx.sn(0.05), 0.0, 0.999)
    L["judge"] = np.clip(0.35 + 0.3 * curve + 0.02 * ctx.sn(0.08), 0.0, 1.0)
    # entropy: fast early drop plus a slow linear decline, r-fold over the run
    s = P["H_alpha"] * (1 - np.exp(-x / P["H_tau"])) / (1 - math.exp(-1 / P["H_tau"])) + (1 - P["H_alpha"]) * x
    L["H"] = P["H0"] * P["H_decline"] ** (-s) * np.exp(0.04 * ctx.sn(0.05))
    # KL to the reference: sqrt-like to linear, exactly tiny at step 1
    L["kl"] = P["kl_end"] * x ** P["kl_p"] * np.exp(0.08 * ctx.sn(0.05))
    L["klr"] = P["klr"] * np.exp(0.1 * ctx.sn(0.1))
    # completion length: early dip (the model gets concise) then a slow drift
    m = P["len_d1"] * x + P["len_dip"] * (np.exp(-x / P["len_tau"]) - 1) + 0.04 * ctx.sn(0.05)
    L["lmed"] = P["L0"] * np.exp(m)
    L["lsig"] = np.full(n, P["lsig"])
    P["cap"] = pick_cap(L["lmed"], P["lsig"], P["cap_z"])
    L["rep"] = P["rep0"] * (L["lmed"] / P["L0"]) ** 0.2 * np.exp(0.1 * ctx.sn(0.05))
    L["lr"] = lr_schedule(n, P["lr_peak"], P["warmup"], P["schedule"])
    lr_rel = L["lr"] / P["lr_peak"]
    L["clip"] = P["clip0"] * (0.5 + 0.5 * np.sqrt(lr_rel)) * np.exp(0.15 * ctx.sn(0.05))
    L["rbias"] = 0.001 * ctx.sn(0.1)
    L["g"] = P["g0"] * np.exp(P["gtrend"] * x) * np.exp(0.1 * ctx.sn(0.05))
    L["tgen"] = np.full(n, P["tgen0"])
    L["topt"] = np.full(n, P["tgen0"] * P["topt_ratio"])
    L["tover"] = np.full(n, P["tover"])
    L["age"] = P["a0"] * np.exp(0.1 * ctx.sn(0.1))
    L["mism"] = P["m0"] * np.sqrt(L["H"] / P["H0"]) * np.exp(0.1 * ctx.sn(0.05))
    ev_curve = 1 - np.exp(-x / P["ev_tau"])
    L["ev"] = P["ev_start"] + (P["ev_final"] - P["ev_start"]) * ev_curve + 0.03 * ctx.sn(0.05)
    L["vloss"] = P["v0"] * (1 - P["v_decl"] * (1 - np.exp(-x / 0.3))) * np.exp(0.1 * ctx.sn(0.05))
    L["vclip"] = P["vclip0"] * (1 - 0.5 * x)
    b = np.arange(8) / 7.0
    shares = np.exp(P["pos_gamma"] * b + 0.15 * ctx.rng.standard_normal(8))
    L["posw"] = np.tile(shares / shares.sum(), (n, 1))
    L["adv_scale"] = np.ones(n)
    L["adv_zero_min"] = np.zeros(n)
    L["sample_corr_len"] = np.full(n, ctx.u(-0.15, 0.05))  # within-group length-reward correlation
    for key in ("ident", "soup", "loop", "pad", "fmtonly", "garbage", "artifact", "bare"):
        ctx.S[key] = np.zeros(n)


# ---------------------------------------------------------------------------------------------
# 3. observation
# ---------------------------------------------------------------------------------------------
def assign_components(ctx: Ctx) -> None:
    """Name the reward components of the run's template (after prepare hooks chose it)."""
    P, t = ctx.P, ctx.P["template"]
    comps = {"correct": (ctx.choice(COMPONENT_NAMES["correct"]), 1.0)}
    if t in ("format", "xml"):
        comps["format"] = (ctx.choice(COMPONENT_NAMES["format"]), P["w_format"])
    if t == "xml":
        comps["xml"] = (ctx.choice(COMPONENT_NAMES["xml"]), 1.0)
    if t == "judge":
        comps["judge"] = (ctx.choice(COMPONENT_NAMES["judge"]), P["w_judge"])
    P["components"] = comps


def length_stats(lmed: np.ndarray, lsig: np.ndarray, cap: float) -> tuple[np.ndarray, np.ndarray]:
    """Expected truncation fraction and mean length of a lognormal length capped at ``cap``."""
    mu = np.log(np.maximum(lmed, 1.0))
    z = (math.log(cap) - mu) / lsig
    trunc = 1 - norm_cdf(z)
    mean = np.exp(mu + lsig**2 / 2) * norm_cdf(z - lsig) + cap * trunc
    return trunc, mean


def _rewards_analytic(ctx: Ctx, obs: dict[str, np.ndarray], trunc_exp: np.ndarray, acc: np.ndarray, kap: np.ndarray,
                      fmt: np.ndarray, zmax: float) -> dict[str, np.ndarray]:
    """Reward, group and advantage statistics from their expected moments (plus sampling noise)."""
    P, L, rng, n, nz = ctx.P, ctx.L, ctx.rng, ctx.n, ctx.noise
    N, ng, G = P["N"], P["n_groups"], P["G"]
    grpo = P["algorithm"] == "grpo"
    comps = P["components"]
    lo, hi = P["correct_range"]
    span = hi - lo
    var_p = acc * (1 - acc) / (kap + 1)
    e_pq = acc * (1 - acc) - var_p
    snz = math.sqrt(nz)  # finite-batch sampling noise is natural; the run's noise level scales it mildly
    sd_acc = np.sqrt(var_p / ng + e_pq / N) * snz
    acc_obs = np.clip(np.round(np.clip(acc + rng.normal(0, 1, n) * sd_acc, 0, 1) * N) / N, 0, 1)
    components: dict[str, np.ndarray] = {comps["correct"][0]: lo + span * acc_obs}
    w_c = comps["correct"][1]
    reward_mean = w_c * (lo + span * acc_obs)
    var_batch = (w_c * span) ** 2 * acc * (1 - acc)
    var_within = (w_c * span) ** 2 * e_pq * (G - 1) / max(G, 1)
    ceiling, floor = w_c * hi, w_c * lo
    if "format" in comps:
        name, w = comps["format"]
        f_obs = np.clip(np.round(np.clip(fmt + rng.normal(0, 1, n) * np.sqrt(fmt * (1 - fmt) / N) * snz, 0, 1) * N) / N, 0, 1)
        components[name] = f_obs
        reward_mean = reward_mean + w * f_obs
        var_batch = var_batch + w**2 * fmt * (1 - fmt)
        var_within = var_within + w**2 * fmt * (1 - fmt) * (G - 1) / max(G, 1)
        ceiling += w
    if "xml" in comps:
        name, w = comps["xml"]
        xml = np.clip(0.5 * (0.35 * (1 - trunc_exp) + 0.65 * fmt) + rng.normal(0, 0.01 * nz, n), 0, 0.5)
        components[name] = xml
        reward_mean = reward_mean + w * xml
        var_batch = var_batch + (w * 0.08) ** 2 * (1 - fmt + 0.05)
        var_within = var_within + (w * 0.08) ** 2 * (1 - fmt + 0.05)
        ceiling += 0.5 * w
    if "judge" in comps:
        name, w = comps["judge"]
        jsd = P["judge_sd"]
        j_obs = np.clip(L["judge"] + rng.normal(0, jsd / math.sqrt(N), n) * nz + rng.normal(0, 0.01 * nz, n), 0, 1)
        components[name] = j_obs
        reward_mean = reward_mean + w * j_obs
        var_batch = var_batch + (w * jsd) ** 2
        var_within = var_within + (w * jsd) ** 2 * 0.8
        ceiling += w
    obs["reward_mean"] = reward_mean
    rstd = np.sqrt(np.maximum(var_batch, 0))
    obs["reward_std"] = rstd * lognoise(rng, n, 0.06 * nz)
    discrete = "judge" not in comps and "xml" not in comps
    if discrete:
        # the batch's extremes are the best and worst reward combinations that occurred
        combos = [(w_c * hi, acc), (w_c * lo, 1 - acc)]
        if "format" in comps:
            w_f = comps["format"][1]
            combos = [(v + w_f, p * fmt) for v, p in combos] + [(v, p * (1 - fmt)) for v, p in combos]
        values = np.array([np.full(n, v) for v, _ in combos]).T
        probs = np.array([p for _, p in combos]).T
        present = rng.random(probs.shape) < 1 - (1 - probs) ** N
        present[np.arange(n), probs.argmax(axis=1)] = True
        obs["reward_max"] = np.where(present, values, -np.inf).max(axis=1)
        obs["reward_min"] = np.where(present, values, np.inf).min(axis=1)
    else:
        obs["reward_max"] = np.minimum(reward_mean + rstd * zmax * lognoise(rng, n, 0.1), ceiling)
        obs["reward_min"] = np.maximum(reward_mean - rstd * zmax * lognoise(rng, n, 0.1), floor)
    obs["reward_max"] = np.maximum(obs["reward_max"], reward_mean)
    obs["reward_min"] = np.minimum(obs["reward_min"], reward_mean)
    L["_acc_eff"], L["_fmt_eff"] = acc, fmt

    # --- GRPO groups and advantages -----------------------------------------------------------
    P["reward_std_kind"] = P.get("reward_std_force") or ("group" if grpo and P["profile"] == "trl" else "batch")
    if grpo:
        if discrete or "xml" in comps:
            q = 1.0
            if "xml" in comps:  # identical soft-format scores: all formatted or all truncated
                q = fmt**G + np.clip(trunc_exp, 0, 1) ** G
            elif "format" in comps:
                q = fmt**G + (1 - fmt) ** G
            zvf_exp = (beta_moment(acc, kap, G) + beta_moment(1 - acc, kap, G)) * q
        else:
            zvf_exp = np.zeros(n)
        zvf_exp = np.clip(zvf_exp, 0, 1)
        p_noisy = np.where((zvf_exp > 1e-9) & (zvf_exp < 1 - 1e-9), sigmoid(logit(zvf_exp) + rng.normal(0, 0.25 * snz, n)), zvf_exp)
        zvf_obs = rng.binomial(ng, np.clip(p_noisy, 0, 1)) / ng
        gstd = np.sqrt(np.maximum(var_within, 0) * np.maximum(1 - zvf_exp, 0)) * lognoise(rng, n, 0.08 * nz)
        gstd = np.where(zvf_obs >= 1, 0.0, gstd)
        obs["zero_variance_group_frac"] = zvf_obs
        obs["group_reward_std_mean"] = gstd
        if P["reward_std_kind"] == "group":  # TRL logs reward_std as the mean within-group std
            obs["reward_std"] = gstd * math.sqrt(G / (G - 1)) * lognoise(rng, n, 0.02 * nz)
        if P["std_norm"]:
            adv_std = np.sqrt(np.maximum(1 - zvf_obs, 0) * (G - 1) / G) * lognoise(rng, n, 0.01 * nz)
        else:
            adv_std = gstd * 1.1 * lognoise(rng, n, 0.03 * nz)
        adv_zero = zvf_obs.copy()
        L["_zvf"] = zvf_obs
    else:
        if P["whiten"]:
            adv_std = 1 + rng.normal(0, 1e-3, n)
        else:
            adv_std = rstd * np.sqrt(np.clip(1 - L["ev"], 0.05, 2.0)) * lognoise(rng, n, 0.05 * nz)
        adv_zero = np.abs(rng.normal(0, 0.004, n))
        L["_zvf"] = np.zeros(n)
    adv_std = adv_std * L["adv_scale"]
    obs["adv_std"] = adv_std
    obs["adv_zero_frac"] = np.clip(np.maximum(adv_zero, L["adv_zero_min"] + rng.normal(0, 0.01 * nz, n) * (L["adv_zero_min"] > 0)), 0, 1)
    obs["adv_mean"] = rng.normal(0, 0.01 * nz, n) * np.maximum(adv_std, 1e-9)
    return components

def _rewards_explicit(ctx: Ctx, obs: dict[str, np.ndarray], acc: np.ndarray, kap: np.ndarray,
                      fmt: np.ndarray) -> dict[str, np.ndarray]:
    """Reward, group and advantage statistics of rollouts drawn one by one (binary rewards, small groups).

    Each step draws every prompt's difficulty p ~ Beta(acc * kappa, (1 - acc) * kappa), then
    each of its G completions is right with probability p (and formatted with a per-prompt
    probability), so the logged numbers are exactly what such a batch gives: reward means are
    multiples of 1/(G * prompts), a group of identical rewards has std exactly 0, a batch that
    is all wrong has reward exactly at its floor with zero spread.
    """
    P, L, rng, n, nz = ctx.P, ctx.L, ctx.rng, ctx.n, ctx.noise
    ng, G = P["n_groups"], P["G"]
    grpo = P["algorithm"] == "grpo"
    comps = P["components"]
    lo, hi = P["correct_range"]
    a = np.maximum(acc * kap, 1e-3)[:, None]
    b = np.maximum((1 - acc) * kap, 1e-3)[:, None]
    p = rng.beta(np.broadcast_to(a, (n, ng)), np.broadcast_to(b, (n, ng)))
    p = np.where(acc[:, None] <= 1e-6, 0.0, p)  # a policy that is never right: exactly 0, not a Beta crumb
    correct = rng.random((n, ng, G)) < p[:, :, None]
    name_c, w_c = comps["correct"]
    right = lo + (hi - lo) * correct
    reward = w_c * right
    components = {name_c: right.reshape(n, -1).mean(axis=1)}
    if "format" in comps:  # the format part: per prompt, concentrated like the task (P["fmt_kappa"])
        name_f, w_f = comps["format"]
        kf = float(P.get("fmt_kappa", 30.0))
        if kf > 0:
            q = rng.beta(np.broadcast_to(np.maximum(fmt * kf, 1e-3)[:, None], (n, ng)),
                         np.broadcast_to(np.maximum((1 - fmt) * kf, 1e-3)[:, None], (n, ng)))
        else:  # all or nothing per prompt: every rollout of a prompt meets the format, or none does
            q = (rng.random((n, ng)) < fmt[:, None]).astype(float)
        q = np.where(fmt[:, None] <= 1e-6, 0.0, np.where(fmt[:, None] >= 1 - 1e-6, 1.0, q))
        formatted = rng.random((n, ng, G)) < q[:, :, None]
        reward = reward + w_f * formatted
        components[name_f] = formatted.reshape(n, -1).mean(axis=1)
    flat = reward.reshape(n, -1)
    obs["reward_min"], obs["reward_max"] = flat.min(axis=1), flat.max(axis=1)
    same = obs["reward_min"] == obs["reward_max"]  # identical rewards: their mean and std exactly, not a rounding
    obs["reward_mean"] = np.where(same, obs["reward_min"], flat.mean(axis=1))
    batch_std = np.where(same, 0.0, flat.std(axis=1, ddof=1)) if flat.shape[1] > 1 else np.zeros(n)
    P["reward_std_kind"] = P.get("reward_std_force") or ("group" if grpo and P["profile"] == "trl" else "batch")
    if grpo:
        zero = reward.max(axis=2) == reward.min(axis=2)
        zvf = zero.mean(axis=1)
        gstd = np.where(zero, 0.0, reward.std(axis=2, ddof=1)).mean(axis=1)
        obs["zero_variance_group_frac"] = zvf
        obs["group_reward_std_mean"] = gstd
        obs["reward_std"] = gstd if P["reward_std_kind"] == "group" else batch_std
        if P["std_norm"]:  # each group's advantages have std 1 unless the group is degenerate
            adv_std = np.sqrt(np.maximum(1 - zvf, 0) * (G - 1) / G) * lognoise(rng, n, 0.01 * nz)
        else:
            adv_std = gstd * 1.1 * lognoise(rng, n, 0.03 * nz)
        adv_zero = zvf.copy()
        L["_zvf"] = zvf
    else:
        obs["reward_std"] = batch_std
        if P["whiten"]:
            adv_std = 1 + rng.normal(0, 1e-3, n)
        else:
            adv_std = np.maximum(batch_std, 1e-3) * np.sqrt(np.clip(1 - L["ev"], 0.05, 2.0)) * lognoise(rng, n, 0.05 * nz)
        adv_zero = np.abs(rng.normal(0, 0.004, n))
        L["_zvf"] = np.zeros(n)
    adv_std = adv_std * L["adv_scale"]
    obs["adv_std"] = adv_std
    obs["adv_zero_frac"] = np.clip(np.maximum(adv_zero, L["adv_zero_min"] + rng.normal(0, 0.01 * nz, n) * (L["adv_zero_min"] > 0)), 0, 1)
    obs["adv_mean"] = rng.normal(0, 0.01 * nz, n) * np.maximum(adv_std, 1e-9)
    L["_acc_eff"], L["_fmt_eff"] = acc, fmt
    return components


def observe(ctx: Ctx) -> tuple[dict[str, np.ndarray], dict[str, np.ndarray], np.ndarray, dict[str, np.ndarray]]:
    """Latents -> logged series (all fields), components, kl_positional and extra metrics."""
    P, L, rng, n, nz = ctx.P, ctx.L, ctx.rng, ctx.n, ctx.noise
    N = P["N"]
    grpo = P["algorithm"] == "grpo"
    cap = P["cap"]
    obs: dict[str, np.ndarray] = {}

    # --- generation lengths ---------------------------------------------------------------
    lmed = L["lmed"] * lognoise(rng, n, 0.03 * nz)
    lsig = L["lsig"]
    trunc_exp, mean_len = length_stats(lmed, lsig, cap)
    trunc_obs = rng.binomial(N, np.clip(trunc_exp, 0, 1)) / N
    obs["completion_len_mean"] = np.minimum(mean_len * lognoise(rng, n, 0.015 * nz), cap)
    p95 = np.exp(np.log(lmed) + 1.645 * lsig) * lognoise(rng, n, 0.03 * nz)
    obs["completion_len_p95"] = np.where(trunc_exp >= 0.05, cap, np.minimum(p95, cap))
    zmax = float(norm_ppf(1 - 0.5 / N))
    mx = np.minimum(np.exp(np.log(lmed) + zmax * lsig) * lognoise(rng, n, 0.05 * nz), cap - 1)
    obs["completion_len_max"] = np.round(np.where(trunc_obs > 0, float(cap), np.maximum(mx, obs["completion_len_p95"] * 0.999)))
    obs["completion_len_mean"] = np.minimum(obs["completion_len_mean"], obs["completion_len_max"])
    obs["truncation_rate"] = trunc_obs
    obs["max_len_hit_frac"] = trunc_obs
    obs["eos_rate"] = np.clip(1 - trunc_obs - np.abs(rng.normal(0, 0.002, n)), 0, 1)
    obs["repetition_rate"] = np.clip(L["rep"] * lognoise(rng, n, 0.12 * nz), 0, 1)

    # --- rewards ----------------------------------------------------------------------------
    # a truncated completion earns nothing, unless it wrote its answer before the cap ("trunc_pays")
    lost = trunc_exp * (1 - L["trunc_pays"]) if "trunc_pays" in L else trunc_exp
    acc = np.clip(L["acc"] * (1 - lost), 1e-6, 1 - 1e-6)
    kap = np.maximum(L["kappa"], 0.01)
    fmt = np.clip(L["fmt"] * (1 - lost), 0, 1)
    if P.get("explicit_groups"):
        components = _rewards_explicit(ctx, obs, acc, kap, fmt)
    else:
        components = _rewards_analytic(ctx, obs, trunc_exp, acc, kap, fmt, zmax)

    # --- policy -----------------------------------------------------------------------------
    obs["entropy_mean"] = L["H"] * lognoise(rng, n, P["sigH"] * nz)
    obs["logprob_mean"] = -L["H"] * ctx.u(0.6, 1.05) * lognoise(rng, n, 0.04 * nz)
    clip = np.clip(L["clip"], 1e-6, 0.95)
    clip_obs = sigmoid(logit(clip) + rng.normal(0, 0.25 * nz, n))
    obs["clip_fraction"] = clip_obs
    sig_r = math.log(1 + P["eps_clip"]) / norm_ppf(1 - clip_obs / 2)
    obs["ratio_p95"] = np.exp(1.645 * sig_r + L["rbias"]) * lognoise(rng, n, 0.005 * nz)
    obs["ratio_mean"] = 1 + L["rbias"] + rng.normal(0, 0.002 * nz, n)
    kl_obs = L["kl"] * lognoise(rng, n, P["sig_kl"] * nz)
    kl_obs[0] = 0.0 if P["warmup"] > 0 or ctx.rng.random() < 0.5 else kl_obs[0]
    obs["kl_mean"] = kl_obs
    obs["kl_max"] = kl_obs * L["klr"] * lognoise(rng, n, 0.25 * nz)
    shares = L["posw"] * lognoise(rng, (n, 8), 0.12 * nz)
    shares /= shares.sum(axis=1, keepdims=True)
    kl_pos = kl_obs[:, None] * 8 * shares

    # --- value head (PPO) ----------------------------------------------------------------------
    obs["value_explained_variance"] = np.minimum(L["ev"] + rng.normal(0, 0.04 * nz, n), 0.995)
    obs["value_loss"] = L["vloss"] * lognoise(rng, n, 0.2 * nz)
    obs["value_clip_fraction"] = np.clip(L["vclip"] * lognoise(rng, n, 0.25 * nz), 0, 1)

    # --- optimisation -------------------------------------------------------------------------
    obs["lr"] = L["lr"].copy()
    g = L["g"] * lognoise(rng, n, min(P["sig_g"] * nz, 0.6))
    zvf = L["_zvf"]
    if grpo:
        g = g * np.sqrt(np.maximum(1 - zvf, 0.05))
    dead = grpo & (P["beta"] == 0) & (zvf >= 1)
    g = np.where(dead, 0.0, g)
    obs["grad_norm"] = g
    obs["grad_norm_post_clip"] = np.minimum(g, P["max_grad_norm"])
    obs["nan_count"] = np.zeros(n)
    obs["inf_count"] = np.zeros(n)
    gpc_med = float(np.median(obs["grad_norm_post_clip"])) or 1.0
    wur_k = P["wur_target"] / (P["lr_peak"] * gpc_med)
    obs["weight_update_ratio"] = L["lr"] * obs["grad_norm_post_clip"] * wur_k * lognoise(rng, n, 0.1 * nz)
    if grpo:
        pg = rng.normal(0, 1, n) * P["loss_sd"] * nz * np.sqrt(np.maximum(1 - zvf, 0))
    else:
        pg = rng.normal(-0.005, 1, n) * P["loss_sd"] * nz + P["vf_coef"] * obs["value_loss"]
    loss = pg * L.get("pg_scale", 1.0) + P["beta"] * kl_obs
    obs["loss"] = np.where(dead, 0.0, loss)

    # --- throughput --------------------------------------------------------------------------
    ref_len = float(np.median(obs["completion_len_mean"][: max(3, n // 20)]))
    gen_len = 0.5 * obs["completion_len_mean"] + 0.5 * obs["completion_len_p95"]
    ref_gen = float(np.median(gen_len[: max(3, n // 20)]))
    tgen = L["tgen"] * (gen_len / ref_gen) ** 0.9 * lognoise(rng, n, P["sig_t"] * nz)
    topt = L["topt"] * (obs["completion_len_mean"] / ref_len) ** 0.8 * lognoise(rng, n, P["sig_t"] * nz)
    over = L["tover"] * lognoise(rng, n, 0.2 * nz)
    step = tgen + topt + over
    spikes = rng.random(n) < P["spike_rate"]
    step = step * np.where(spikes, rng.uniform(1.3, 3.0, n), 1.0)
    step[0] *= P["first_mult"]
    ck = P["ckpt_every"]
    ck_idx = np.arange(ck - 1, n, ck)
    step[ck_idx] += P["ckpt_cost"] * lognoise(rng, len(ck_idx), 0.1)
    obs["generation_time_s"] = tgen
    obs["optimization_time_s"] = topt
    obs["step_time_s"] = step

    # --- async / inference engine ---------------------------------------------------------------
    obs["batch_age"] = np.maximum(L["age"] + rng.normal(0, 0.12 * nz, n), 0)
    mism = L["mism"] * lognoise(rng, n, 0.18 * nz)
    mism = mism * np.where(rng.random(n) < 0.01, rng.uniform(2, 4, n), 1.0)
    obs["logprob_mismatch"] = mism

    extra = {
        "num_tokens": np.cumsum(obs["completion_len_mean"] * N + N * 120.0),
        "epoch": np.cumsum(np.full(n, N / P["G"])) / P["dataset_size"],
        "gpu_mem_gb": np.clip(ctx.u(30, 70) + 0.6 * ctx.sn(0.2) + 0.002 * obs["completion_len_mean"], 5, 80),
    }
    obs["wall_time"] = P["start_time"] + np.cumsum(step)
    return obs, components, kl_pos, extra


# ---------------------------------------------------------------------------------------------
# 4. what this run logs
# ---------------------------------------------------------------------------------------------
def applicable(ctx: Ctx) -> set[str]:
    """Fields that make sense for this run at all (algorithm, KL, async, inference engine)."""
    P = ctx.P
    fields = set(GEN_FIELDS) | {"kl_positional", "reward_components"}
    if P["algorithm"] == "grpo":
        fields -= set(VALUE_FIELDS)
    else:
        fields -= set(GROUP_FIELDS)
    if P["beta"] == 0 and not P["kl_monitor"]:
        fields -= set(KL_FIELDS)
    if not P["async"]:
        fields.discard("batch_age")
    if not P["vllm"]:
        fields.discard("logprob_mismatch")
    if not P["log_components"]:
        fields.discard("reward_components")
    return fields


def choose_fields(ctx: Ctx) -> tuple[set[str], dict[str, int]]:
    """The fields this run logs (a logging profile plus what its signal needs) and their cadence."""
    P, rng = ctx.P, ctx.rng
    ok = applicable(ctx)
    profile = P["profile"]
    if profile == "sparse":
        chosen = {"reward_mean", "loss", "grad_norm"}
        for extra_field, p in (("lr", 0.5), ("step_time_s", 0.4), ("kl_mean", 0.3), ("reward_std", 0.3)):
            if rng.random() < p:
                chosen.add(extra_field)
        chosen &= ok | {"reward_mean", "loss", "grad_norm", "lr", "step_time_s", "reward_std"}
    elif profile == "full":
        chosen = set()
        for f in sorted(ok):  # sorted: a set's order follows the per-process string hash seed
            p = {"kl_positional": 0.5, "repetition_rate": 0.6, "weight_update_ratio": 0.5, "nan_count": 0.5,
                 "inf_count": 0.5, "max_len_hit_frac": 0.7, "optimization_time_s": 0.7}.get(f, 0.9)
            if rng.random() < p:
                chosen.add(f)
    elif profile == "trl":
        chosen = {f for f in TRL_FIELDS if f in ok} | ({"reward_components"} & ok)
        for f in sorted(ok - chosen):
            if rng.random() < 0.25:
                chosen.add(f)
    else:
        chosen = {f for f in sorted(ok) if rng.random() < 0.55}
    if "nan_count" in chosen or "inf_count" in chosen:
        chosen |= {"nan_count", "inf_count"}
    chosen.add("reward_mean")
    chosen |= ctx.required
    if ctx.P["algorithm"] == "ppo":
        chosen -= set(GROUP_FIELDS)
        if profile != "sparse":  # a PPO trainer reports its value head
            chosen |= {"value_loss", "value_explained_variance"}
    else:
        chosen -= set(VALUE_FIELDS)
        if profile != "sparse":  # a GRPO trainer reports its groups
            chosen |= set(GROUP_FIELDS)
    if "kl_positional" in chosen:
        chosen.add("kl_mean")
    cadence: dict[str, int] = {}
    room = ctx.n - (ctx.onset if ctx.onset is not None else 0)
    limit = max(1, room // 12)
    for f, options in (("kl_positional", (1, 1, 2, 5, 10)), ("repetition_rate", (1, 1, 1, 5)), ("value_clip_fraction", (1, 1, 2))):
        if f in chosen:
            cadence[f] = int(min(options[int(rng.integers(len(options)))], limit))
    return chosen, cadence
