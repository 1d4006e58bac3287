"""Where the doctor's views point: at a recording, at a copy of one run, a chunk of runs, a live tick.

The detectors and the feature views (sql/v*/detectors/) read v1.steps and v1.samples by name.
What those names stand for changes with what is being diagnosed: the recording's files, a
sorted in-memory copy of them (read once, queried many times), the copy narrowed to one run of
a chunk, tables held in memory (diagnose_tables), or a live watcher's tables narrowed to the rows
a tick changed. This module is the one place that re-points them; everything else asks it to.
A copy holds the step columns the doctor reads (step_columns), not every extra.* metric, and
the samples without their text (LEFT_OUT): a statement that reads text sees the recording's
samples instead (SampleText), read from the files where a step filter reaches the scan.
The copy narrowed to one run of a chunk widens to the whole chunk when the run is unset
(_IN_RUN): a detector's statement about its run is then asked once for every run of the chunk
(RootSession.ask, in the form rlprobe.doctor.batch gives it).
"""

from __future__ import annotations

import re
from contextlib import contextmanager
from functools import lru_cache
from typing import Any, Iterable, Iterator

import duckdb
import pyarrow as pa

from rlprobe.doctor import batch
from rlprobe.doctor.context import by_run
from rlprobe.errors import QueryError
from rlprobe.schemas import SAMPLE_COLUMN_TYPES, STEP_COLUMN_TYPES
from rlprobe.store import sample_files, scope, sqlfiles
from rlprobe.store.engine import new_connection, run

# the views the detectors read, and the order their copies are kept in (a per-run filter then
# skips other runs' row groups; a copy of one run's samples is kept in the files' order, as
# sorting a constant key would only cost memory)
ORDER = {"steps": "run_id, step", "samples": "run_id"}

# The sample columns the doctor's copy leaves out: each rollout's text, nearly all of a run's
# sample bytes (800k samples of a few hundred characters are over a gigabyte in memory), which
# most detectors never read. The few statements that do (the n-gram repetition of completions
# when a run logs no repetition_rate, the share of distinct completions, a custom detector or a
# report that names them) read them from the recording's files (SampleText).
TEXT_COLUMNS = ("prompt_text", "completion_text", "completion_token_ids")
# Left out as well, and read the same way: the columns no built-in detector reads. group_id and
# capture_reason are strings, and rank is worked out per row from the file's folder; on 800k
# samples they were a quarter of the copy's time (0.48 -> 0.34 s of CPU).
LEFT_OUT = (*TEXT_COLUMNS, "group_id", "capture_reason", "rank")

_TEXT = re.compile(r"\b(" + "|".join(LEFT_OUT) + r")\b", re.IGNORECASE)
_VIEW = re.compile(r"\bVIEW\s+v1\.(\w+)", re.IGNORECASE)
_COUNT_STAR = re.compile(r"\bcount\s*\(\s*\*\s*\)", re.IGNORECASE)
_ALL_COLUMNS = re.compile(r"\*|\bcolumns\s*\(", re.IGNORECASE)

# The step columns the doctor reads besides the fixed ones: every reward component (the
# detectors bin them all, whatever the run calls them). extra.* columns are the run's own
# metrics, which no built-in detector reads; a run may log thousands of them.
STEP_PREFIXES = ("reward_component.",)


def step_columns(custom_sql: Iterable[str] = ()) -> str | None:
    """The pattern (for the variable rlprobe_columns) of the step columns the doctor copies: the
    fixed columns, every reward component, and each name a custom detector's SQL mentions;
    None (every column) when one of those may read a column it does not name (a star).

    A recording with ten thousand extra.* metrics is then copied as one with a few dozen.
    """
    names: set[str] = set()
    for sql in custom_sql:
        mentioned = scope.names_mentioned(sql)
        if mentioned is None:
            return None
        names |= mentioned
    return scope.columns_pattern(names, STEP_COLUMN_TYPES, STEP_PREFIXES)


