"""rlprobe.arrow_numpy.to_numpy gives what pyarrow's to_numpy gives, without importing pandas."""

from __future__ import annotations

import subprocess
import sys

import duckdb
import numpy as np
import pyarrow as pa
import pytest

from rlprobe.arrow_numpy import to_numpy

SQL = """
SELECT i, i::DOUBLE AS f, i::INTEGER AS i32, i::FLOAT AS f32, (i % 200)::UTINYINT AS u8,
       CASE WHEN i % 3 = 0 THEN NULL ELSE i END AS int_nulls,
       CASE WHEN i % 4 = 0 THEN NULL ELSE i * 0.5 END AS float_nulls,
       NULL::DOUBLE AS all_null, i % 2 = 0 AS flag,
       CASE WHEN i % 5 = 0 THEN NULL ELSE i % 2 = 0 END AS flag_nulls,
       'run-' || (i // 100) AS run_id, CASE WHEN i % 7 = 0 THEN NULL ELSE 'x' END AS text_nulls
FROM range(1000) t(i)
"""


def _table() -> pa.Table:
    one = duckdb.sql(SQL).to_arrow_table()
    return pa.concat_tables([one, one.slice(5, 50), one])  # three chunks, one of them sliced


def _shapes(column: pa.ChunkedArray) -> dict[str, pa.Array | pa.ChunkedArray]:
    return {"chunked": column, "sliced": column.slice(7, 1200), "array": column.combine_chunks().slice(3, 100),
            "empty": column.slice(0, 0)}


@pytest.mark.parametrize("name", duckdb.sql(SQL).columns)
def test_same_values_and_dtype_as_pyarrow(name: str) -> None:
    for shape, column in _shapes(_table().column(name)).items():
        ours, theirs = to_numpy(column), column.to_numpy(zero_copy_only=False)
        assert len(ours) == len(theirs), shape
        if theirs.dtype.kind in "iufb":
            assert ours.dtype.kind == theirs.dtype.kind, shape
            assert np.array_equal(ours, theirs, equal_nan=True), shape
        else:
            assert ours.dtype == object and list(ours) == list(theirs), shape


def test_result_is_writable_and_owns_its_memory() -> None:
    out = to_numpy(_table().column("f"))
    out[0] = -1.0  # a detector may modify what it got
    assert _table().column("f")[0].as_py() == 0.0


# A finder first on sys.meta_path sees every attempt to import pandas, installed or not.
PROBE = """
import sys
class Probe:
    tried = []
    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] == "pandas":
            Probe.tried.append(name)
        return None
sys.meta_path.insert(0, Probe())
"""


def _pandas_tried(code: str) -> bool:
    out = subprocess.run([sys.executable, "-c", PROBE + code + "\nprint(bool(Probe.tried))"], capture_output=True,
                         text=True, check=True)
    return out.stdout.strip().splitlines()[-1] == "True"


def test_does_not_import_pandas() -> None:
    read = f"import duckdb\nt = duckdb.sql({SQL!r}).to_arrow_table()\n"
    assert _pandas_tried(read + "t.column('f').to_numpy()")  # pyarrow's own conversion tries: the probe sees it
    assert not _pandas_tried(read + "from rlprobe.arrow_numpy import to_numpy\nfor c in t.columns: to_numpy(c)")
