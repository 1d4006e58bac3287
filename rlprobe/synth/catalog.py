"""What the generator can make: the 19 signature IDs, the healthy families, the variants only asked
for, the options real logs show, and the fields each needs."""

from __future__ import annotations

SIGNATURES: tuple[str, ...] = (
    "KL_BLOWUP",
    "ENTROPY_COLLAPSE",
    "REWARD_HACK_LENGTH",
    "FORMAT_GAMING",
    "CLIP_SATURATION",
    "DEGENERATE_GROUPS",
    "ADV_COLLAPSE",
    "VALUE_DIVERGENCE",
    "GRAD_PATHOLOGY",
    "TRUNCATION_STARVE",
    "REPETITION_SPIRAL",
    "REWARD_STD_DEATH",
    "REF_POLICY_DRIFT_ASYMMETRY",
    "THROUGHPUT_ROT",
    "ENTROPY_BLOWUP",
    "STALE_ROLLOUTS",
    "TRAIN_INFERENCE_MISMATCH",
    "REWARD_COLLAPSE",
    "COMPLETION_COLLAPSE",
)
"""The failure signatures, exactly as the doctor's catalog names them."""

PATHOLOGIES: dict[str, str] = {
    "KL_BLOWUP": "KL to the reference grows exponentially or jumps (variant exponential|jump); kl_max rises faster than kl_mean",
    "ENTROPY_COLLAPSE": "entropy falls to 3-15% of its early level; reward_std then shrinks and zero-variance groups rise",
    "REWARD_HACK_LENGTH": "completions get 1.8-5x longer and a judge component rises with length while correctness stays flat or falls",
    "FORMAT_GAMING": "the format component pins at its ceiling while correctness stagnates or falls (variant stagnates|falls)",
    "CLIP_SATURATION": "clip_fraction sustained at 0.25-0.6 with ratio_p95 up; KL grows faster",
    "DEGENERATE_GROUPS": "GRPO groups lose all within-group variance (80-98% zero-variance; variant all_correct|all_wrong)",
    "ADV_COLLAPSE": "advantages collapse to ~0 across the batch while rewards keep their variance; learning stalls (variant scaled|zeroed)",
    "VALUE_DIVERGENCE": "PPO value head breaks: explained variance falls below 0 and value_loss runs away (always ppo)",
    "GRAD_PATHOLOGY": "NaN/Inf gradients with NaN loss, repeated violent grad-norm spikes, or exponential grad-norm growth (variant nan|spikes|growth; loss_divergence on request)",
    "TRUNCATION_STARVE": "30-90% of completions hit the length cap: eos_rate falls, completion_len_max pins at the cap, reward drops",
    "REPETITION_SPIRAL": "repetition_rate climbs to 0.25-0.8 and completions loop n-grams; length up, reward down",
    "REWARD_STD_DEATH": "reward variance dies with entropy low (variant saturated: reward at ceiling | collapsed: reward at floor)",
    "REF_POLICY_DRIFT_ASYMMETRY": "KL concentrates in 1-2 of the 8 kl_positional buckets (template or formatting mismatch)",
    "THROUGHPUT_ROT": "step_time_s creeps up 50-300% at constant completion length (variant generation|overhead)",
    "ENTROPY_BLOWUP": "entropy jumps 3-20x within a few steps, completions become token soup and run to the cap, reward falls to ~0",
    "STALE_ROLLOUTS": "batch_age rises to 4-10 (or jumps high) in async RL; ratios drift and clipping rises (variant rising|jump)",
    "TRAIN_INFERENCE_MISMATCH": "inference/trainer log-prob gap (logprob_mismatch) drifts from ~1e-3 to 0.03-0.2 (variant drift|jump)",
    "REWARD_COLLAPSE": "reward improves, then falls by 50-95% within a few steps and stays down",
    "COMPLETION_COLLAPSE": "completions shrink to a few tokens within a few steps: bare answers or nothing (variant bare_answer: reward falls | bare_answer_easy: reward holds | empty)",
}
"""Signature ID -> one line on how the synthetic failure looks."""

