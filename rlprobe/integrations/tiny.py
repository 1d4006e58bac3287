"""A tiny Llama, a tokenizer trained on the spot and a toy task: real TRL training, offline, on CPU.

Used by the TRL example, its tests and its benchmark, so all three train exactly the same thing.
Nothing is downloaded: the tokenizer is trained on a few sentences and the model's weights are
random, which is all a recorder needs to see a trainer's real callbacks, logs and buffers.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

WORDS = (
    "the cat sat on a mat and the dog ran to the red ball . "
    "a bird can sing one two three four five . yes no maybe ok "
    "what is the answer ? tell me a short story about a cat . "
    "count to five . say yes or no . name a color : red blue green"
).split()

PLAIN_PROMPTS = [
    "tell me a short story about a cat .",
    "count to five .",
    "say yes or no .",
    "name a color :",
    "what is the answer ?",
    "a bird can sing",
    "the dog ran to",
    "one two three",
]

# A chat template small enough to read: role and content on one line per message.
CHAT_TEMPLATE = (
    "{% for message in messages %}{{ message['role'] }} : {{ message['content'] }} . {% endfor %}"
    "{% if add_generation_prompt %}assistant : {% endif %}"
)


def offline() -> None:
    """Make transformers, datasets and the hub never touch the network (for tests and examples)."""
    for name in ("HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE", "HF_DATASETS_OFFLINE", "WANDB_DISABLED"):
        os.environ.setdefault(name, "1")
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")


def build_tiny_model(path: str | os.PathLike[str], hidden_size: int = 32, seed: int = 0) -> Path:
    """Save a 1-layer Llama with random weights and a locally trained word-level tokenizer to path."""
    offline()
    import torch
    from tokenizers import Tokenizer, models, pre_tokenizers, trainers
    from transformers import LlamaConfig, LlamaForCausalLM, PreTrainedTokenizerFast

    out = Path(path)
    out.mkdir(parents=True, exist_ok=True)
    specials = ["<pad>", "<eos>", "<unk>"]
    backend = Tokenizer(models.WordLevel(unk_token="<unk>"))
    backend.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
    backend.train_from_iterator([" ".join(WORDS), "user assistant system :"], trainers.WordLevelTrainer(special_tokens=specials))
    tokenizer = PreTrainedTokenizerFast(
        tokenizer_object=backend, pad_token="<pad>", eos_token="<eos>", unk_token="<unk>", padding_side="left"
    )
    tokenizer.chat_template = CHAT_TEMPLATE
    tokenizer.save_pretrained(out)

    torch.manual_seed(seed)
    config = LlamaConfig(
        vocab_size=len(tokenizer),
        hidden_size=hidden_size,
        intermediate_size=2 * hidden_size,
        num_hidden_layers=1,
        num_attention_heads=2,
        num_key_value_heads=2,
        max_position_embeddings=128,
        pad_token_id=tokenizer.pad_token_id,
        eos_token_id=tokenizer.eos_token_id,
        bos_token_id=None,
        tie_word_embeddings=True,
    )
    LlamaForCausalLM(config).save_pretrained(out)
    return out


def tiny_dataset(n: int = 64, conversational: bool = False) -> Any:
    """A datasets.Dataset of n prompts, plain text or as chat messages."""
    offline()
    from datasets import Dataset

    prompts = [PLAIN_PROMPTS[i % len(PLAIN_PROMPTS)] for i in range(n)]
    if conversational:
        return Dataset.from_dict({"prompt": [[{"role": "user", "content": p}] for p in prompts]})
    return Dataset.from_dict({"prompt": prompts})


def _text(completion: Any) -> str:
    if isinstance(completion, list):  # conversational: a list of messages
        return " ".join(str(m.get("content", "")) for m in completion if isinstance(m, dict))
    return str(completion)


def reward_short(completions: list[Any], **kwargs: Any) -> list[float]:
    """A length reward: 1 for an empty completion, falling towards 0 as it grows."""
    return [1.0 / (1.0 + len(_text(c).split())) for c in completions]


def reward_cat(completions: list[Any], **kwargs: Any) -> list[float]:
    """A format reward: 1 when the completion mentions a cat."""
    return [1.0 if "cat" in _text(c).split() else 0.0 for c in completions]


def grpo_config(output_dir: str | os.PathLike[str], **overrides: Any) -> Any:
    """GRPOConfig for the tiny model: CPU, no checkpoints, no reporting, one log per step."""
    offline()
    from trl import GRPOConfig

    return GRPOConfig(**{**_common_args(output_dir, GRPOConfig), "num_generations": 4, **overrides})


def rloo_config(output_dir: str | os.PathLike[str], **overrides: Any) -> Any:
    """RLOOConfig for the tiny model, with the same settings as grpo_config."""
    offline()
    from trl import RLOOConfig

    return RLOOConfig(**{**_common_args(output_dir, RLOOConfig), "num_generations": 4, **overrides})


def _common_args(output_dir: str | os.PathLike[str], config_class: type) -> dict[str, Any]:
    import dataclasses

    # TRL turns checkpointing on by default; on a 1-layer model it only costs time. transformers 5
    # renamed the option (the old name still works, with a warning).
    names = {f.name for f in dataclasses.fields(config_class)}
    checkpointing = "activation_checkpointing" if "activation_checkpointing" in names else "gradient_checkpointing"
    return {
        checkpointing: False,
        "output_dir": str(output_dir),
        "per_device_train_batch_size": 8,
        "max_completion_length": 8,
        "max_steps": 20,
        "learning_rate": 1e-3,
        "logging_steps": 1,
        "save_strategy": "no",
        "report_to": "none",
        "use_cpu": True,
        "bf16": False,
        "disable_tqdm": True,
        "seed": 0,
    }
