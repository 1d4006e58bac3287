"""What the manifest says about where a run ran: git sha, package versions, host, GPUs."""

from __future__ import annotations

import platform
import socket
import subprocess
import sys
from importlib import metadata
from typing import Any

# Packages whose versions explain a run's behaviour. Looked up by metadata, never imported.
RELEVANT_PACKAGES = (
    "rlprobe", "torch", "transformers", "trl", "accelerate", "peft", "deepspeed", "vllm",
    "flash-attn", "bitsandbytes", "datasets", "tokenizers", "numpy", "pyarrow",
)


def _git(*args: str) -> str | None:
    try:
        out = subprocess.run(["git", *args], capture_output=True, text=True, timeout=2.0, check=True)
    except (OSError, subprocess.SubprocessError):
        return None
    return out.stdout.strip() or None


def _package_versions() -> dict[str, str]:
    versions = {}
    for name in RELEVANT_PACKAGES:
        try:
            versions[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            continue
    return versions


def _gpu_info() -> list[dict[str, Any]] | None:
    """GPU names and memory, only if the training process already imported torch."""
    torch = sys.modules.get("torch")
    if torch is None:
        return None
    try:
        if not torch.cuda.is_available():
            return []
        return [
            {"name": torch.cuda.get_device_name(i), "memory_gb": round(torch.cuda.get_device_properties(i).total_memory / 2**30, 1)}
            for i in range(torch.cuda.device_count())
        ]
    except Exception:  # a broken CUDA set-up must not stop the recording
        return None


def capture_env() -> dict[str, Any]:
    """Environment block of the manifest; every probe is best-effort and never raises."""
    sha = _git("rev-parse", "HEAD")
    env: dict[str, Any] = {
        "git_sha": sha,
        "git_dirty": bool(_git("status", "--porcelain", "--untracked-files=no")) if sha else None,
        "python": platform.python_version(),
        "platform": platform.platform(),
        "hostname": socket.gethostname(),
        "argv": list(sys.argv),
        "packages": _package_versions(),
    }
    gpus = _gpu_info()
    if gpus is not None:
        env["gpus"] = gpus
    return env