EXTRA_VARIANTS: dict[str, dict[str, str]] = {
    "TRUNCATION_STARVE": {
        "dead_start": "dead from the first step: every completion at the length cap, reward exactly at its floor with zero "
                      "spread, grad_norm and KL exactly 0 (GRPO) - the whole run is wasted",
        "transient": "entropy rises 2-4x, then a 30-70-step episode at the cap (reward dips, answers often written before "
                     "the cap) that the run gets out of by itself (truth has end_step)",
        "answers_before_cap": "90-100% of completions at the cap and staying there while reward holds: the answer is "
                              "written before the cap, so the grader still pays",
    },
    "REWARD_STD_DEATH": {
        "dead_start": "dead from the first step: reward exactly at its floor with zero spread on every step, lengths "
                      "normal; grad_norm and KL exactly 0 (GRPO)",
    },
    "DEGENERATE_GROUPS": {
        "dead_start": "every group all-wrong from the first step (no within-group variance, no learning signal); a "
                      "format part may differ between prompts, so the batch reward need not sit at its floor",
    },
    "ENTROPY_BLOWUP": {
        "transient": "entropy jumps 3-10x for 5-30 steps, completions run to the cap and reward falls, then the run "
                     "recovers by itself (truth has end_step)",
    },
    "GRAD_PATHOLOGY": {
        "loss_divergence": "the loss goes from ~0.02 to 1e3-1e8 within 2-40 steps while grad_norm is clipped, flat or "
                           "rising; reward then falls",
    },
    "REWARD_HACK_LENGTH": {
        "bias_from_start": "the reward model's length bias is in the samples from step 1; the policy exploits it only "
                           "from the onset (the first step its completions are visibly longer)",
    },
}
"""Variants made only when asked for (``make_run(..., variant=...)``, ``--variant``): the default
draw never makes them, so every seed keeps the run it always had."""

HEALTHY_FAMILIES: dict[str, str] = {
    "steady": "the baseline: rising reward, slow natural entropy decline (1.2-4x), slow KL growth, noisy everything",
    "reasoning_growth": "legitimate length growth (1.5-3.5x) while correctness rises, with step time following length",
    "warmup_transient": "LR warm-up transients: early spikes in grad norm, KL, entropy and clipping that settle",
    "noisy_grad": "heavy-tailed grad norms with one or two isolated spikes (8-40x)",
    "late_saturation": "reward saturates at the ceiling late: reward_std falls and zero-variance groups rise late",
    "easy_task": "a nearly saturated easy task: most groups zero-variance from the start, zero grad norms (like the real healthy log)",
    "sparse_logging": "only a few fields logged (e.g. reward_mean, loss, grad_norm)",
    "short": "a short run (25-99 steps, whatever n_steps asks) dominated by early transients",
    "ppo": "healthy PPO: value head learns (explained variance 0.3-0.9 after a negative start)",
    "async_offpolicy": "async RL with steady moderate batch age (0.3-2) and steady log-prob mismatch",
}
"""Healthy family -> one line on the traps it contains."""

