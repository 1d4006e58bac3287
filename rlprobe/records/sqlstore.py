"""Open a records store in DuckDB: the records SQL files of sql/records/v1/, run in order.

The records SQL is kept out of sql/v1/ on purpose: everything under sql/v1/ belongs to the
run-recording views that every `rlprobe` session creates, and a records store is a different
tree of files. The split is the same: sources/ read the files (DuckDB-specific), queries/ are
the SELECTs over them that Python runs with named $parameters.
"""

from __future__ import annotations

import os
from functools import lru_cache
from pathlib import Path
from typing import Any, Mapping

from rlprobe.errors import QueryError, RecordsNotFound
from rlprobe.store import sqlfiles

RECORDS_SQL_VERSION = 1


@lru_cache(maxsize=None)
def records_sql(version: int = RECORDS_SQL_VERSION) -> tuple[sqlfiles.SqlFile, ...]:
    """The records SQL files: sources in dependency order, then the queries."""
    folder = sqlfiles.sql_root() / "records" / f"v{version}"
    files = [sqlfiles.parse(p, version) for p in sorted(folder.rglob("*.sql"))]
    by_name = {f.name: f for f in files}
    done: dict[str, sqlfiles.SqlFile] = {}

    def visit(f: sqlfiles.SqlFile) -> None:
        if f.name in done:
            return
        for dep in f.depends:
            if dep not in by_name:
                raise ValueError(f"{f.path}: depends on unknown '{dep}'")
            visit(by_name[dep])
        done[f.name] = f

    for f in sorted(files, key=lambda f: (f.kind != "source", f.path.name)):
        visit(f)
    return tuple(done.values())


def records_query(name: str) -> str:
    """The SELECT of a records query file (sql/records/v1/queries/<name>.sql)."""
    for f in records_sql():
        if f.kind == "query" and f.name == name:
            return f.sql
    raise KeyError(f"no records query named {name!r}")


def _quote(text: str) -> str:
    return "'" + text.replace("'", "''") + "'"


class RecordsStore:
    """A DuckDB session over one snapshot of a records store (read once, at open)."""

    def __init__(self, path: str | os.PathLike[str]) -> None:
        import duckdb

        p = Path(path).expanduser()
        if not p.is_dir():
            raise RecordsNotFound(f"{path}: no such records store (expected a directory)")
        self.path = p.resolve()
        self.con = duckdb.connect(":memory:")
        self.con.execute("SET enable_progress_bar = false")
        self.con.execute(f"SET VARIABLE records_store = {_quote(str(self.path))}")
        for f in records_sql():
            if f.kind == "source":
                try:
                    self.con.execute(f.sql)
                except duckdb.Error as exc:
                    raise QueryError(f"cannot read the records store {self.path}: {str(exc).splitlines()[0]}") from exc
        if not self.con.sql("SELECT count(*) FROM records_files").fetchall()[0][0]:
            raise RecordsNotFound(
                f"{path} holds no inference records: expected <lineage>/<run>-<id>/manifest-<attempt>.json "
                "and records-<attempt>.jsonl below it")

    def rows(self, name: str, params: Mapping[str, Any] | None = None) -> list[dict[str, Any]]:
        """Run a records query and return its rows as dicts."""
        rel = self.con.execute(records_query(name), dict(params or {}))
        columns = [d[0] for d in rel.description]
        return [dict(zip(columns, row)) for row in rel.fetchall()]

    def close(self) -> None:
        """Close the DuckDB connection."""
        self.con.close()

    def __enter__(self) -> "RecordsStore":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()