@lru_cache(maxsize=None)
def text_views() -> frozenset[str]:
    """The doctor's feature views (v1.<name>) that read sample text, directly or through another."""
    features = [f.sql for f in sqlfiles.load(max(sqlfiles.versions())) if f.kind == "feature"]
    found: set[str] = set()
    while True:
        names = {m.group(1) for sql in features for m in _VIEW.finditer(sql)
                 if _TEXT.search(sql) or any(re.search(rf"\bv1\.{n}\b", sql) for n in found)}
        if names <= found:
            return frozenset(found)
        found |= names


def reads_text(sql: str) -> bool:
    """True when sql may read sample text (or another column the doctor's copy leaves out,
    LEFT_OUT): it names one or a feature view that reads one, or it reads samples with a star or
    COLUMNS(...) (count(*) reads no column). A guess on the safe side: a statement taken to read
    text only costs a read of the files."""
    if _TEXT.search(sql) or any(re.search(rf"\b{n}\b", sql) for n in text_views()):
        return True
    return sample_files.reads_samples(sql) and _ALL_COLUMNS.search(_COUNT_STAR.sub("", sql)) is not None


def copy_views(con: duckdb.DuckDBPyConnection, where: str | None, columns: str | None) -> None:
    """Copy steps and samples (the rows where `where` holds) into doctor_<view>, sorted by run;
    of the step files only the columns matching the pattern `columns` are read (None: all), of
    the sample files every column but LEFT_OUT (those are read where a statement needs them:
    SampleText). Without `where` (one run) the samples are kept in the files' order."""
    filt = f" WHERE {where}" if where else ""
    for view, order in ORDER.items():
        narrow = view == "steps" and columns is not None
        if narrow:
            run(con, "SET VARIABLE rlprobe_columns = ?", [columns], fetch="none")
        select = "*"
        if view == "samples":
            select = f"* EXCLUDE ({', '.join(LEFT_OUT)})"
            order = order if where else ""
        try:
            run(con, f"CREATE OR REPLACE TEMP TABLE doctor_{view} AS SELECT {select} FROM v1.{view}{filt}"
                     + (f" ORDER BY {order}" if order else ""), fetch="none")
        finally:
            if narrow:
                run(con, "RESET VARIABLE rlprobe_columns", fetch="none")


def point(con: duckdb.DuckDBPyConnection, view: str, select_sql: str) -> None:
    """Make v1.<view> stand for select_sql."""
    run(con, f"CREATE OR REPLACE VIEW v1.{view} AS {select_sql}", fetch="none")


def create_features(con: duckdb.DuckDBPyConnection, views: Iterable[str] | None = None) -> None:
    """Create the doctor's feature views (sql/v*/detectors/) over whatever v1.steps and v1.samples
    are now: all of them, or those named in views (v1.<name>)."""
    wanted = None if views is None else set(views)
    for f in sqlfiles.load(max(sqlfiles.versions())):
        if f.kind == "feature" and (wanted is None or _VIEW.search(f.sql).group(1) in wanted):  # type: ignore[union-attr]
            run(con, f.sql, fetch="none")


def point_at_recording(con: duckdb.DuckDBPyConnection) -> None:
    """v1.steps and v1.samples read the recording's files again (sql/v*/views), not a copy.

    They are bound against an empty folder, as open_store binds them: DuckDB binds a view when
    it is created, which would open every file and carry every column of a run with ten
    thousand metrics (seconds), and binds it again when it is read anyway.
    """
    with _bound_without_files(con):
        for f in sqlfiles.load(max(sqlfiles.versions())):
            if f.kind == "view" and f.name in ORDER:
                run(con, f.sql, fetch="none")
    con.execute("RESET VARIABLE rlprobe_samples_held")


