"""A query over a root that reads only some run_ids opens only those runs' files.

rlprobe.store.scope proves from the SQL which run_ids a query can read; the views then list
only those runs' folders. The answer must be exactly what the whole root gives: narrowing is
only ever allowed to skip rows the query's own WHERE clause throws away.
"""

from __future__ import annotations

import re
import shutil
from pathlib import Path

import pytest

from conftest import make_run
from rlprobe.store import open_store
from rlprobe.store.scope import run_ids_read


@pytest.mark.parametrize("sql, expected", [
    ("SELECT * FROM steps WHERE run_id = 'a'", {"a"}),
    ("SELECT * FROM v1.steps WHERE 'a' = run_id AND step > 3", {"a"}),
    ("SELECT * FROM steps WHERE run_id IN ('a', 'b')", {"a", "b"}),
    ("EXPLAIN ANALYZE SELECT count(*) FROM samples WHERE run_id = 'a'", {"a"}),
    ("SELECT s.step FROM steps s JOIN samples x ON x.step = s.step WHERE s.run_id = 'a' AND x.run_id = 'b'", {"a", "b"}),
    ("WITH w AS (SELECT * FROM steps WHERE run_id = 'a') SELECT * FROM w", {"a"}),
    ("SELECT (SELECT max(step) FROM steps WHERE run_id = 'b') FROM runs WHERE run_id = 'a'", {"a", "b"}),
    ("SELECT 1 AS one", set()),
])
def test_what_a_query_provably_reads(sql: str, expected: set[str]) -> None:
    assert run_ids_read(sql) == frozenset(expected)


@pytest.mark.parametrize("sql, params, expected", [
    ("SELECT * FROM steps WHERE run_id = $run_id", {"run_id": "a"}, frozenset({"a"})),
    ("SELECT * FROM steps WHERE run_id = $2 AND step > $1", [3, "b"], frozenset({"b"})),
    ("SELECT * FROM steps WHERE run_id = ?", ["c"], frozenset({"c"})),
    ("SELECT * FROM steps WHERE run_id = ? AND step > ?", ["c", 3], None),  # which ? is which: not guessed
    ("SELECT * FROM steps WHERE run_id = $run_id", {"other": "a"}, None),
    ("SELECT * FROM steps WHERE run_id = $run_id", {"run_id": 7}, None),
])
def test_parameters_bound_to_text_count_as_that_text(sql: str, params: object, expected: frozenset[str] | None) -> None:
    assert run_ids_read(sql, params) == expected


@pytest.mark.parametrize("sql", [
    "SELECT * FROM steps",
    "SELECT * FROM steps WHERE run_id = 'a' OR step > 3",                      # not a conjunct
    "SELECT * FROM steps WHERE run_id LIKE 'a%'",
    "SELECT * FROM steps WHERE run_id = ?",                                     # a parameter, unknown here
    "SELECT * FROM steps s JOIN samples x USING (step) WHERE s.run_id = 'a'",   # samples unfiltered
    "SELECT * FROM steps s JOIN samples x USING (run_id) WHERE run_id = 'a'",   # unqualified with two sources
    "SELECT (SELECT max(step) FROM steps) FROM runs WHERE run_id = 'a'",        # the subquery reads everything
    "SELECT * FROM (SELECT * FROM steps) WHERE run_id = 'a'",                   # the inner scan is unfiltered
    "SELECT * FROM steps WHERE run_id IN (SELECT run_id FROM runs)",
    "SELECT * FROM other_db.steps WHERE run_id = 'a'",
    "SELECT * FROM my_own_table",
    "SELECT * FROM steps s JOIN my_view m USING (step) WHERE s.run_id = 'a'",  # my_view may read steps
    "SET VARIABLE x = 1",
    "SELECT 1; SELECT * FROM steps WHERE run_id = 'a'",
    "this is not sql",
])
def test_what_it_cannot_prove_reads_everything(sql: str) -> None:
    assert run_ids_read(sql) is None


def files_read(store, sql: str) -> int:
    plan = "\n".join(row[1] for row in store.rows("EXPLAIN ANALYZE " + sql)[2])
    return sum(int(n.replace(",", "")) for n in re.findall(r"Total Files Read:\s*([\d,]+)", plan))


