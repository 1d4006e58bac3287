"""Options: the shapes real logs take that a run's dynamics do not decide.

A real GRPO log is rarely a dense record of every step. HF's Trainer logs every
``logging_steps`` (5-10) steps, rewards and lengths as means over that window but ``grad_norm``
as the value of one step; two optimizer updates per rollout batch make ``grad_norm`` alternate
and leave reward keys on every other step; binary rewards with small groups make reward means
multiples of 1/(G * prompts); TRL logs ``reward_std`` as the mean within-group std where other
loops log the batch std; trainers write placeholders (entropy, approx KL exactly 0 on every
step). Healthy runs have traps of their own: tasks so easy that most groups carry no signal from
the start, runs that saturate early, a one-step KL and grad-norm spike, a reward model that
favours length and is never exploited.

``Options()`` is the plain dense run (exactly what ``make_run`` made before options existed).
``draw_setup(kind, seed)`` draws options, a variant and a group size from the seed, from the
table ``DRAW``, the way ``benchmarks/detectors.py`` samples over them.

    from rlprobe.synth import Options, draw_setup, make_run
    run = make_run("ENTROPY_BLOWUP", seed=3, options=Options(logging="sparse", reward="binary"))
    run = make_run("TRUNCATION_STARVE", seed=3, **draw_setup("TRUNCATION_STARVE", 3))
"""

from __future__ import annotations

import zlib
from dataclasses import asdict, dataclass, fields, replace
from typing import Any, Iterable, Mapping

import numpy as np

from rlprobe.synth.catalog import EXTRA_VARIANTS, HEALTHY_FAMILIES, PATHOLOGY_FIELDS, SIGNATURES

PLACEHOLDER_FIELDS = ("entropy_mean", "kl_mean", "clip_fraction", "loss")
"""Metrics trainers are seen writing as exactly 0 on every step (not measured, or rounded)."""

OPTION_DOCS: dict[str, str] = {
    "logging": "dense: every step | sparse: HF logging_steps, 20-60 points at a stride of 5-10 steps, first at the stride, "
               "window means with grad_norm of one step (the run is logging_steps x points long)",
    "logging_steps": "sparse: the stride (5-10; drawn when not given)",
    "points": "sparse: the number of logged points (20-60; from n_steps / logging_steps when not given)",
    "loss": "sparse: window (the HF Trainer's mean over the window) | step (the logged step's own loss, as custom loops log it)",
    "updates": "1 | 2 optimizer updates per rollout batch: grad_norm alternates (the second ~1e-3 of the first) and "
               "reward and length keys are logged on every other step only",
    "reward": "default | binary: 0/1 correctness with small groups (group size 2-16) and few prompts, so reward means are "
              "multiples of 1/(G*prompts) | sparse: binary with 1-10% success (healthy runs only)",
    "prompts": "binary, sparse: prompts per step (drawn when not given)",
    "reward_std": "auto: the logging profile decides | group: the mean within-group std (TRL) | batch: the std over the batch",
    "placeholders": "metrics written as exactly 0 on every step, comma-separated from " + ", ".join(PLACEHOLDER_FIELDS),
    "task": "default | easy: 60-90% zero-variance groups from the start | saturating: reward reaches its ceiling early "
            "(healthy runs only)",
    "spike": "none | kl_grad: at one step KL ~30-100x and grad_norm ~200-800x their medians, normal again the next "
             "step (healthy runs only)",
    "length_bias": "none | unexploited: a judge reward that favours longer completions from step 1, which the policy "
                   "never exploits (healthy runs only)",
    "onset": "drawn: where the signature draws it (mostly 20-70% of the run) | early: in the first 8-20% of the run, "
             "where warm-up baselines and smoothers have little to stand on (pathological runs only)",
}
"""Option name -> what its values do (``rlprobe synth --list`` prints this)."""

_CHOICES: dict[str, tuple[Any, ...]] = {
    "logging": ("dense", "sparse"),
    "loss": ("window", "step"),
    "updates": (1, 2),
    "reward": ("default", "binary", "sparse"),
    "reward_std": ("auto", "group", "batch"),
    "task": ("default", "easy", "saturating"),
    "spike": ("none", "kl_grad"),
    "length_bias": ("none", "unexploited"),
    "onset": ("drawn", "early"),
}
_RANGES: dict[str, tuple[int, int]] = {"logging_steps": (1, 1000), "points": (5, 10_000), "prompts": (1, 512)}
HEALTHY_ONLY = ("task", "spike", "length_bias")


