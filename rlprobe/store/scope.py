"""Which runs a query can read, so that the views list and open only those runs' files.

A filter on run_id cannot reach the file list by itself: every source makes its per-file choice
(compacted file over parts, newest shard copy) over one materialized scan, and DuckDB does not
push a filter on a computed column through it. So before a query over a root, rlprobe reads the
query with sqlglot; when every reference to one of its views is filtered by run_id equal to (or
IN) string literals, the variable rlprobe_scope is set to those runs' directories for that one
query (sql/v1/sources/00_paths.sql). Anything it cannot prove reads the whole root, as before:
the scope only ever narrows what the query's own WHERE clause would have thrown away.
"""

from __future__ import annotations

import re
from functools import lru_cache
from typing import Any, Callable, Iterable, Mapping, Optional, Sequence

_EXPLAIN = re.compile(r"^\s*EXPLAIN(\s+ANALYZE)?\s+", re.I)
# A star that selects every column (SELECT *, SELECT DISTINCT *, a, *, t.*): such a query needs
# every column, which the text says without a parse. A match in a string or a comment (LIKE 'a.*')
# only leaves that query's columns unnarrowed, as a parse would leave COLUMNS('extra.*').
_STAR = re.compile(r"(?:\bselect\s+(?:distinct\s+)?|,\s*|\.)\*", re.I)


@lru_cache(maxsize=1)
def _view_names() -> frozenset[str]:
    """Every view and source rlprobe creates (the names a query may read the root through)."""
    from rlprobe.store import sqlfiles

    names = set()
    for version in sqlfiles.versions():
        names.update(f.name.lower() for f in sqlfiles.load(version) if f.kind in ("source", "view", "feature"))
    return frozenset(names)


def mentions(sql: str, names: Iterable[str]) -> bool:
    """Whether one of names (lowercase) occurs anywhere in sql's text, in any case.

    The look before a parse: sqlglot costs ~140 ms to import, once per process, and a query
    whose text holds none of rlprobe's view names reads none of them, so there is nothing to
    scope or narrow (`SELECT 1`, a query of the user's own tables). A name inside a longer word,
    a string or a comment only sends the query on to the parser, which decides as before.
    """
    text = sql.lower()
    return any(name in text for name in names)


def mentions_a_view(sql: str) -> bool:
    """Whether sql's text names one of rlprobe's views or sources at all (see mentions)."""
    return mentions(sql, _view_names())


def _literal_run_ids(condition: object, alias: str, only_source: bool, bound: Callable[[object], Optional[str]]) -> Optional[set[str]]:
    """The run_ids a WHERE conjunct pins the source alias to, or None if it does not."""
    from sqlglot import exp

    def is_run_id(node: object) -> bool:
        return (
            isinstance(node, exp.Column)
            and node.name.lower() == "run_id"
            and (node.table.lower() == alias.lower() if node.table else only_source)
        )

    def text(node: object) -> Optional[str]:
        if isinstance(node, exp.Placeholder):
            return bound(node)
        return node.this if isinstance(node, exp.Literal) and node.is_string else None

    if isinstance(condition, exp.EQ):
        left, right = condition.this, condition.expression
        if is_run_id(right):
            left, right = right, left
        value = text(right)
        if is_run_id(left) and value is not None:
            return {value}
    if isinstance(condition, exp.In) and is_run_id(condition.this) and not condition.args.get("query"):
        values = [text(v) for v in condition.expressions]
        if values and all(v is not None for v in values):
            return set(values)  # type: ignore[arg-type]
    return None


def _conjuncts(where: object) -> list[object]:
    from sqlglot import exp

    if where is None:
        return []
    condition = where.this if isinstance(where, exp.Where) else where
    return list(condition.flatten()) if isinstance(condition, exp.And) else [condition]


