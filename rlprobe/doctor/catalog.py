"""The signature catalog as data: what each signature is, what it reads, its parameters, and
which signatures explain which.

One row per signature, like a linter's rule table: the id users see, a title, the severity
policy in words (the docs page says it at length), the inputs it needs, its parameters with
their defaults (what doctor.toml may override), and its docs page. The detection logic lives in
rlprobe/doctor/detectors/, one function per signature, bound to its row by id
(rlprobe.doctor.registry); a detector never imports or runs another.

Causes are data too. A Link says that one failure (the cause) produces another's picture in the
recording (the symptom): an entropy blow-up turns completions into token soup that runs to the
length cap, so a truncation episode that starts while entropy is blown up is its symptom. The
engine (rlprobe.doctor.causes) applies one rule to every link: a symptom keeps its finding, is
ranked under its cause and says so. Disabling a cause in doctor.toml leaves its symptoms
standing on their own.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any, Mapping

# Names a reward component may carry, by the role it plays in the total reward (detectors that
# read roles take them as parameters, for other naming schemes).
CORRECT_PATTERN = r"correct|accura|verif|answer|match|exact|solve|pass|math|gold|equal|unit_?test"
FORMAT_PATTERN = r"format|tag|xml|strict|soft|struct|syntax|template|schema|json|regex"


@dataclass(frozen=True)
class Signature:
    """One failure signature: a row of the catalog."""

    id: str
    title: str
    family: str  # reward | generation | policy | optimization
    severity: str  # the severity policy, in one sentence
    needs_all: tuple[str, ...] = ()
    needs_any: tuple[str, ...] = ()
    needs: str = ""  # inputs that are not plain step metrics, in words (checked by the detector's own check)
    params: Mapping[str, Any] = field(default_factory=dict)
    noun: str = ""  # the failure as a noun phrase, for a symptom's words ("an entropy blow-up")
    # NaN/Inf values of its inputs are part of what it looks for, so an input logged as NaN on
    # every step counts as logged (a loss that was never finite broke from the first step)
    reads_nonfinite: bool = False

    @property
    def page(self) -> str:
        """The signature's docs page, relative to the repository root."""
        return f"docs/signatures/{self.id}.md"


@dataclass(frozen=True)
class Link:
    """`cause` produces the picture of `symptom`; `why` says how, in words a finding can quote.

    `implies`: the cause's condition entails the symptom's (every rollout earning the same
    reward means every group has zero variance), so the cause explains it whatever their
    onsets and severities say about which came first.
    """

    cause: str
    symptom: str
    why: str
    implies: bool = False


def _p(**params: Any) -> Mapping[str, Any]:
    return MappingProxyType(dict(params))