@dataclass(frozen=True)
class Options:
    """How a run is logged and which real-log traits it has (the defaults: a plain dense run)."""

    logging: str = "dense"
    logging_steps: int | None = None
    points: int | None = None
    loss: str = "window"
    updates: int = 1
    reward: str = "default"
    prompts: int | None = None
    reward_std: str = "auto"
    placeholders: tuple[str, ...] = ()
    task: str = "default"
    spike: str = "none"
    length_bias: str = "none"
    onset: str = "drawn"

    def changed(self) -> dict[str, Any]:
        """The options that differ from a plain dense run (what a run's truth records)."""
        plain = Options()
        out = {k: v for k, v in asdict(self).items() if v != getattr(plain, k)}
        if "placeholders" in out:
            out["placeholders"] = list(out["placeholders"])
        return out


def parse_options(value: Options | Mapping[str, Any] | Iterable[str] | None) -> Options:
    """Options from an Options, a mapping or ``KEY=VALUE`` strings; a readable ValueError if bad."""
    if value is None:
        return Options()
    if isinstance(value, Options):
        return _validate(value)
    if not isinstance(value, Mapping):
        pairs: dict[str, Any] = {}
        for item in value:
            key, sep, raw = str(item).partition("=")
            if not sep:
                raise ValueError(f"option {item!r} is not KEY=VALUE (keys: {', '.join(OPTION_DOCS)})")
            pairs[key.strip()] = raw.strip()
        value = pairs
    known = {f.name for f in fields(Options)}
    kwargs: dict[str, Any] = {}
    for key, raw in value.items():
        if key not in known:
            raise ValueError(f"unknown option {key!r}: valid are {', '.join(OPTION_DOCS)}")
        kwargs[key] = _coerce(key, raw)
    return _validate(Options(**kwargs))


def _coerce(key: str, raw: Any) -> Any:
    if key == "placeholders":
        items = raw.split(",") if isinstance(raw, str) else list(raw)
        return tuple(sorted({str(i).strip() for i in items if str(i).strip()}))
    if key in _RANGES or key == "updates":
        if raw is None or raw == "":
            return None
        try:
            return int(raw)
        except (TypeError, ValueError):
            raise ValueError(f"option {key} must be an integer, got {raw!r}") from None
    return str(raw).strip().lower()


def _validate(o: Options) -> Options:
    for key, choices in _CHOICES.items():
        if getattr(o, key) not in choices:
            raise ValueError(f"option {key}={getattr(o, key)!r}: valid are {', '.join(map(str, choices))}")
    for key, (lo, hi) in _RANGES.items():
        v = getattr(o, key)
        if v is not None and not lo <= v <= hi:
            raise ValueError(f"option {key}={v}: must be in {lo}..{hi}")
    bad = [p for p in o.placeholders if p not in PLACEHOLDER_FIELDS]
    if bad:
        raise ValueError(f"placeholders {', '.join(bad)}: valid are {', '.join(PLACEHOLDER_FIELDS)}")
    if o.logging == "sparse" and o.updates == 2:
        raise ValueError("updates=2 logs every step (reward keys on every other one); it does not combine with logging=sparse")
    if o.logging == "dense" and (o.logging_steps is not None or o.points is not None):
        raise ValueError("logging_steps and points apply to logging=sparse only")
    if o.reward == "default" and o.prompts is not None:
        raise ValueError("prompts applies to reward=binary or reward=sparse only")
    return o


def check_kind(o: Options, sig: str | None, family: str | None, variant: str | None) -> None:
    """A readable ValueError when options do not fit the kind of run asked for."""
    what = sig or f"healthy:{family}"
    if sig is None and o.onset != "drawn":
        raise ValueError(f"onset={o.onset} is for pathological runs; {what} has no onset")
    if o.onset != "drawn" and variant == "dead_start":
        raise ValueError("a dead_start run fails from its first step; onset=early does not apply")
    if sig is not None:
        for key in HEALTHY_ONLY:
            if getattr(o, key) != getattr(Options(), key):
                raise ValueError(f"option {key} is for healthy runs only, not {what}")
        if o.reward == "sparse":
            raise ValueError(f"reward=sparse is for healthy runs only, not {what}")
    if o.reward != "default" and sig in ("REWARD_HACK_LENGTH", "FORMAT_GAMING"):
        raise ValueError(f"{what} needs its reward components (judge or format); reward={o.reward} has one")
    if o.reward != "default" and o.length_bias != "none":
        raise ValueError("length_bias needs a judge reward; it does not combine with reward=" + o.reward)
    if o.reward == "sparse" and o.task != "default":
        raise ValueError(f"reward=sparse (1-10% success) contradicts task={o.task}")
    if o.logging == "sparse" and family == "short":
        raise ValueError("healthy:short is 25-99 steps logged every step; it does not combine with logging=sparse")
    if o.task != "default" and family == "ppo":
        raise ValueError(f"task={o.task} is about GRPO groups; healthy:ppo has none")
    if o.updates == 2 and sig == "GRAD_PATHOLOGY":
        raise ValueError("GRAD_PATHOLOGY's grad-norm picture does not combine with updates=2 (alternating grad norms)")
    # a healthy run may carry a placeholder anywhere; a failure cannot lose the field it shows in
    clash = sorted(set(o.placeholders) & set(PATHOLOGY_FIELDS[sig])) if sig else []
    if clash:
        raise ValueError(f"{what} carries its signal in {', '.join(clash)}; it cannot be a placeholder there")


