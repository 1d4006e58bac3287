"""A real (tiny) GRPO training loop in numpy, recorded with rlprobe's manual API.

No GPU, no network, no torch: the "language model" is a table of logits per prompt and
position over a 16-token vocabulary, and the task is to spell a prompt-specific target and end
with EOS. Everything logged is computed exactly from the policy: rewards, group-normalised
advantages, entropy, KL to the frozen reference, completion lengths, the policy-gradient norm.

    python examples/train_loop.py runs/demo --steps 300
    rlprobe query runs/demo "SELECT step, reward_mean, entropy_mean, kl_mean FROM steps WHERE step % 25 = 0"

With --lr 8 the same loop collapses within a few dozen steps (entropy falls, groups go
zero-variance): a run to point the doctor at.
"""

from __future__ import annotations

import argparse
import time

import numpy as np

from rlprobe import Recorder, SamplingConfig

VOCAB = "abcdefghijklmno"  # 15 letters; token 15 is EOS
EOS = len(VOCAB)
V = EOS + 1
MAX_LEN = 8
N_PROMPTS = 8


def softmax(logits: np.ndarray) -> np.ndarray:
    z = logits - logits.max(axis=-1, keepdims=True)
    e = np.exp(z)
    return e / e.sum(axis=-1, keepdims=True)


def target_for(prompt: int) -> np.ndarray:
    """The completion that earns full reward: 5 prompt-dependent letters, then EOS."""
    letters = [(prompt * 3 + i) % len(VOCAB) for i in range(5)]
    return np.array(letters + [EOS] * (MAX_LEN - 5))


def generate(probs: np.ndarray, rng: np.random.Generator, n: int) -> np.ndarray:
    """Sample n completions (MAX_LEN tokens each) from per-position distributions."""
    cum = probs.cumsum(axis=-1)
    u = rng.random((n, MAX_LEN, 1))
    return (u > cum[None]).sum(axis=-1).clip(0, V - 1)


def completion_length(tokens: np.ndarray) -> tuple[int, bool]:
    """Tokens up to and including the first EOS; truncated if there is none."""
    eos = np.flatnonzero(tokens == EOS)
    return (int(eos[0]) + 1, False) if eos.size else (MAX_LEN, True)


def render(tokens: np.ndarray) -> str:
    length, _ = completion_length(tokens)
    return "".join(VOCAB[t] if t != EOS else "</s>" for t in tokens[:length])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("run_dir", nargs="?", default="runs/demo")
    parser.add_argument("--steps", type=int, default=300)
    parser.add_argument("--lr", type=float, default=1.0)
    parser.add_argument("--group-size", type=int, default=8)
    parser.add_argument("--prompts-per-step", type=int, default=4)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()

    rng = np.random.default_rng(args.seed)
    logits = rng.normal(0.0, 0.1, size=(N_PROMPTS, MAX_LEN, V))
    reference = softmax(logits.copy())
    config = vars(args) | {"vocab": V, "max_len": MAX_LEN, "algorithm": "grpo"}

    with Recorder(args.run_dir, algorithm="grpo", model_name="numpy-logit-table", trainer_config=config,
                  sampling=SamplingConfig(top_k=2, bottom_k=2, random_k=4, seed=args.seed)) as rec:
        rec.log_event("train_begin", step=0, message="toy GRPO loop")
        for step in range(1, args.steps + 1):
            t0 = time.perf_counter()
            prompts = rng.choice(N_PROMPTS, size=args.prompts_per_step, replace=False)
            grad = np.zeros_like(logits)
            samples, rewards_all, adv_all, lengths, truncs, group_stds = [], [], [], [], [], []
            comp_correct, comp_format = [], []
            for p in prompts:
                probs = softmax(logits[p])
                tokens = generate(probs, rng, args.group_size)
                target = target_for(p)
                correct = (tokens[:, :5] == target[:5]).mean(axis=1)
                lens_trunc = [completion_length(t) for t in tokens]
                fmt = np.array([0.0 if tr else (1.0 if ln == 6 else 0.5) for ln, tr in lens_trunc])
                rewards = correct + 0.5 * fmt
                std = rewards.std()
                adv = (rewards - rewards.mean()) / (std + 1e-4)
                group_stds.append(std)
                # policy gradient of sum_t log pi(token_t): onehot - probs, weighted by advantage
                onehot = np.eye(V)[tokens]
                grad[p] += (adv[:, None, None] * (onehot - probs[None])).sum(axis=0)
                logp = np.log(probs[np.arange(MAX_LEN), tokens]).mean(axis=1)
                for i in range(args.group_size):
                    ln, tr = lens_trunc[i]
                    samples.append({
                        "prompt_text": f"spell pattern #{p}",
                        "completion_text": render(tokens[i]),
                        "completion_token_ids": tokens[i, :ln].tolist(),
                        "reward_total": float(rewards[i]),
                        "reward_components": {"correct": float(correct[i]), "format": float(fmt[i])},
                        "advantage": float(adv[i]),
                        "logprob_mean": float(logp[i]),
                        "completion_len": ln,
                        "truncated": tr,
                        "group_id": f"{step}-{p}",
                    })
                rewards_all += rewards.tolist(); adv_all += adv.tolist()
                lengths += [ln for ln, _ in lens_trunc]; truncs += [tr for _, tr in lens_trunc]
                comp_correct += correct.tolist(); comp_format += fmt.tolist()
            n = len(rewards_all)
            grad /= n
            logits += args.lr * grad
            probs_now = softmax(logits[prompts])
            ref = reference[prompts]
            entropy = -(probs_now * np.log(probs_now)).sum(-1)
            kl = (probs_now * (np.log(probs_now) - np.log(ref))).sum(-1)
            rewards_np, adv_np = np.array(rewards_all), np.array(adv_all)
            rec.log_step(
                step,
                reward_mean=rewards_np.mean(), reward_std=rewards_np.std(),
                reward_min=rewards_np.min(), reward_max=rewards_np.max(),
                reward_components={"correct": float(np.mean(comp_correct)), "format": float(np.mean(comp_format))},
                kl_mean=kl.mean(), kl_max=kl.max(),
                kl_positional=kl.mean(axis=0).tolist(),
                entropy_mean=entropy.mean(),
                adv_mean=adv_np.mean(), adv_std=adv_np.std(), adv_zero_frac=float(np.mean(np.abs(adv_np) < 1e-6)),
                group_reward_std_mean=float(np.mean(group_stds)),
                zero_variance_group_frac=float(np.mean(np.array(group_stds) < 1e-6)),
                loss=-(adv_np * 0).mean(), lr=args.lr, grad_norm=float(np.linalg.norm(grad)),
                completion_len_mean=float(np.mean(lengths)), completion_len_p95=float(np.percentile(lengths, 95)),
                completion_len_max=float(np.max(lengths)), max_len_hit_frac=float(np.mean(truncs)),
                eos_rate=1.0 - float(np.mean(truncs)), truncation_rate=float(np.mean(truncs)),
                step_time_s=time.perf_counter() - t0,
            )
            rec.log_samples(step, samples)
        rec.log_event("train_end", step=args.steps)
    print(f"recorded {args.steps} steps into {args.run_dir} (dropped: {rec.dropped})")


if __name__ == "__main__":
    main()