SIGNATURES: tuple[Signature, ...] = (
    # -- policy ---------------------------------------------------------------------------------
    Signature(
        "ENTROPY_COLLAPSE", "Policy entropy collapses", "policy",
        "warn when smoothed entropy stays below ratio_warn of its early level; critical below ratio_critical",
        needs_all=("entropy_mean",),
        params=_p(ratio_warn=0.2, ratio_critical=0.1, z_max=-3.0, sustain_frac=0.03),
        noun="an entropy collapse",
    ),
    Signature(
        "ENTROPY_BLOWUP", "Policy entropy blows up", "policy",
        "warn when entropy jumps above ratio_warn times the level before the jump and stays; critical above ratio_critical",
        needs_all=("entropy_mean",),
        params=_p(ratio_warn=2.5, ratio_critical=4.0, z_min=4.0, sustain_frac=0.02),
        noun="an entropy blow-up",
    ),
    Signature(
        "KL_BLOWUP", "KL to the reference blows up", "policy",
        "warn when KL breaks away from its own power-law trend by excess_warn; critical by excess_critical",
        needs_any=("kl_mean", "kl_max"),
        params=_p(excess_warn=3.0, excess_critical=6.0, healthy_slope=1.0, min_improvement=30.0, min_kl=1e-3,
                  departure=1.05, settle_share=0.2, warmup_share=0.5, runaway_ratio=100.0, runaway_exponent=2.0,
                  sustain_frac=0.02),
        noun="a KL blow-up",
    ),
    Signature(
        "REF_POLICY_DRIFT_ASYMMETRY", "KL to the reference concentrates at a few token positions", "policy",
        "warn when two position buckets hold top2_warn of the KL; critical at top2_critical",
        needs="kl_positional (a list of per-position KL shares)",
        params=_p(top2_warn=0.5, top2_critical=0.8, rise_min=0.15, sustain_frac=0.03),
        noun="KL concentrating at a few token positions",
    ),
    # -- generation -----------------------------------------------------------------------------
    Signature(
        "TRUNCATION_STARVE", "Completions keep hitting the length cap", "generation",
        "warn when frac_warn of completions hit the cap for a sustained stretch; critical at frac_critical, or when "
        "nearly all are cut from the first step with a reward that never moves; at most warn once the run recovered",
        needs_any=("max_len_hit_frac", "truncation_rate", "eos_rate", "completion_len_mean"),
        params=_p(frac_warn=0.1, frac_critical=0.25, dead_frac=0.9, sustain_frac=0.03),
        noun="completions hitting the length cap",
    ),
    Signature(
        "COMPLETION_COLLAPSE", "Completions shrink to a few tokens", "generation",
        "warn when completions shrink below ratio_warn of their early length and to at most max_tokens; critical "
        "below ratio_critical or when the reward falls with them; critical from the first step when they are at most "
        "few_tokens and the reward stays at 0",
        needs_any=("completion_len_mean",),
        params=_p(ratio_warn=0.3, ratio_critical=0.12, max_tokens=48.0, few_tokens=8.0, nothing_earned=0.01, sustain_frac=0.03),
        noun="completions shrinking to a few tokens",
    ),
    Signature(
        "REPETITION_SPIRAL", "Generated text loops", "generation",
        "warn when repetition rises to rate_warn (or text_rep_warn in the captured text); critical at rate_critical",
        needs="repetition_rate, or captured samples with completion_text",
        params=_p(rate_warn=0.15, rate_critical=0.3, rise_min=0.1, ratio_min=2.5, text_rep_warn=0.5, text_rep_critical=0.7,
                  text_novelty_warn=0.5, text_novelty_critical=0.3, text_stat="mean", sustain_frac=0.03),
        noun="a repetition spiral",
    ),
    Signature(
        "THROUGHPUT_ROT", "Step time creeps up", "generation",
        "info: step time at ratio_info of its early level with a significant upward trend; warn at ratio_warn when "
        "completion length, logged, does not explain it",
        needs_any=("step_time_s", "generation_time_s"),
        params=_p(ratio_info=1.5, ratio_warn=2.0, sustain_frac=0.1, trend_p=0.001, step_z=5.0),
        noun="step time creeping up",
    ),
    # -- optimization ---------------------------------------------------------------------------
    Signature(
        "CLIP_SATURATION", "The ratio clip is engaged on a large, sustained share of tokens", "optimization",
        "warn when clip_warn of tokens stay clipped; critical at clip_critical",
        needs_any=("clip_fraction", "ratio_p95"),
        params=_p(clip_warn=0.2, clip_critical=0.5, clip_eps=0.2, sustain_frac=0.03),
        noun="a saturated ratio clip",
    ),
    Signature(
        "ADV_COLLAPSE", "Advantages collapse across the whole batch", "optimization",
        "warn when the advantage scale falls below ratio_warn of its early level while rewards keep their variance; "
        "critical below ratio_critical",
        needs_any=("adv_std", "adv_zero_frac"),
        params=_p(ratio_warn=0.1, ratio_critical=0.02, unexplained_factor=4.0, zero_frac_warn=0.6, zero_frac_rise=0.3,
                  sustain_frac=0.03, floor_ratio_warn=0.2),
        noun="collapsed advantages",
    ),
    Signature(
        "VALUE_DIVERGENCE", "The PPO value head stops predicting returns", "optimization",
        "warn when explained variance falls to ev_warn or the value loss grows loss_ratio_warn-fold; critical when both",
        needs_any=("value_explained_variance", "value_loss"),
        params=_p(ev_warn=0.0, ev_drop=0.3, ev_critical=-0.5, loss_ratio_warn=4.0, loss_ratio_critical=10.0, sustain_frac=0.03),
        noun="a diverging value head",
    ),
    Signature(
        "GRAD_PATHOLOGY", "NaN/Inf gradients, violent grad-norm spikes, runaway growth or a diverging loss", "optimization",
        "critical on repeated non-finite steps, many corroborated spikes, growth_ratio_critical growth or a loss that "
        "diverges by orders of magnitude; warn on fewer",
        needs_any=("grad_norm", "nan_count", "inf_count", "loss"),
        params=_p(nonfinite_critical_steps=3, spike_ratio_min=8.0, spike_sigmas=4.5, spike_events_warn=3, spike_events_critical=8,
                  spike_rate_critical=0.02, spike_window_frac=0.25, spike_window_min_steps=200, spike_window_min_points=100,
                  growth_ratio_warn=6.0,
                  growth_ratio_critical=20.0, growth_departure_ratio=1.5, growth_sustain_frac=0.02,
                  loss_ratio_warn=100.0, loss_ratio_critical=1e4, loss_abs_min=1.0),
        noun="a gradient pathology",
        reads_nonfinite=True,
    ),
    Signature(
        "STALE_ROLLOUTS", "Rollouts come from a stale policy", "optimization",
        "warn when batch_age rises age_ratio_warn-fold or sits at age_high; critical when it does both and clipping rises",
        needs_all=("batch_age",),
        params=_p(age_ratio_warn=2.0, age_rise_warn=1.5, age_high=4.0, age_ratio_critical=4.0, sustain_frac=0.03),
        noun="stale rollouts",
    ),
    Signature(
        "TRAIN_INFERENCE_MISMATCH", "The inference engine's log-probs drift from the trainer's", "optimization",
        "warn when the log-prob gap grows ratio_warn-fold above abs_floor nats; critical at ratio_critical",
        needs_all=("logprob_mismatch",),
        params=_p(ratio_warn=3.0, ratio_critical=10.0, abs_floor=0.005, departure_ratio=1.5, sustain_frac=0.03),
        noun="a train/inference log-prob gap",
    ),
    # -- reward ---------------------------------------------------------------------------------
    Signature(
        "REWARD_STD_DEATH", "Reward variance dies", "reward",
        "critical when every rollout earns the same low reward (from the first step or later); warn when the variance "
        "dies as the policy narrows, or saturates while std-normalised advantages keep pushing the policy; info when the "
        "run saturated at its ceiling and simply finished learning",
        needs_any=("reward_std", "reward_mean"),
        params=_p(ratio_warn=0.15, ratio_critical=0.08, jitter_max=0.3, entropy_drop=0.75, distinct_max=0.8, dead_rel=0.05,
                  push_ratio_max=0.01, push_grad_min=0.5, push_kl_rise=1.3, sustain_frac=0.03),
        noun="reward variance dying",
    ),
    Signature(
        "DEGENERATE_GROUPS", "Zero-variance GRPO groups dominate", "reward",
        "warn when most groups that gave signal early have gone degenerate; critical at level_critical, or when (nearly) "
        "every group is degenerate to the end (no learning signal) unless every prompt is solved (info)",
        needs_all=("zero_variance_group_frac",),
        params=_p(level_warn=0.75, level_critical=0.85, every_min=0.98, baseline_max=0.5, closure_min=0.82, closure_floor=0.7,
                  rise_z=3.0, jitter_min=0.6, jitter_strong=1.0, within_share_max=0.25, sustain_frac=0.03),
        noun="zero-variance groups",
    ),
    Signature(
        "REWARD_COLLAPSE", "Reward collapses", "reward",
        "warn when the reward's level falls min_drop_noise standard errors, losing drop_warn of its height above its "
        "floor (and, for a success rate, min_fall_range of its range), and stays down; critical at drop_critical",
        needs_all=("reward_mean",),
        params=_p(drop_warn=0.25, drop_critical=0.6, min_drop_noise=4.0, min_fall_range=0.1, recovered_share=0.5,
                  recovered_hold_frac=0.1, min_points=3, sustain_frac=0.03),
        noun="a reward collapse",
    ),
    Signature(
        "REWARD_HACK_LENGTH", "Reward hacking through length", "reward",
        "warn when length grows ratio_warn-fold and what pays rises with it while correctness does not; critical at "
        "ratio_critical; info when nothing says whether answers got better",
        needs_all=("completion_len_mean", "reward_mean"),
        params=_p(ratio_warn=1.5, ratio_critical=2.5, reward_rise_min=1.0, correct_rise_max=1.0, stall_ratio=0.0,
                  correct_share_max=0.5, coupling_min=0.2, coupling_rise=0.2, sustain_frac=0.03,
                  format_pattern=FORMAT_PATTERN, correct_pattern=CORRECT_PATTERN),
        noun="length hacking",
    ),
    Signature(
        "FORMAT_GAMING", "A format reward pins at its ceiling while correctness stagnates", "reward",
        "warn when a format component jumps to its ceiling while correctness stagnates; critical when correctness falls",
        needs_all=("reward_mean",),
        params=_p(rise_z=5.0, late_share=0.7, near_ceiling=0.15, min_rise_share=0.2, correct_rise_max=1.0, learn_share=0.25, min_reward_share=0.15, stall_ratio=0.25, fall_critical=3.0,
                  sustain_frac=0.03, format_pattern=FORMAT_PATTERN, correct_pattern=CORRECT_PATTERN),
        noun="format gaming",
    ),
)
"""Every built-in signature, in the order `rlprobe doctor` documents them."""


