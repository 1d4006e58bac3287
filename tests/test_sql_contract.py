"""The contract of the SQL files under sql/: headers, the split between engine-specific sources
and portable views, and agreement with rlprobe.schemas (the recording format in code).

The files are read straight from the checkout with a parser of this test's own, so a header the
loader (rlprobe.store.sqlfiles) happened to tolerate still fails here.
"""

from __future__ import annotations

import re
from pathlib import Path

import duckdb
import pytest
import sqlglot
from sqlglot import exp

from rlprobe.schemas import EVENT_COLUMN_TYPES, SAMPLE_COLUMN_TYPES, STEP_COLUMN_TYPES
from rlprobe.store import sqlfiles
from rlprobe.store.engine import Target, init_script

from conftest import make_run

SQL_DIR = Path(__file__).resolve().parents[1] / "sql"
SQL_FILES = sorted(SQL_DIR.rglob("*.sql"))
REQUIRED_KEYS = ("name", "kind", "depends", "doc", "columns")
FILE_READERS = re.compile(r"\b(read_\w+|glob|parquet_scan|parquet_metadata|parquet_schema|sniff_csv)\s*\(", re.I)
PUBLIC_VIEWS = ("steps", "samples", "events", "runs", "manifest", "rollout_events", "batch_age")


def header_and_body(path: Path) -> tuple[dict[str, list[str]], str]:
    """The leading `-- key: value` lines (blank lines allowed) and the SQL after them."""
    header: dict[str, list[str]] = {}
    lines = path.read_text(encoding="utf-8").splitlines()
    i = 0
    while i < len(lines):
        line = lines[i]
        match = re.match(r"^--\s*([a-z_]+):\s?(.*)$", line)
        if match:
            header.setdefault(match.group(1), []).append(match.group(2).strip())
        elif line.strip():
            break
        i += 1
    return header, "\n".join(lines[i:])


def strip_comments(sql: str) -> str:
    """SQL without -- comments (string literals here never contain '--')."""
    return "\n".join(line.split("--", 1)[0] for line in sql.splitlines())


def rel(path: Path) -> str:
    return str(path.relative_to(SQL_DIR))


def test_there_are_sql_files() -> None:
    names = {rel(p) for p in SQL_FILES}
    assert {f"v1/views/{v}.sql" for v in PUBLIC_VIEWS} <= names
    assert any(n.startswith("v1/sources/") for n in names)


@pytest.mark.parametrize("path", SQL_FILES, ids=rel)
def test_every_file_has_a_full_header(path: Path) -> None:
    header, body = header_and_body(path)
    missing = [k for k in REQUIRED_KEYS if not header.get(k) or not " ".join(header[k]).strip()]
    assert not missing, f"{rel(path)}: header lacks {missing} (needs '-- key: value' lines for {REQUIRED_KEYS})"
    assert len(header["name"]) == 1 and len(header["kind"]) == 1, f"{rel(path)}: one name and one kind"
    assert re.fullmatch(r"[a-z_][a-z0-9_]*", header["name"][0]), header["name"]
    assert body.strip(), f"{rel(path)}: no SQL after the header"


@pytest.mark.parametrize("path", SQL_FILES, ids=rel)
def test_kind_matches_the_folder(path: Path) -> None:
    kind = header_and_body(path)[0]["kind"][0]
    folder = path.parent.name
    if folder == "sources":
        assert kind == "source", f"{rel(path)} is under sources/ but says kind: {kind}"
    if folder == "views":
        assert kind == "view", f"{rel(path)} is under views/ but says kind: {kind}"
    if kind == "source":
        assert folder == "sources", f"{rel(path)}: kind 'source' belongs under sources/"
    if kind == "view":
        assert folder == "views", f"{rel(path)}: kind 'view' belongs under views/"
    assert (kind == "query") == (folder == "queries"), f"{rel(path)}: kind 'query' and the queries/ folder go together"


def test_names_are_unique_per_version() -> None:
    seen: dict[tuple[str, str], str] = {}
    for path in SQL_FILES:
        version = path.relative_to(SQL_DIR).parts[0]
        name = header_and_body(path)[0]["name"][0]
        assert (version, name) not in seen, f"{rel(path)} and {seen[(version, name)]} are both named {name}"
        seen[(version, name)] = rel(path)


VIEW_FILES = [p for p in SQL_FILES if p.parent.name == "views"]
QUERY_FILES = [p for p in SQL_FILES if p.parent.name == "queries"]
NON_SOURCE_FILES = [p for p in SQL_FILES if p.parent.name != "sources"]


@pytest.mark.parametrize("path", VIEW_FILES, ids=rel)
def test_a_view_file_is_one_create_view_of_its_own_name(path: Path) -> None:
    header, body = header_and_body(path)
    statements = [s for s in sqlglot.parse(body, read="duckdb") if s is not None]
    assert len(statements) == 1, f"{rel(path)}: {len(statements)} statements, expected one CREATE VIEW"
    (create,) = statements
    assert isinstance(create, exp.Create) and create.kind == "VIEW", f"{rel(path)}: not a CREATE VIEW"
    version = path.relative_to(SQL_DIR).parts[0]
    assert create.this.sql(dialect="duckdb") == f"{version}.{header['name'][0]}"
    assert path.stem == header["name"][0]
    assert len(re.findall(r"\bCREATE\b", strip_comments(body), re.I)) == 1


