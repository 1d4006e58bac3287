"""Arrow columns as numpy arrays without pyarrow's pandas bridge.

pyarrow converts to numpy (`Array.to_numpy`, `ChunkedArray.to_numpy`, `np.asarray(column)`)
through its pandas conversion code, which imports pandas first whenever pandas is installed:
153 ms of a 1k-step `rlprobe doctor`, for nothing it uses. Here numbers are read straight from
the column's buffers (a null becomes NaN, as pyarrow's own conversion makes it) and anything
else goes through `to_pylist`, which pyarrow does without pandas.

    steps = to_numpy(table.column("step"))     # int64 when no value is NULL, else float64 with NaN
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pyarrow as pa

__all__ = ["to_numpy"]


def to_numpy(column: pa.Array | pa.ChunkedArray) -> np.ndarray:
    """column as numpy, as `column.to_numpy(zero_copy_only=False)` gives it, without importing pandas.

    Integers and floats keep their dtype when no value is NULL; with NULLs they become float64
    with NaN where the NULLs were. Booleans without NULLs are bool. Every other type (and
    booleans with NULLs) is an object array of Python values, None for NULL.
    """
    chunks = column.chunks if isinstance(column, pa.ChunkedArray) else [column]
    kind = column.type
    if pa.types.is_integer(kind) or pa.types.is_floating(kind):
        dtype = np.dtype(kind.to_pandas_dtype())  # a dtype lookup: imports nothing
        has_nulls = column.null_count > 0
        parts = [_numbers(c, dtype, float_nulls=has_nulls) for c in chunks]
        empty = np.float64 if has_nulls and dtype.kind in "iu" else dtype
        return np.concatenate(parts) if parts else np.empty(0, empty)
    if pa.types.is_boolean(kind) and column.null_count == 0:
        parts = [_bits(c.buffers()[1], c.offset, len(c)) for c in chunks]
        return np.concatenate(parts) if parts else np.empty(0, bool)
    values: list[Any] = column.to_pylist()
    out = np.empty(len(values), dtype=object)
    out[:] = values
    return out


def _bits(buffer: pa.Buffer | None, offset: int, length: int) -> np.ndarray:
    """length bits of an Arrow bitmap (least significant bit first) from bit offset, as bool."""
    if buffer is None:
        return np.ones(length, dtype=bool)
    packed = np.frombuffer(buffer, dtype=np.uint8)
    return np.unpackbits(packed, bitorder="little", count=offset + length)[offset:].astype(bool)


def _numbers(chunk: pa.Array, dtype: np.dtype, float_nulls: bool) -> np.ndarray:
    n = len(chunk)
    validity, data = chunk.buffers()[:2]
    values = np.frombuffer(data, dtype=dtype, count=n, offset=chunk.offset * dtype.itemsize) if n else np.empty(0, dtype)
    if not float_nulls:
        return values.copy()  # writable and independent of the Arrow buffer, as pyarrow's copy is
    out = values.astype(np.float64)
    if chunk.null_count:
        out[~_bits(validity, chunk.offset, n)] = np.nan
    return out