@contextmanager
def _bound_without_files(con: duckdb.DuckDBPyConnection) -> Iterator[None]:
    """Views created within the block bind against an empty folder (see point_at_recording)."""
    root = run(con, "SELECT getvariable('rlprobe_root') AS root").column("root")[0].as_py()
    run(con, "SET VARIABLE rlprobe_root = ?", [str(sqlfiles.sql_root() / "_bind_without_files")], fetch="none")
    try:
        yield
    finally:
        run(con, "SET VARIABLE rlprobe_root = ?", [root], fetch="none")


def point_at_copies(con: duckdb.DuckDBPyConnection, where: str | None = None, views: Iterable[str] = tuple(ORDER),
                    prefix: str = "doctor_") -> None:
    """v1.<view> reads the copy <prefix><view>, filtered by where."""
    for view in views:
        if view == "samples" and prefix == "doctor_":
            con.execute("SET VARIABLE rlprobe_samples_held = true")  # no file to list for it, nor for this
        point(con, view, f"SELECT * FROM {prefix}{view}" + (f" WHERE {where}" if where else ""))


def materialize(con: duckdb.DuckDBPyConnection, where: str | None = None, columns: str | None = None) -> RunCopy:
    """Copy steps and samples (the rows where `where` holds; the step columns matching `columns`,
    see step_columns; the samples without their text) once, sorted by run, point the views at
    the copies and build the feature views over them. The RunCopy returned gives a statement
    that reads text the recording's samples, and computes each feature view it reads once."""
    text = SampleText(con)
    copy_views(con, where, columns)
    point_at_copies(con, where)
    text.narrowed(where)
    text.create_features()
    return RunCopy(con, text)


class SampleText:
    """Sample text in a session whose v1.samples is the doctor's copy without it (copy_views).

    The recording's samples view is kept as v1.doctor_recorded_samples; for one statement that
    reads text (reads_text), v1.samples stands for it, narrowed like the copy (the same rows,
    with their text) and to the runs' folders (rlprobe_scope), and over the shard files listed
    for that statement, so a step filter and the columns used reach the parquet scan. Create it
    while v1.samples reads the recording, before the views are pointed at copies.
    """

    def __init__(self, con: duckdb.DuckDBPyConnection) -> None:
        self.con = con
        # con.execute, not run, here and below: re-pointing a view reads no file, so none is
        # listed for it (run lists the shards for any statement that names samples)
        con.execute("DROP VIEW IF EXISTS v1.doctor_recorded_samples")
        con.execute("ALTER VIEW v1.samples RENAME TO doctor_recorded_samples")
        with _bound_without_files(con):  # until the copies exist
            con.execute("CREATE VIEW v1.samples AS SELECT * FROM v1.doctor_recorded_samples")
        self.where: str | None = None
        self.dirs: list[str] | None = None

    def create_features(self, views: Iterable[str] | None = None) -> None:
        """create_features (of every feature view, or of those named in views), binding the
        feature views that read text against the recording's samples (DuckDB binds a view when
        it is created: over the copy, a text column is unknown)."""
        filt = f" WHERE {self.where}" if self.where else ""
        with _bound_without_files(self.con):
            self.con.execute(f"CREATE OR REPLACE VIEW v1.samples AS SELECT * FROM v1.doctor_recorded_samples{filt}")
            try:
                create_features(self.con, views)
            finally:
                self.con.execute(f"CREATE OR REPLACE VIEW v1.samples AS SELECT * FROM doctor_samples{filt}")

    def narrowed(self, where: str | None, dirs: list[str] | None = None) -> None:
        """v1.samples now reads the copy filtered by where; text is read from the files of dirs
        (None: every run below the root)."""
        self.where, self.dirs = where, dirs

    @contextmanager
    def around(self, sql: str) -> Iterator[None]:
        """Within the block, v1.samples has its text when sql reads some (reads_text)."""
        if not reads_text(sql):
            yield
            return
        con = self.con
        filt = f" WHERE {self.where}" if self.where else ""
        with _bound_without_files(con):  # the recording's samples bind at each read anyway
            con.execute(f"CREATE OR REPLACE VIEW v1.samples AS SELECT * FROM v1.doctor_recorded_samples{filt}")
        con.execute("RESET VARIABLE rlprobe_samples_held")
        try:
            if self.dirs is not None:
                con.execute("SET VARIABLE rlprobe_scope = ?::VARCHAR[]", [self.dirs])
            if sample_files.reads_samples(sql):  # engine.run lists the files for it
                yield
            else:  # a feature view's name need not say it reads samples: list them here
                with sample_files.bound(con, "v1.samples"):
                    yield
        finally:
            if self.dirs is not None:
                con.execute("RESET VARIABLE rlprobe_scope")
            con.execute(f"CREATE OR REPLACE VIEW v1.samples AS SELECT * FROM doctor_samples{filt}")
            con.execute("SET VARIABLE rlprobe_samples_held = true")

    def restore(self) -> None:
        """v1.samples reads the recording's samples again, text and all."""
        with _bound_without_files(self.con):
            self.con.execute("CREATE OR REPLACE VIEW v1.samples AS SELECT * FROM v1.doctor_recorded_samples")
        self.con.execute("RESET VARIABLE rlprobe_samples_held")