@pytest.mark.parametrize("path", QUERY_FILES, ids=rel)
def test_a_query_file_is_one_select_named_like_the_file(path: Path) -> None:
    header, body = header_and_body(path)
    statements = [s for s in sqlglot.parse(body, read="duckdb") if s is not None]
    assert len(statements) == 1 and isinstance(statements[0], exp.Query), f"{rel(path)}: expected one SELECT"
    assert path.stem == header["name"][0]


@pytest.mark.parametrize("path", NON_SOURCE_FILES, ids=rel)
def test_only_sources_read_files(path: Path) -> None:
    body = strip_comments(header_and_body(path)[1])
    found = FILE_READERS.findall(body)
    assert not found, f"{rel(path)} calls {found}: reading files is the sources' job (sql/*/sources/)"
    functions = {f.name.lower() for f in sqlglot.parse_one(body, read="duckdb").find_all(exp.Anonymous)}
    functions |= {type(f).__name__.lower() for f in sqlglot.parse_one(body, read="duckdb").find_all(exp.Func)}
    assert not {f for f in functions if f.startswith("read") or f in ("glob", "readparquet", "readcsv")}, functions


def test_sources_are_where_files_are_read() -> None:
    readers = {rel(p) for p in SQL_FILES if p.parent.name == "sources" and FILE_READERS.search(strip_comments(p.read_text()))}
    assert {"v1/sources/30_src_steps.sql", "v1/sources/30_src_samples.sql", "v1/sources/30_src_events.sql"} <= readers


def _defined(body: str) -> set[str]:
    return set(re.findall(r"CREATE\s+(?:OR\s+REPLACE\s+)?(?:VIEW|MACRO|TABLE)\s+v\d+\.(\w+)", body, re.I))


@pytest.mark.parametrize("path", SQL_FILES, ids=rel)
def test_depends_names_what_the_file_uses(path: Path) -> None:
    """Every v1.<object> the SQL uses is defined by a file its header depends on, directly or
    through another dependency (that is what orders the init script)."""
    version = path.relative_to(SQL_DIR).parts[0]
    siblings = [p for p in SQL_FILES if p.relative_to(SQL_DIR).parts[0] == version]
    owner: dict[str, str] = {}
    deps_of: dict[str, set[str]] = {}
    for p in siblings:
        h, b = header_and_body(p)
        deps_of[h["name"][0]] = _depends(h)
        for obj in _defined(strip_comments(b)):
            owner[obj] = h["name"][0]
    header, body = header_and_body(path)
    body = strip_comments(body)
    direct = _depends(header)
    unknown = {d for d in direct if d not in deps_of}
    assert not unknown, f"{rel(path)} depends on {sorted(unknown)}, which no file defines"
    reachable: set[str] = set()
    todo = list(direct)
    while todo:
        name = todo.pop()
        if name not in reachable:
            reachable.add(name)
            todo += deps_of.get(name, set())
    used = set(re.findall(rf"\b{version}\.(\w+)", body)) - _defined(body)
    needed = {owner.get(obj, f"<undefined {obj}>") for obj in used}
    assert needed <= reachable, f"{rel(path)} uses {sorted(used)} from {sorted(needed)}; its header depends on {sorted(direct)}"


def _depends(header: dict[str, list[str]]) -> set[str]:
    names = {d.strip() for d in " ".join(header["depends"]).split(",")}
    return {d for d in names if d and not d.startswith(("(", "variable "))}


def _template_columns(path: Path) -> dict[str, str]:
    body = strip_comments(header_and_body(path)[1])
    pairs = re.findall(r"CAST\(NULL AS ([A-Z\[\]]+)\) AS \"?([\w.]+)\"?", body)
    return {name: type_ for type_, name in pairs}


INTERNAL = {"filename", "file_row_number", "empty"}


@pytest.mark.parametrize("file, expected", [
    ("20_step_columns.sql", STEP_COLUMN_TYPES),
    ("20_sample_columns.sql", SAMPLE_COLUMN_TYPES),
    ("20_event_columns.sql", EVENT_COLUMN_TYPES),
])
def test_column_templates_match_the_schemas(file: str, expected: dict[str, str]) -> None:
    path = SQL_DIR / "v1" / "sources" / file
    got = {k: v for k, v in _template_columns(path).items() if k not in INTERNAL}
    assert got == expected, (
        f"{file} and rlprobe.schemas disagree: only in the SQL {sorted(set(got) - set(expected))}, "
        f"only in schemas.py {sorted(set(expected) - set(got))}, "
        f"types differ {sorted(k for k in set(got) & set(expected) if got[k] != expected[k])}")
    header_cols = [c.strip() for c in " ".join(header_and_body(path)[0]["columns"]).split(",")]
    assert [c for c in header_cols if c not in INTERNAL] == list(expected), f"{file}: the header's columns line"