def test_a_run_id_filter_opens_one_runs_files(root_of_many: Path) -> None:
    store = open_store(root_of_many)
    one = files_read(store, "SELECT max(reward_mean) FROM steps WHERE run_id = 'many-042'")
    every = files_read(store, "SELECT max(reward_mean) FROM steps WHERE run_id LIKE 'many-042'")
    assert one <= 3, f"read {one} files for one run"  # its steps.parquet and manifest
    assert every >= 300
    assert store.rows("SELECT max(reward_mean), count(*) FROM steps WHERE run_id = 'many-042'")[2] == [(42.0, 3)]


@pytest.mark.parametrize("sql", [
    "SELECT run_id, step, reward_mean FROM steps WHERE run_id IN ('run1', 'run0') ORDER BY ALL",
    "SELECT run_id, sample_id FROM samples WHERE run_id = 'run1' ORDER BY ALL",
    "SELECT run_id, kind, timestamp FROM events WHERE run_id = 'run2' ORDER BY ALL",
    "SELECT run_id, status, steps_recorded, last_step FROM runs WHERE run_id = 'run2'",
    "SELECT run_id, algorithm FROM manifest WHERE run_id = 'run0'",
    "SELECT count(*) FROM steps WHERE run_id = 'no-such-run'",
])
def test_a_scoped_query_answers_what_the_whole_root_answers(nested_root: Path, sql: str) -> None:
    scoped = open_store(nested_root)
    assert scoped.scope_for(sql) is not None or "no-such-run" in sql
    whole = open_store(nested_root).con.sql(sql).fetchall()  # the connection itself never narrows
    assert scoped.rows(sql)[2] == whole
    assert whole or "no-such-run" in sql


def test_runs_known_only_by_folder_name_are_never_skipped(nested_root: Path) -> None:
    # a copy of run1 without its manifest: its run_id is its folder name, 'run1-copy'
    shutil.copytree(nested_root / "a" / "run1", nested_root / "elsewhere" / "run1-copy")
    (nested_root / "elsewhere" / "run1-copy" / "manifest.json").unlink()
    # a run whose manifest does not parse: its run_id is its folder name too
    make_run(nested_root / "bad" / "run3", 2, state="closed")
    (nested_root / "bad" / "run3" / "manifest.json").write_text("{not json")
    store = open_store(nested_root)
    assert store.scope_for("SELECT * FROM steps WHERE run_id = 'run1-copy'") is None
    assert store.rows("SELECT count(*) FROM steps WHERE run_id = 'run1-copy'")[2] == [(5,)]
    assert store.scope_for("SELECT * FROM steps WHERE run_id = 'run3'") == [str(nested_root / "bad" / "run3")]
    assert store.rows("SELECT count(*) FROM steps WHERE run_id = 'run3'")[2] == [(2,)]


def test_a_view_of_the_users_own_is_never_narrowed(nested_root: Path) -> None:
    store = open_store(nested_root)
    store.con.execute("CREATE TEMP VIEW all_steps AS SELECT * FROM steps")
    sql = "SELECT count(*) FROM all_steps"
    assert store.scope_for(sql) is None
    assert store.rows(sql)[2] == [(12,)]
    both = "SELECT (SELECT count(*) FROM all_steps) AS n, count(*) AS m FROM steps WHERE run_id = 'run0'"
    assert store.scope_for(both) is None
    assert store.rows(both)[2] == [(12, 4)]


def test_the_scope_lasts_one_query(nested_root: Path) -> None:
    store = open_store(nested_root)
    assert store.rows("SELECT count(*) FROM steps WHERE run_id = 'run0'")[2] == [(4,)]
    assert store.rows("SELECT count(*) FROM steps")[2] == [(12,)]


def test_folder_names_with_glob_characters_are_literal(tmp_path: Path) -> None:
    root = tmp_path / "runs"
    make_run(root / "sweep[lr=1e-5]", 3, state="closed", run_id="lr-small")
    make_run(root / "sweep[lr=1e-4]", 4, state="closed", run_id="lr-big")
    store = open_store(root)
    assert store.rows("SELECT count(*) FROM steps WHERE run_id = 'lr-small'")[2] == [(3,)]
    assert store.rows("SELECT count(*) FROM steps WHERE run_id = 'lr-big'")[2] == [(4,)]
