"""Turn whatever a training loop logged into rows of the recording format, field by field.

Runs on the writer thread. A bad field is dropped and reported, the rest of the record is
kept: one malformed metric must not cost the whole step. NaN and inf are values (a NaN loss is
evidence), so they are kept as they are.
"""

from __future__ import annotations

import json
import math
from typing import Any, Mapping

from rlprobe.jsonsafe import clean_text, safe_str
from rlprobe.schemas import (
    EXTRA_PREFIX,
    REWARD_COMPONENT_PREFIX,
    SAMPLE_COLUMN_TYPES,
    STEP_FLOAT_FIELDS,
    SampleRecord,
)

_STEP_FLOATS = frozenset(STEP_FLOAT_FIELDS)
_SAMPLE_TEXT = frozenset({"prompt_text", "completion_text", "sample_id", "group_id", "capture_reason"})
_SAMPLE_FLOATS = frozenset(k for k, t in SAMPLE_COLUMN_TYPES.items() if t == "DOUBLE")
_INT64_MIN, _INT64_MAX = -(2**63), 2**63 - 1  # what an int64 column holds

# Names already checked, and the float column each goes to: a run logs the same few dozen
# names at every step, so each is checked once, not at every step. Only names that passed
# _name() are ever added, so a lookup that hits is the answer the full path would give.
# Bounded: past the bound, new names simply take the full path each time.
_COLUMN_CACHE_MAX = 1 << 16
_STEP_FLOAT_COLUMNS: dict[str, str] = {name: name for name in STEP_FLOAT_FIELDS}
_DICT_COLUMNS: dict[str, dict[str, str]] = {REWARD_COMPONENT_PREFIX: {}, EXTRA_PREFIX: {}}
_SAMPLE_FLOAT_COLUMNS: dict[str, str] = {}  # sample keys outside the contract -> their float column
_TEXT, _FLOAT, _INT, _BOOL, _INTS, _COMPONENTS, _EXTRA = range(7)
_SAMPLE_KINDS: dict[str, int] = {
    **{name: _TEXT for name in _SAMPLE_TEXT},
    **{name: _FLOAT for name in _SAMPLE_FLOATS},
    "completion_len": _INT, "truncated": _BOOL, "completion_token_ids": _INTS,
    "reward_components": _COMPONENTS, "extra": _EXTRA,
}


def _remember(cache: dict[str, str], name: Any, column: str) -> None:
    if type(name) is str and len(cache) < _COLUMN_CACHE_MAX:
        cache[name] = column


class BadValue(ValueError):
    """A value that cannot be stored in the field it was logged under."""


def to_float(value: Any) -> float:
    """Coerce a number-like value (python, numpy, torch scalar, numeric string) to float."""
    if isinstance(value, float):
        return value
    if isinstance(value, (int, bool)):
        try:
            return float(value)
        except OverflowError:
            raise BadValue(f"integer too large for a float: {str(value)[:20]}...") from None
    if isinstance(value, str):
        try:
            return float(value.strip())
        except ValueError:
            raise BadValue(f"not a number: {value[:40]!r}") from None
    if isinstance(value, (list, tuple, dict, set)):
        raise BadValue(f"expected a number, got a {type(value).__name__}")
    try:
        return float(value)  # numpy scalars, 0-d tensors, Decimal, ...
    except Exception as exc:  # whatever a foreign object raises, it is one bad field
        raise BadValue(f"expected a number, got {type(value).__name__}") from exc