@pytest.fixture(scope="module")
def empty_con(tmp_path_factory: pytest.TempPathFactory) -> duckdb.DuckDBPyConnection:
    """Every view created over an empty folder: the fixed columns, no rows."""
    con = duckdb.connect()
    con.execute(init_script(Target(tmp_path_factory.mktemp("nothing"), "root")))
    return con


def _describe(con: duckdb.DuckDBPyConnection, view: str) -> dict[str, str]:
    return dict(con.sql(f"SELECT column_name, column_type FROM (DESCRIBE {view})").fetchall())


@pytest.mark.parametrize("view, expected", [
    ("v1.step_columns", STEP_COLUMN_TYPES), ("v1.sample_columns", SAMPLE_COLUMN_TYPES), ("v1.event_columns", EVENT_COLUMN_TYPES),
])
def test_column_templates_have_the_schema_types_in_duckdb(empty_con: duckdb.DuckDBPyConnection, view: str, expected: dict[str, str]) -> None:
    got = {k: v for k, v in _describe(empty_con, view).items() if k not in INTERNAL}
    assert got == expected


@pytest.mark.parametrize("view", PUBLIC_VIEWS)
def test_every_view_exposes_run_id(empty_con: duckdb.DuckDBPyConnection, view: str) -> None:
    for name in (view, f"v1.{view}"):
        cols = _describe(empty_con, name)
        assert cols.get("run_id") == "VARCHAR", f"{name}: {cols}"
        assert list(cols)[0] == "run_id", f"{name}: run_id should come first"
    header = header_and_body(SQL_DIR / "v1" / "views" / f"{view}.sql")[0]
    assert " ".join(header["columns"]).startswith("run_id VARCHAR")


@pytest.mark.parametrize("view", ["events", "runs", "manifest"])
def test_a_fixed_views_header_lists_its_columns_exactly(empty_con: duckdb.DuckDBPyConnection, view: str) -> None:
    header = header_and_body(SQL_DIR / "v1" / "views" / f"{view}.sql")[0]
    listed = [c.strip().rsplit(" ", 1) for c in " ".join(header["columns"]).split(",")]
    assert [(name, type_) for name, type_ in listed] == list(_describe(empty_con, view).items())


def test_the_loader_sees_the_same_files_in_a_working_order() -> None:
    assert sqlfiles.versions() == [1]
    loaded = sqlfiles.load(1)
    assert {f.path.resolve() for f in loaded} == {p.resolve() for p in SQL_FILES if p.relative_to(SQL_DIR).parts[0] == "v1"}
    position = {f.name: i for i, f in enumerate(loaded)}
    for f in loaded:
        for dep in f.depends:
            assert position[dep] < position[f.name], f"{f.name} runs before its dependency {dep}"
    assert sorted(f.name for f in sqlfiles.public_views(1)) == sorted(PUBLIC_VIEWS)


def test_the_init_script_binds_the_root_once_and_aliases_the_newest_views(tmp_path: Path) -> None:
    script = init_script(Target(tmp_path, "root"))
    assert script.count("SET VARIABLE rlprobe_root") == 1
    assert f"'{tmp_path}'" in script
    for view in PUBLIC_VIEWS:
        assert f"CREATE OR REPLACE VIEW main.{view} AS SELECT * FROM v1.{view};" in script
    for path in SQL_FILES:
        if path.relative_to(SQL_DIR).parts[0] != "v1":
            continue  # other trees (sql/records/) have their own loader and never join the run views
        if path.parent.name == "queries":
            assert header_and_body(path)[1].strip() not in script, f"{rel(path)} is a query, not part of the views"
            continue
        assert header_and_body(path)[1].strip() in script, f"{rel(path)} is not in the init script"


FEATURE_FILES = [p for p in SQL_FILES if p.parent.name == "detectors"]


@pytest.fixture(scope="module")
def run_con(tmp_path_factory: pytest.TempPathFactory) -> duckdb.DuckDBPyConnection:
    """Every view, the doctor's features too, over a finished run with steps, samples and events."""
    run_dir = tmp_path_factory.mktemp("run") / "r"
    make_run(run_dir, 40, samples_per_step=4)
    con = duckdb.connect()
    con.execute(init_script(Target(run_dir, "run")))
    return con


@pytest.mark.parametrize("path", FEATURE_FILES, ids=rel)
def test_a_feature_views_header_gives_its_columns_and_their_types(run_con: duckdb.DuckDBPyConnection, path: Path) -> None:
    """The detectors read the features by the types their headers declare (a count DuckDB widens
    to HUGEINT, or a DECIMAL literal, reaches Python as a Decimal and Spark as another type)."""
    header, body = header_and_body(path)
    view = re.search(r"\bCREATE\s+(?:OR\s+REPLACE\s+)?VIEW\s+(\w+\.\w+)", body, re.I).group(1)  # type: ignore[union-attr]
    declared = " ".join(" ".join(header["columns"]).split())
    got = ", ".join(f"{name} {type_}" for name, type_ in _describe(run_con, view).items())
    assert got == declared, rel(path)
