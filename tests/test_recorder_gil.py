"""The writer thread converts rows to Arrow in pieces, so the training thread never waits long.

Converting Python objects to Arrow holds the GIL for the whole call; one call over a flush of
64 samples x 2.4 KB x 200 steps stalled log_step for tens of milliseconds. How long the
training thread waits is measured in benchmarks/overhead.py (section 1b), not here; this checks
that the conversion is cut into pieces of at most ARROW_CHUNK_ROWS rows and keeps every value.
"""

from __future__ import annotations

from conftest import sample_rows
from rlprobe.record import writer
from rlprobe.schemas import SAMPLE_COLUMN_TYPES


def test_a_big_batch_is_converted_in_chunks_and_keeps_every_value(monkeypatch):
    calls = []
    monkeypatch.setattr(writer, "yield_gil", lambda: calls.append(1))
    rows = [r for step in range(40) for r in sample_rows(step, 64)]  # 2560 rows
    table = writer._table(rows, SAMPLE_COLUMN_TYPES)
    column = table.column("completion_text")
    assert max(len(chunk) for chunk in column.chunks) <= writer.ARROW_CHUNK_ROWS
    assert column.to_pylist() == [r["completion_text"] for r in rows]
    assert table.column("step").to_pylist() == [r["step"] for r in rows]
    assert calls, "the GIL is offered back between chunks"


def test_a_small_batch_is_one_chunk():
    table = writer._table(sample_rows(0, 8), SAMPLE_COLUMN_TYPES)
    assert all(table.column(name).num_chunks == 1 for name in table.column_names)
