"""Live diagnosis: watch a recording as it grows, report each finding once, decide on halting.

Read-side only: a watcher reads the files a Recorder (in this or another process) has written;
it never imports the recorder's threads and never writes into the recording. Importing this
module is cheap (no DuckDB, no torch): a training process imports HaltPolicy from here, and the
watcher loads DuckDB on its first tick.

How the watcher stays incremental: a live recording only grows by new files (immutable step
parts), by a rewritten open sample shard, and, at close or resume, by a compaction that replaces
the parts with steps.parquet (or back). The watcher keeps one DuckDB connection holding the
run's step and sample rows, each row tagged with the file it came from, and each tick applies
per-file deltas: rows of files that vanished or changed are deleted, new or changed files are
read. The tables then hold exactly what the steps and samples views would read, and the doctor
runs over them, so a tick gives the same findings as a fresh `diagnose_path` of the same files.

The doctor's costliest feature views are kept incrementally too (_LiveTables.refresh): as
tables, recomputed each tick only for the keys (a bin of steps, a step's samples) whose rows
changed. On a long run a tick then costs about what the new rows and the binned series cost,
not what all steps and samples cost.
"""

from __future__ import annotations

import json
import os
import queue
import re
import stat
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Iterable, Mapping, Optional

from rlprobe.doctor.findings import SEVERITY_ORDER, Finding
from rlprobe.layout import SEALED, SHARD_RE, newest_shards, parse_shard

if TYPE_CHECKING:
    import duckdb

    from rlprobe.doctor.config import DoctorConfig
    from rlprobe.doctor.findings import Diagnosis

Sink = Callable[[Finding], Any]


@dataclass(frozen=True)
class HaltPolicy:
    """When a live finding should stop training; conservative by default (critical, >= 70%)."""

    min_severity: str = "critical"
    min_confidence: float = 0.7
    signatures: Optional[frozenset[str]] = None

    def __post_init__(self) -> None:
        if self.min_severity not in SEVERITY_ORDER:
            raise ValueError(f"min_severity must be one of {sorted(SEVERITY_ORDER, key=SEVERITY_ORDER.get)}, not {self.min_severity!r}")
        if not 0.0 <= self.min_confidence <= 1.0:
            raise ValueError(f"min_confidence must be within [0, 1], not {self.min_confidence!r}")
        if self.signatures is not None and not isinstance(self.signatures, frozenset):
            object.__setattr__(self, "signatures", frozenset(self.signatures))

    def should_halt(self, finding: Finding) -> bool:
        """True when this finding is severe, confident and (if listed) of a halting signature."""
        return (
            SEVERITY_ORDER[finding.severity] >= SEVERITY_ORDER[self.min_severity]
            and finding.confidence >= self.min_confidence
            and (self.signatures is None or finding.signature_id in self.signatures)
        )


# -- the run's files ------------------------------------------------------------------------
# The views' globs (sql/v1/sources): steps/part-*.parquet, steps.parquet, samples/shard-*.parquet,
# in the run directory and in its rank-NNN sub-recordings. Hidden temp files never match. Of a
# sample shard only one copy is read (rlprobe.layout: the sealed file, else the newest open one).
_PART = re.compile(r"^part-.*\.parquet$")
_RANK_DIR = re.compile(r"^rank-([0-9]+)$")
_RECORDING_ENTRIES = ("manifest.json", "steps.parquet", "steps", "events.jsonl", "samples")

FileSig = tuple[int, int, int]
"""(size, mtime_ns, inode): an atomic rewrite changes the inode even when size and time match."""


def _sig(st: os.stat_result) -> FileSig:
    return (st.st_size, st.st_mtime_ns, st.st_ino)


def _files(folder: Path, pattern: re.Pattern[str]) -> dict[str, FileSig]:
    """Regular files in folder whose names match, with their signatures; {} if there is no folder."""
    out: dict[str, FileSig] = {}
    try:
        entries = os.scandir(folder)
    except OSError:
        return out
    with entries:
        for entry in entries:
            if not pattern.match(entry.name):
                continue
            try:
                st = entry.stat()
            except OSError:
                continue  # vanished between listing and stat (compaction): not part of this tick
            if stat.S_ISREG(st.st_mode):
                out[entry.path] = _sig(st)
    return out


@dataclass
class _Listing:
    """The data files the views would read for one run, at one instant."""

    steps: dict[str, FileSig]
    samples: dict[str, tuple[FileSig, int]]  # path -> (signature, rank of its directory)


