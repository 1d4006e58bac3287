"""A custom RL loop, shaped as verl or OpenRLHF users write theirs, recorded and guarded by rlprobe.

The loop keeps its own metrics dict with verl-style names (`actor/entropy`,
`critic/score/mean`, `response_length/mean`, ...). rlprobe.keymap maps those onto rlprobe's
fields, so the dict goes to the recorder as it is. Every --diagnose-every steps the live
guardian (RunWatcher + HaltPolicy, what `attach(trainer, halt=True)` does for TRL) reads the
recording back and stops the loop on a confident critical finding, before it burns more compute.

The policy is the numpy toy of examples/train_loop.py (no GPU, no torch, no network), here with
a KL penalty (--beta) that keeps it near its reference.

    python examples/manual_loop.py runs/manual                    # anchored: runs all 300 steps
    python examples/manual_loop.py runs/unanchored --beta 0 --lr 1  # the guardian halts it
    rlprobe doctor runs/unanchored

The default run gets one warning: a third of its first completions hit the length cap, which
is how the random initial policy meets this cap. Without the KL anchor the policy leaves its
reference for good (KL grows about a thousandfold while it learns the task), and the guardian
halts the run with a critical KL_BLOWUP at the next diagnosis after it crosses the line.
"""

from __future__ import annotations

import argparse
import time
from typing import Any

import numpy as np

from rlprobe import Recorder, SamplingConfig
from rlprobe.doctor.live import HaltPolicy, RunWatcher
from rlprobe.keymap import map_metrics
from train_loop import MAX_LEN, N_PROMPTS, V, completion_length, generate, render, softmax, target_for


def rollout(logits: np.ndarray, prompts: np.ndarray, group_size: int, rng: np.random.Generator, step: int) -> list[dict[str, Any]]:
    """Generation and reward: group_size completions per prompt, scored and normalised per group."""
    batch = []
    for p in prompts:
        probs = softmax(logits[p])
        tokens = generate(probs, rng, group_size)
        correct = (tokens[:, :5] == target_for(p)[:5]).mean(axis=1)
        lens = [completion_length(t) for t in tokens]
        fmt = np.array([0.0 if tr else (1.0 if ln == 6 else 0.5) for ln, tr in lens])
        rewards = correct + 0.5 * fmt
        adv = (rewards - rewards.mean()) / (rewards.std() + 1e-4)
        for i in range(group_size):
            batch.append({
                "prompt": int(p), "tokens": tokens[i], "reward": float(rewards[i]), "advantage": float(adv[i]),
                "correct": float(correct[i]), "format": float(fmt[i]), "length": lens[i][0],
                "truncated": lens[i][1], "group": f"{step}-{p}",
            })
    return batch


def update(logits: np.ndarray, reference: np.ndarray, batch: list[dict[str, Any]], lr: float, beta: float) -> float:
    """One policy-gradient step on the batch, with a KL penalty towards the reference; returns the gradient norm."""
    grad = np.zeros_like(logits)
    for s in batch:
        probs = softmax(logits[s["prompt"]])
        grad[s["prompt"]] += s["advantage"] * (np.eye(V)[s["tokens"]] - probs)
    grad /= len(batch)
    for p in {s["prompt"] for s in batch}:  # d KL(pi || ref) / d logits = pi * (log pi/ref - KL)
        probs = softmax(logits[p])
        log_ratio = np.log(probs) - np.log(reference[p])
        grad[p] -= beta * probs * (log_ratio - (probs * log_ratio).sum(-1, keepdims=True))
    logits += lr * grad
    return float(np.linalg.norm(grad))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("run_dir", nargs="?", default="runs/manual")
    parser.add_argument("--steps", type=int, default=300)
    parser.add_argument("--lr", type=float, default=2.0)
    parser.add_argument("--beta", type=float, default=0.3, help="KL penalty towards the reference policy")
    parser.add_argument("--group-size", type=int, default=8)
    parser.add_argument("--prompts-per-step", type=int, default=4)
    parser.add_argument("--diagnose-every", type=int, default=25)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()

    rng = np.random.default_rng(args.seed)
    logits = rng.normal(0.0, 0.1, size=(N_PROMPTS, MAX_LEN, V))
    reference = softmax(logits.copy())
    watcher = RunWatcher(args.run_dir)
    policy = HaltPolicy()  # critical findings at >= 70% confidence only
    halted = None

    with Recorder(args.run_dir, algorithm="grpo", model_name="numpy-logit-table", trainer_config=vars(args),
                  sampling=SamplingConfig(top_k=2, bottom_k=2, random_k=4, seed=args.seed)) as rec:
        rec.log_event("train_begin", step=0)
        for step in range(1, args.steps + 1):
            timing: dict[str, float] = {}
            t0 = time.perf_counter()
            prompts = rng.choice(N_PROMPTS, size=args.prompts_per_step, replace=False)
            batch = rollout(logits, prompts, args.group_size, rng, step)
            timing["gen"] = time.perf_counter() - t0
            grad_norm = update(logits, reference, batch, args.lr, args.beta)
            probs, ref = softmax(logits[prompts]), reference[prompts]
            scores = np.array([s["reward"] for s in batch])
            lengths = np.array([s["length"] for s in batch])
            metrics = {  # the names verl logs; rlprobe.keymap knows them
                "training/global_step": step,
                "critic/score/mean": scores.mean(), "critic/score/max": scores.max(), "critic/score/min": scores.min(),
                "critic/advantages/mean": np.mean([s["advantage"] for s in batch]),
                "actor/entropy": float((-(probs * np.log(probs)).sum(-1)).mean()),
                "actor/kl_loss": float((probs * (np.log(probs) - np.log(ref))).sum(-1).mean()),
                "actor/grad_norm": grad_norm, "actor/lr": args.lr,
                "response_length/mean": lengths.mean(), "response_length/max": lengths.max(),
                "response_length/clip_ratio": np.mean([s["truncated"] for s in batch]),
                "timing_s/gen": timing["gen"], "timing_s/step": time.perf_counter() - t0,
            }
            mapped = map_metrics(metrics)
            rec.log_step(step, **mapped.step_kwargs())
            rec.log_samples(step, [{
                "prompt_text": f"spell pattern #{s['prompt']}", "completion_text": render(s["tokens"]),
                "reward_total": s["reward"], "reward_components": {"correct": s["correct"], "format": s["format"]},
                "advantage": s["advantage"], "completion_len": s["length"], "truncated": s["truncated"],
                "group_id": s["group"],
            } for s in batch])

            if step % args.diagnose_every == 0:
                rec.flush()  # the watcher reads what is on disk
                for finding in watcher.tick():
                    print(f"step {step}: {finding.severity.upper()} {finding.signature_id} "
                          f"({finding.confidence:.0%}) since step {finding.first_step}")
                # every finding the run has now, not only the new ones: a critical one reported
                # earlier may have grown confident enough since
                halted = watcher.halting(policy)
                if halted is not None:
                    rec.log_event("auto_halt", step=step, message=halted.explanation,
                                  signature_id=halted.signature_id, severity=halted.severity,
                                  confidence=halted.confidence)
                    break
        rec.log_event("train_end", step=step)
    if halted is not None:
        print(f"halted at step {step} by {halted.signature_id}: {halted.explanation}")
    else:
        print(f"recorded {step} steps into {args.run_dir}")


if __name__ == "__main__":
    main()
