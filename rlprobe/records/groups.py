"""Build group rows from a trainer's per-sample outputs (a GRPO group: one prompt, G responses).

Trainers that have no verifier diagnostics of their own (TRL's reward functions return a
number, or None when they do not apply) get validity from that: a number is ``completed``,
None or NaN is ``unknown``.
"""

from __future__ import annotations

import math
from typing import Any, Mapping, Sequence

from rlprobe.records.identity import (
    finite_or_none,
    input_key,
    policy_scope,
    prompt_token_sha256,
    query_sha256,
    task_key,
    validity,
)


def prompt_identity(
    prompt: str | Sequence[Mapping[str, Any]],
    protocol_digest: str,
    *,
    prompt_token_ids: Sequence[int] | None = None,
    targets: Any = None,
) -> dict[str, Any]:
    """task_key, task_key_basis, input_key, query_sha256 and prompt_token_sha256 of one prompt.

    The selection filter calls this too, so a streamed prompt's input_key is computed exactly
    as the recorder computed it.
    """
    key, basis = task_key(prompt, targets)
    tokens = prompt_token_sha256(prompt_token_ids) if prompt_token_ids is not None else None
    return {"task_key": key, "task_key_basis": basis, "input_key": input_key(key, tokens, protocol_digest),
            "query_sha256": query_sha256(prompt), "prompt_token_sha256": tokens}


def _state(value: Any) -> str:
    if value is None:
        return "unknown"
    try:
        return "completed" if math.isfinite(float(value)) else "unknown"
    except (TypeError, ValueError):
        return "unknown"


def group_from_samples(
    prompt: str | Sequence[Mapping[str, Any]],
    completions: Sequence[str],
    rewards: Sequence[float | None],
    *,
    protocol_digest: str,
    verifiers: Sequence[str],
    components: Mapping[str, Sequence[float | None]] | None = None,
    weights: Mapping[str, float] | None = None,
    completion_tokens: Sequence[int] | None = None,
    truncated: Sequence[bool] | None = None,
    statuses: Sequence[str] | None = None,
    policy_versions: Sequence[Sequence[int]] | Sequence[int] | int = 0,
    fresh: bool = True,
    prompt_token_ids: Sequence[int] | None = None,
    targets: Any = None,
    group_index: int | None = None,
    rollout_id: int | None = None,
    group_attempt: str | None = None,
    filter_decision: str = "passed",
    filter_reason: str | None = None,
    prepared_sample_id: str | None = None,
    source_dataset: str | None = None,
    source_row: int | None = None,
) -> dict[str, Any]:
    """One group row in the records format from a prompt and its G scored completions.

    components maps each reward function (verifier) name to its per-completion scores; its
    states give validity (a missing score is unknown). policy_versions is one version for the
    whole group, one per completion, or a list of versions per completion.
    """
    n = len(completions)
    if len(rewards) != n:
        raise ValueError(f"{n} completions but {len(rewards)} rewards")
    components = dict(components or {})
    weights = dict(weights or {})
    if isinstance(policy_versions, int):
        per_response: list[list[int]] = [[policy_versions]] * n
    else:
        per_response = [[int(v)] if isinstance(v, int) else [int(x) for x in v] for v in policy_versions]
        if len(per_response) != n:
            raise ValueError(f"{n} completions but {len(per_response)} policy_versions")
    responses = []
    for i in range(n):
        scores = {name: values[i] for name, values in components.items()}
        checked = validity({name: _state(v) for name, v in scores.items()}, expected=verifiers)
        versions = sorted(set(per_response[i]))
        responses.append({
            "index": i,
            "reward": finite_or_none(rewards[i]),
            "reward_components": [{"name": name, "score": finite_or_none(v), "weight": weights.get(name, 1.0)}
                                  for name, v in scores.items()],
            "validity": checked,
            "response_tokens": int(completion_tokens[i]) if completion_tokens is not None else None,
            "status": statuses[i] if statuses is not None else ("truncated" if truncated and truncated[i] else "completed"),
            "truncated": bool(truncated[i]) if truncated is not None else False,
            "policy_versions": versions,
            "policy_scope": policy_scope(versions, fresh),
            "response": completions[i],
        })
    row: dict[str, Any] = {"kind": "group"}
    row.update(prompt_identity(prompt, protocol_digest, prompt_token_ids=prompt_token_ids, targets=targets))
    row.update({
        "prepared_sample_id": prepared_sample_id,
        "source_dataset": source_dataset,
        "source_row": source_row,
        "verifiers": list(verifiers),
        "group_index": group_index,
        "rollout_id": rollout_id,
        "group_size": n,
        "group_attempt": group_attempt,
        "filter_decision": filter_decision,
        "filter_reason": filter_reason,
        "responses": responses,
    })
    return row


def groups_from_batch(
    prompts: Sequence[Any],
    completions: Sequence[str],
    rewards: Sequence[float | None],
    *,
    num_generations: int,
    components: Mapping[str, Sequence[float | None]] | None = None,
    completion_tokens: Sequence[int] | None = None,
    truncated: Sequence[bool] | None = None,
    **group_fields: Any,
) -> list[dict[str, Any]]:
    """Split a flat GRPO batch (each prompt repeated num_generations times in a row, as TRL
    lays it out) into group rows; group_fields go to every group_from_samples call."""
    n = len(completions)
    if n % num_generations:
        raise ValueError(f"{n} completions do not split into groups of {num_generations}")
    out = []
    for g, start in enumerate(range(0, n, num_generations)):
        end = start + num_generations
        sl = slice(start, end)
        fields = dict(group_fields)
        fields.setdefault("group_index", g)
        out.append(group_from_samples(
            prompts[start], list(completions[sl]), list(rewards[sl]),
            components={k: list(v[sl]) for k, v in (components or {}).items()},
            completion_tokens=list(completion_tokens[sl]) if completion_tokens is not None else None,
            truncated=list(truncated[sl]) if truncated is not None else None,
            **fields))
    return out
