"""Record a real TRL GRPO run: a tiny random Llama, offline, on CPU, in a few seconds.

    python examples/trl_grpo.py runs/trl-demo
    rlprobe doctor runs/trl-demo

Needs the TRL extra (torch first, the CPU wheel: pip install torch==2.13.0, then
pip install -e ".[trl]"). The model is 1 layer with random weights and a word-level tokenizer
trained on a few sentences (rlprobe.integrations.tiny), so nothing is downloaded; swap in your
own model, dataset and reward functions and the attach() line stays the same.
"""

from __future__ import annotations

import argparse
import tempfile
from pathlib import Path

from rlprobe.integrations import tiny


def main() -> None:
    """Train 20 GRPO steps with rlprobe attached, then say how to read the recording."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("run_dir", nargs="?", default="runs/trl-demo", help="where to record (default runs/trl-demo)")
    parser.add_argument("--steps", type=int, default=20, help="optimizer steps (default 20)")
    parser.add_argument("--halt", action="store_true", help="let the live doctor stop the run on a critical finding")
    options = parser.parse_args()

    tiny.offline()  # before transformers is imported: never touch the network
    from transformers import PrinterCallback
    from trl import GRPOTrainer

    from rlprobe.integrations.trl import attach

    with tempfile.TemporaryDirectory() as scratch:
        model_path = tiny.build_tiny_model(Path(scratch) / "tiny-llama")
        trainer = GRPOTrainer(
            model=str(model_path),
            reward_funcs=[tiny.reward_short, tiny.reward_cat],
            args=tiny.grpo_config(Path(scratch) / "out", max_steps=options.steps, beta=0.04),
            train_dataset=tiny.tiny_dataset(),
        )
        trainer.remove_callback(PrinterCallback)  # the recording holds every logged figure

        callback = attach(trainer, options.run_dir, halt=options.halt or None, on_finding=_say, diagnose_every=10)
        trainer.train()

    print(f"recorded {trainer.state.global_step} steps into {options.run_dir}")
    if callback.halted_by is not None:
        print(f"halted by {callback.halted_by.signature_id}")
    print("next:")
    print(f"  rlprobe doctor {options.run_dir}")
    print(f'  rlprobe query {options.run_dir} "SELECT step, reward_mean, kl_mean, entropy_mean, loss FROM steps ORDER BY step"')
    print(f'  rlprobe query {options.run_dir} "SELECT step, reward_total, advantage, completion_text FROM samples ORDER BY reward_total DESC LIMIT 5"')


def _say(finding: object) -> None:
    print(f"live doctor: {finding.severity} {finding.signature_id} (confidence {finding.confidence:.2f})")  # type: ignore[attr-defined]


if __name__ == "__main__":
    main()
