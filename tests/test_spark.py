"""rlprobe's views on Spark: the transpiled SQL (no Spark needed) and, with a local pyspark
session, the same queries on DuckDB and on Spark over one root, compared row for row.

The Spark tests are skipped only when Java or pyspark is missing; .ci/run installs pyspark.
"""

from __future__ import annotations

import json
import math
import random
import re
import shutil
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest
import sqlglot

from rlprobe.spark.dialect import RlprobeSpark
from rlprobe.spark.transpile import NotTranspilable, portable_files, transpile_file
from rlprobe.store import sqlfiles


def spark_sql(duckdb_sql: str) -> str:
    return sqlglot.transpile(duckdb_sql, read="duckdb", write=RlprobeSpark)[0]


# --- the dialect's fixes, one by one: what sqlglot's Spark dialect alone gets wrong -----------
# (title, DuckDB input, expected Spark SQL)
DIALECT_CASES = [
    ("median over a window frame: exact percentile, which Spark allows with a frame",
     "SELECT median(x) OVER (PARTITION BY r ORDER BY i ROWS BETWEEN 10 PRECEDING AND 10 FOLLOWING) FROM t",
     "SELECT PERCENTILE(x, 0.5) OVER (PARTITION BY r ORDER BY i NULLS LAST ROWS BETWEEN 10 PRECEDING AND 10 FOLLOWING) FROM t"),
    ("median aggregate: exact",
     "SELECT median(x) FROM t",
     "SELECT PERCENTILE(x, 0.5) FROM t"),
    ("list_median: sorted NULL-free list, middle element(s)",
     "SELECT list_median([a, b, c]) FROM t",
     "SELECT ELEMENT_AT(TRANSFORM(ARRAY(ARRAY_SORT(FILTER(ARRAY(a, b, c), v -> v IS NOT NULL))), s -> "
     "CASE WHEN SIZE(s) = 0 THEN NULL WHEN SIZE(s) % 2 = 1 THEN s[SIZE(s) DIV 2] "
     "ELSE (s[SIZE(s) DIV 2 - 1] + s[SIZE(s) DIV 2]) / 2 END), 1) FROM t"),
    ("list_sum: NULLs skipped, NULL for an empty list",
     "SELECT list_sum(l) FROM t",
     "SELECT AGGREGATE(FILTER(l, v -> v IS NOT NULL), CAST(NULL AS DOUBLE), (acc, v) -> COALESCE(acc, 0) + v) FROM t"),
    ("max(x, n): the n largest values",
     "SELECT max(x, 2) FROM t",
     "SELECT SLICE(SORT_ARRAY(COLLECT_LIST(x), FALSE), 1, 2) FROM t"),
    ("isinf", "SELECT isinf(x) FROM t", "SELECT ABS(x) = CAST('Infinity' AS DOUBLE) FROM t"),
    ("isfinite (NaN < Infinity is false in Spark)", "SELECT isfinite(x) FROM t",
     "SELECT ABS(x) < CAST('Infinity' AS DOUBLE) FROM t"),
    ("isnan of NULL is NULL, as in DuckDB", "SELECT isnan(x) FROM t",
     "SELECT IF(x IS NULL, NULL, ISNAN(x)) FROM t"),
    ("hash: 64-bit", "SELECT hash(a, b) FROM t", "SELECT XXHASH64(a, b) FROM t"),
    ("two unnests in one select list: one generator, lists paired by position",
     "SELECT r, hash(unnest(l)) AS w, unnest(range(10)) AS pos FROM t",
     "SELECT r, XXHASH64(_unnested._u0) AS w, _unnested._u1 AS pos FROM t "
     "LATERAL VIEW INLINE(ARRAYS_ZIP(l, IF((CAST(10 AS BIGINT) - 1) < CAST(0 AS BIGINT), ARRAY(), "
     "SEQUENCE(CAST(0 AS BIGINT), (CAST(10 AS BIGINT) - 1))))) _unnested AS _u0, _u1"),
    ("one top-level unnest stays a plain explode",
     "SELECT unnest(l) AS x FROM t", "SELECT EXPLODE(l) AS x FROM t"),
    ("ORDER BY: DuckDB sorts NULLs last, Spark first; sqlglot makes it explicit",
     "SELECT lag(a) OVER (ORDER BY a), lag(a) OVER (ORDER BY b DESC) FROM t",
     "SELECT LAG(a) OVER (ORDER BY a NULLS LAST), LAG(a) OVER (ORDER BY b DESC) FROM t"),
    ("row_number: BIGINT as in DuckDB (Spark's is an INT)",
     "SELECT row_number() OVER w AS i FROM t WINDOW w AS (PARTITION BY r ORDER BY s)",
     "SELECT CAST(ROW_NUMBER() OVER w AS BIGINT) AS i FROM t WINDOW w AS (PARTITION BY r ORDER BY s NULLS LAST)"),
    ("range(n): a BIGINT list as in DuckDB",
     "SELECT range(n) FROM t",
     "SELECT IF((CAST(n AS BIGINT) - 1) < CAST(0 AS BIGINT), ARRAY(), SEQUENCE(CAST(0 AS BIGINT), (CAST(n AS BIGINT) - 1))) FROM t"),
    ("avg: a DOUBLE, also of DECIMAL values (Spark would round to a DECIMAL)",
     "SELECT avg(CASE WHEN p THEN 1.0 ELSE 0.0 END) FROM t",
     "SELECT AVG(CAST(CASE WHEN p THEN 1.0 ELSE 0.0 END AS DOUBLE)) FROM t"),
    ("UNPIVOT: both engines drop NULL values by default",
     "SELECT * FROM t UNPIVOT (value FOR metric IN (a, b))",
     "SELECT * FROM t UNPIVOT(value FOR metric IN (a, b))"),
]