def to_int(value: Any) -> int:
    """Coerce an integral number-like value to an int64; 3.0 is fine, 3.5, NaN, True and 2**63 are not.

    A value out of the int64 range is refused here, field by field: one such value reaching the
    parquet writer would fail the whole batch it is in.
    """
    if type(value) is int and _INT64_MIN <= value <= _INT64_MAX:  # the usual case, first
        return value
    if isinstance(value, bool) or type(value).__name__ == "bool_":
        raise BadValue(f"expected an integer, got a bool ({value!r})")
    if isinstance(value, int):
        number = value
    elif hasattr(value, "__index__") and not isinstance(value, (str, bytes)):
        try:
            number = value.__index__()  # numpy and torch integers, exactly (a float would round)
        except Exception as exc:
            raise BadValue(f"expected an integer, got {type(value).__name__}") from exc
    else:
        as_float = to_float(value)
        if not math.isfinite(as_float) or as_float != int(as_float):
            raise BadValue(f"expected an integer, got {safe_str(value)[:40]}")
        number = int(as_float)
    if not _INT64_MIN <= number <= _INT64_MAX:
        raise BadValue(f"integer out of the int64 range: {str(number)[:24]}")
    return number


def _name(name: Any) -> str:
    """A column name: text that UTF-8 can hold (a lone surrogate cannot be a parquet column)."""
    text = name if isinstance(name, str) else safe_str(name)
    if clean_text(text) is not text:
        raise BadValue("name is not valid text (it holds a lone surrogate)")
    return text


def _float_list(value: Any) -> list[float]:
    if type(value) is list and set(map(type, value)) <= {float}:  # the usual case, checked in bulk
        return list(value)
    if isinstance(value, (str, bytes, Mapping)) or not hasattr(value, "__iter__"):
        raise BadValue(f"expected a list of numbers, got {type(value).__name__}")
    return [to_float(v) for v in value]


def _int_list(value: Any) -> list[int]:
    if isinstance(value, (str, bytes, Mapping)) or not hasattr(value, "__iter__"):
        raise BadValue(f"expected a list of integers, got {type(value).__name__}")
    values = list(value)
    if all(type(v) is int for v in values):  # the common case, checked in bulk
        if values and not (_INT64_MIN <= min(values) and max(values) <= _INT64_MAX):
            raise BadValue("integer out of the int64 range in the list")
        return values
    return [to_int(v) for v in values]


def _put_dict(row: dict[str, Any], prefix: str, name: str, value: Any, problems: list[str]) -> None:
    if not isinstance(value, Mapping):
        problems.append(f"{name}: expected a dict of numbers, got {type(value).__name__}")
        return
    columns = _DICT_COLUMNS[prefix]
    for key, item in value.items():
        if item is None:
            continue
        if type(item) is float:
            column = columns.get(key) if type(key) is str else None
            if column is not None:
                row[column] = item
                continue
        try:
            column = prefix + _name(key)
            row[column] = to_float(item)
            _remember(columns, key, column)
        except Exception as exc:
            problems.append(f"{name}[{safe_str(key)[:60]!r}]: {exc}")


def step_row(step: Any, metrics: Mapping[str, Any], wall_time: float) -> tuple[dict[str, Any] | None, list[str]]:
    """Flattened parquet row for one log_step call, and the problems found (row None if unusable)."""
    problems: list[str] = []
    try:
        row: dict[str, Any] = {"step": to_int(step)}
    except BadValue as exc:
        return None, [f"step: {exc}"]
    row["wall_time"] = wall_time
    columns = _STEP_FLOAT_COLUMNS
    for name, value in metrics.items():
        if value is None:
            continue
        if type(value) is float:  # the usual metric: a float under a name seen before
            column = columns.get(name)
            if column is not None:
                row[column] = value
                continue
        key = name
        try:
            name = _name(name)
            if name in _STEP_FLOATS:
                row[name] = to_float(value)
            elif name == "kl_positional":
                row[name] = _float_list(value)
            elif name == "reward_components":
                _put_dict(row, REWARD_COMPONENT_PREFIX, name, value, problems)
            elif name == "extra":
                _put_dict(row, EXTRA_PREFIX, name, value, problems)
            elif name.startswith((REWARD_COMPONENT_PREFIX, EXTRA_PREFIX)):
                row[name] = to_float(value)
                _remember(columns, key, name)
            elif name == "step":
                problems.append("step: given twice")
            else:
                row[EXTRA_PREFIX + name] = to_float(value)
                _remember(columns, key, EXTRA_PREFIX + name)
        except Exception as exc:  # one bad field costs that field, never the step
            problems.append(f"{clean_text(name)}: {exc}")
    return row, problems


