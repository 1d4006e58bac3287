"""Wide recordings (thousands of extra.* metrics) stay usable: a query reads only the columns
it names.

A 30-step run with 10,000 metric names took 9.9 s to query: every layer of the views carried
every column. When a query provably needs only some (rlprobe.store.scope.columns_read), the
sources read only those (the variable rlprobe_columns), and the answer is the same.
"""

from __future__ import annotations

import pytest

from conftest import make_run
from rlprobe.store import open_store, scope

EXTRAS = tuple(f"m{i:04d}" for i in range(1500))

QUERIES = [
    "SELECT step, loss, \"extra.m0007\" FROM steps ORDER BY step",
    "SELECT count(*), max(\"extra.m1499\") FROM steps",
    "WITH s AS (SELECT step, \"extra.m0042\" AS x FROM steps) SELECT sum(x) FROM s",
    "SELECT s.step, s.reward_mean, r.status FROM steps AS s JOIN runs AS r USING (run_id) ORDER BY step",
    "SELECT step, \"extra.m0003\" FROM steps WHERE step IN (SELECT step FROM samples) ORDER BY step",
    "SELECT sample_id, reward_total FROM samples ORDER BY sample_id",
]


@pytest.fixture(scope="module", params=["closed", "live"])
def wide_run(request, tmp_path_factory):
    run = tmp_path_factory.mktemp("wide") / "run"
    writer = make_run(run, 12, extra=EXTRAS, state=request.param, steps_per_part=3, samples_per_step=2)
    if request.param == "live":  # a step logged again: the narrowed read still merges it
        writer.write_steps([{"step": 4, "loss": -4.0, "extra.m0007": -7.0}])
    return run


@pytest.mark.parametrize("sql", QUERIES)
def test_a_narrowed_query_answers_as_the_full_one(wide_run, sql, monkeypatch):
    narrowed = open_store(wide_run)
    assert narrowed.columns_for(sql) is not None, "this query names its columns: it must be narrowed"
    got = narrowed.rows(sql)
    monkeypatch.setattr(scope, "columns_read", lambda sql: None)
    assert got == open_store(wide_run).rows(sql)


def test_the_pattern_names_only_what_the_query_needs(wide_run):
    store = open_store(wide_run)
    pattern = store.columns_for('SELECT step, "extra.m0007" FROM steps')
    assert pattern is not None

    def matches(name: str) -> bool:  # as DuckDB's COLUMNS() matches it
        return store.con.sql("SELECT regexp_matches(?, ?)", params=[name, pattern]).fetchall()[0][0]

    assert matches("extra.m0007") and matches("step") and matches("filename") and matches("loss")
    assert not matches("extra.m0008") and not matches("extra.m00070") and not matches("extraxm0007")


@pytest.mark.parametrize("sql", ["SELECT * FROM steps", "SELECT COLUMNS('extra.*') FROM steps", "SELECT t.* FROM steps t",
                                 "SELECT * FROM batch_age", "SELECT step FROM my_table"])
def test_a_query_that_may_need_every_column_is_not_narrowed(sql):
    assert scope.columns_read(sql) is None


def test_runs_reads_only_the_step_columns_it_needs(wide_run):
    assert open_store(wide_run).rows("SELECT steps_recorded FROM runs")[2] == [(12,)]


def test_describe_still_lists_every_column(wide_run):
    columns = [c for (c, _) in open_store(wide_run).rows("SELECT column_name, column_type FROM (DESCRIBE v1.steps)")[2]]
    assert "extra.m1499" in columns and "extra.m0000" in columns
