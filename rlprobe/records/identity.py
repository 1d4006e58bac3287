"""Hashes that identify checkpoints, protocols and prompts in inference records.

The recorder and the selection filter must compute these identically (a selection table is
matched against a run by the same digests), so both import them from here. Everything is
standard library: the write side must stay light.
"""

from __future__ import annotations

import hashlib
import json
import math
import os
from pathlib import Path
from typing import Any, Iterable, Mapping, Sequence

WORKFLOW_MARKER = "workflow-model.json"
LINEAGE_HEX = 16
VALIDITY_OK = ("ok", "completed")
VALIDITY_FAILED = ("timeout", "rejected", "service_error", "judge_error")
VALIDITY_STATES = VALIDITY_OK + VALIDITY_FAILED + ("unknown",)
POLICY_SCOPES = ("start_checkpoint", "run_version", "mixed")


def canonical_json(value: Any) -> str:
    """JSON with sorted keys and no spaces: the text every digest here is taken over."""
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False, allow_nan=False)


def sha256_hex(data: str | bytes) -> str:
    """The SHA-256 of text (as UTF-8) or bytes, as 64 hex digits."""
    return hashlib.sha256(data.encode("utf-8") if isinstance(data, str) else data).hexdigest()


def file_sha256(path: str | os.PathLike[str]) -> str:
    """The SHA-256 of a file's bytes."""
    digest = hashlib.sha256()
    with open(path, "rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def checkpoint_inventory(checkpoint: str | os.PathLike[str]) -> tuple[Any, str]:
    """The starting checkpoint's file inventory and its basis.

    With the workflow marker (workflow-model.json, written when the model was prepared) the
    inventory is the marker's content; without it, the directory's own: its resolved path and,
    per file, size, modification time and, for JSON files, their SHA-256. Neither is a digest
    of the weights (hashing many GB at startup would delay every run).
    """
    root = Path(checkpoint).expanduser().resolve()
    marker = root / WORKFLOW_MARKER
    if marker.is_file():
        return json.loads(marker.read_text(encoding="utf-8")), WORKFLOW_MARKER
    if not root.is_dir():
        raise FileNotFoundError(f"{checkpoint}: no such checkpoint directory")
    files = []
    for path in sorted(p for p in root.rglob("*") if p.is_file()):
        stat = path.stat()
        entry: dict[str, Any] = {"path": path.relative_to(root).as_posix(), "size": stat.st_size,
                                 "mtime_ns": stat.st_mtime_ns}
        if path.suffix == ".json":
            entry["sha256"] = file_sha256(path)
        files.append(entry)
    return {"source": str(root), "files": files}, "served_directory_inventory"


def lineage_of(checkpoint: str | os.PathLike[str]) -> tuple[str, str]:
    """(lineage, basis): the first 16 hex of the SHA-256 of the checkpoint's file inventory."""
    inventory, basis = checkpoint_inventory(checkpoint)
    return sha256_hex(canonical_json(inventory))[:LINEAGE_HEX], basis


def build_protocol(
    sampling: Mapping[str, Any],
    *,
    stop: Sequence[str] | None = None,
    deterministic_inference: bool = False,
    tokenizer_files: Iterable[str | os.PathLike[str]] = (),
    chat_template: str | None = None,
    generation_config: str | os.PathLike[str] | None = None,
    verifier_registry: Any = None,
    zero_variance_filter: bool = False,
) -> dict[str, Any]:
    """The generation protocol a record's evidence depends on, as the manifest stores it.

    Files are hashed by content (a path is not evidence of sameness); the verifier registry is
    hashed as canonical JSON of whatever describes it (names, configs, versions).
    """
    tokenizer = {Path(p).name: file_sha256(p) for p in sorted(tokenizer_files, key=lambda p: Path(p).name)}
    return {
        "sampling": dict(sampling),
        "stop": list(stop or []),
        "sglang_enable_deterministic_inference": bool(deterministic_inference),
        "tokenizer_sha256": tokenizer,
        "chat_template_sha256": sha256_hex(chat_template) if chat_template is not None else None,
        "generation_config_sha256": file_sha256(generation_config) if generation_config else None,
        "verifier_registry_sha256": sha256_hex(canonical_json(verifier_registry)) if verifier_registry is not None else None,
        "zero_variance_filter": bool(zero_variance_filter),
    }


def protocol_digest(protocol: Mapping[str, Any]) -> str:
    """The SHA-256 of a protocol's canonical JSON."""
    return sha256_hex(canonical_json(dict(protocol)))


def task_key(rendered_input: str | Sequence[Mapping[str, Any]], targets: Any = None) -> tuple[str, str]:
    """(task_key, task_key_basis): SHA-256 of the full rendered input plus verifier targets.

    A string is taken as the chat-template rendering (exact under the recorded template); a list
    of messages is hashed as canonical JSON, every system and conversation turn included.
    """
    if isinstance(rendered_input, str):
        body, basis = rendered_input, "rendered_input+targets"
    else:
        body, basis = canonical_json([dict(m) for m in rendered_input]), "messages_json+targets"
    return sha256_hex(canonical_json({"input": body, "targets": targets})), basis


def prompt_token_sha256(token_ids: Sequence[int]) -> str:
    """SHA-256 of the prompt's token ids (as a JSON list of ints)."""
    return sha256_hex(canonical_json([int(t) for t in token_ids]))


def input_key(task_key_: str, prompt_token_sha256_: str | None, protocol_digest_: str) -> str:
    """task_key, prompt-token hash and protocol digest together: pool observations only within one."""
    return sha256_hex(canonical_json([task_key_, prompt_token_sha256_, protocol_digest_]))


def query_sha256(messages_or_text: str | Sequence[Mapping[str, Any]]) -> str | None:
    """SHA-256 of the final user message only: a grouping hint, never an identity."""
    if isinstance(messages_or_text, str):
        return sha256_hex(messages_or_text)
    users = [m for m in messages_or_text if m.get("role") == "user"]
    if not users:
        return None
    content = users[-1].get("content")
    return sha256_hex(content if isinstance(content, str) else canonical_json(content))


def validity(components: Mapping[str, str | None], expected: Iterable[str] = ()) -> dict[str, Any]:
    """{valid, components}: every expected verifier gets a state (unknown when none was recorded).

    valid is True only when every component is ok or completed, False when any failed, and None
    when any is unknown (and none failed): an unknown is evidence of neither.
    """
    states = {name: "unknown" for name in expected}
    for name, state in components.items():
        states[name] = state if state in VALIDITY_STATES else "unknown"
    values = set(states.values())
    if values & set(VALIDITY_FAILED):
        valid: bool | None = False
    elif "unknown" in values:
        valid = None
    else:
        valid = True if values else None
    return {"valid": valid, "components": states}


def policy_scope(versions: Sequence[int], fresh: bool) -> str:
    """start_checkpoint (all version 0 of a fresh run), run_version (one later version) or mixed."""
    distinct = set(int(v) for v in versions)
    if len(distinct) > 1:
        return "mixed"
    if distinct == {0} and fresh:
        return "start_checkpoint"
    return "run_version"


def finite_or_none(value: Any) -> float | None:
    """A float, or None for missing and non-finite values (JSON has no NaN)."""
    if value is None:
        return None
    out = float(value)
    return out if math.isfinite(out) else None