@pytest.mark.parametrize("title,duckdb,expected", DIALECT_CASES, ids=[c[0].split(":")[0] for c in DIALECT_CASES])
def test_dialect_fix(title: str, duckdb: str, expected: str) -> None:
    assert spark_sql(duckdb) == expected, title


def _file(name: str) -> sqlfiles.SqlFile:
    return next(f for f in sqlfiles.load(1) if f.name == name)


def test_len_of_a_list_is_size_and_len_of_a_string_stays_length() -> None:
    schema = {"v1_steps": {"run_id": "VARCHAR", "step": "BIGINT", "kl_positional": "DOUBLE[]"}}
    sql = transpile_file(_file("feat_policy_kl_positional"), schema).select
    assert "CAST(ARRAY_SIZE(v1_steps.kl_positional) AS BIGINT) >= 2" in sql
    assert "LENGTH(" not in sql
    # a CTE column the type annotator cannot type (string_split) is followed to its definition
    samples = {"v1_samples": {"run_id": "VARCHAR", "step": "BIGINT", "sample_id": "VARCHAR",
                              "completion_text": "VARCHAR", "truncated": "BOOLEAN", "completion_len": "BIGINT"}}
    sql = transpile_file(_file("feat_gen_text_repetition"), samples).select
    assert "CAST(ARRAY_SIZE(texts.words) AS BIGINT) >= 8" in sql and "LENGTH(texts.words)" not in sql


def test_a_double_cast_to_an_integer_rounds_half_to_even_as_in_duckdb(tmp_path: Path) -> None:
    path = tmp_path / "casts.sql"
    path.write_text("-- name: casts\n-- kind: view\nCREATE VIEW v1.casts AS SELECT CAST(x AS BIGINT) AS a, "
                    "CAST(floor(x) AS BIGINT) AS b, CAST(n AS BIGINT) AS c FROM v1.t;\n")
    sql = transpile_file(sqlfiles.parse(path, 1), {"v1_t": {"x": "DOUBLE", "n": "INTEGER"}}).select
    assert "CAST(BROUND(v1_t.x) AS BIGINT) AS a" in sql
    assert "CAST(FLOOR(v1_t.x) AS BIGINT) AS b" in sql and "CAST(v1_t.n AS BIGINT) AS c" in sql


def test_star_exclude_is_expanded_against_the_root_columns_and_names_are_rewritten() -> None:
    src = {"step": "BIGINT", "reward_mean": "DOUBLE", "reward_component.format": "DOUBLE",
           "rec_dir": "VARCHAR", "run_dir": "VARCHAR", "rank": "BIGINT", "filename": "VARCHAR"}
    schema = {"v1_src_steps": src, "v1_src_manifest": {"run_dir": "VARCHAR", "run_id": "VARCHAR"}}
    sql = transpile_file(_file("steps"), schema).select
    assert "EXCEPT" not in sql and "EXCLUDE" not in sql and "rec_dir AS" not in sql
    assert "s.`reward_component.format` AS `reward_component.format`" in sql
    assert "FROM v1_src_steps AS s" in sql and "v1." not in sql