def _list_run(run_dir: Path) -> _Listing:
    rec_dirs: list[tuple[Path, int]] = [(run_dir, 0)]
    try:
        with os.scandir(run_dir) as entries:
            for entry in entries:
                m = _RANK_DIR.match(entry.name)
                if m and entry.is_dir():
                    rec_dirs.append((Path(entry.path), int(m.group(1))))
    except OSError:
        pass
    steps: dict[str, FileSig] = {}
    samples: dict[str, tuple[FileSig, int]] = {}
    for rec_dir, rank in rec_dirs:
        if rank == 0:  # the steps view is rank 0's series only
            try:
                compacted = (rec_dir / "steps.parquet").stat()
            except OSError:
                compacted = None
            if compacted is not None and stat.S_ISREG(compacted.st_mode):
                # Listed after the parts would be wrong here: compaction renames steps.parquet
                # into place before deleting the parts, so once it exists it alone is the truth.
                steps[str(rec_dir / "steps.parquet")] = _sig(compacted)
            else:
                steps.update(_files(rec_dir / "steps", _PART))
        shards = {os.path.basename(path): (path, sig) for path, sig in _files(rec_dir / "samples", SHARD_RE).items()}
        for name in newest_shards(shards):
            path, sig = shards[name]
            samples[path] = (sig, rank)
    return _Listing(steps, samples)


def _is_open(path: str) -> bool:
    """True for an open sample shard version (rlprobe.layout), which the next flush replaces."""
    parsed = parse_shard(os.path.basename(path))
    return parsed is not None and parsed[1] != SEALED


class _FileVanished(Exception):
    """A listed file was gone (or replaced) when read: list again."""


def _sql_str(text: str) -> str:
    return "'" + text.replace("'", "''") + "'"


def _glob_literal(path: str) -> str:
    """path as a glob that matches only itself (v1.glob_escape): DuckDB's readers take every
    name they are given as a glob, so a run folder named 'a*' would also read its sibling 'ab'."""
    return path.replace("[", "[[]").replace("*", "[*]").replace("?", "[?]")


def _sql_list(paths: Iterable[str]) -> str:
    return "[" + ", ".join(_sql_str(_glob_literal(p)) for p in paths) + "]"