# Feature views that more than one statement of every diagnosis reads: doctor_baseline and
# doctor_features both read doctor_binned, and feat_reward_noise reads it once per reward metric.
# As a view, each reader would unpivot and bin every step again (the costliest part of the
# feature pass), so a session computes it once into a table.
SHARED_FEATURES = ("doctor_binned",)

_FEAT = re.compile(r"\bv1\.(feat_\w+)")


def _cached(sql: str, cached: Iterable[str]) -> str:
    """sql without the names of the feat_* views served from tables: those read no text any more."""
    names = set(cached)
    return _FEAT.sub(lambda m: "" if m.group(1) in names else m.group(0), sql)


class RunCopy:
    """One run (or the rows `where` keeps) diagnosed over the doctor's copy (materialize).

    Each feature view a diagnosis reads is computed once, into a table doctor_cache_<name> that
    v1.<name> then stands for: doctor_binned (SHARED_FEATURES) at once, a `feat_*` view the
    first time a statement names it (a detector may read one several times, and a view is
    computed again at every read). A statement that reads text gets the recording's samples
    (SampleText). restore() puts the views back as they were before.
    """

    def __init__(self, con: duckdb.DuckDBPyConnection, text: SampleText) -> None:
        self.con = con
        self.text = text
        self.cached: list[str] = []
        self.cache(SHARED_FEATURES)

    def cache(self, names: Iterable[str]) -> None:
        """Compute the feature views named (v1.<name>) that are not tables yet, once each."""
        for name in names:
            if name in self.cached:
                continue
            sql = f"CREATE OR REPLACE TEMP TABLE doctor_cache_{name} AS SELECT * FROM v1.{name}"
            with self.text.around(sql):
                run(self.con, sql, fetch="none")
            point(self.con, name, f"SELECT * FROM doctor_cache_{name}")
            self.cached.append(name)

    @contextmanager
    def around(self, sql: str) -> Iterator[None]:
        """Within the block, sql can run: the feat_* views it reads are tables (cache), and
        v1.samples has its text if sql reads some (SampleText)."""
        self.cache(dict.fromkeys(_FEAT.findall(sql)))
        with self.text.around(_cached(sql, self.cached)):
            yield

    def restore(self) -> None:
        """The cached feature views are views again (over the copy), and v1.samples reads the
        recording's samples, text and all (SampleText.restore)."""
        if self.cached:
            self.text.create_features(self.cached)
            for name in self.cached:
                run(self.con, f"DROP TABLE IF EXISTS doctor_cache_{name}", fetch="none")
            self.cached = []
        self.text.restore()


