"""The sample shard files a query reads, chosen by name from one listing before it runs.

src_samples (sql/v1/sources/30_src_samples.sql) reads the files bound in the variable
rlprobe_sample_files as a plain scan, so DuckDB pushes a query's step filter, run folders and
columns into the parquet reader (text columns are read only by a query that uses them). The
list is chosen by rlprobe.layout's rule (sql/v1/sources/25_sample_files.sql) from two listings,
one after the other. One is not enough: a directory read while the writer renames a shard's open
version to its sealed name sees neither name (POSIX leaves entries renamed during a readdir
unspecified, and Linux does drop both), and the run's samples would silently be missing. The
writer removes a shard's copies only after its sealed file exists, so a second listing begun
after the first ended sees that file whenever the first missed it; a file in both is read once.

The list is bound for one statement and reset after it, so no later query reads a stale list (a
listed file deleted before the scan opens it fails the statement, which engine.run retries with a
fresh listing). Without it (a DuckDB session of your own, or a query that reaches samples
through a view that does not name them) src_samples lists and chooses the files itself: the
same rows, without the narrowing.
"""

from __future__ import annotations

import re
from contextlib import contextmanager
from typing import Iterator

import duckdb

# Every view and query that reads samples names them: the samples view, src_samples itself, the
# doctor's copies. A query that does not is read the slower way, never wrongly.
_NAMES_SAMPLES = re.compile(r"sample", re.IGNORECASE)


def reads_samples(sql: str) -> bool:
    """True when sql may read the samples view (it names it): then binding the list pays."""
    return _NAMES_SAMPLES.search(sql) is not None


def has_views(con: duckdb.DuckDBPyConnection) -> bool:
    """True when con holds rlprobe's views: the init script binds rlprobe_root before them.

    Checked with getvariable, which never fails: a failed statement would abort a transaction
    that the caller has open on con.
    """
    ((root,),) = con.execute("SELECT getvariable('rlprobe_root') IS NOT NULL").fetchall()
    return bool(root)


def is_local(con: duckdb.DuckDBPyConnection) -> bool:
    """True when the views read a local folder. Object storage is left to src_samples' own
    choice: DuckDB's glob() over a filesystem registered from fsspec (s3://) listed no shard of a
    single run, and a list that misses files would silently lose their rows."""
    ((remote,),) = con.execute("SELECT coalesce(CAST(getvariable('rlprobe_root') AS VARCHAR), '') LIKE '%://%'").fetchall()
    return not remote


def reads_files(con: duckdb.DuckDBPyConnection) -> bool:
    """False while v1.samples stands for rows held in memory, not the files: the doctor's copy
    of a run's samples sets the variable rlprobe_samples_held (rlprobe.doctor.session), and a
    listing for a query over it would be wasted (a tenth of a second for 200 shards)."""
    ((held,),) = con.execute("SELECT getvariable('rlprobe_samples_held') IS NOT NULL").fetchall()
    return not held


@contextmanager
def bound(con: duckdb.DuckDBPyConnection, sql: str) -> Iterator[None]:
    """Within the block, src_samples reads the files listed on entry (when sql reads samples)."""
    if not reads_samples(sql) or not has_views(con) or not is_local(con) or not reads_files(con):
        yield
        return
    # two statements, so the second listing starts only once the first has ended
    con.execute("SET VARIABLE rlprobe_sample_files = v1.sample_files_listed()")
    con.execute("SET VARIABLE rlprobe_sample_files = v1.sample_files_relisted()")
    try:
        yield
    finally:
        try:
            con.execute("RESET VARIABLE rlprobe_sample_files")
        except duckdb.TransactionException:
            # the statement failed inside a transaction of the caller's, which is now aborted:
            # the statement's own error is the one to see (the list stays until the next query
            # through engine.run binds a fresh one)
            pass
