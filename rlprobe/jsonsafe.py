"""Strict JSON for values that may hold NaN, inf, numpy scalars or other objects."""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

_MAX_DEPTH = 64  # deeper structures are cut (a recursion limit must never be what fails)


def clean_text(text: str) -> str:
    """text with lone surrogates (which UTF-8 cannot hold) replaced by U+FFFD; pairs are joined."""
    try:
        text.encode("utf-8")
        return text
    except UnicodeEncodeError:
        return text.encode("utf-16", "surrogatepass").decode("utf-16", "replace")


def safe_str(value: Any) -> str:
    """str(value) as valid UTF-8 text, whatever the object's __str__ does (raise, return junk)."""
    for render in (str, repr):
        try:
            text = render(value)
            if isinstance(text, str):
                return clean_text(text)
        except Exception:
            continue
    return f"<unprintable {type(value).__name__}>"


def json_safe(value: Any, _depth: int = 0, _seen: frozenset[int] = frozenset()) -> Any:
    """A copy of value that json.dumps writes as strict JSON: NaN/inf become "nan"/"inf" strings.

    Never raises: text is made valid UTF-8, a container that contains itself becomes the string
    "<cycle>", nesting deeper than 64 levels is cut, and an object whose str() raises is named
    by its type.
    """
    if isinstance(value, float):
        return value if math.isfinite(value) else str(value)
    if isinstance(value, str):
        return clean_text(value)
    if value is None or isinstance(value, (int, bool)):
        return value
    if isinstance(value, (Mapping, list, tuple, set, frozenset)):
        if id(value) in _seen:
            return "<cycle>"
        if _depth >= _MAX_DEPTH:
            return "<too deep>"
        seen = _seen | {id(value)}
        try:
            if isinstance(value, Mapping):
                return {safe_str(k): json_safe(v, _depth + 1, seen) for k, v in value.items()}
            return [json_safe(v, _depth + 1, seen) for v in value]
        except Exception:  # a mapping whose items() raises, a set that changed size, ...
            return safe_str(value)
    try:
        return json_safe(float(value), _depth + 1, _seen)
    except Exception:
        return safe_str(value)