def in_memory(steps: pa.Table, samples: pa.Table | None = None) -> duckdb.DuckDBPyConnection:
    """A connection whose v1.steps (and v1.samples) are the given tables, with the doctor's features."""
    con = new_connection()
    con.execute("CREATE SCHEMA v1")
    con.register("rlprobe_steps_input", steps)
    point(con, "steps", "SELECT * FROM rlprobe_steps_input")
    if samples is None:
        samples = pa.table({"run_id": pa.nulls(0, pa.string())})
    for name, sql_type in SAMPLE_COLUMN_TYPES.items():  # every column the samples view has on disk
        if name not in samples.column_names:
            arrow_type = {"BIGINT": pa.int64(), "DOUBLE": pa.float64(), "BOOLEAN": pa.bool_(), "BIGINT[]": pa.list_(pa.int64())}.get(sql_type, pa.string())
            samples = samples.append_column(name, pa.nulls(samples.num_rows, arrow_type))
    con.register("rlprobe_samples_input", samples)
    point(con, "samples", "SELECT * FROM rlprobe_samples_input")
    create_features(con)
    return con


# Runs whose steps add up to about this many are diagnosed together: one feature pass, one pass
# per feat_* view. It bounds the memory of a root of thousands of runs: the chunk's sorted copy
# of its steps, the window passes and their result, the chunk's answers to the detectors'
# statements (200 runs x 5,000 steps: peak 0.79 GB in chunks of 125k steps, 1.03 GB in 200k,
# 1.15 GB in 250k, 1.92 GB in 500k; the same CPU time within noise, as every cost but a few
# fixed statements per chunk goes with the rows). 1,000 runs x 5,000 steps peaked at 1.49 GB
# in chunks of 250k, at the 1.5 GB the fleet doctor is held to: 200k leaves a margin.
CHUNK_STEPS = 200_000
_IN_CHUNK = "list_contains(getvariable('rlprobe_doctor_runs'), run_id)"
# The run focused on; with the variable unset, every run the copies hold (the chunk's): a
# statement is then asked once for them all (RootSession.ask). DuckDB folds the variable when it
# plans a statement, so a set one is still a plain filter on run_id that skips other runs' row
# groups.
_IN_RUN = "(run_id = getvariable('rlprobe_doctor_run') OR getvariable('rlprobe_doctor_run') IS NULL)"