def test_a_materialized_cte_and_an_unordered_row_number_become_spark_sql(tmp_path: Path) -> None:
    path = tmp_path / "numbered.sql"
    path.write_text("-- name: numbered\n-- kind: view\nCREATE VIEW v1.numbered AS WITH c AS MATERIALIZED "
                    "(SELECT a, b FROM v1.t) SELECT *, row_number() OVER () AS i FROM c;\n")
    sql = transpile_file(sqlfiles.parse(path, 1), {"v1_t": {"a": "BIGINT", "b": "VARCHAR"}}).select
    assert "MATERIALIZED" not in sql
    # any order numbers the rows, and Spark wants one: the other columns give every scan the same
    assert "ROW_NUMBER() OVER (ORDER BY c.a NULLS LAST, c.b NULLS LAST)" in sql


def test_only_portable_files_are_transpiled() -> None:
    files, skipped = portable_files(1)
    names = {f.name for f in files}
    assert {"steps", "samples", "events", "runs", "manifest", "doctor_features"} <= names
    assert all(f.kind in ("view", "feature") for f in files)
    assert "rollout_events" in names and "batch_age" in names
    assert skipped == []


def test_a_view_reading_files_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "bad.sql"
    path.write_text("-- name: bad\n-- kind: view\nCREATE VIEW v1.bad AS SELECT getvariable('x') AS x;\n")
    with pytest.raises(NotTranspilable, match="getvariable"):
        transpile_file(sqlfiles.parse(path, 1), {})


# --- the same queries on DuckDB and on Spark -------------------------------------------------

def _spark_available() -> str | None:
    if shutil.which("java") is None:
        return "Java is not installed"
    try:
        import pyspark  # noqa: F401
    except ImportError:
        return "pyspark is not installed"
    return None


needs_spark = pytest.mark.skipif(_spark_available() is not None, reason=str(_spark_available()))


