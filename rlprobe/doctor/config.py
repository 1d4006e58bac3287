"""doctor.toml: per-detector thresholds, enable/disable, and a folder of custom SQL detectors.

    [doctor]
    custom_detectors = "detectors/"     # optional: .sql files that become detectors

    [ENTROPY_COLLAPSE]
    ratio_warn = 0.15                   # any default parameter of that detector

    [THROUGHPUT_ROT]
    enabled = false

An unknown detector or key is an error naming the valid ones: a typo must never silently
leave a threshold at its default.
"""

from __future__ import annotations

import os
import tomllib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Mapping

from rlprobe.errors import RlprobeError


class ConfigError(RlprobeError):
    """doctor.toml (or a config dict) names something that does not exist or has a bad value."""


@dataclass
class DoctorConfig:
    """Resolved configuration: parameters per detector, which are enabled, custom SQL folder."""

    params: dict[str, dict[str, Any]] = field(default_factory=dict)
    disabled: set[str] = field(default_factory=set)
    custom_dir: Path | None = None

    def for_detector(self, detector_id: str, defaults: Mapping[str, Any]) -> dict[str, Any]:
        """The detector's defaults with this config's overrides applied."""
        return {**defaults, **self.params.get(detector_id, {})}


def load_config(config_path: str | os.PathLike[str] | None = None, config: Mapping[str, Any] | None = None) -> DoctorConfig:
    """Read doctor.toml and/or a dict of the same shape (the dict wins), validated."""
    from rlprobe.doctor.registry import all_detectors

    merged: dict[str, Any] = {}
    base_dir = Path.cwd()
    if config_path is not None:
        path = Path(config_path)
        try:
            merged = tomllib.loads(path.read_text(encoding="utf-8"))
        except FileNotFoundError:
            raise ConfigError(f"{config_path}: no such config file") from None
        except tomllib.TOMLDecodeError as exc:
            raise ConfigError(f"{config_path} is not valid TOML: {exc}") from None
        base_dir = path.resolve().parent
    for key, value in (config or {}).items():
        if isinstance(value, Mapping) and isinstance(merged.get(key), Mapping):
            merged[key] = {**merged[key], **value}
        else:
            merged[key] = value

    detectors = all_detectors()
    resolved = DoctorConfig()
    for section, values in merged.items():
        if section == "doctor":
            _doctor_section(values, base_dir, resolved)
            continue
        if section not in detectors:
            raise ConfigError(f"unknown detector {section!r} in doctor config; valid: doctor, {', '.join(sorted(detectors))}")
        if not isinstance(values, Mapping):
            raise ConfigError(f"[{section}] must be a table of settings")
        defaults = detectors[section].params
        for key, value in values.items():
            if key == "enabled":
                if not isinstance(value, bool):
                    raise ConfigError(f"[{section}] enabled must be true or false")
                if not value:
                    resolved.disabled.add(section)
                continue
            if key not in defaults:
                valid = ", ".join(["enabled", *sorted(defaults)])
                raise ConfigError(f"unknown setting {key!r} for {section}; valid: {valid}")
            if isinstance(defaults[key], (int, float)) and not isinstance(value, (int, float)):
                raise ConfigError(f"[{section}] {key} must be a number, got {value!r}")
            resolved.params.setdefault(section, {})[key] = value
    return resolved


def _doctor_section(values: Any, base_dir: Path, resolved: DoctorConfig) -> None:
    if not isinstance(values, Mapping):
        raise ConfigError("[doctor] must be a table of settings")
    for key, value in values.items():
        if key != "custom_detectors":
            raise ConfigError(f"unknown setting {key!r} in [doctor]; valid: custom_detectors")
        folder = (base_dir / str(value)).resolve()
        if not folder.is_dir():
            raise ConfigError(f"[doctor] custom_detectors: {value} is not a folder")
        resolved.custom_dir = folder