class RootSession:
    """Diagnosing many runs over one connection.

    Runs are taken in chunks of about CHUNK_STEPS steps. For a chunk the features pass runs
    once over all its runs; then v1.steps and v1.samples are narrowed to the run being
    diagnosed, so a detector's follow-up query costs one run, not the root; and a `feat_*` view
    is computed for the whole chunk the first time a detector asks for it (one pass), then
    served from that table filtered by run, as doctor_binned is from the start (SHARED_FEATURES).
    A detector's statement about its run that every run asks (ask) is asked once for the whole
    chunk in its chunk form (rlprobe.doctor.batch), and each run is handed its rows.
    columns is the pattern of the step columns copied (step_columns; None for all).
    """

    def __init__(self, con: duckdb.DuckDBPyConnection, runs: list[dict[str, Any]], features_sql: str,
                 chunk_steps: int | None = None, columns: str | None = None) -> None:
        self.con = con
        self.columns = columns
        self.features_sql = features_sql
        chunk_steps = chunk_steps or CHUNK_STEPS
        self.chunk_of: dict[str, int] = {}
        self.chunks: list[list[str]] = []
        self.chunk_dirs: list[list[str]] = []
        size = 0
        for info in runs:
            if not self.chunks or size + int(info["steps"]) > chunk_steps and self.chunks[-1]:
                self.chunks.append([])
                self.chunk_dirs.append([])
                size = 0
            if info["run_id"] not in self.chunk_of:
                self.chunks[-1].append(info["run_id"])
                self.chunk_of[info["run_id"]] = len(self.chunks) - 1
            # a run_id in two folders is read from both, in the chunk it first came in
            self.chunk_dirs[self.chunk_of[info["run_id"]]].append(info["run_dir"])
            size += int(info["steps"])
        self.dirs_of: dict[str, list[str]] = {}
        for info in runs:
            self.dirs_of.setdefault(info["run_id"], []).append(info["run_dir"])
        self.current: int | None = None
        self.run_id: str | None = None
        self.features_by_run: dict[str, pa.Table] = {}
        self.cached: set[str] = set()
        self.text: SampleText | None = None
        # this chunk's answers to statements asked once for all its runs (ask), by (statement,
        # parameters after the run): _ChunkAnswer, or None where the chunk form failed
        self.answers: dict[tuple[str, tuple[Any, ...]], _ChunkAnswer | None] = {}
        # the first run that asked a statement with parameters besides the run (ask)
        self.first_asker: dict[tuple[str, tuple[Any, ...]], str] = {}
        # statements that return no rows, asked for their columns: the same for every run
        self.columns_of: dict[str, pa.Table] = {}

    def _load_chunk(self, index: int) -> None:
        for name in self.cached:
            run(self.con, f"DROP TABLE IF EXISTS doctor_cache_{name}", fetch="none")
        self.cached = set()
        self.features_by_run = {}
        self.answers, self.first_asker, self.columns_of = {}, {}, {}
        self.current = index
        run(self.con, "SET VARIABLE rlprobe_doctor_runs = ?", [self.chunks[index]], fetch="none")
        # Only this chunk's runs are read (their folders alone are listed), and only they are
        # held in memory: a root of thousands of runs costs one chunk's memory, not the root's.
        point_at_recording(self.con)
        for view in ORDER:  # the last chunk's copies go before this chunk's are made, not after
            run(self.con, f"DROP TABLE IF EXISTS doctor_{view}", fetch="none")
        self.text = SampleText(self.con)
        run(self.con, "SET VARIABLE rlprobe_scope = ?::VARCHAR[]", [self.chunk_dirs[index]], fetch="none")
        try:
            copy_views(self.con, _IN_CHUNK, self.columns)
        finally:
            run(self.con, "RESET VARIABLE rlprobe_scope", fetch="none")
        point_at_copies(self.con, _IN_CHUNK)
        self.text.narrowed(_IN_CHUNK, self.chunk_dirs[index])
        self.text.create_features()
        for name in SHARED_FEATURES:  # once for the chunk, read by the features pass and by detectors
            run(self.con, f"CREATE OR REPLACE TEMP TABLE doctor_cache_{name} AS SELECT * FROM v1.{name} ORDER BY run_id", fetch="none")
            point(self.con, name, f"SELECT * FROM doctor_cache_{name}")
            self.cached.add(name)
        self.features_by_run = by_run(run(self.con, self.features_sql))
        point_at_copies(self.con, _IN_RUN)
        point_at_copies(self.con, _IN_RUN, sorted(self.cached), prefix="doctor_cache_")
        self.run_id = None

    def focus(self, run_id: str) -> None:
        """Point the narrowed views at one run (computing its chunk's features first if needed)."""
        if self.chunk_of[run_id] != self.current:
            self._load_chunk(self.chunk_of[run_id])
        run(self.con, "SET VARIABLE rlprobe_doctor_run = ?", [run_id], fetch="none")
        self.run_id = run_id
        if self.text is not None:
            self.text.narrowed(_IN_RUN, self.dirs_of[run_id])

    @contextmanager
    def around(self, sql: str) -> Iterator[None]:
        """Within the block, sql can run: the feat_* views it reads are computed for the chunk
        (cache_features_of), and v1.samples has its text if sql reads some (SampleText)."""
        self.cache_features_of(sql)
        if self.text is None:
            yield
            return
        with self.text.around(_cached(sql, self.cached)):
            yield

    def cache_features_of(self, sql: str) -> None:
        """Compute (once, for every run of the chunk) the feat_* views a detector query reads."""
        names = [n for n in dict.fromkeys(_FEAT.findall(sql)) if n not in self.cached]
        if not names:
            return
        assert self.text is not None and self.current is not None
        # text is read from the chunk's folders for the one pass
        self.text.narrowed(_IN_CHUNK, self.chunk_dirs[self.current])
        try:
            with self._chunk_wide():
                for name in names:
                    sql = f"CREATE OR REPLACE TEMP TABLE doctor_cache_{name} AS SELECT * FROM v1.{name} ORDER BY run_id"
                    with self.text.around(sql):
                        run(self.con, sql, fetch="none")
                    self.cached.add(name)
                    point_at_copies(self.con, _IN_RUN, [name], prefix="doctor_cache_")
        finally:
            self.text.narrowed(_IN_RUN, self.dirs_of[self.run_id] if self.run_id is not None else None)
            point_at_copies(self.con, _IN_RUN, ["samples"])  # a pass that read text left it on the chunk

    @contextmanager
    def _chunk_wide(self) -> Iterator[None]:
        """Within the block, the narrowed views hold every run of the chunk (_IN_RUN)."""
        run(self.con, "SET VARIABLE rlprobe_doctor_run = NULL", fetch="none")
        try:
            yield
        finally:
            if self.run_id is not None:
                run(self.con, "SET VARIABLE rlprobe_doctor_run = ?", [self.run_id], fetch="none")

    def ask(self, sql: str, params: list[Any]) -> pa.Table:
        """sql (its first parameter the run focused on, as a detector asks) for the focused run:
        its rows of the chunk's answer where the statement has a chunk form (rlprobe.doctor.batch),
        asked once for the chunk; otherwise asked for the run alone (around).

        A statement with parameters besides the run is asked for the chunk once a second run asks
        it with the same ones (a metric's name, say): where they are the run's own (a step range
        of its episode), asking the chunk would only cost more than asking the run."""
        if not params and batch.ONLY_COLUMNS.search(sql):
            if sql not in self.columns_of:
                with self.around(sql):
                    self.columns_of[sql] = run(self.con, sql, params)
            return self.columns_of[sql]
        answer = self._chunk_answer(sql, params)
        if answer is not None:
            return answer.of(self.run_id)  # type: ignore[arg-type]
        with self.around(sql):
            return run(self.con, sql, params)

    def _chunk_answer(self, sql: str, params: list[Any]) -> _ChunkAnswer | None:
        """The chunk's answer to sql, asked now if need be; None to ask it for the run alone."""
        if self.run_id is None or not params or params[0] != self.run_id:
            return None
        key = (sql, tuple(params[1:]))
        try:
            if key in self.answers:
                return self.answers[key]
        except TypeError:  # a parameter that is not a plain value
            return None
        form = batch.chunk_form(sql)
        if form is None or reads_text(sql):  # text is read per run, from its folders (SampleText)
            return None
        if len(params) > 1 and self.first_asker.setdefault(key, self.run_id) == self.run_id:
            return None
        self.cache_features_of(sql)
        try:
            with self._chunk_wide():
                table = run(self.con, form.sql, params[1:])
        except QueryError:
            answer = None  # asked per run, which fails (or not) as the detector expects
        else:
            answer = _ChunkAnswer(self.con, form, params[1:], table)
        self.answers[key] = answer
        return answer


class _ChunkAnswer:
    """A chunk form's rows (rlprobe.doctor.batch), handed out run by run."""

    def __init__(self, con: duckdb.DuckDBPyConnection, form: batch.ChunkForm, params: list[Any], table: pa.Table) -> None:
        self.con = con
        self.form = form
        self.params = params
        self.table = table
        self.spans = batch.spans(table)
        self.empty: pa.Table | None = None

    def of(self, run_id: str) -> pa.Table:
        """The rows the statement gives for run_id asked alone."""
        span = self.spans.get(run_id)
        if span is not None:
            return self.table.slice(span[0], span[1] - span[0]).drop_columns([batch.RUN])
        if self.form.empty is None:
            return self.table.slice(0, 0).drop_columns([batch.RUN])
        if self.empty is None:  # an aggregate over no rows: the same for every run without any
            self.empty = run(self.con, self.form.empty, self.params)
        return self.empty