MAGNITUDES: dict[str, str] = {
    "KL_BLOWUP": "factor by which KL ends above its healthy course (jump: jump factor x further growth)",
    "ENTROPY_COLLAPSE": "entropy's final level as a fraction of its early level (0.03-0.15)",
    "REWARD_HACK_LENGTH": "completion-length growth factor (1.8-5)",
    "FORMAT_GAMING": "relative fall of correctness after the format pins (0-0.6; ~0 for 'stagnates')",
    "CLIP_SATURATION": "sustained clip fraction (0.25-0.6)",
    "DEGENERATE_GROUPS": "expected zero-variance group fraction once degenerate (0.8-0.98)",
    "ADV_COLLAPSE": "factor advantages are scaled by (1e-4-0.05)",
    "VALUE_DIVERGENCE": "value-loss growth factor (5-200)",
    "GRAD_PATHOLOGY": "nan: final NaN/Inf step rate; spikes: median spike factor; growth: grad-norm growth factor",
    "TRUNCATION_STARVE": "sustained truncated fraction (0.3-0.9)",
    "REPETITION_SPIRAL": "final repetition_rate (0.25-0.8)",
    "REWARD_STD_DEATH": "final reward_std as a fraction of its level before the onset",
    "REF_POLICY_DRIFT_ASYMMETRY": "share of KL in the 1-2 hot buckets (0.6-0.95)",
    "THROUGHPUT_ROT": "step-time growth factor (1.5-4)",
    "ENTROPY_BLOWUP": "entropy jump factor over its level at the onset (3-20, more if the run's entropy had declined)",
    "STALE_ROLLOUTS": "batch age reached (3-10 steps)",
    "TRAIN_INFERENCE_MISMATCH": "logprob_mismatch reached (0.03-0.2)",
    "REWARD_COLLAPSE": "fraction of correctness lost at the collapse (0.5-0.9)",
    "COMPLETION_COLLAPSE": "median completion length after the collapse as a fraction of its level before (0.002-0.1)",
}
"""Signature ID -> what Truth.magnitude measures for it."""

# Fields each pathology's main signal lives in: always logged by runs of that pathology.
PATHOLOGY_FIELDS: dict[str, tuple[str, ...]] = {
    "KL_BLOWUP": ("kl_mean", "kl_max"),
    "ENTROPY_COLLAPSE": ("entropy_mean",),
    "REWARD_HACK_LENGTH": ("completion_len_mean", "reward_mean", "reward_components"),
    "FORMAT_GAMING": ("reward_mean", "reward_components"),
    "CLIP_SATURATION": ("clip_fraction", "ratio_p95"),
    "DEGENERATE_GROUPS": ("zero_variance_group_frac", "group_reward_std_mean", "reward_mean", "reward_std"),
    "ADV_COLLAPSE": ("adv_std", "adv_zero_frac", "adv_mean", "reward_std"),
    "VALUE_DIVERGENCE": ("value_loss", "value_explained_variance"),
    "GRAD_PATHOLOGY": ("grad_norm", "loss", "nan_count", "inf_count"),
    "TRUNCATION_STARVE": ("max_len_hit_frac", "truncation_rate", "eos_rate", "completion_len_max", "completion_len_mean"),
    "REPETITION_SPIRAL": ("repetition_rate",),
    "REWARD_STD_DEATH": ("reward_std", "reward_mean", "entropy_mean"),
    "REF_POLICY_DRIFT_ASYMMETRY": ("kl_positional", "kl_mean"),
    "THROUGHPUT_ROT": ("step_time_s",),
    "ENTROPY_BLOWUP": ("entropy_mean",),
    "STALE_ROLLOUTS": ("batch_age",),
    "TRAIN_INFERENCE_MISMATCH": ("logprob_mismatch",),
    "REWARD_COLLAPSE": ("reward_mean",),
    "COMPLETION_COLLAPSE": ("completion_len_mean", "completion_len_max", "reward_mean", "reward_std"),
}

FAMILY_FIELDS: dict[str, tuple[str, ...]] = {
    "steady": ("reward_mean", "entropy_mean"),
    "reasoning_growth": ("reward_mean", "completion_len_mean", "step_time_s"),
    "warmup_transient": ("grad_norm", "entropy_mean", "lr"),
    "noisy_grad": ("grad_norm", "loss"),
    "late_saturation": ("reward_mean", "reward_std"),
    "easy_task": ("reward_mean", "reward_std", "grad_norm", "entropy_mean"),
    "sparse_logging": (),
    "short": ("reward_mean",),
    "ppo": ("value_loss", "value_explained_variance"),
    "async_offpolicy": ("batch_age", "logprob_mismatch"),
}