def _to_bool(value: Any) -> bool:
    if isinstance(value, (bool, int, float)) or hasattr(value, "__bool__") and not hasattr(value, "__len__"):
        return bool(value)
    if isinstance(value, str) and value.strip().lower() in ("true", "false", "1", "0"):
        return value.strip().lower() in ("true", "1")
    raise BadValue(f"expected true/false, got {type(value).__name__}")


def _text(value: Any, name: str, problems: list[str]) -> str:
    if not isinstance(value, str):
        # Conversational prompts arrive as message lists; keep them readable rather than drop them.
        value = json.dumps(value, default=safe_str, ensure_ascii=False)
    cleaned = clean_text(value)
    if cleaned is not value:
        problems.append(f"{name}: lone surrogates replaced by U+FFFD (UTF-8 cannot hold them)")
    return cleaned


def sample_row(sample: Any, step: int, rank: int) -> tuple[dict[str, Any] | None, list[str]]:
    """Flattened parquet row for one sample (dict or SampleRecord) and the problems found."""
    if type(sample) is not dict:
        if isinstance(sample, SampleRecord):
            sample = sample.model_dump(exclude_none=True)
        if not isinstance(sample, Mapping):
            return None, [f"sample: expected a dict or SampleRecord, got {type(sample).__name__}"]
    problems: list[str] = []
    row: dict[str, Any] = {"step": step, "rank": rank}
    for name, value in sample.items():
        if value is None or name in ("step", "rank"):
            continue
        kind = _SAMPLE_KINDS.get(name) if type(name) is str else None
        try:
            # The contract's own names, with the values they usually hold, go straight in (a
            # known name needs no check; ASCII text holds no lone surrogate; the JSON text of an
            # int is its str()); anything else takes the full path below.
            if kind == _TEXT:
                if type(value) is str and value.isascii():
                    row[name] = value
                elif type(value) is int:
                    row[name] = str(value)
                else:
                    row[name] = _text(value, name, problems)
                continue
            if kind == _FLOAT:
                row[name] = value if type(value) is float else to_float(value)
                continue
            if kind == _INT:
                row[name] = to_int(value)
                continue
            if kind is None and type(value) is float:
                column = _SAMPLE_FLOAT_COLUMNS.get(name) if type(name) is str else None
                if column is not None:
                    row[column] = value
                    continue
            key = name
            name = _name(name)
            if name in _SAMPLE_TEXT:
                row[name] = _text(value, name, problems)
            elif name in _SAMPLE_FLOATS:
                row[name] = to_float(value)
            elif name == "completion_len":
                row[name] = to_int(value)
            elif name == "truncated":
                row[name] = _to_bool(value)
            elif name == "completion_token_ids":
                row[name] = _int_list(value)
            elif name == "reward_components":
                _put_dict(row, REWARD_COMPONENT_PREFIX, name, value, problems)
            elif name == "extra":
                _put_dict(row, EXTRA_PREFIX, name, value, problems)
            elif name.startswith((REWARD_COMPONENT_PREFIX, EXTRA_PREFIX)):
                row[name] = to_float(value)
                _remember(_SAMPLE_FLOAT_COLUMNS, key, name)
            else:
                row[EXTRA_PREFIX + name] = to_float(value)
                _remember(_SAMPLE_FLOAT_COLUMNS, key, EXTRA_PREFIX + name)
        except Exception as exc:  # e.g. bool() of an array: one bad field, not a dead writer
            problems.append(f"{clean_text(name) if isinstance(name, str) else safe_str(name)}: {exc}")
    return row, problems