LINKS: tuple[Link, ...] = (
    # a policy knocked off the data manifold writes token soup: everything downstream follows
    Link("ENTROPY_BLOWUP", "TRUNCATION_STARVE", "token soup never emits EOS and runs to the length cap"),
    Link("ENTROPY_BLOWUP", "KL_BLOWUP", "a flattened token distribution is far from the reference"),
    Link("ENTROPY_BLOWUP", "REWARD_COLLAPSE", "degenerate text earns no reward"),
    Link("ENTROPY_BLOWUP", "DEGENERATE_GROUPS", "degenerate text fails every rollout of a prompt alike"),
    Link("ENTROPY_BLOWUP", "REWARD_STD_DEATH", "degenerate text earns every rollout the same low reward"),
    Link("ENTROPY_BLOWUP", "TRAIN_INFERENCE_MISMATCH", "noise tokens are where the kernels of trainer and engine disagree most"),
    Link("ENTROPY_BLOWUP", "CLIP_SATURATION", "a flattened policy moves its ratios far on every token"),
    Link("ENTROPY_BLOWUP", "COMPLETION_COLLAPSE", "degenerate text ends early as often as it runs on"),
    # a policy that has become deterministic gives every rollout of a prompt the same answer
    Link("ENTROPY_COLLAPSE", "REWARD_STD_DEATH", "a deterministic policy gives every rollout of a prompt the same answer"),
    Link("ENTROPY_COLLAPSE", "DEGENERATE_GROUPS", "a deterministic policy gives every rollout of a prompt the same answer"),
    Link("ENTROPY_COLLAPSE", "REWARD_COLLAPSE", "a deterministic policy stops exploring answers that earn reward"),
    # loops and cut completions
    Link("REPETITION_SPIRAL", "TRUNCATION_STARVE", "a loop runs until the length cap stops it"),
    Link("REPETITION_SPIRAL", "REWARD_COLLAPSE", "looping completions never reach an answer"),
    Link("REPETITION_SPIRAL", "REWARD_HACK_LENGTH", "loops make completions longer without making them better"),
    Link("TRUNCATION_STARVE", "REWARD_COLLAPSE", "cut completions never reach their answer"),
    Link("TRUNCATION_STARVE", "DEGENERATE_GROUPS", "a group whose completions are all cut earns the same reward on each"),
    Link("TRUNCATION_STARVE", "REWARD_STD_DEATH", "completions that are all cut all earn the same reward"),
    Link("TRUNCATION_STARVE", "THROUGHPUT_ROT", "every cut completion is the longest, costliest generation there is"),
    Link("REWARD_HACK_LENGTH", "TRUNCATION_STARVE", "the growing completions reach the length cap"),
    Link("REWARD_HACK_LENGTH", "THROUGHPUT_ROT", "longer completions take longer to generate"),
    Link("COMPLETION_COLLAPSE", "REWARD_COLLAPSE", "bare answers lose the reasoning that earned the reward"),
    Link("COMPLETION_COLLAPSE", "DEGENERATE_GROUPS", "the rollouts of a prompt become the same bare answer"),
    Link("COMPLETION_COLLAPSE", "REWARD_STD_DEATH", "the rollouts of a prompt become the same bare answer"),
    # the off-policy gap and the optimizer
    Link("STALE_ROLLOUTS", "CLIP_SATURATION", "rollouts from an older policy have ratios far from 1"),
    Link("TRAIN_INFERENCE_MISMATCH", "CLIP_SATURATION", "the engine's log-probs are not the trainer's, so ratios start away from 1"),
    Link("VALUE_DIVERGENCE", "GRAD_PATHOLOGY", "the value loss is part of PPO's gradient"),
    Link("GRAD_PATHOLOGY", "REWARD_COLLAPSE", "an oversized or broken update moved the policy somewhere worse"),
    Link("REWARD_STD_DEATH", "REWARD_COLLAPSE", "the policy settled on one output that every rollout repeats"),
    Link("DEGENERATE_GROUPS", "REWARD_COLLAPSE", "the prompts the policy now always fails outnumber those it always solves"),
    Link("REWARD_STD_DEATH", "DEGENERATE_GROUPS", "when every rollout earns the same reward every group has zero variance",
         implies=True),
    Link("REWARD_STD_DEATH", "ADV_COLLAPSE", "advantages are differences of rewards, and the rewards no longer differ",
         implies=True),
    Link("DEGENERATE_GROUPS", "ADV_COLLAPSE", "a degenerate group's advantages are all zero", implies=True),
)
"""Which signatures explain which. Acyclic: a cause is never, through other links, its own symptom."""


