"""Custom detectors written in SQL: a .sql file with a header becomes a detector, no Python.

    -- id: LOSS_ABOVE_TEN
    -- severity: warn                       (info | warn | critical)
    -- explanation: The loss went above 10.
    -- actions: Lower the learning rate; Check the reward scale
    SELECT min(step) AS first_step, 0.9 AS confidence, max(loss) AS max_loss
    FROM steps WHERE run_id = ? AND loss > 10 HAVING count(*) > 0

The query gets the run id as its one parameter and returns at most one row: first_step,
confidence (0..1, default 0.5) and any further columns, which become the evidence. No row, or
a row whose first_step is NULL, means nothing was found.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any, Callable

import pyarrow as pa

from rlprobe.doctor.findings import SEVERITY_ORDER, Finding, Skipped
from rlprobe.errors import RlprobeError
from rlprobe.store.sqlfiles import read_header

Query = Callable[[str, list[Any]], pa.Table]


def _load(path: Path) -> tuple[dict[str, str], str]:
    meta, body = read_header(path)
    missing = [k for k in ("id", "severity", "explanation") if k not in meta]
    if missing:
        raise RlprobeError(f"{path}: custom detector header lacks {', '.join(missing)} (see docs/doctor.md)")
    if meta["severity"] not in SEVERITY_ORDER:
        raise RlprobeError(f"{path}: severity must be info, warn or critical, got {meta['severity']!r}")
    _refuse_unless_read_only(path, body)
    return meta, body


# Table functions a detector may use: they make rows, they read no file.
_ROW_FUNCTIONS = frozenset({"range", "generate_series", "unnest"})


def _refuse_unless_read_only(path: Path, body: str) -> None:
    """A custom detector is one SELECT over rlprobe's views, nothing else.

    The doctor runs it on a connection that reads the recording's files, so DuckDB's external
    access cannot be switched off for it (the setting is per database and cannot be switched on
    again); instead its SQL is read first: a second statement, a COPY, ATTACH, INSTALL or SET,
    or a table that is neither one of rlprobe's views nor a CTE of the query (a file path, a
    read_csv(...)) is refused before anything runs.
    """
    import sqlglot
    from sqlglot import exp
    from sqlglot.errors import SqlglotError

    from rlprobe.store.scope import _view_names

    def refuse(why: str) -> None:
        raise RlprobeError(f"{path}: a custom detector must be one SELECT over rlprobe's views; {why} (see docs/doctor.md)")

    try:
        statements = [s for s in sqlglot.parse(body, read="duckdb") if s is not None]
    except SqlglotError as exc:
        refuse(f"its SQL could not be read ({str(exc).splitlines()[0][:120]})")
    if len(statements) != 1:
        refuse(f"it holds {len(statements)} statements")
    query = statements[0]
    if not isinstance(query, exp.Query):
        refuse(f"it is a {query.key.upper()} statement")
    ctes = {cte.alias_or_name.lower() for cte in query.find_all(exp.CTE)}
    views = _view_names()
    for table in query.find_all(exp.Table):
        if isinstance(table.this, exp.Func):
            name = (table.this.name if isinstance(table.this, exp.Anonymous) else table.this.key).lower()
            if name not in _ROW_FUNCTIONS:
                refuse(f"it calls the table function {name}(...)")
        elif table.name.lower() not in views | ctes or table.catalog:
            refuse(f"it reads {table.sql('duckdb')[:80]}, which is not one of rlprobe's views")


def run_custom_detectors(folder: Path, query: Query, run_id: str) -> tuple[list[Finding], list[Skipped]]:
    """Run every .sql detector in folder over one run."""
    findings: list[Finding] = []
    skipped: list[Skipped] = []
    for path in sorted(folder.glob("*.sql")):
        meta, body = _load(path)
        try:
            rows = query(body, [run_id]).to_pylist()
        except RlprobeError as exc:
            skipped.append(Skipped(signature_id=meta["id"], reason=f"custom detector {path.name} failed: {exc}"))
            continue
        if not rows or rows[0].get("first_step") is None:
            continue
        row = dict(rows[0])
        first_step = row.pop("first_step")
        confidence = row.pop("confidence", 0.5)
        confidence = 0.5 if confidence is None or not math.isfinite(float(confidence)) else min(1.0, max(0.0, float(confidence)))
        row.pop("run_id", None)
        actions = [a.strip() for a in meta.get("actions", "").split(";") if a.strip()]
        findings.append(Finding(
            signature_id=meta["id"], severity=meta["severity"], confidence=confidence,
            first_step=int(first_step), explanation=meta["explanation"], evidence=row,
            suggested_actions=actions, run_id=run_id,
        ))
    return findings, skipped
