"""A detector's per-run statement asked once for every run of a chunk.

A detector asks about the run it diagnoses with statements like
`SELECT count(*) AS n FROM v1.samples WHERE run_id = ?`, bound to the run. Diagnosing a root,
the same text comes once per run, and each statement costs a few milliseconds whatever it
reads (binding, planning, the Arrow result): a thousand runs asking ten of them is tens of
seconds. Over a chunk (rlprobe.doctor.session.RootSession) the views can hold every run of the
chunk at once, so such a statement is asked once in its chunk form, its rows ordered by run
first, and each run is handed its slice.

The chunk form is the statement's own text with three edits, so DuckDB reads everything else
exactly as written:
- the conjunct `run_id = ?` becomes `true`: the views hold the rows of the runs diagnosed, and
  in the per-run form each row passes it, wherever it stands;
- the run goes in front of the select list (as RUN), of the GROUP BY (an aggregate without one
  gets `GROUP BY run_id`) and of the ORDER BY (one without gets `ORDER BY` the run);
- nothing else changes: the other parameters are bound as given.
A run with no rows in an aggregate without GROUP BY (a count over nothing, a min of nothing) is
missing from the chunk's answer; its answer is the statement over no rows at all (`empty`:
the conjunct becomes `false`).

Only statements whose shape makes that exact are taken (chunk_form): one SELECT over one
view or table (or views joined USING (run_id), which pairs rows of one run only), the run's conjunct at the top of its WHERE and its parameter the first one, no
subquery, window, DISTINCT, HAVING, QUALIFY or LIMIT (a limit would apply to the chunk, a window
would run across runs), no column named by its place in GROUP BY or ORDER BY (the run in front
would shift it). Anything else, or a text sqlglot does not parse, is asked per run as
before. A statement that returns no rows (`... LIMIT 0`, asked for its columns) and takes no
parameter answers the same for every run of a chunk (the views have the same columns for all):
asked once (ONLY_COLUMNS).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import lru_cache

import numpy as np
import pyarrow as pa

from rlprobe.arrow_numpy import to_numpy

# The column the chunk form adds for the run of each row (a name no view has).
RUN = "rlprobe_batch_run"

_RUN_PARAM = re.compile(r"(?<![.\w\"])run_id\s*=\s*\?", re.IGNORECASE)
_SELECT = re.compile(r"^\s*SELECT\s+", re.IGNORECASE)
_GROUP_BY = re.compile(r"\bGROUP\s+BY\b", re.IGNORECASE)
_ORDER_BY = re.compile(r"\bORDER\s+BY\b", re.IGNORECASE)
ONLY_COLUMNS = re.compile(r"\bLIMIT\s+0\s*;?\s*$", re.IGNORECASE)


@dataclass(frozen=True)
class ChunkForm:
    """A per-run statement as asked once for a chunk: sql (rows ordered by the run, in column
    RUN) and, for an aggregate without GROUP BY, empty: the answer of a run without rows."""

    sql: str
    empty: str | None


@lru_cache(maxsize=256)
def chunk_form(sql: str) -> ChunkForm | None:
    """The chunk form of a per-run statement whose first parameter is the run, or None when its
    shape does not make one exact (see the module's docstring)."""
    text = sql.strip().rstrip(";").rstrip()
    if RUN in text or not _SELECT.match(text) or "--" in text or "/*" in text:
        return None  # a comment could hide the clauses appended (or hold the words searched for)
    found = list(_RUN_PARAM.finditer(text))
    if len(found) != 1 or "?" in text[: found[0].start()]:
        return None
    where_at = found[0]
    shape = _shape(text)
    if shape is None:
        return None
    aggregate, grouped, ordered = shape
    if len(_GROUP_BY.findall(text)) != int(grouped) or len(_ORDER_BY.findall(text)) != int(ordered):
        return None  # the words appear where the parse did not see a clause (a string, a name)

    def edited(conjunct: str) -> str:
        return text[: where_at.start()] + conjunct + text[where_at.end():]

    out = _SELECT.sub(lambda m: f"{m.group(0)}run_id AS {RUN}, ", edited("true"), count=1)
    order = _ORDER_BY.search(out)
    head, tail = (out[: order.start()], out[order.end():]) if order else (out, None)
    if grouped:
        head = _GROUP_BY.sub("GROUP BY run_id,", head, count=1)
    elif aggregate:
        head = f"{head.rstrip()} GROUP BY run_id "
    out = f"{head.rstrip()} ORDER BY {RUN}" + (f",{tail}" if tail is not None else "")
    return ChunkForm(out, edited("false") if aggregate and not grouped else None)


def _shape(text: str) -> tuple[bool, bool, bool] | None:
    """(aggregate, has GROUP BY, has ORDER BY) of a statement the chunk form serves, else None."""
    import sqlglot  # only a root's diagnosis asks, once per statement text
    from sqlglot import exp
    from sqlglot.errors import SqlglotError

    try:
        parsed = sqlglot.parse(text, read="duckdb")
    except SqlglotError:
        return None
    if len(parsed) != 1 or not isinstance(parsed[0], exp.Select):
        return None
    select = parsed[0]
    args = select.args
    # clauses other than these (joins, DISTINCT, HAVING, QUALIFY, LIMIT, a sample, ...) would
    # act across the runs of the chunk; "from" is "from_" in sqlglot 30
    if any(v for k, v in args.items() if k not in ("expressions", "from", "from_", "joins", "where", "group", "order")):
        return None
    source = args.get("from_") or args.get("from")
    if source is None or not isinstance(source.this, exp.Table) or not all(_same_run(j) for j in args.get("joins") or []):
        return None
    if any(node is not select for node in select.find_all(exp.Select, exp.Subquery, exp.Window, exp.Union)):
        return None
    for clause in (args.get("group"), args.get("order")):
        # GROUP BY ALL, ROLLUP and the like, and a column by its position (GROUP BY 1, ORDER BY
        # ALL), which the run put in front would shift
        if clause is not None and (any(v for k, v in clause.args.items() if k != "expressions")
                                   or any(_positional(e) for e in clause.expressions)):
            return None
    where = args.get("where")
    if where is None or not any(
        isinstance(c, exp.EQ) and isinstance(c.this, exp.Column) and not c.this.table
        and c.this.name.lower() == "run_id" and isinstance(c.expression, exp.Placeholder)
        for c in _conjuncts(where.this)
    ):
        return None
    aggregate = any(e.find(exp.AggFunc) is not None for e in select.expressions)
    return aggregate, args.get("group") is not None, args.get("order") is not None


def _same_run(join: object) -> bool:
    """True for `[INNER | LEFT] JOIN table USING (run_id, ...)`: it pairs rows of one run only,
    so over the chunk each run is joined as it is alone."""
    from sqlglot import exp

    assert isinstance(join, exp.Join)
    return (isinstance(join.this, exp.Table) and not any(v for k, v in join.args.items() if k not in ("this", "using", "kind", "side"))
            and (join.args.get("kind") or "INNER").upper() == "INNER" and (join.args.get("side") or "LEFT").upper() == "LEFT"
            and any(i.name.lower() == "run_id" for i in join.args.get("using") or []))


def _positional(term: object) -> bool:
    """True for an ORDER BY or GROUP BY term that names a column by its place (1, ALL)."""
    from sqlglot import exp

    if isinstance(term, exp.Ordered):
        term = term.this
    return isinstance(term, exp.Literal) or (isinstance(term, (exp.Column, exp.Var)) and term.name.upper() == "ALL")


def _conjuncts(node: object) -> list[object]:
    """The terms of a chain of ANDs (a single term: itself)."""
    from sqlglot import exp

    if isinstance(node, exp.And):
        return _conjuncts(node.this) + _conjuncts(node.expression)
    return [node]


def spans(table: pa.Table) -> dict[str, tuple[int, int]]:
    """{run: (first row, row after its last)} of a chunk form's answer, ordered by RUN."""
    if table.num_rows == 0:
        return {}
    encoded = table.column(RUN).combine_chunks().dictionary_encode(null_encoding="encode")
    runs, codes = encoded.dictionary.to_pylist(), to_numpy(encoded.indices)
    starts = np.flatnonzero(np.concatenate([[True], codes[1:] != codes[:-1]]))
    ends = np.append(starts[1:], len(codes))
    return {str(runs[codes[a]]): (int(a), int(b)) for a, b in zip(starts.tolist(), ends.tolist())}
