"""Strict JSON for values that may hold NaN, inf, numpy scalars or other objects."""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any


def json_safe(value: Any) -> Any:
    """A copy of value that json.dumps writes as strict JSON: NaN/inf become "nan"/"inf" strings."""
    if isinstance(value, float):
        return value if math.isfinite(value) else str(value)
    if isinstance(value, Mapping):
        return {str(k): json_safe(v) for k, v in value.items()}
    if isinstance(value, (list, tuple, set)):
        return [json_safe(v) for v in value]
    if value is None or isinstance(value, (str, int, bool)):
        return value
    try:
        return json_safe(float(value))
    except (TypeError, ValueError, RuntimeError):
        return str(value)