BY_ID: Mapping[str, Signature] = MappingProxyType({s.id: s for s in SIGNATURES})


def causes_of(signature_id: str) -> tuple[Link, ...]:
    """The links whose symptom is signature_id."""
    return tuple(link for link in LINKS if link.symptom == signature_id)


def causal_order() -> tuple[str, ...]:
    """Signature ids with every cause before its symptoms (catalog order among equals)."""
    order: list[str] = []
    state: dict[str, int] = {}

    def visit(sid: str, path: tuple[str, ...]) -> None:
        if state.get(sid) == 2:
            return
        if state.get(sid) == 1:
            raise ValueError(f"causal links form a cycle: {' -> '.join((*path, sid))}")
        state[sid] = 1
        for link in causes_of(sid):
            visit(link.cause, (*path, sid))
        state[sid] = 2
        order.append(sid)

    for sig in SIGNATURES:
        visit(sig.id, ())
    return tuple(order)


def _check() -> None:
    ids = [s.id for s in SIGNATURES]
    if len(ids) != len(set(ids)):
        raise ValueError("a signature id appears twice in the catalog")
    for link in LINKS:
        for end in (link.cause, link.symptom):
            if end not in BY_ID:
                raise ValueError(f"link {link.cause} -> {link.symptom} names {end}, which is not in the catalog")
    causal_order()


_check()