def _binder(statement: object, params: Any) -> Callable[[object], Optional[str]]:
    """The text value a placeholder stands for: $name from a mapping, $N or a lone ? from a sequence."""
    from sqlglot import exp

    placeholders = list(statement.find_all(exp.Placeholder))  # type: ignore[attr-defined]

    def bound(node: object) -> Optional[str]:
        name = getattr(node, "this", None)
        value: Any = None
        if isinstance(params, Mapping) and isinstance(name, str) and not name.isdigit():
            value = params.get(name)
        elif isinstance(params, Sequence) and not isinstance(params, (str, bytes)):
            if isinstance(name, str) and name.isdigit() and 1 <= int(name) <= len(params):
                value = params[int(name) - 1]
            elif name is None and len(placeholders) == 1 and len(params) == 1:
                value = params[0]  # with several ?, which is which would depend on the parser's walk
        return value if isinstance(value, str) else None

    return bound


def run_ids_read(sql: str, params: Any = None) -> Optional[frozenset[str]]:
    """The run_ids sql can read through rlprobe's views, or None when that cannot be proved.

    Proved means: one SELECT statement (EXPLAIN and EXPLAIN ANALYZE of one too) that reads no
    table but rlprobe's views and sources, and every such reference, in every subquery and CTE,
    sits in a SELECT whose WHERE has a top-level conjunct run_id = '<text>' or
    run_id IN ('<text>', ...) on that reference. A parameter bound to text counts as that text
    ($name, $1, or the only ? of the query). A query that reads no view at all is not narrowed.
    """
    import sqlglot
    from sqlglot import exp
    from sqlglot.errors import SqlglotError
    from sqlglot.optimizer.scope import traverse_scope

    try:
        statements = sqlglot.parse(_EXPLAIN.sub("", sql, count=1), read="duckdb")
    except SqlglotError:
        return None
    if len(statements) != 1 or not isinstance(statements[0], exp.Query):
        return None
    views = _view_names()
    bound = _binder(statements[0], params)
    found: set[str] = set()
    try:
        scopes = traverse_scope(statements[0])
    except (SqlglotError, RecursionError):
        return None
    for scope in scopes:
        selected = scope.selected_sources
        for alias, (_, source) in selected.items():
            if not isinstance(source, exp.Table):
                continue  # a CTE or a subquery: its own scope is checked in turn
            if source.name.lower() not in views:
                return None  # a table or view of the user's: it may read rlprobe's views itself
            if source.catalog or (source.db and not re.fullmatch(r"v\d+|main", source.db, re.I)):
                return None  # another database's table of the same name: not ours to reason about
            where = scope.expression.args.get("where") if isinstance(scope.expression, exp.Select) else None
            pinned = None
            for conjunct in _conjuncts(where):
                pinned = _literal_run_ids(conjunct, alias, len(selected) == 1, bound)
                if pinned is not None:
                    break
            if pinned is None:
                return None
            found |= pinned
    return frozenset(found)


def scope_dirs(dirs_by_run_id: dict[str, list[str]], run_ids: Iterable[str]) -> Optional[list[str]]:
    """The run directories that hold run_ids, or None if one of them has no directory with a
    manifest (it may be a run known only by its folder name: read everything)."""
    out: set[str] = set()
    for run_id in set(run_ids):
        dirs = dirs_by_run_id.get(run_id)
        if not dirs:
            return None
        out.update(dirs)
    if any(not _is_absolute(d) for d in out):
        return None  # a directory the views could not parse ('' would glob from /): read everything
    return sorted(out)


def _is_absolute(path: str) -> bool:
    return path.startswith("/") and path.rstrip("/") != "" or re.match(r"^[A-Za-z][A-Za-z0-9+.\-]*://.", path) is not None


# The views whose step and sample columns come from src_steps and src_samples alone (a query
# that reads only these, by name, needs no other column of the files).
_NARROWABLE_VIEWS = frozenset({"steps", "samples", "events", "runs", "manifest"})
# Columns the sources themselves need, whatever the query reads.
_SOURCE_COLUMNS = frozenset({"step", "rank", "sample_id", "filename", "file_row_number", "empty"})