@pytest.fixture(scope="module")
def root(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Three finished synthetic runs and one live run, with the states the sources must handle."""
    from rlprobe import Recorder
    from rlprobe.synth import write_run

    root = tmp_path_factory.mktemp("spark") / "runs"
    write_run(root / "team" / "healthy", "healthy:steady", n_steps=240, seed=1)
    write_run(root / "grad", "GRAD_PATHOLOGY", n_steps=200, seed=2)
    write_run(root / "rep", "REPETITION_SPIRAL", n_steps=200, seed=3)
    rec = Recorder(root / "live", algorithm="grpo", capture_env=False)
    for s in range(30):
        rec.log_step(s, reward_mean=0.1 * s, grad_norm=1.0 + s % 3, loss=float("nan") if s == 7 else 0.5,
                     kl_positional=[0.1, 0.2, 0.05 * s], my_metric=float(s))  # step 4: a tie for the top bucket
        rec.log_samples(s, [{"prompt_text": "p", "completion_text": f"a b c d e f g h {s}", "reward_total": s % 4,
                             "completion_len": 9, "group_id": "g"} for _ in range(4)], select=False)
    rec.log_step(12, reward_mean=99.0)  # a step logged twice: both rows stay until close()
    rec.log_event("checkpoint", step=10, message="saved", path="x")
    assert rec.flush()
    rec.log_step(30, reward_mean=3.0, late_metric=1.0)  # a column that only the second part has
    assert rec.flush()
    # the instant of a compaction: steps.parquet renamed in, a part not yet removed
    (root / "grad" / "steps").mkdir()
    shutil.copy(next((root / "live" / "steps").glob("part-*.parquet")), root / "grad" / "steps" / "part-000000.parquet")
    # a torn last line of a killed writer
    with open(root / "live" / "events.jsonl", "a", encoding="utf-8") as fh:
        fh.write('{"timestamp": 1.0, "kind": "chec')
    # a rank sub-recording: samples and events merge into the run, with the folder's rank
    (root / "rep" / "rank-001" / "samples").mkdir(parents=True)
    shutil.copy(root / "rep" / "samples" / "shard-00000.parquet", root / "rep" / "rank-001" / "samples" / "shard-00000.parquet")
    (root / "rep" / "rank-001" / "events.jsonl").write_text('{"timestamp": 5.0, "kind": "note", "data": {"a": [1, 2]}}\n')
    # rollout traces: two runs of an async controller, written by RolloutTrace
    write_controller_trace(root / "team" / "healthy" / "rollout_trace.jsonl", steps=6)
    write_controller_trace(root / "live" / "rollout_trace.jsonl", steps=3)
    with open(root / "live" / "rollout_trace.jsonl", "a", encoding="utf-8") as fh:
        fh.write('{"t": 1800000009.5, "run_id": "x", "event": "rollout_se')  # the torn line of a killed writer
    # a trace of another tool in a folder of its own (no recording): odd values of every kind
    write_odd_trace(root / "other-tool" / "rollout_trace.jsonl")
    return root


def write_controller_trace(path: Path, steps: int) -> None:
    """An async GRPO controller's trace: two groups of two calls per step, a refit cutting the
    calls still running, an abandoned call, a discarded group, a restored call, a checkpoint."""
    from rlprobe.rollouts import RolloutTrace

    with RolloutTrace(path) as trace:
        version = 0
        for step in range(steps):
            calls = [(f"a{step}.{g}.{k}", f"g{step}.{g}", 2 * step + g, k) for g in range(2) for k in range(2)]
            for attempt, group, prompt, k in calls:  # prompt ids are numbers: the views show '4'
                trace.emit("rollout_dispatch", attempt_id=attempt, group_id=group, prompt_id=prompt,
                           generation_index=k, version=version)
            trace.emit("refit", replaced_version=version, new_version=version + 1,
                       calls=[[calls[1][0], 12], [calls[3][0], 0]])
            version += 1
            for i, (attempt, *_rest) in enumerate(calls):
                trace.emit("rollout_seal", attempt_id=attempt, tokens=20 + 7 * i + step)
            if step == 2:
                trace.emit("rollout_abandon", attempt_id=calls[0][0], reason="timeout")
                trace.emit("rollout_seal", attempt_id=calls[2][0], tokens=30.5)  # not a whole number: no count
                trace.emit("group_discard", group_id="g-lost", prompt_id=99)
                trace.emit("rollout_resume", attempt_id="r0", group_id=calls[0][1], prompt_id=0,
                           generation_index=0, version=0, tokens=16)
            trace.emit("group_publish", group_id=calls[0][1], step=step)
            # the second group says its tokens itself; 2.0 is a whole number, "1.5" is not
            trace.emit("group_publish", group_id=calls[2][1], step=step,
                       tokens_by_version={str(version - 1): 30, str(version): 2.0, "1.5": 4})
            trace.emit("train_step", step=step, trained_version=version)
            trace.emit("weight_sync", version=version + 1)
            version += 1
        trace.emit("checkpoint_publish", step=steps - 1, path=str(path.parent / "ckpt"))


def write_odd_trace(path: Path) -> None:
    """Lines of every odd kind the source must type or drop exactly as DuckDB does."""
    from test_rollouts import fuzz_trace  # random traces with ids as numbers, counts as text, ...

    path.parent.mkdir(parents=True)
    events = [e for seed in range(3) for e in fuzz_trace(random.Random(seed))]
    lines = [json.dumps(e) for e in events]
    lines[5:5] = [
        "", "  ", "[1, 2]", '"text"', '{"event": 17}', '{"event": null}', '{"no_event": "x"}',
        '{"event": "refit"}] trailing', '{"event": "refit"}, {"event": "refit"}', '{"event": "x"} {"event": "y"}',
        '{"event": "refit", "calls": "[[\\"a0\\", 3]]", "tokens_by_version": "{\\"1\\": 2}"}',
        '{"event": "refit", "calls": [["a0", 3], "[\\"a1\\", 4]", ["a2", "5"], ["a3"], null, [7, 8.0], ["a4", 1e3]]}',
        '{"event": "group_publish", "step": "3", "tokens_by_version": {"1": null, "2": [1], "3": "4", "x": 1}}',
        '{"event": "train_step", "step": 9223372036854775807, "trained_version": 1e300, "t": "1.5"}',
        '{"event": "rollout_seal", "attempt_id": {"nested": [1, true]}, "tokens": 9007199254740993}',
        '{"event": "rollout_seal", "attempt_id": "\\u00e9\\"q", "tokens": -0.0, "path": null}',
    ]
    # Windows line ends on the first lines, a file without a final newline
    path.write_bytes(("\r\n".join(lines[:8]) + "\r\n" + "\n".join(lines[8:])).encode())


@pytest.fixture(scope="module")
def duck(root: Path) -> Any:
    from rlprobe.store import open_store

    store = open_store(root)
    store.con.execute("\n".join(f.text for f in sqlfiles.load(1) if f.kind == "feature"))
    return store.con


@pytest.fixture(scope="module")
def spark(root: Path) -> Any:
    from pyspark.sql import SparkSession

    from rlprobe.spark import register_views

    session = (
        SparkSession.builder.master("local[1]").appName("rlprobe-tests")
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.sql.shuffle.partitions", "2")
        .config("spark.driver.bindAddress", "127.0.0.1")
        .config("spark.driver.host", "127.0.0.1")
        .config("spark.sql.session.timeZone", "UTC")
        .getOrCreate()
    )
    session.sparkContext.setLogLevel("ERROR")
    register_views(session, root)
    yield session
    session.stop()


def _norm(value: Any, json_col: bool) -> Any:
    if json_col and isinstance(value, str):
        return ("json", json.dumps(json.loads(value), sort_keys=True))
    if isinstance(value, Decimal):
        return float(value)
    if isinstance(value, float) and math.isnan(value):
        return "NaN"
    if isinstance(value, (list, tuple)):  # a Spark Row (a struct) is a tuple too
        return tuple(_norm(v, False) for v in value)
    if isinstance(value, dict):  # a DuckDB struct: its fields in order
        return tuple(_norm(v, False) for v in value.values())
    return value


def _type(duckdb_type: str) -> str:
    """A column type up to what the engines legitimately spell differently."""
    t = duckdb_type.upper()
    if t == "INT":
        return "INTEGER"  # one type, two spellings
    if t in ("VARCHAR", "TEXT", "JSON", "STRING"):
        return "STRING"  # Spark has no JSON type: JSON columns are JSON text
    if t == "HUGEINT":
        return "BIGINT"  # DuckDB widens sum() of integers to 128 bits; Spark keeps BIGINT
    if t.startswith("DECIMAL"):
        return "DECIMAL"  # VALUES literals: precision differs, values are compared below
    if t.endswith("[]") and not t.startswith("STRUCT("):  # lists (runs.tags): the same rule for the element
        return _type(t[:-2]) + "[]"
    if t.startswith("STRUCT("):  # lists of structs (rollout_events.calls): the same rule inside
        fields = re.findall(r'"?(\w+)"? (\w+)', t)
        return "STRUCT(" + ", ".join(f"{n.lower()} {_type(k)}" for n, k in fields) + ")" + t[t.rindex(")") + 1:]
    return t


def _sort_key(row: tuple[Any, ...]) -> tuple[Any, ...]:
    # rounded so that float noise in a sort column cannot pair the wrong rows
    return tuple((v is None, 0, round(v, 6), "") if isinstance(v, float) else (v is None, 1, 0.0, str(v)) for v in row)


def _rows(columns: list[str], rows: list[tuple[Any, ...]], json_cols: set[str]) -> list[tuple[Any, ...]]:
    out = [tuple(_norm(v, c in json_cols) for v, c in zip(row, columns)) for row in rows]
    return sorted(out, key=_sort_key)


def _same(a: Any, b: Any) -> bool:
    if isinstance(a, float) and isinstance(b, float):
        return a == b or math.isclose(a, b, rel_tol=1e-9, abs_tol=1e-9)
    if isinstance(a, tuple) and isinstance(b, tuple):
        return len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b))
    if isinstance(a, float) and isinstance(b, int) or isinstance(a, int) and isinstance(b, float):
        return math.isclose(a, b, rel_tol=1e-12)
    return a == b


# (id, query with {v} for the contract's schema: 'v1.' on DuckDB, 'v1_' on Spark, JSON columns)
QUERIES = [
    ("steps", "SELECT * FROM steps", {}),
    ("samples", "SELECT * FROM samples", {}),
    ("events", "SELECT * FROM events", {"data"}),
    ("manifest", "SELECT * FROM manifest", {"trainer_config", "environment"}),
    ("runs", "SELECT * EXCLUDE (last_write_at) FROM runs", {}),
    ("runs_last_write", "SELECT run_id, last_write_at FROM runs", {}),
    ("steps_per_run", "SELECT run_id, count(*) AS n, count(DISTINCT step) AS d, max(step) AS last, "
                      "sum(reward_mean) AS r FROM steps GROUP BY run_id", {}),
    ("doctor_bin_width", "SELECT * FROM {v}doctor_bin_width", {}),
    ("doctor_series", "SELECT * FROM {v}doctor_series", {}),
    ("doctor_binned", "SELECT * FROM {v}doctor_binned", {}),
    ("doctor_baseline", "SELECT * FROM {v}doctor_baseline", {}),
    ("doctor_features", "SELECT * FROM {v}doctor_features", {}),
    ("doctor_metric_floors", "SELECT * FROM {v}doctor_metric_floors", {}),
    ("feat_reward_noise", "SELECT * FROM {v}feat_reward_noise", {}),
    ("feat_reward_samples", "SELECT * FROM {v}feat_reward_samples", {}),
    ("feat_opt_grad_spikes", "SELECT * FROM {v}feat_opt_grad_spikes", {}),
    ("feat_opt_nonfinite", "SELECT * FROM {v}feat_opt_nonfinite", {}),
    ("feat_opt_offpolicy", "SELECT * FROM {v}feat_opt_offpolicy", {}),
    ("feat_policy_kl_positional", "SELECT * FROM {v}feat_policy_kl_positional", {}),
    ("feat_gen_text_repetition", "SELECT * FROM {v}feat_gen_text_repetition", {}),
    ("rollout_events", "SELECT * FROM rollout_events", {}),  # data: the same text, not only the same JSON
    ("rollout_events_per_run", "SELECT run_id, event, count(*) AS n, sum(tokens) AS tokens, max(seq) AS last_line "
                               "FROM rollout_events GROUP BY run_id, event", {}),
    ("batch_age", "SELECT * FROM batch_age", {}),
]


def test_every_transpiled_view_is_compared() -> None:
    compared = {q[0] for q in QUERIES}
    files, _ = portable_files(1)
    for f in files:
        view = sqlglot.parse_one(f.sql, read="duckdb").this.name
        assert view in compared, f"{view} is transpiled for Spark but no test compares it with DuckDB"


@needs_spark
@pytest.mark.parametrize("name,query,json_cols", QUERIES, ids=[q[0] for q in QUERIES])
def test_spark_equals_duckdb(duck: Any, spark: Any, name: str, query: str, json_cols: set[str]) -> None:
    rel = duck.sql(query.format(v="v1."))
    d_cols, d_rows = rel.columns, rel.fetchall()
    # Spark has no SELECT * EXCLUDE: list the columns, the same ones
    sp_query = query.format(v="v1_")
    if "EXCLUDE" in sp_query:
        sp_query = "SELECT " + ", ".join(f"`{c}`" for c in d_cols) + " FROM " + sp_query.rsplit("FROM ", 1)[1]
    df = spark.sql(sp_query)
    s_cols, s_rows = df.columns, [tuple(r) for r in df.collect()]
    assert d_rows, f"{name}: the DuckDB side is empty, the comparison would prove nothing"
    # fixed columns in the same order; extra metric columns ("extra.<name>") may come in another
    # order (each engine unions file schemas in its own order), so rows are compared by name
    assert sorted(s_cols) == sorted(d_cols)
    fixed = [c for c in d_cols if "." not in c]
    assert [c for c in s_cols if "." not in c] == fixed
    from rlprobe.spark import column_types

    s_types = column_types(df)
    d_types = dict(zip(d_cols, (str(t) for t in rel.types)))
    assert {c: _type(t) for c, t in s_types.items()} == {c: _type(t) for c, t in d_types.items()}
    order = [s_cols.index(c) for c in d_cols]
    s_rows = [tuple(r[i] for i in order) for r in s_rows]
    d_norm, s_norm = _rows(d_cols, d_rows, json_cols), _rows(d_cols, s_rows, json_cols)
    assert len(s_norm) == len(d_norm), f"{name}: {len(s_norm)} rows on Spark, {len(d_norm)} on DuckDB"
    for d, s in zip(d_norm, s_norm):
        assert _same(d, s), f"{name}: DuckDB {d} != Spark {s}"


@needs_spark
def test_rollout_trace_lines_on_spark(spark: Any) -> None:
    def rows(sql: str) -> list[tuple[Any, ...]]:
        return [tuple(r) for r in spark.sql(sql).collect()]

    # lines 6-15 of the odd trace are not one JSON object with a string event: dropped, and the
    # lines after them keep their line numbers
    odd = "FROM rollout_events WHERE run_id = 'other-tool' AND seq BETWEEN 5 AND 21 ORDER BY seq"
    assert [r[0] for r in rows(f"SELECT seq {odd}")] == [5, 16, 17, 18, 19, 20, 21]
    calls = dict(rows(f"SELECT seq, calls {odd}"))
    assert calls[16] is None  # the string "[[...]]" is not a list of calls
    # elements that are not [id, whole count] pairs are left out; ids are text
    assert [tuple(c) for c in calls[17]] == [("a0", 3), ("a2", 5), ("7", 8), ("a4", 1000)]
    assert rows("SELECT count(*) FROM rollout_events WHERE trace_run_id = 'x'") == [(0,)]  # the torn line
    assert rows("SELECT tokens FROM rollout_events WHERE event = 'rollout_seal' AND data LIKE '%30.5%'") == [(None,)] * 2
    # prompt ids written as numbers read as text, as in DuckDB
    assert rows("SELECT DISTINCT prompt_id FROM rollout_events WHERE event = 'rollout_dispatch' "
                "AND group_id IN ('g0.0', 'g0.1') ORDER BY 1") == [("0",), ("1",)]


def test_batch_age_is_a_chain_of_views_one_per_cte(duck: Any) -> None:
    """Spark would plan each reference to a CTE on its own (about 1,400 scans of the trace in
    one plan): each CTE becomes a temp view of its own, cached, which the later ones read."""
    schema = {f"v1_{n}": {r[0]: r[1] for r in duck.sql(f"DESCRIBE v1.{n}").fetchall()} for n in ("src_rollout_trace", "src_manifest")}
    view = transpile_file(_file("batch_age"), schema)
    parts = [name for name, _select in view.parts]
    assert parts[:4] == ["v1_batch_age__ev", "v1_batch_age__refit_calls", "v1_batch_age__defs", "v1_batch_age__ends"]
    assert parts[-1] == "v1_batch_age__latest" and len(parts) == 22
    statements = view.statements
    assert statements[:2] == [f"CREATE OR REPLACE TEMPORARY VIEW v1_batch_age__ev AS\n{view.parts[0][1]}",
                              "CACHE LAZY TABLE v1_batch_age__ev"]
    assert statements[-1].startswith("CREATE OR REPLACE TEMPORARY VIEW v1_batch_age AS")
    assert "FROM v1_batch_age__latest AS l" in view.select and "WITH" not in view.select
    every = "\n".join(statements)
    assert "WITH" not in every and "MATERIALIZED" not in every and "OVER ()" not in every and "QUALIFY" not in every
    assert "LATERAL VIEW" in every and "EXPLODE(x.calls) u AS c" in every
    # a correlated subquery reads the part too, under the CTE's alias
    ends = dict(view.parts)["v1_batch_age__ends"]
    assert "FROM v1_batch_age__ev AS x" in ends and "FROM v1_batch_age__defs AS d" in ends
    # only the CTEs are renamed: the sources keep their views
    assert "FROM v1_src_rollout_trace AS" in view.parts[0][1] and "JOIN v1_src_manifest AS m" in view.select


def test_cli_prints_the_spark_views(root: Path) -> None:
    from click.testing import CliRunner

    from rlprobe.cli import cli

    result = CliRunner().invoke(cli, ["sql", str(root), "--dialect", "spark"])
    assert result.exit_code == 0, result.output
    assert "CREATE OR REPLACE TEMPORARY VIEW v1_doctor_features AS" in result.output
    assert "CREATE OR REPLACE TEMPORARY VIEW steps AS SELECT * FROM v1_steps;" in result.output
    # the live run's extra metric is a column of this root, quoted for Spark
    assert "s.`extra.my_metric` AS `extra.my_metric`" in result.output
    assert "read_parquet" not in result.output and "EXCLUDE" not in result.output
    assert "CREATE OR REPLACE TEMPORARY VIEW rollout_events AS SELECT * FROM v1_rollout_events;" in result.output
    assert "-- left out" not in result.output
    # batch_age: its CTEs first, each a cached view, then the view over them
    out = result.output
    assert out.index("CACHE LAZY TABLE v1_batch_age__ev;") < out.index("CREATE OR REPLACE TEMPORARY VIEW v1_batch_age AS")
    assert "CREATE OR REPLACE TEMPORARY VIEW v1_batch_age__latest AS" in out
    duckdb_script = CliRunner().invoke(cli, ["sql", str(root)]).output
    assert duckdb_script.startswith("-- rlprobe") and "SET VARIABLE rlprobe_root" in duckdb_script


@needs_spark
def test_a_root_without_samples_or_events_still_has_every_view(spark: Any, tmp_path: Path) -> None:
    from rlprobe import Recorder
    from rlprobe.spark import register_views

    with Recorder(tmp_path / "only", capture_env=False) as rec:
        for s in range(20):
            rec.log_step(s, loss=1.0 / (s + 1))
    (tmp_path / "only" / "events.jsonl").unlink()
    session = spark.newSession()  # its own temp views: the module's root stays registered
    names = register_views(session, tmp_path)
    assert {"steps", "samples", "events", "runs", "manifest", "rollout_events", "v1_doctor_features",
            "batch_age", "v1_batch_age__ev", "v1_batch_age__latest"} <= set(names)
    assert session.sql("SELECT count(*) FROM samples").collect()[0][0] == 0
    assert session.sql("SELECT count(*) FROM events").collect()[0][0] == 0
    assert session.sql("SELECT count(*) FROM rollout_events").collect()[0][0] == 0
    assert session.sql("SELECT count(*) FROM batch_age").collect()[0][0] == 0  # its parts are empty too
    assert session.table("samples").columns[:4] == ["run_id", "rank", "step", "sample_id"]
    row = session.sql("SELECT count(*), count(kl_positional), count(loss) FROM steps").collect()[0]
    assert tuple(row) == (20, 0, 20)
    assert session.sql("SELECT status, steps_recorded FROM runs").collect()[0] == ("closed", 20)


@needs_spark
def test_a_newer_recording_format_fails_the_query(spark: Any, tmp_path: Path) -> None:
    from rlprobe.spark import sources

    run = tmp_path / "future"
    run.mkdir()
    (run / "manifest.json").write_text(json.dumps({"schema_version": 2, "run_id": "x"}))
    (tmp_path / "ok").mkdir()
    (tmp_path / "ok" / "manifest.json").write_text("{not json")
    with pytest.raises(Exception, match="upgrade rlprobe"):
        sources.manifest(spark, str(tmp_path)).collect()
    (run / "manifest.json").unlink()
    rows = sources.manifest(spark, str(tmp_path)).collect()
    assert [(r.run_dir.endswith("/ok"), r.manifest_ok, r.run_id) for r in rows] == [(True, False, None)]


# Each fix of the dialect, run: the same SELECT on both engines over the same small table,
# with the values that tell the semantics apart (NULL, NaN, inf, ties, even/odd lengths).
FIXES_TABLE = """(VALUES
    (1, 2.5::DOUBLE, [1.0, NULL, 3.0]::DOUBLE[], 'a b  c'),
    (1, -2.5::DOUBLE, [4.0, 2.0]::DOUBLE[], ''),
    (1, 2.7::DOUBLE, []::DOUBLE[], NULL),
    (2, 'NaN'::DOUBLE, [NULL]::DOUBLE[], 'x'),
    (2, 'Infinity'::DOUBLE, ['NaN'::DOUBLE, 1.0, 0.0]::DOUBLE[], 'y y'),
    (2, NULL, NULL, 'z')) AS t(g, x, l, s)"""
FIXES = [
    ("casts", "SELECT g, x, CAST(x AS BIGINT) AS r FROM {t} WHERE abs(x) < 10"),
    ("finite", "SELECT g, x, isnan(x) AS a, isinf(x) AS b, isfinite(x) AS c FROM {t}"),
    ("lists", "SELECT g, l, list_median(l) AS m, list_sum(l) AS s, len(l) AS n, len(s) AS chars FROM {t}"),
    ("list_of_a_literal", "SELECT g, list_median([x, x + 1, NULL]) AS m FROM {t} WHERE isfinite(x)"),
    ("top_n", "SELECT g, max(x, 2) AS top2, median(x) AS med, avg(CASE WHEN x > 0 THEN 1.0 ELSE 0.0 END) AS f "
              "FROM {t} WHERE isfinite(x) GROUP BY g"),
    ("sliding_median", "SELECT x, median(x) OVER (ORDER BY x ROWS BETWEEN 1 PRECEDING AND 1 FOLLOWING) AS m, "
                       "row_number() OVER (ORDER BY x) AS i FROM {t} WHERE isfinite(x)"),
    ("sliding_quantile", "SELECT x, quantile_cont(x, 0.75) OVER (ORDER BY x ROWS BETWEEN 2 PRECEDING AND 2 FOLLOWING) AS q "
                         "FROM {t} WHERE isfinite(x)"),
    ("parallel_unnest", "SELECT g, s, unnest(string_split(s, ' ')) AS w, unnest(range(len(string_split(s, ' ')))) AS p "
                        "FROM {t} WHERE s IS NOT NULL"),
]


@needs_spark
@pytest.mark.parametrize("name,query", FIXES, ids=[f[0] for f in FIXES])
def test_each_fix_gives_duckdbs_answer_on_spark(spark: Any, tmp_path: Path, name: str, query: str) -> None:
    import duckdb

    from rlprobe.spark import column_types

    path = tmp_path / "fix.sql"
    path.write_text(f"-- name: fix\n-- kind: view\nCREATE VIEW v1.fix AS {query.format(t=FIXES_TABLE)};\n")
    rel = duckdb.sql(query.format(t=FIXES_TABLE))
    d_cols, d_rows = rel.columns, rel.fetchall()
    df = spark.sql(transpile_file(sqlfiles.parse(path, 1), {}).select)
    assert df.columns == d_cols
    assert {c: _type(t) for c, t in column_types(df).items()} == {c: _type(str(t)) for c, t in zip(d_cols, rel.types)}
    d_norm, s_norm = _rows(d_cols, d_rows, set()), _rows(d_cols, [tuple(r) for r in df.collect()], set())
    assert len(d_norm) == len(s_norm) and all(_same(d, s) for d, s in zip(d_norm, s_norm)), (d_norm, s_norm)
