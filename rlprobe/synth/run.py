"""make_run: a synthetic run in memory (series, components, samples on demand, ground truth)."""

from __future__ import annotations

import math
import random
import zlib
from dataclasses import asdict, dataclass, field
from typing import Any

import numpy as np

from rlprobe.synth import families as _families
from rlprobe.synth import pathologies as _pathologies
from rlprobe.synth import text as _text
from rlprobe.synth._numeric import loguniform
from rlprobe.synth.catalog import HEALTHY_FAMILIES, SIGNATURES
from rlprobe.synth.model import GEN_FIELDS, Ctx, assign_components, baseline, choose_fields, draw_params, observe

ALGORITHMS = ("grpo", "ppo")
_SAMPLE_GROUPS = 4  # GRPO groups per logged sample batch
_PPO_SAMPLES = 16


@dataclass(frozen=True)
class Truth:
    """What a synthetic run really is: written next to the recording, never into it."""

    kind: str  # "healthy" or a signature ID
    family: str | None  # healthy family, None for pathological runs
    pathology: str | None  # signature ID, None for healthy runs
    onset_step: int | None  # first step of the failure (None for healthy runs)
    magnitude: float | None  # the failure's size in its own unit (see PATHOLOGIES / params)
    noise: float
    algorithm: str
    variant: str | None
    fields_logged: tuple[str, ...]
    n_steps: int
    seed: int
    group_size: int
    params: dict[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready dict."""
        out = asdict(self)
        out["fields_logged"] = list(self.fields_logged)
        return _jsonable(out)


def _jsonable(value: Any) -> Any:
    if isinstance(value, dict):
        return {str(k): _jsonable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_jsonable(v) for v in value]
    if isinstance(value, (np.floating, float)):
        return float(value) if math.isfinite(float(value)) else None
    if isinstance(value, (np.integer,)):
        return int(value)
    if isinstance(value, np.bool_):
        return bool(value)
    return value


@dataclass
class SynthRun:
    """A synthetic run: step series (NaN where not logged), components, kl_positional, truth."""

    truth: Truth
    steps: np.ndarray
    series: dict[str, np.ndarray]
    components: dict[str, np.ndarray]
    kl_positional: np.ndarray | None
    extra: dict[str, np.ndarray]
    masks: dict[str, np.ndarray]
    model_name: str
    trainer_config: dict[str, Any]
    events: list[tuple[str, int, str, dict[str, Any]]]
    _ctx: Ctx

    def logged(self, name: str) -> np.ndarray:
        """Boolean mask of the steps at which a field is logged (all False if never)."""
        if name in self.masks:
            return self.masks[name]
        present = name in self.series or (name == "kl_positional" and self.kl_positional is not None)
        return np.full(len(self.steps), present)

    def samples(self, step: int) -> list[dict[str, Any]]:
        """The rollouts of one step as SampleRecord dicts (GRPO: groups of G sharing a prompt)."""
        return _samples(self, int(step))


def _parse_kind(kind: str) -> tuple[str | None, str | None]:
    text = str(kind).strip()
    low = text.lower()
    if low == "healthy":
        return None, "*"
    if low.startswith("healthy:"):
        fam = low.split(":", 1)[1].strip()
        if fam not in HEALTHY_FAMILIES:
            raise ValueError(f"unknown healthy family {fam!r}: valid families are {', '.join(HEALTHY_FAMILIES)}")
        return None, fam
    sig = text.upper()
    if sig not in SIGNATURES:
        raise ValueError(
            f"unknown kind {kind!r}: use a signature ({', '.join(SIGNATURES)}), 'healthy' or 'healthy:<family>' "
            f"({', '.join(HEALTHY_FAMILIES)})"
        )
    return sig, None


def _label_seed(seed: int, label: str) -> list[int]:
    return [int(seed) & 0xFFFFFFFF, (int(seed) >> 32) & 0xFFFFFFFF, zlib.crc32(label.encode())]


def make_run(
    kind: str,
    n_steps: int = 500,
    seed: int = 0,
    algorithm: str | None = None,
    noise: float | None = None,
    group_size: int = 8,
) -> SynthRun:
    """Generate a synthetic run in memory: a signature ID, 'healthy' or 'healthy:<family>'."""
    sig, family = _parse_kind(kind)
    if n_steps < 10:
        raise ValueError(f"n_steps must be >= 10, got {n_steps}")
    if group_size < 2:
        raise ValueError(f"group_size must be >= 2, got {group_size}")
    if algorithm is not None:
        algorithm = algorithm.lower()
        if algorithm not in ALGORITHMS:
            raise ValueError(f"unknown algorithm {algorithm!r}: valid are {', '.join(ALGORITHMS)}")
    if noise is not None and not (noise >= 0 and math.isfinite(noise)):
        raise ValueError(f"noise must be a finite number >= 0, got {noise}")
    if family == "*":
        names = list(HEALTHY_FAMILIES)
        family = names[int(np.random.default_rng(_label_seed(seed, "healthy")).integers(len(names)))]
    label = sig if sig else f"healthy:{family}"
    rng = np.random.default_rng(_label_seed(seed, label))
    n = int(n_steps)
    if family == "short":
        n = min(n, int(rng.integers(25, 100)))
    nz = float(noise) if noise is not None else loguniform(rng, 0.5, 2.0)
    ctx = Ctx(rng, n, nz, int(group_size))
    forced = _pathologies.SPECS[sig][2] if sig else _families.FAMILIES[family][2]
    draw_params(ctx, forced or algorithm)
    if sig:
        _pathologies.prepare(ctx, sig)
    else:
        _families.prepare(ctx, family)
    assign_components(ctx)
    baseline(ctx)
    if sig:
        _pathologies.apply(ctx, sig)
    else:
        _families.apply(ctx, family)
    obs, comps, kl_pos, extra = observe(ctx)
    for hook in ctx.post:
        hook(ctx, obs, extra)
    fields, cadence = choose_fields(ctx)
    steps = np.arange(1, n + 1, dtype=np.int64)
    masks = {f: (steps % k == 0) for f, k in cadence.items() if k > 1}
    series: dict[str, np.ndarray] = {}
    for f in GEN_FIELDS:
        if f in fields:
            arr = np.asarray(obs[f], dtype=np.float64).copy()
            if f in masks:
                arr[~masks[f]] = np.nan
            series[f] = arr
    series["wall_time"] = obs["wall_time"]
    components = {k: np.asarray(v, dtype=np.float64) for k, v in comps.items()} if "reward_components" in fields else {}
    klp = None
    if "kl_positional" in fields:
        klp = kl_pos.copy()
        if "kl_positional" in masks:
            klp[~masks["kl_positional"]] = np.nan
    keep_extra = {}
    if ctx.P["profile"] != "sparse":
        for name, p in (("num_tokens", 0.5), ("epoch", 0.4), ("gpu_mem_gb", 0.3)):
            if rng.random() < p or (name == "gpu_mem_gb" and sig == "THROUGHPUT_ROT" and ctx.variant == "overhead"):
                keep_extra[name] = np.asarray(extra[name], dtype=np.float64)
    logged = sorted(series) + (["kl_positional"] if klp is not None else [])
    logged += [f"reward_component.{k}" for k in components] + [f"extra.{k}" for k in keep_extra]
    params = {k: v for k, v in ctx.info.items()}
    params.update(
        model=ctx.P["model"], reward_template=ctx.P["template"], cap=ctx.P["cap"], beta=ctx.P["beta"],
        batch_size=ctx.P["N"], n_groups=ctx.P["n_groups"], profile=ctx.P["profile"], cadence=dict(cadence),
    )
    truth = Truth(
        kind="healthy" if family else sig,  # type: ignore[arg-type]
        family=family,
        pathology=sig,
        onset_step=(ctx.onset + 1) if (sig and ctx.onset is not None) else None,
        magnitude=float(ctx.magnitude) if ctx.magnitude is not None else None,
        noise=nz,
        algorithm=ctx.P["algorithm"],
        variant=ctx.variant,
        fields_logged=tuple(logged),
        n_steps=n,
        seed=int(seed),
        group_size=int(ctx.P["G"]),
        params=_jsonable(params),
    )
    run = SynthRun(
        truth=truth, steps=steps, series=series, components=components, kl_positional=klp, extra=keep_extra,
        masks=masks, model_name=ctx.P["model"], trainer_config=_trainer_config(ctx, seed), events=_events(ctx), _ctx=ctx,
    )
    return run


def _trainer_config(ctx: Ctx, seed: int) -> dict[str, Any]:
    P = ctx.P
    comps = P["components"]
    cfg: dict[str, Any] = {
        "model_name_or_path": P["model"],
        "learning_rate": P["lr_peak"],
        "lr_scheduler_type": P["schedule"],
        "warmup_steps": P["warmup"],
        "max_steps": ctx.n,
        "max_grad_norm": P["max_grad_norm"],
        "max_completion_length": P["cap"],
        "temperature": 1.0,
        "seed": int(seed),
        "save_steps": P["ckpt_every"],
        "use_peft": P["lora"],
        "use_vllm": P["vllm"],
        "async_rollouts": P["async"],
        "reward_funcs": [name for name, _ in comps.values()],
        "reward_weights": [w for _, w in comps.values()],
        "epsilon": P["eps_clip"],
    }
    if P["algorithm"] == "grpo":
        cfg.update(num_generations=P["G"], generation_batch_size=P["N"], beta=P["beta"],
                   epsilon_high=P["eps_clip_high"], scale_rewards=bool(P["std_norm"]), loss_type="dapo" if P["eps_clip_high"] > 0.2 else "grpo")
    else:
        cfg.update(batch_size=P["N"], kl_coef=P["beta"], vf_coef=P["vf_coef"], whiten_advantages=bool(P["whiten"]),
                   num_ppo_epochs=int(ctx.rng.integers(1, 5)), gamma=1.0, lam=0.95)
    cfg["synthetic"] = {"generator": "rlprobe.synth", "version": 1}
    return cfg


def _events(ctx: Ctx) -> list[tuple[str, int, str, dict[str, Any]]]:
    out = [("checkpoint", int(s), "", {"path": f"checkpoints/checkpoint-{int(s)}"}) for s in range(ctx.P["ckpt_every"], ctx.n + 1, ctx.P["ckpt_every"])]
    out += ctx.events
    return sorted(out, key=lambda e: e[1])


# ---------------------------------------------------------------------------------------------
# samples
# ---------------------------------------------------------------------------------------------
def _style(r: random.Random, S: dict[str, float]) -> tuple[str, float]:
    for key, style in (("soup", "soup"), ("loop", "loop"), ("fmtonly", "format_only"), ("garbage", "garbage"), ("pad", "padded")):
        v = S[key]
        if v > 0 and r.random() < v:
            return style, v
    return "normal", 0.0


def _samples(run: SynthRun, step: int) -> list[dict[str, Any]]:
    ctx = run._ctx
    n = ctx.n
    if not 1 <= step <= n:
        raise ValueError(f"step {step} outside 1..{n}")
    i = step - 1
    P, L = ctx.P, ctx.L
    label = run.truth.pathology or f"healthy:{run.truth.family}"
    base = _label_seed(run.truth.seed, label) + [step]
    rng = np.random.default_rng(base)
    r = random.Random(int(rng.integers(1 << 62)))
    grpo = P["algorithm"] == "grpo"
    G = P["G"] if grpo else 1
    ngroups = min(P["n_groups"], _SAMPLE_GROUPS) if grpo else _PPO_SAMPLES
    shape = (ngroups, G)
    acc = float(np.clip(L["acc"][i], 1e-4, 1 - 1e-4))
    kap = float(max(L["kappa"][i], 0.02))
    fmt = float(np.clip(L["fmt"][i], 0, 1))
    lmed, lsig, cap = float(L["lmed"][i]), float(L["lsig"][i]), int(P["cap"])
    H = float(L["H"][i])
    S = {k: float(v[i]) for k, v in ctx.S.items()}
    comps = P["components"]
    lo, hi = P["correct_range"]

    p = rng.beta(max(acc * kap, 1e-3), max((1 - acc) * kap, 1e-3), ngroups) if grpo else np.full(ngroups, acc)
    correct = rng.random(shape) < p[:, None]
    formatted = rng.random(shape) < fmt
    z = rng.standard_normal(shape)
    corr = float(L["sample_corr_len"][i])
    if "judge" not in comps:
        z = z + corr * 2.0 * (correct - 0.5)
    lens = np.exp(math.log(max(lmed, 1.0)) + lsig * z)
    truncated = lens >= cap
    lens = np.where(truncated, cap, np.maximum(np.round(lens), 4)).astype(int)
    correct &= ~truncated
    formatted &= ~truncated
    ident = rng.random(ngroups) < S["ident"]
    for g in np.flatnonzero(ident):
        correct[g, :] = correct[g, 0]
        formatted[g, :] = formatted[g, 0]
        lens[g, :] = lens[g, 0]
        truncated[g, :] = truncated[g, 0]
        z[g, :] = z[g, 0]

    comp_vals: dict[str, np.ndarray] = {comps["correct"][0]: lo + (hi - lo) * correct}
    reward = comps["correct"][1] * comp_vals[comps["correct"][0]]
    if "format" in comps:
        name, w = comps["format"]
        comp_vals[name] = formatted.astype(float)
        reward = reward + w * comp_vals[name]
    if "xml" in comps:
        name, w = comps["xml"]
        xml = np.where(formatted, 0.5, np.where(truncated, 0.0, np.round(rng.uniform(0, 0.4, shape) / 0.125) * 0.125))
        comp_vals[name] = xml
        reward = reward + w * xml
    if "judge" in comps:
        name, w = comps["judge"]
        slope = max(corr, 0.0) + 0.02
        jd = float(L["judge"][i]) + slope * z + rng.normal(0, P["judge_sd"], shape) * (1 - 0.5 * S["pad"])
        comp_vals[name] = np.clip(jd, 0, 1)
        reward = reward + w * comp_vals[name]

    if grpo:
        mean = reward.mean(axis=1, keepdims=True)
        if P["std_norm"]:
            adv = (reward - mean) / (reward.std(axis=1, ddof=1, keepdims=True) + 1e-4)
        else:
            adv = reward - mean
    else:
        adv = (reward - reward.mean()) * (1 - float(np.clip(L["ev"][i], -1, 0.95))) ** 0.5 + rng.normal(0, 0.1, shape)
        if P["whiten"]:
            adv = (adv - adv.mean()) / (adv.std() + 1e-8)
    adv = adv * float(L["adv_scale"][i])
    if L["adv_zero_min"][i] > 0:
        adv = np.where(rng.random(shape) < L["adv_zero_min"][i], 0.0, adv)
    logp = -H * rng.uniform(0.6, 1.1, shape)
    kl_on = run.kl_positional is not None or "kl_mean" in run.series
    klc = float(L["kl"][i]) * np.exp(rng.normal(0, 0.8, shape)) if kl_on else None

    out: list[dict[str, Any]] = []
    fmt_name = P["answer_format"]
    for g in range(ngroups):
        problem = _text.new_problem(r)
        prompt = _text.prompt_text(problem, fmt_name, P["chat"])
        shared: str | None = None
        for j in range(G):
            if ident[g] and shared is not None:
                text = shared
            else:
                style, inten = _style(r, S)
                text = _text.completion_text(r, problem, fmt_name, int(lens[g, j]), bool(correct[g, j]),
                                             bool(formatted[g, j]), bool(truncated[g, j]), style, inten)
                if S["artifact"] > 0 and r.random() < S["artifact"]:
                    text = _text.template_artifact(r, text, bool(P.get("artifact_start", True)))
                shared = text
            out.append({
                "prompt_text": prompt,
                "completion_text": text,
                "reward_total": float(reward[g, j]),
                "reward_components": {k: float(v[g, j]) for k, v in comp_vals.items()},
                "advantage": float(adv[g, j]),
                "logprob_mean": float(logp[g, j]),
                "kl_contribution": float(klc[g, j]) if klc is not None else None,
                "completion_len": int(lens[g, j]),
                "truncated": bool(truncated[g, j]),
                "group_id": f"{step}-{g}" if grpo else None,
            })
    return out