def _ident(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'


class _LiveTables:
    """One run's step and sample rows in a DuckDB connection, kept equal to the files by per-file deltas.

    live_steps and live_samples carry a filename column (which file each row came from), so a
    file that changes or disappears takes exactly its own rows with it. v1.steps and v1.samples
    are views over them with the columns and types the recording views have, and the doctor's
    feature views sit on top.
    """

    _TABLES = {"steps": "live_steps", "samples": "live_samples"}

    def __init__(self) -> None:
        import duckdb

        from rlprobe.schemas import SAMPLE_COLUMN_TYPES, STEP_COLUMN_TYPES

        self.con: duckdb.DuckDBPyConnection = duckdb.connect(":memory:")
        self.files: dict[str, dict[str, FileSig]] = {"steps": {}, "samples": {}}
        self.columns: dict[str, dict[str, str]] = {}
        self.run_id: Optional[str] = None
        self.features_for: Optional[tuple[Any, ...]] = None  # the column sets the features were built on
        self.files_read = 0  # data files read so far: what "incremental" means, countable in tests
        self.cached: tuple[str, ...] = ()  # feature views served from live_cache_* tables (see refresh)
        self.caches_built = False  # the caches hold every key: refresh may go by deltas
        self.bins: Optional[tuple[int, int]] = None  # (step_min, width) the by-bin caches were cut with
        self.last_refresh: dict[str, str] = {}  # view -> how refresh last updated it: all | by bin | by step
        self.con.execute("CREATE SCHEMA v1")
        for kind in ("steps", "samples"):
            # steps whose rows changed since the last refresh (a NULL row stands for the NULL step)
            self.con.execute(f"CREATE TABLE live_touched_{kind} (step BIGINT)")
        for kind, types in (("steps", STEP_COLUMN_TYPES), ("samples", SAMPLE_COLUMN_TYPES)):
            cols = {name: sql_type for name, sql_type in types.items()}
            cols["filename"] = "VARCHAR"
            self.con.execute(f"CREATE TABLE {self._TABLES[kind]} ({', '.join(f'{_ident(n)} {t}' for n, t in cols.items())})")
            self.columns[kind] = cols

    # -- deltas ---------------------------------------------------------------------------
    def sync(self, listing: _Listing) -> bool:
        """Make the tables hold exactly the listed files' rows; True when anything changed."""
        if not self.files["steps"] and not self.files["samples"]:
            # The first load. DuckDB compresses an in-memory table at its first checkpoint (a
            # 100k-step run with samples: 1.1 GB to 0.3 GB, seconds of work), and the first
            # checkpoint after rows were deleted from that compressed data costs seconds again.
            # Both would land on some later steady tick (automatic checkpoints); instead load
            # the files that never change, checkpoint now, in the tick that is slow anyway, and
            # then the open shard versions, whose rows every flush replaces.
            sealed = {p: v for p, v in listing.samples.items() if not _is_open(p)}
            changed = self._sync(_Listing(listing.steps, sealed))
            if changed:
                self.con.execute("CHECKPOINT")
            return self._sync(listing) or changed
        return self._sync(listing)

    def _sync(self, listing: _Listing) -> bool:
        import duckdb

        wanted = {"steps": dict(listing.steps), "samples": {p: s for p, (s, _) in listing.samples.items()}}
        ranks = {p: r for p, (_, r) in listing.samples.items()}
        plans = {}
        for kind in ("steps", "samples"):
            old, new = self.files[kind], wanted[kind]
            gone = [p for p, s in old.items() if new.get(p) != s]
            added = sorted(p for p, s in new.items() if old.get(p) != s)
            if gone or added:
                plans[kind] = (gone, added)
        if not plans:
            return False
        self.con.execute("BEGIN TRANSACTION")
        try:
            for kind, (gone, added) in plans.items():
                table = self._TABLES[kind]
                track = self.caches_built
                if gone:
                    if track:
                        self._touch(kind, gone)
                    self.con.execute(f"DELETE FROM {table} WHERE filename IN (SELECT unnest(?::VARCHAR[]))", [gone])
                if added:
                    self._insert(kind, table, added, ranks)
                    if track:
                        self._touch(kind, added)
            self.con.execute("COMMIT")
        except BaseException as exc:
            self.con.execute("ROLLBACK")
            # the ALTERs rolled back too: forget columns the table no longer has
            for kind in ("steps", "samples"):
                have = {r[0] for r in self.con.execute(f"SELECT column_name FROM (DESCRIBE {self._TABLES[kind]})").fetchall()}
                self.columns[kind] = {n: t for n, t in self.columns[kind].items() if n in have}
            if isinstance(exc, duckdb.IOException):
                raise _FileVanished(str(exc).strip().splitlines()[0] if str(exc).strip() else "IO error") from exc
            raise
        for kind, new in wanted.items():
            self.files[kind] = new
        self.files_read += sum(len(added) for _, added in plans.values())
        return True

    def _insert(self, kind: str, table: str, paths: list[str], ranks: Mapping[str, int]) -> None:
        source = f"read_parquet({_sql_list(paths)}, union_by_name = true, filename = true, hive_partitioning = false)"
        rel = self.con.sql(f"SELECT * FROM {source}")
        cols = self.columns[kind]
        for name, dtype in zip(rel.columns, rel.types):
            sql_type = str(dtype)
            if name not in cols:
                self.con.execute(f"ALTER TABLE {table} ADD COLUMN {_ident(name)} {sql_type}")
                cols[name] = sql_type
            elif cols[name] != sql_type and name not in self._fixed(kind):
                # The views would widen this column to a common type across files; a table
                # cannot follow that in place, so start over from every file in one read.
                raise _TypeConflict(f"column {name!r} is {cols[name]} in earlier files and {sql_type} in {paths[0]}")
        self.con.execute(f"INSERT INTO {table} BY NAME SELECT * FROM {source}")
        if kind == "samples":
            # rank: the file's own column, else the rank of its directory (rank-NNN), as in the view
            by_rank: dict[int, list[str]] = {}
            for p in paths:
                by_rank.setdefault(ranks.get(p, 0), []).append(p)
            for rank, group in by_rank.items():
                self.con.execute(
                    f"UPDATE {table} SET rank = ? WHERE rank IS NULL AND filename IN (SELECT unnest(?::VARCHAR[]))", [rank, group]
                )

    def _touch(self, kind: str, paths: list[str]) -> None:
        """Note the steps the rows of these files have (called before delete and after insert)."""
        self.con.execute(
            f"INSERT INTO live_touched_{kind} SELECT DISTINCT step FROM {self._TABLES[kind]} "
            "WHERE filename IN (SELECT unnest(?::VARCHAR[]))",
            [paths],
        )

    @staticmethod
    def _fixed(kind: str) -> set[str]:
        from rlprobe.schemas import SAMPLE_COLUMN_TYPES, STEP_COLUMN_TYPES

        return set(STEP_COLUMN_TYPES if kind == "steps" else SAMPLE_COLUMN_TYPES) | {"filename"}

    # -- views ----------------------------------------------------------------------------
    def _steps_view(self, where: str = "") -> None:
        # One row per step, as the recording's steps view has it (sql/v1/sources/30_src_steps.sql):
        # a step written twice is merged, each column keeping its last non-NULL value in write
        # order (part index, then row; rowid follows a file's row order).
        order = "coalesce(TRY_CAST(regexp_extract(filename, '/part-([0-9]+)\\.parquet$', 1) AS BIGINT), 0) * 4294967296 + rowid"
        run_id = f"CAST({_sql_str(self.run_id or '')} AS VARCHAR) AS run_id"
        _engine()[0].point(
            self.con, "steps",
            f"WITH s AS (SELECT * EXCLUDE (filename), {order} AS write_order FROM live_steps {where}), "
            f"repeated AS (SELECT step FROM s GROUP BY step HAVING count(*) > 1) "
            f"SELECT {run_id}, * EXCLUDE (write_order) FROM s ANTI JOIN repeated USING (step) "
            f"UNION ALL BY NAME "
            f"SELECT {run_id}, step, arg_max(COLUMNS(* EXCLUDE (step, write_order)), write_order) "
            f"FROM s SEMI JOIN repeated USING (step) GROUP BY step"
        )

    def _samples_view(self, where: str = "") -> None:
        _engine()[0].point(self.con, "samples", f"SELECT CAST({_sql_str(self.run_id or '')} AS VARCHAR) AS run_id, rank, "
                                                f"* EXCLUDE (rank, filename) FROM live_samples {where}")

    def publish(self, run_id: str) -> bool:
        """(Re)create v1.steps / v1.samples for run_id and the doctor's features; True if rebuilt."""
        key = (run_id, tuple(self.columns["steps"]), tuple(self.columns["samples"]))
        if key == self.features_for:
            return False
        self.run_id = run_id
        self._steps_view()
        self._samples_view()
        # custom SQL detectors may name the unqualified views, as they can over a recording
        self.con.execute("CREATE OR REPLACE VIEW main.steps AS SELECT * FROM v1.steps")
        self.con.execute("CREATE OR REPLACE VIEW main.samples AS SELECT * FROM v1.samples")
        _engine()[0].create_features(self.con)
        # Each cached feature view keeps its SQL as v1.live_src_<name>, and v1.<name> becomes a
        # view of its table: the doctor's other views and the detectors read it by name, unchanged.
        present = {r[0] for r in self.con.execute("SELECT view_name FROM duckdb_views() WHERE schema_name = 'v1'").fetchall()}
        self.cached = tuple(v for v in (*_BY_BIN, *_BY_SAMPLE_STEP) if v in present)
        for view in self.cached:
            self.con.execute(f"DROP VIEW IF EXISTS v1.live_src_{view}")
            self.con.execute(f"ALTER VIEW v1.{view} RENAME TO live_src_{view}")
            self.con.execute(f"CREATE OR REPLACE TABLE live_cache_{view} AS SELECT * FROM v1.live_src_{view} LIMIT 0")
            self.con.execute(f"CREATE VIEW v1.{view} AS SELECT * FROM live_cache_{view}")
        self.caches_built = False
        self.features_for = key
        return True

    def refresh(self) -> None:
        """Bring the cached feature tables up to date with the step and sample tables.

        A view's SQL runs again only over the rows of the keys whose input changed since the
        last refresh, through v1.steps / v1.samples narrowed to those rows; that gives each such
        key the rows it would get over all data. _BY_SAMPLE_STEP views are keyed by step (the
        open shard's steps, on a live run). _BY_BIN views are keyed by doctor_binned's bin: the
        new steps fall in the last bin or two, and the narrowed steps keep the first and last
        step so the extent, and with it every bin's bounds, stays the same. When the extent
        moves the bins do too, and the by-bin views are computed again from all steps.
        """
        con = self.con
        ((step_min, width),) = con.execute(
            # doctor_binned's bins, as sql/v1/detectors/00_doctor_bin_width.sql cuts them (one run here)
            "SELECT min(step), greatest(1, CAST(ceil((max(step) - min(step) + 1) / 1000.0) AS BIGINT)) FROM live_steps"
        ).fetchall()
        bins = None if step_min is None else (int(step_min), int(width))
        # the NULL step has no bin: any doubt, and the by-bin views start over
        by_bin = self.caches_built and bins == self.bins and not con.execute(
            "SELECT count(*) FILTER (step IS NULL) FROM live_touched_steps"
        ).fetchall()[0][0]
        how: dict[str, str] = {}
        con.execute("BEGIN TRANSACTION")
        try:
            if by_bin:
                con.execute(
                    "CREATE OR REPLACE TEMP TABLE live_touched_bins AS "
                    "SELECT DISTINCT CAST(floor((step - ?) / ?) AS BIGINT) AS bin FROM live_touched_steps",
                    list(bins),
                )
            for view in self.cached:
                if view in _BY_BIN and by_bin:
                    self._steps_view(
                        f"WHERE CAST(floor((step - {bins[0]}) / {bins[1]}) AS BIGINT) IN (SELECT bin FROM live_touched_bins) "
                        f"OR step = {bins[0]} OR step = (SELECT max(step) FROM live_steps)"
                    )
                    con.execute(f"DELETE FROM live_cache_{view} WHERE bin IN (SELECT bin FROM live_touched_bins)")
                    con.execute(
                        f"INSERT INTO live_cache_{view} SELECT * FROM v1.live_src_{view} WHERE bin IN (SELECT bin FROM live_touched_bins)"
                    )
                    how[view] = "by bin"
                elif view in _BY_SAMPLE_STEP and self.caches_built:
                    self._samples_view(
                        "WHERE step IN (SELECT step FROM live_touched_samples) "
                        "OR (step IS NULL AND EXISTS (SELECT 1 FROM live_touched_samples WHERE step IS NULL))"
                    )
                    con.execute(
                        f"DELETE FROM live_cache_{view} AS c WHERE EXISTS "
                        "(SELECT 1 FROM live_touched_samples AS t WHERE t.step IS NOT DISTINCT FROM c.step)"
                    )
                    con.execute(f"INSERT INTO live_cache_{view} SELECT * FROM v1.live_src_{view}")
                    how[view] = "by step"
                else:  # every key, from all rows
                    con.execute(f"DELETE FROM live_cache_{view}")
                    con.execute(f"INSERT INTO live_cache_{view} SELECT * FROM v1.live_src_{view}")
                    how[view] = "all"
                    if view in _BY_BIN and not self._bins_agree(view, bins):
                        bins = None  # this view cuts its bins otherwise: never go by bin
                self._steps_view()  # all rows again, for the next view and for the detectors
                self._samples_view()
            con.execute("DELETE FROM live_touched_steps")
            con.execute("DELETE FROM live_touched_samples")
            con.execute("COMMIT")
        except BaseException:
            con.execute("ROLLBACK")
            self.caches_built = False  # start over from all rows next time
            raise
        if not self.caches_built:
            self.con.execute("CHECKPOINT")  # compress the new tables now, not in a later tick (see sync)
        self.caches_built = True
        self.bins = bins
        self.last_refresh = how

    def _bins_agree(self, view: str, bins: Optional[tuple[int, int]]) -> bool:
        """True when each of the view's bins spans only steps of that bin as refresh cuts bins (step_min, width)."""
        if bins is None:
            return False
        step_min, width = bins
        ((wrong,),) = self.con.execute(
            f"SELECT count(*) FROM live_cache_{view} WHERE bin IS DISTINCT FROM CAST(floor((step - ?) / ?) AS BIGINT) "
            "OR bin IS DISTINCT FROM CAST(floor((step_hi - ?) / ?) AS BIGINT)",
            [step_min, width, step_min, width],
        ).fetchall()
        return wrong == 0

    def step_stats(self) -> tuple[int, Optional[int]]:
        """Step rows held and the largest step (the runs view's steps_recorded and last_step)."""
        ((n, last),) = self.con.execute("SELECT count(DISTINCT step), max(step) FROM live_steps").fetchall()  # a step written twice is one step
        return int(n), (int(last) if last is not None else None)


# Feature views the watcher serves from tables, each recomputed only where its input changed
# (see _LiveTables.refresh).
# One row per bin of doctor_binned (every step metric cut into at most 1,000 bins of consecutive
# steps, sql/v1/detectors/10_doctor_binned.sql), computed from that bin's steps alone.
# doctor_binned is read by doctor_baseline, doctor_features and, per reward metric,
# feat_reward_noise: as a view, every reader cut all steps into bins again.
_BY_BIN = ("doctor_binned", "feat_policy_kl_positional")
# One row per (run_id, step) computed from that step's samples alone. feat_reward_samples
# counts distinct completion texts per step: over all samples of a long run it was the most
# expensive query of a diagnosis.
_BY_SAMPLE_STEP = ("feat_reward_samples",)


class _TypeConflict(Exception):
    """Files disagree on a column's type: rebuild the tables from all files in one read."""


def _engine() -> Any:
    """The doctor's session and engine modules, imported on the first tick (they load DuckDB)."""
    from rlprobe.doctor import engine, session

    return session, engine


# -- the watcher ----------------------------------------------------------------------------
_MAX_ERRORS = 200  # a watcher runs for days: keep the latest errors, not all of them
_READ_ATTEMPTS = 3  # a compaction may delete listed parts before they are read: list again


def _manifest_fields(content: bytes) -> tuple[Optional[int], Optional[str]]:
    """(schema_version, run_id) as the views parse manifest.json; (None, None) when unreadable."""
    try:
        doc = json.loads(content)
    except (ValueError, UnicodeDecodeError):
        return None, None
    if not isinstance(doc, dict):
        return None, None
    version = doc.get("schema_version")
    if isinstance(version, bool) or not isinstance(version, (int, float, str)):
        version_int = int(version) if isinstance(version, bool) else None
    else:
        try:
            version_int = int(round(float(version)))
        except (TypeError, ValueError, OverflowError):
            version_int = None
    run_id = doc.get("run_id")
    if run_id is not None and not isinstance(run_id, str):
        run_id = json.dumps(run_id)
    return version_int, run_id


class RunWatcher:
    """Tails a (possibly not yet existing) run; each tick returns only findings not reported before.

    A finding is keyed by its signature: it is reported when first seen and again only when its
    severity rises (warn -> critical). Sinks get each new finding; a sink that raises is
    recorded on the watcher's `errors` list and never stops the watcher.

    Each tick reads only the files that are new or changed since the last one (see the module
    docstring) and diagnoses again only when the data changed, with the same result as a fresh
    `diagnose_path` over the same files. A run that does not exist yet, has no steps yet, or is
    being compacted gives [] and is read again next tick. A recording this rlprobe cannot read
    (a newer format, a file instead of a run) raises the RlprobeError `rlprobe doctor` would.
    """

    def __init__(
        self,
        run_dir: str | os.PathLike[str],
        sinks: Iterable[Sink] = (),
        config: Mapping[str, Any] | None = None,
        config_path: str | os.PathLike[str] | None = None,
    ) -> None:
        self.run_dir = Path(run_dir)
        self.sinks = list(sinks)
        self.config = config
        self.config_path = config_path
        self.reported: dict[str, str] = {}  # signature_id -> worst severity reported
        self.errors: list[str] = []
        self.ticks = 0
        self.last_error: Optional[str] = None
        self.status = "not started"  # waiting for run | no steps yet | watching
        self.findings: list[Finding] = []  # the latest diagnosis' findings, reported or not
        self.diagnosis: Optional[Diagnosis] = None
        self.steps = 0
        self.last_step: Optional[int] = None
        self.diagnoses = 0  # how many ticks actually re-ran the detectors
        self.timings: dict[str, float] = {}  # the last tick's read_s and diagnose_s (seconds)
        self._files_read_before = 0  # by connections closed since (see files_read)
        self._cfg: Optional[DoctorConfig] = None
        self._tables: Optional[_LiveTables] = None
        self._manifest: tuple[Optional[FileSig], Optional[int], Optional[str]] = (None, None, None)
        self._dirty = True

    # -- public ---------------------------------------------------------------------------
    def tick(self) -> list[Finding]:
        """Read what is new, diagnose, and return (and send to sinks) the findings not reported before."""
        self.ticks += 1
        current = self._poll()
        if current is None:
            return []
        new: list[Finding] = []
        for finding in current:
            before = self.reported.get(finding.signature_id)
            if before is not None and SEVERITY_ORDER[finding.severity] <= SEVERITY_ORDER[before]:
                continue
            self.reported[finding.signature_id] = finding.severity
            new.append(finding)
        for finding in new:
            for sink in self.sinks:
                try:
                    sink(finding)
                except Exception as exc:  # a broken sink must never stop the watcher
                    self._error(f"sink {getattr(sink, '__name__', sink)!s}: {type(exc).__name__}: {exc}")
        return new

    def halting(self, policy: HaltPolicy) -> Optional[Finding]:
        """The worst finding of the latest diagnosis that `policy` says should stop training, or None.

        Judged on every finding the run has now, not only on those tick() reported: a critical
        finding reported at 58% confidence that reaches 85% two ticks later (its episode went on)
        is the same finding to tick(), but it now meets the policy.
        """
        return next((f for f in self.findings if policy.should_halt(f)), None)

    def diagnose(self) -> Optional[Diagnosis]:
        """Bring the tables up to date and diagnose them now (no dedup, no sinks); None before the first step."""
        self._dirty = True
        self._poll()
        return self.diagnosis if self.steps else None

    @property
    def files_read(self) -> int:
        """Data files (step parts, sample shards, steps.parquet) read so far, over all ticks."""
        return self._files_read_before + (self._tables.files_read if self._tables is not None else 0)

    def close(self) -> None:
        """Release the DuckDB connection (a later tick reads the run again from scratch)."""
        if self._tables is not None:
            self._files_read_before += self._tables.files_read
            self._tables.con.close()
        self._tables = None
        self._dirty = True

    # -- internals ------------------------------------------------------------------------
    def _error(self, text: str) -> None:
        self.last_error = text
        self.errors.append(text)
        del self.errors[:-_MAX_ERRORS]

    def _config(self) -> DoctorConfig:
        if self._cfg is None:
            from rlprobe.doctor.config import load_config

            self._cfg = load_config(self.config_path, self.config)
        return self._cfg

    def _poll(self) -> Optional[list[Finding]]:
        """Sync with the files; the current findings when the data changed, else None."""
        from rlprobe.errors import CorruptRecording, NotARecording, RlprobeError, SchemaTooNew

        cfg = self._config()  # a bad doctor.toml is the user's to fix: raise it on the first tick
        path = self.run_dir.expanduser()
        if not path.exists():
            self.status = "waiting for run"
            return None
        if not path.is_dir():
            raise NotARecording(f"{self.run_dir} is a file, not a run directory: point the watcher at a run directory")
        run_dir = path.resolve()
        run_id = self._read_manifest(run_dir)
        t0 = time.perf_counter()
        self.timings = {}
        try:
            changed = self._sync(run_dir)
        except (SchemaTooNew, CorruptRecording, NotARecording):
            raise
        except _FileVanished as exc:
            self._error(f"read raced a compaction, trying again next tick: {exc}")
            return None
        except (RlprobeError, OSError, ImportError) as exc:
            self._error(f"{type(exc).__name__}: {exc}")
            return None
        except Exception as exc:  # e.g. a parquet file a newer writer produced: start over next tick
            self._error(f"{type(exc).__name__}: {exc}")
            self.close()
            return None
        tables = self._tables
        assert tables is not None
        self.timings["read_s"] = time.perf_counter() - t0
        if tables.run_id != run_id:
            changed = True
        self._dirty = self._dirty or changed
        self.steps, self.last_step = tables.step_stats()
        if self.steps == 0:
            self.status = "no steps yet"
            if not self._looks_like_run(run_dir):
                raise NotARecording(
                    f"{self.run_dir} holds runs, not a run: watch one run directory (rlprobe ls {self.run_dir} lists them)"
                )
            return None
        self.status = "watching"
        if not self._dirty:
            return None  # same files as last time: same findings, none of them new
        t0 = time.perf_counter()
        try:
            self.diagnosis = self._run_doctor(tables, run_dir, run_id, cfg)
        except (SchemaTooNew, CorruptRecording):
            raise
        except Exception as exc:  # keep watching; the next tick diagnoses again
            self._error(f"diagnosis failed: {type(exc).__name__}: {exc}")
            return None
        self.timings["diagnose_s"] = time.perf_counter() - t0
        self.diagnoses += 1
        self._dirty = False
        self.last_error = None
        self.findings = list(self.diagnosis.findings)
        return self.findings

    def _read_manifest(self, run_dir: Path) -> str:
        """The run id the views would give the run; refuses a newer recording format."""
        from rlprobe.store import versions

        manifest = run_dir / "manifest.json"
        try:
            st = manifest.stat()
            sig: Optional[FileSig] = _sig(st)
        except OSError:
            sig = None
        if sig != self._manifest[0]:
            version, run_id = None, None
            if sig is not None:
                try:
                    version, run_id = _manifest_fields(manifest.read_bytes())
                except OSError:
                    sig = None  # vanished (or unreadable): look again next tick
            self._manifest = (sig, version, run_id)
        _, version, run_id = self._manifest
        versions.check(version, str(run_dir))
        return run_id if run_id is not None else run_dir.name

    def _sync(self, run_dir: Path) -> bool:
        if self._tables is None:
            self._tables = _LiveTables()
            self._dirty = True
        for attempt in range(_READ_ATTEMPTS):
            listing = _list_run(run_dir)
            try:
                return self._tables.sync(listing)
            except _TypeConflict:
                self.close()
                self._tables = _LiveTables()
                self._dirty = True
            except _FileVanished:
                if attempt == _READ_ATTEMPTS - 1:
                    raise
                time.sleep(0.05 * (attempt + 1))
        raise _FileVanished("the run's files kept changing while being read")

    @staticmethod
    def _looks_like_run(run_dir: Path) -> bool:
        """A run (any recording file, or nothing at all yet) rather than a folder of runs."""
        if any((run_dir / name).exists() for name in _RECORDING_ENTRIES):
            return True
        try:
            with os.scandir(run_dir) as entries:
                return not any(e.is_dir() and (Path(e.path) / "manifest.json").exists() for e in entries)
        except OSError:
            return True

    def _run_doctor(self, tables: _LiveTables, run_dir: Path, run_id: str, cfg: DoctorConfig) -> Diagnosis:
        tables.publish(run_id)
        tables.refresh()
        info = {"run_id": run_id, "run_dir": str(run_dir), "steps": self.steps, "last_step": self.last_step}
        return _engine()[1].diagnose_connection(tables.con, [info], cfg)[0]


# -- webhook sink ---------------------------------------------------------------------------
_EMOJI = {"critical": ":rotating_light:", "warn": ":warning:", "info": ":information_source:"}
_SLACK_SECTION_MAX = 3000  # Slack rejects a section block whose text is longer


def _mrkdwn(text: str) -> str:
    """Escape the three characters Slack's mrkdwn treats as control characters."""
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


def slack_payload(finding: Finding, run: Optional[str] = None) -> dict[str, Any]:
    """The Slack incoming-webhook message for one finding: `text` plus one mrkdwn section block."""
    run_name = run or finding.run_id or "run"
    head = (
        f"{_EMOJI.get(finding.severity, '')} *{finding.severity.upper()}* `{_mrkdwn(finding.signature_id)}` "
        f"in run `{_mrkdwn(run_name)}`: from step {finding.first_step if finding.first_step is not None else '?'}, "
        f"confidence {finding.confidence:.0%}"
    ).strip()
    lines = [head, _mrkdwn(finding.explanation)]
    if finding.suggested_actions:
        lines.append("Try: " + _mrkdwn("; ".join(finding.suggested_actions[:3])))
    text = "\n".join(lines)
    if len(text) > _SLACK_SECTION_MAX:
        text = text[: _SLACK_SECTION_MAX - 1] + "…"
    return {"text": text, "blocks": [{"type": "section", "text": {"type": "mrkdwn", "text": text}}]}


_STOP = object()


_WEBHOOK_READ_BYTES = 64 * 1024  # of a webhook's response body, at most this much is read


class WebhookSink:
    """A RunWatcher sink that POSTs each finding as Slack-compatible JSON, from a background thread.

    Calling the sink only enqueues (a full queue drops and counts), so a slow, failing or hanging
    endpoint never stalls the watcher. Connection errors, timeouts, HTTP 429 and 5xx are retried
    with exponential backoff; every outcome is counted (`sent`, `failed`, `dropped`) and failures
    are kept on `errors`, never raised. `flush(timeout)` waits for the queue to drain; `close()`
    flushes and stops the thread.
    """

    def __init__(
        self,
        url: str,
        timeout: float = 5.0,
        retries: int = 3,
        backoff_s: float = 0.5,
        queue_size: int = 100,
        run: Optional[str] = None,
        payload: Callable[[Finding, Optional[str]], Mapping[str, Any]] = slack_payload,
    ) -> None:
        if not url.startswith(("http://", "https://")):
            raise ValueError(f"webhook url must start with http:// or https://, not {url!r}")
        if timeout <= 0 or retries < 0 or backoff_s < 0 or queue_size < 1:
            raise ValueError("webhook_sink needs timeout > 0, retries >= 0, backoff_s >= 0 and queue_size >= 1")
        self.url = url
        self.timeout = timeout
        self.retries = retries
        self.backoff_s = backoff_s
        self.run = run
        self.payload = payload
        self.sent = 0
        self.failed = 0
        self.dropped = 0
        self.attempts = 0
        self.errors: list[str] = []
        self.last_error: Optional[str] = None
        self.__name__ = f"webhook_sink({url})"
        self._queue: queue.Queue[Any] = queue.Queue(maxsize=queue_size)
        self._cond = threading.Condition()
        self._pending = 0
        self._thread: Optional[threading.Thread] = None
        self._closed = False
        self._stop = threading.Event()

    def __call__(self, finding: Finding) -> None:
        """Queue the finding for posting; never blocks, never raises for delivery problems."""
        if self._closed:
            with self._cond:
                self.dropped += 1
            return
        body = json.dumps(self.payload(finding, self.run), ensure_ascii=False, default=str).encode("utf-8")
        self._start()
        with self._cond:
            try:
                self._queue.put_nowait(body)
            except queue.Full:
                self.dropped += 1
                return
            self._pending += 1

    @property
    def pending(self) -> int:
        """Messages queued or being posted."""
        with self._cond:
            return self._pending

    def flush(self, timeout: float = 10.0) -> bool:
        """Wait until every queued message was posted or given up on; False if timeout came first."""
        deadline = time.monotonic() + timeout
        with self._cond:
            while self._pending:
                left = deadline - time.monotonic()
                if left <= 0:
                    return False
                self._cond.wait(left)
        return True

    def close(self, timeout: float = 10.0) -> bool:
        """Flush (up to timeout), then stop the thread; True when everything queued was handled."""
        drained = self.flush(timeout)
        self._closed = True
        self._stop.set()  # cut short any backoff still sleeping
        if self._thread is not None:
            try:
                self._queue.put_nowait(_STOP)
            except queue.Full:
                pass  # the thread is stuck on a hanging endpoint; it is a daemon, let it be
        return drained

    def _start(self) -> None:
        with self._cond:
            if self._thread is None:
                self._thread = threading.Thread(target=self._work, name="rlprobe-webhook", daemon=True)
                self._thread.start()

    def _work(self) -> None:
        while True:
            body = self._queue.get()
            if body is _STOP:
                return
            try:
                self._post(body)
            except Exception as exc:  # the worker must outlive anything a post can throw
                self._record_failure(f"{type(exc).__name__}: {exc}")
            finally:
                with self._cond:
                    self._pending -= 1
                    self._cond.notify_all()

    def _post(self, body: bytes) -> None:
        import urllib.error
        import urllib.request

        from rlprobe import __version__

        error = "not attempted"
        for attempt in range(self.retries + 1):
            if attempt and self._stop.wait(min(self.backoff_s * 2 ** (attempt - 1), 30.0)):
                break  # closing: do not keep retrying past close()
            with self._cond:
                self.attempts += 1
            request = urllib.request.Request(
                self.url, data=body, method="POST",
                headers={"Content-Type": "application/json; charset=utf-8", "User-Agent": f"rlprobe/{__version__}"},
            )
            try:
                with urllib.request.urlopen(request, timeout=self.timeout) as response:
                    response.read(_WEBHOOK_READ_BYTES)  # the answer is not used: never read a huge body whole
                with self._cond:
                    self.sent += 1
                    self.last_error = None
                return
            except urllib.error.HTTPError as exc:
                error = f"HTTP {exc.code} {exc.reason}"
                if exc.code != 429 and exc.code < 500:
                    break  # a client error will not go away by retrying
            except (urllib.error.URLError, OSError) as exc:  # refused, reset, DNS, timeout
                reason = getattr(exc, "reason", exc)
                error = f"{type(reason).__name__}: {reason}"
            except Exception as exc:  # http.client oddities (a server that closes mid-response, ...)
                error = f"{type(exc).__name__}: {exc}"
        self._record_failure(f"{error} (after {attempt + 1} attempt{'s' if attempt else ''})")

    def _record_failure(self, text: str) -> None:
        with self._cond:
            self.failed += 1
            self.last_error = text
            self.errors.append(text)
            del self.errors[:-_MAX_ERRORS]


def webhook_sink(
    url: str,
    timeout: float = 5.0,
    retries: int = 3,
    backoff_s: float = 0.5,
    queue_size: int = 100,
    run: Optional[str] = None,
) -> WebhookSink:
    """A sink posting each finding to a Slack-compatible incoming webhook; never blocks the watcher."""
    return WebhookSink(url, timeout=timeout, retries=retries, backoff_s=backoff_s, queue_size=queue_size, run=run)