def columns_read(sql: str) -> Optional[frozenset[str]]:
    """Every column name sql mentions, when that provably covers what it reads of the views'
    step and sample columns; None when it may need them all.

    Proved means: one query (EXPLAIN of one too) that reads nothing but rlprobe's public views
    (steps, samples, events, runs, manifest) and its own CTEs, with no star outside count(*)
    and no COLUMNS(...). Every name is kept, whichever table it belongs to: a name the files do
    not have matches nothing, so a larger set only costs nothing. A query whose text names none
    of those views, or selects a star, is None before sqlglot loads: it has no view columns to
    narrow, or needs them all.
    """
    if not mentions(sql, _NARROWABLE_VIEWS) or _STAR.search(sql):
        return None
    import sqlglot
    from sqlglot import exp
    from sqlglot.errors import SqlglotError

    try:
        statements = sqlglot.parse(_EXPLAIN.sub("", sql, count=1), read="duckdb")
    except (SqlglotError, RecursionError):
        return None
    if len(statements) != 1 or not isinstance(statements[0], exp.Query):
        return None
    query = statements[0]
    if any(node.key in ("describe", "summarize", "show", "pragma", "command") for node in query.walk()):
        return None  # DESCRIBE v1.steps and the like list every column: all of them are needed
    ctes = {cte.alias_or_name.lower() for cte in query.find_all(exp.CTE)}
    for table in query.find_all(exp.Table):
        name = table.name.lower()
        if isinstance(table.this, exp.Func) or table.catalog:
            return None
        if name in ctes and not table.db:
            continue
        if name not in _NARROWABLE_VIEWS or (table.db and not re.fullmatch(r"v\d+|main", table.db, re.I)):
            return None
    return _names_of(query)


def names_mentioned(sql: str) -> Optional[frozenset[str]]:
    """Every name one SELECT mentions, when it reads no column it does not name (no star outside
    count(*), no COLUMNS(...)); None when it may read them all or cannot be read.

    Unlike columns_read, the tables it reads are not checked: the doctor asks this of a custom
    detector, whose SQL may read the doctor's feature views, which are built over the columns
    the doctor copies and name their own.
    """
    import sqlglot
    from sqlglot import exp
    from sqlglot.errors import SqlglotError

    try:
        statements = [s for s in sqlglot.parse(sql, read="duckdb") if s is not None]
    except (SqlglotError, RecursionError):
        return None
    if len(statements) != 1 or not isinstance(statements[0], exp.Query):
        return None
    return _names_of(statements[0])


def _names_of(query: Any) -> Optional[frozenset[str]]:
    from sqlglot import exp

    for star in query.find_all(exp.Star):
        if not isinstance(star.parent, exp.Count):
            return None
    for func in query.find_all(exp.Func):
        if func.sql_name().lower() == "columns" or (isinstance(func, exp.Anonymous) and func.name.lower() == "columns"):
            return None
    # every identifier, not only columns: USING (x) names a column too, and extra names are harmless
    return frozenset(i.name for i in query.find_all(exp.Identifier) if i.name)


def columns_pattern(names: Iterable[str], fixed: Iterable[str], prefixes: Iterable[str] = ()) -> str:
    """A regular expression (RE2) matching exactly the given column names, the fixed columns,
    the ones the sources need and every name that starts with one of prefixes; every character
    outside [A-Za-z0-9_] is written \\x{..}."""
    wanted = sorted(set(names) | set(fixed) | _SOURCE_COLUMNS)
    escape = lambda text: "".join(ch if ch.isascii() and (ch.isalnum() or ch == "_") else f"\\x{{{ord(ch):x}}}" for ch in text)  # noqa: E731
    return "^(" + "|".join([escape(n) for n in wanted] + [escape(p) + ".*" for p in sorted(set(prefixes))]) + ")$"