# -----------------------------------------------------------------------------------------------
# drawing a setup (what the benchmark samples over)
# -----------------------------------------------------------------------------------------------
DRAW: dict[str, tuple[tuple[Any, float], ...]] = {
    "logging": (("dense", 0.6), ("sparse", 0.4)),
    "loss": (("window", 0.5), ("step", 0.5)),
    "updates": ((1, 0.85), (2, 0.15)),
    "reward": (("default", 0.6), ("binary", 0.4)),
    "reward_healthy": (("default", 0.55), ("binary", 0.35), ("sparse", 0.1)),
    "reward_std": (("auto", 0.5), ("group", 0.25), ("batch", 0.25)),
    "placeholders": (((), 0.85), (("entropy_mean",), 0.05), (("kl_mean",), 0.03), (("entropy_mean", "kl_mean"), 0.04),
                     (("clip_fraction", "loss"), 0.03)),
    "task": (("default", 0.7), ("easy", 0.18), ("saturating", 0.12)),
    "spike": (("none", 0.88), ("kl_grad", 0.12)),
    "length_bias": (("none", 0.93), ("unexploited", 0.07)),
    "onset": (("drawn", 0.8), ("early", 0.2)),
    "group_size": ((2, 0.1), (3, 0.05), (4, 0.2), (5, 0.1), (6, 0.1), (8, 0.25), (12, 0.05), (16, 0.15)),
    "variant": (("drawn", 0.6), ("extra", 0.4)),  # extra: one of EXTRA_VARIANTS[sig], equally likely
}
"""Option -> (value, probability) pairs ``draw_setup`` samples from (pathological and healthy runs)."""


def _pick(rng: np.random.Generator, key: str) -> Any:
    values, probs = zip(*DRAW[key])
    p = np.asarray(probs, dtype=float)
    return values[int(rng.choice(len(values), p=p / p.sum()))]


def draw_setup(kind: str, seed: int) -> dict[str, Any]:
    """make_run keyword arguments (options, variant, group_size) drawn from the seed for this kind.

    A draw that does not fit the kind (``check_kind``) is drawn again, so every setup is valid.
    The stream is the seed's own and separate from the run's, so the same seed gives the same
    setup whatever else changes.
    """
    low = kind.strip().lower()
    family = low.split(":", 1)[1] if low.startswith("healthy:") else None
    sig = None if low.startswith("healthy") else kind.strip().upper()
    if sig is not None and sig not in SIGNATURES:
        raise ValueError(f"unknown signature {kind!r}")
    if family is not None and family not in HEALTHY_FAMILIES:
        raise ValueError(f"unknown healthy family {family!r}")
    rng = np.random.default_rng([int(seed) & 0xFFFFFFFF, zlib.crc32(f"setup|{low}".encode())])
    for _ in range(200):
        variant = None
        if sig in EXTRA_VARIANTS and _pick(rng, "variant") == "extra":
            names = list(EXTRA_VARIANTS[sig])
            variant = names[int(rng.integers(len(names)))]
        o = Options(logging=_pick(rng, "logging"), reward=_pick(rng, "reward" if sig else "reward_healthy"),
                    reward_std=_pick(rng, "reward_std"), placeholders=_pick(rng, "placeholders"))
        if o.logging == "sparse":
            o = replace(o, logging_steps=int(rng.integers(5, 11)), points=int(rng.integers(20, 61)), loss=_pick(rng, "loss"))
        else:
            o = replace(o, updates=_pick(rng, "updates"))
        if sig is None:
            o = replace(o, task=_pick(rng, "task"), spike=_pick(rng, "spike"), length_bias=_pick(rng, "length_bias"))
        elif variant != "dead_start":
            o = replace(o, onset=_pick(rng, "onset"))
        group_size = int(_pick(rng, "group_size")) if o.reward != "default" else 8
        try:
            check_kind(_validate(o), sig, family, variant)
        except ValueError:
            continue
        return {"options": o, "variant": variant, "group_size": group_size}
    raise RuntimeError(f"no valid setup drawn for {kind} seed {seed}")  # pragma: no cover - the table allows plain runs
