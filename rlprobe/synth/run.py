"""make_run: a synthetic run in memory (series, components, samples on demand, ground truth)."""

from __future__ import annotations

import math
import random
import zlib
from dataclasses import asdict, dataclass, field
from typing import Any, Iterable, Mapping

import numpy as np

from rlprobe.synth import families as _families
from rlprobe.synth import pathologies as _pathologies
from rlprobe.synth import shapes as _shapes
from rlprobe.synth import text as _text
from rlprobe.synth._numeric import loguniform
from rlprobe.synth.catalog import EXTRA_VARIANTS, HEALTHY_FAMILIES, PATHOLOGY_FIELDS, SIGNATURES
from rlprobe.synth.logview import how_logged, logged_indices, points_hold, thin
from rlprobe.synth.model import GEN_FIELDS, Ctx, assign_components, baseline, choose_fields, draw_params, observe
from rlprobe.synth.options import Options, check_kind, parse_options

ALGORITHMS = ("grpo", "ppo")
_SAMPLE_GROUPS = 4  # GRPO groups per logged sample batch
_PPO_SAMPLES = 16


@dataclass(frozen=True)
class Truth:
    """What a synthetic run really is: written next to the recording, never into it."""

    kind: str  # "healthy" or a signature ID
    family: str | None  # healthy family, None for pathological runs
    pathology: str | None  # signature ID, None for healthy runs
    onset_step: int | None  # first (logged) step at which the failure is in the data (None for healthy runs)
    magnitude: float | None  # the failure's size in its own unit (see PATHOLOGIES / params)
    noise: float
    algorithm: str
    variant: str | None
    fields_logged: tuple[str, ...]
    n_steps: int
    seed: int
    group_size: int
    params: dict[str, Any] = field(default_factory=dict)
    end_step: int | None = None  # last (logged) step of an episode that ended; None: it lasts to the end
    fit: tuple[str, ...] = ()  # every signature that is a correct diagnosis (the pathology first)

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready dict."""
        out = asdict(self)
        out["fields_logged"] = list(self.fields_logged)
        out["fit"] = list(self.fit)
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
    """A synthetic run: step series (NaN where not logged), components, kl_positional, truth.

    ``steps`` are the logged steps (1..n, or stride, 2*stride, ... for a sparse log); every
    series has one value per logged step. ``masks`` says where a field is logged when it is not
    at every logged step.
    """

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
        present = (name in self.series or (name == "kl_positional" and self.kl_positional is not None)
                   or (name == "reward_components" and bool(self.components)))
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
    variant: str | None = None,
    options: Options | Mapping[str, Any] | Iterable[str] | None = None,
) -> SynthRun:
    """Generate a synthetic run in memory: a signature ID, 'healthy' or 'healthy:<family>'.

    ``variant`` asks for one of a signature's EXTRA_VARIANTS (dead_start, transient, ...);
    ``options`` (an Options, a mapping or KEY=VALUE strings) for the shapes real logs take
    (sparse logging, binary rewards, placeholders, ...). Without them the run is exactly the
    one this seed always gave.
    """
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
    if variant is not None:
        variant = str(variant).strip().lower()
        valid = EXTRA_VARIANTS.get(sig or "", {})
        if variant not in valid:
            what = f"{sig} has {', '.join(valid)}" if valid else f"{sig or 'a healthy run'} has none"
            raise ValueError(f"unknown variant {variant!r}: {what} (variants on request: "
                             + "; ".join(f"{k}: {', '.join(v)}" for k, v in EXTRA_VARIANTS.items()) + ")")
    opts = parse_options(options)
    if family == "*":
        names = list(HEALTHY_FAMILIES)
        family = names[int(np.random.default_rng(_label_seed(seed, "healthy")).integers(len(names)))]
    check_kind(opts, sig, family, variant)
    label = sig if sig else f"healthy:{family}"
    rng = np.random.default_rng(_label_seed(seed, label))
    orng = np.random.default_rng(_label_seed(seed, label) + [zlib.crc32(b"options")])
    n = int(n_steps)
    if family == "short":
        n = min(n, int(rng.integers(25, 100)))
    stride = 1
    if opts.logging == "sparse":  # logging_steps x points optimizer steps, one logged point per window
        stride = opts.logging_steps or int(orng.integers(5, 11))
        n = stride * (opts.points or int(np.clip(round(n / stride), 20, 60)))
    nz = float(noise) if noise is not None else loguniform(rng, 0.5, 2.0)
    ctx = Ctx(rng, n, nz, int(group_size), opts=opts, orng=orng, logged_idx=logged_indices(n, stride))
    forced = _pathologies.spec(sig, variant)[2] if sig else _families.FAMILIES[family][2]
    draw_params(ctx, forced or algorithm)
    if sig:
        _pathologies.prepare(ctx, sig, variant)
    else:
        _families.prepare(ctx, family)
    _shapes.prepare(ctx)
    assign_components(ctx)
    baseline(ctx)
    if sig:
        _pathologies.apply(ctx, sig, variant)
    else:
        _families.apply(ctx, family)
    _shapes.shape_latents(ctx)
    obs, comps, kl_pos, extra = observe(ctx)
    for hook in ctx.post:
        hook(ctx, obs, extra)
    _shapes.edit_observed(ctx, obs)
    fields, cadence = choose_fields(ctx)
    fields, option_masks = _shapes.fields(ctx, fields)
    if stride > 1:  # a sparse log has one point per window and nothing logged less often
        cadence = {}
    steps = np.arange(1, n + 1, dtype=np.int64)
    masks = {f: (steps % k == 0) for f, k in cadence.items() if k > 1}
    masks.update(option_masks)
    series: dict[str, np.ndarray] = {}
    for f in GEN_FIELDS:
        if f in fields:
            arr = np.asarray(obs[f], dtype=np.float64).copy()
            if f in masks:
                arr[~masks[f]] = np.nan
            series[f] = arr
    series["wall_time"] = obs["wall_time"]
    components = {k: np.asarray(v, dtype=np.float64) for k, v in comps.items()} if "reward_components" in fields else {}
    if "reward_components" in masks and components:
        components = {k: np.where(masks["reward_components"], v, np.nan) for k, v in components.items()}
    elif not components:
        masks.pop("reward_components", None)
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
    onset_step, end_step = _visible_onset(ctx, sig, stride, masks, series, components)
    if stride > 1:
        series = {f: thin(v, stride, how_logged(f, opts.loss)) for f, v in series.items()}
        components = {k: thin(v, stride, "mean") for k, v in components.items()}
        klp = thin(klp, stride, "mean") if klp is not None else None
        keep_extra = {k: thin(v, stride, how_logged(k, opts.loss)) for k, v in keep_extra.items()}
        steps = steps[ctx.logged_idx]
    logged = sorted(series) + (["kl_positional"] if klp is not None else [])
    logged += [f"reward_component.{k}" for k in components] + [f"extra.{k}" for k in keep_extra]
    params = {k: v for k, v in ctx.info.items()}
    params.update(
        model=ctx.P["model"], reward_template=ctx.P["template"], cap=ctx.P["cap"], beta=ctx.P["beta"],
        batch_size=ctx.P["N"], n_groups=ctx.P["n_groups"], profile=ctx.P["profile"], cadence=dict(cadence),
        reward_std_kind=ctx.P["reward_std_kind"], logging_steps=stride, logged_points=len(steps),
        updates_per_batch=opts.updates, options=opts.changed(),
    )
    if ctx.P.get("explicit_groups") and ctx.P["template"] == "binary":
        # each step's reward mean is a multiple of this (a window mean of a sparse log: of it / stride)
        params["reward_quantum"] = (ctx.P["correct_range"][1] - ctx.P["correct_range"][0]) / ctx.P["N"]
    truth = Truth(
        kind="healthy" if family else sig,  # type: ignore[arg-type]
        family=family,
        pathology=sig,
        onset_step=onset_step,
        magnitude=float(ctx.magnitude) if ctx.magnitude is not None else None,
        noise=nz,
        algorithm=ctx.P["algorithm"],
        variant=ctx.variant,
        fields_logged=tuple(logged),
        n_steps=n,
        seed=int(seed),
        group_size=int(ctx.P["G"]),
        params=_jsonable(params),
        end_step=end_step,
        fit=tuple(dict.fromkeys((sig,) + tuple(ctx.fit))) if sig else (),
    )
    run = SynthRun(
        truth=truth, steps=steps, series=series, components=components, kl_positional=klp, extra=keep_extra,
        masks=masks if stride == 1 else {}, model_name=ctx.P["model"], trainer_config=_trainer_config(ctx, seed),
        events=_events(ctx), _ctx=ctx,
    )
    return run


def _visible_onset(ctx: Ctx, sig: str | None, stride: int, masks: dict[str, np.ndarray], series: dict[str, np.ndarray],
                   components: dict[str, np.ndarray]) -> tuple[int | None, int | None]:
    """The first (and, for an episode that ended, last) logged step whose data shows the failure.

    Where the failure holds comes from the latents (``ctx.holds``, or every step from the
    onset); a logged point shows it by the rule of how it is logged (``points_hold``); a point
    where none of the failure's own fields is logged (reward keys on every other step) does not.
    """
    if sig is None or ctx.onset is None:
        return None, None
    n = ctx.n
    idx = np.arange(n)
    holds = ctx.holds if ctx.holds is not None else idx >= ctx.onset
    if ctx.holds is None and ctx.episode_end is not None:
        holds = holds & (idx <= ctx.episode_end)
    present = [f for f in PATHOLOGY_FIELDS[sig] if f in series or (f == "reward_components" and components)]
    if present and all(f in masks for f in present):
        holds = holds & np.logical_or.reduce([masks[f] for f in present])
    point = points_hold(holds, stride, ctx.holds_rule)
    shown = np.flatnonzero(point)
    if shown.size == 0:  # guarded against by construction (episodes span >= 2 windows)
        raise RuntimeError(f"{sig} ({ctx.variant}) is not visible in the logged data of this run")
    step_of = (lambda j: int(j) + 1) if stride == 1 else (lambda j: (int(j) + 1) * stride)
    end = step_of(shown[-1]) if ctx.episode_end is not None else None
    return step_of(shown[0]), end


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
    if ctx.stride > 1:
        cfg["logging_steps"] = ctx.stride
    if ctx.opts is not None and ctx.opts.updates > 1:
        cfg["num_iterations"] = ctx.opts.updates
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
    for key, style in (("soup", "soup"), ("loop", "loop"), ("fmtonly", "format_only"), ("garbage", "garbage"), ("pad", "padded"),
                       ("bare", "bare")):
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
    lens = np.where(truncated, cap, np.maximum(np.round(lens), P.get("min_len", 4))).astype(int)
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
