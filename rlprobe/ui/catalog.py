"""The dashboard's read side: one DuckDB database over a run or a runs root, queried per request.

The views are created once (rlprobe.store.open_store); then the database is locked to the root:
DuckDB's own access control lets it read files below the root and nowhere else, and the lock
keeps anyone, the SQL console included, from changing that. Every request gets its own cursor
(a DuckDB connection is not shared between threads) with the root bound and, for a query about
some runs, the views narrowed to those runs' directories (the rlprobe_scope variable), so a chart
of two runs never lists the files of the other hundred.

Charts of runs whose step files need no merging are binned from those files' columns
(rlprobe.ui.stepfiles decides, rlprobe.ui.columns holds the columns in memory between requests,
keyed by each file's path, size, mtime and inode), and the metric picker counts their values from
the files' footers; other runs go through the views. Both ways give the same figures.

Every SQL text is a `kind: query` file under sql/v1/ui/queries/ (or the report's, reused). Nothing
here writes anywhere.
"""

from __future__ import annotations

import math
import os
import re
import threading
import time
from collections import OrderedDict
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterable, Iterator, Sequence

import duckdb

from rlprobe.errors import QueryError, RlprobeError
from rlprobe.jsonsafe import json_safe
from rlprobe.store import sqlfiles
from rlprobe.store.engine import Store, open_store, run
from rlprobe.ui.columns import COLUMN_CACHE_BYTES, ColumnCache, held_rows
from rlprobe.ui.stepfiles import FileFacts, FileKey, RunFiles, StepFileFacts, chosen_files, list_run_files, needs_merge, stat_key

RUNS_MAX_AGE_S = 1.0  # listing the runs is shared by every open page and the doctor for this long
RUNS_MAX_STALE_S = 30.0  # ... and, while no file below the root changes, reused for up to this long
CACHED_RESULTS = 32  # chart and metric-picker answers kept, keyed by the runs' versions
# The files the runs view reads whose change a directory's mtime does not show (appends, rewrites).
_WATCHED_FILES = frozenset({"manifest.json", "events.jsonl", "steps.parquet"})
QUIET_EVENTS = ("recorder_open", "recorder_close", "bad_record")  # listed on a run page, not drawn
MAX_BINS = 4000  # a chart asks for one bin per pixel column; no screen is wider than this
MAX_SERIES_RUNS = 50
MAX_METRICS = 64
CONSOLE_ROWS = 1000  # rows the console returns by default ...
CONSOLE_MAX_ROWS = 10_000  # ... and at most
CONSOLE_TIMEOUT_S = 10.0
CELL_CHARS = 2000  # a console cell longer than this is cut (completions can be megabytes)
X_AXES = ("step", "wall_time", "relative")
SAMPLE_ORDERS = ("top", "bottom", "step")


class BadRequest(RlprobeError):
    """A request the dashboard cannot answer as asked (unknown run, metric, parameter)."""


class NotFound(BadRequest):
    """A run the root does not hold."""


@dataclass
class RunsListing:
    """The runs below the root at one instant; broken runs carry the one-line reason."""

    rows: list[dict[str, Any]]
    at: float
    broken: dict[str, str] = field(default_factory=dict)  # run_dir -> error

    def by_id(self, run_id: str) -> dict[str, Any] | None:
        """The row of run_id, or None."""
        return next((r for r in self.rows if r["run_id"] == run_id), None)


def fingerprint(row: dict[str, Any]) -> str:
    """What changes when a run grows: steps, last step, last write, status, events."""
    return "|".join(str(row.get(k)) for k in ("steps_recorded", "last_step", "last_write_at", "status", "events", "error"))


def inline_params(sql: str, params: dict[str, Any]) -> str:
    """sql with each $name replaced by the literal it was run with: the query a chart ran, as text
    a user can paste into `rlprobe query` or any DuckDB session with the views."""

    def literal(value: Any) -> str:
        if value is None:
            return "NULL"
        if isinstance(value, bool):
            return "true" if value else "false"
        if isinstance(value, (int, float)):
            return repr(value)
        if isinstance(value, (list, tuple)):
            return "[" + ", ".join(literal(v) for v in value) + "]"
        return "'" + str(value).replace("'", "''") + "'"

    return re.sub(r"\$([A-Za-z_]\w*)\b", lambda m: literal(params[m.group(1)]) if m.group(1) in params else m.group(0), sql)


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__


class Catalog:
    """A run or a runs root opened for the dashboard (see the module docstring)."""

    def __init__(self, path: str | os.PathLike[str], runs_max_age_s: float = RUNS_MAX_AGE_S,
                 column_cache_bytes: int = COLUMN_CACHE_BYTES, threads: int | None = None) -> None:
        from rlprobe.store.engine import is_url

        if is_url(path):
            raise BadRequest(f"{path}: rlprobe ui reads local runs; copy or mount the runs, or use rlprobe query on the URL")
        self.store = open_store(path, threads=threads)
        self.target = self.store.target
        self.root = Path(self.target.path)
        self.warnings = list(self.store.warnings)
        con = self.store.con
        # After this, no statement on this database reads or writes a file outside the root, and no
        # statement can lift that: DuckDB checks every file access itself.
        con.execute("SET allowed_directories = ?", [[str(self.root) + os.sep]])
        con.execute("SET enable_external_access = false")
        con.execute("SET lock_configuration = true")
        self.runs_max_age_s = runs_max_age_s
        self._lock = threading.Lock()
        self._listing: RunsListing | None = None
        self._signature: int | None = None
        self._cache: OrderedDict[Any, Any] = OrderedDict()
        self._broken: dict[str, str] = {}
        self._known_dirs: set[str] = set()
        # What the runs' step files say (their steps, their columns), kept by the files' keys:
        # unlike the answers above, it holds while a run grows by new parts.
        self.step_files = StepFileFacts(lambda name, params: self.query(name, params))
        self._by_files: OrderedDict[Any, Any] = OrderedDict()
        # The columns charts read, decoded, kept by the same keys (0 bytes: charts read the files).
        self.columns = ColumnCache(self._read_columns, column_cache_bytes)

    # -- sessions ---------------------------------------------------------------------------
    @contextmanager
    def session(self, dirs: Sequence[str] | None = None) -> Iterator[duckdb.DuckDBPyConnection]:
        """A cursor with the views bound to the root, narrowed to dirs when given."""
        cur = self.store.con.cursor()
        try:
            cur.execute("SET VARIABLE rlprobe_root = ?", [str(self.root)])
            if dirs is not None:
                cur.execute("SET VARIABLE rlprobe_scope = ?::VARCHAR[]", [list(dirs)])
            yield cur
        finally:
            cur.close()

    def query(self, name: str, params: dict[str, Any] | None, dirs: Sequence[str] | None = None) -> list[dict[str, Any]]:
        """Rows of the query file `name` (as dicts), over dirs (None: the whole root)."""
        return self.table(name, params, dirs).to_pylist()

    def table(self, name: str, params: dict[str, Any] | None, dirs: Sequence[str] | None = None) -> Any:
        """The query file `name`'s result as a pyarrow Table, over dirs (None: the whole root)."""
        with self.session(dirs) as cur:
            return run(cur, sqlfiles.query(name), params or None, "arrow")

    # -- runs ---------------------------------------------------------------------------------
    def runs(self, max_age_s: float | None = None) -> RunsListing:
        """Every run below the root (a listing at most max_age_s old, default runs_max_age_s); a run
        whose files cannot be read is listed as broken, with the reason."""
        age = self.runs_max_age_s if max_age_s is None else max_age_s
        with self._lock:
            now = time.monotonic()
            if self._listing is not None and now - self._listing.at < age:
                return self._listing
            signature = self.files_signature()
            if self._listing is not None and signature == self._signature and now - self._listing.at < RUNS_MAX_STALE_S and age > 0:
                return self._listing  # nothing below the root changed: the same runs, the same figures
            rows = self._list_runs()
            self._listing = RunsListing(rows, time.monotonic(), dict(self._broken))
            self._signature = signature
            return self._listing

    def files_signature(self) -> int:
        """A hash of what listing the runs reads, from stat() alone: every directory's mtime (a part
        written, a shard replaced, a run created) and the size and mtime of the files that grow in
        place (events.jsonl) or are replaced (manifest.json, steps.parquet). Symlinked folders are
        not followed; RUNS_MAX_STALE_S bounds what that can miss."""
        parts: list[tuple[Any, ...]] = []
        for dirpath, _dirnames, filenames in os.walk(self.root):
            try:
                parts.append((dirpath, os.stat(dirpath).st_mtime_ns))
            except OSError:
                continue
            for name in filenames:
                if name in _WATCHED_FILES:
                    try:
                        st = os.stat(os.path.join(dirpath, name))
                    except OSError:
                        continue
                    parts.append((dirpath, name, st.st_size, st.st_mtime_ns, st.st_ino))
        return hash(tuple(parts))

    def cached(self, key: Any, compute: Any, store: OrderedDict[Any, Any] | None = None) -> Any:
        """compute()'s value, kept under key (which carries the runs' versions, or the files'
        keys) for the next asker; in the answers kept (default) or in store."""
        store = self._cache if store is None else store
        with self._lock:
            if key in store:
                store.move_to_end(key)
                return store[key]
        value = compute()
        with self._lock:
            store[key] = value
            while len(store) > CACHED_RESULTS:
                store.popitem(last=False)
        return value

    def forget_files(self) -> None:
        """Forget what the step files said (their facts and the views' columns over them): the
        next chart learns it again, as the first chart after the server starts does."""
        self.step_files.clear()
        self.columns.clear()
        with self._lock:
            self._by_files.clear()

    def versions(self, run_ids: Sequence[str]) -> tuple[str, ...]:
        """Each run's fingerprint: a cache key that changes when any of the runs grows."""
        listing = self.runs()
        return tuple(fingerprint(listing.by_id(r) or {}) for r in run_ids)

    def _list_runs(self) -> list[dict[str, Any]]:
        if not self._broken:
            try:
                rows = self.query("ui_runs", None)
                self._known_dirs = {r["run_dir"] for r in rows}
                return rows
            except QueryError:
                pass  # one run's files are unreadable: find which, and list the others
        candidates = self._known_dirs | {r["run_dir"] for r in self.query("ui_run_dirs", None)}
        good = sorted(candidates - set(self._broken))
        try:
            rows = self.query("ui_runs", None, good) if good else []
        except QueryError:
            rows = []
            for run_dir in good:  # the slow path, once per newly broken run
                rows += self._probe(run_dir)
        for run_dir in sorted(self._broken):
            rows += self._probe(run_dir)
        self._known_dirs = candidates
        rows += [self._broken_row(d) for d in sorted(self._broken)]
        return sorted(rows, key=lambda r: (r.get("created_at") is None, r.get("created_at") or "", r["run_dir"]))

    def _probe(self, run_dir: str) -> list[dict[str, Any]]:
        try:
            rows = self.query("ui_runs", None, [run_dir])
        except QueryError as exc:
            self._broken[run_dir] = str(exc)
            return []
        self._broken.pop(run_dir, None)
        return rows

    def _broken_row(self, run_dir: str) -> dict[str, Any]:
        name = os.path.basename(run_dir.rstrip("/")) or run_dir
        return {"run_id": name, "name": name, "tags": [], "run_dir": run_dir, "status": "broken",
                "error": self._broken[run_dir], "steps_recorded": 0}

    def dirs_of(self, run_ids: Sequence[str]) -> list[str]:
        """The run directories of run_ids (NotFound for an id the root does not hold)."""
        listing = self.runs()
        dirs: list[str] = []
        for run_id in run_ids:
            found = [r["run_dir"] for r in listing.rows if r["run_id"] == run_id]
            if not found:
                raise NotFound(f"no run {run_id!r} below {self.root}")
            dirs += found
        return dirs

    def row(self, run_id: str) -> dict[str, Any]:
        """The runs-table row of one run."""
        found = self.runs().by_id(run_id)
        if found is None:
            raise NotFound(f"no run {run_id!r} below {self.root}")
        return found

    # -- one run ------------------------------------------------------------------------------
    def header(self, run_id: str) -> dict[str, Any]:
        """The run's row with its trainer_config and environment as JSON text (the report's header query)."""
        row = self.row(run_id)
        if row.get("status") == "broken":
            return dict(row)
        rows = self.query("report_run", None, self.dirs_of([run_id]))
        found = next((r for r in rows if r["run_id"] == run_id), None)
        return {**row, **(found or {})}

    def samples(self, run_id: str, *, q: str = "", lo: int | None = None, hi: int | None = None, cited: list[str] | None = None,
                order: str = "top", limit: int = 20, offset: int = 0, max_chars: int = 4000) -> dict[str, Any]:
        """One page of the run's samples (see sql/v1/ui/queries/ui_samples.sql)."""
        if order not in SAMPLE_ORDERS:
            raise BadRequest(f"order must be one of {', '.join(SAMPLE_ORDERS)}, not {order!r}")
        params = {"run_id": run_id, "q": q[:500], "lo": lo, "hi": hi, "cited": cited, "order": order,
                  "limit": max(1, min(int(limit), 200)), "offset": max(0, int(offset)), "max_chars": max_chars}
        rows = self.query("ui_samples", params, self.dirs_of([run_id]))
        return {"matching": rows[0]["matching"] if rows else 0, "offset": params["offset"], "samples": json_safe(rows)}

    # -- charts -------------------------------------------------------------------------------
    def metrics(self, run_ids: Sequence[str]) -> list[dict[str, Any]]:
        """The numeric metrics the runs logged, with the runs that logged each."""
        run_ids, dirs = self._resolve(run_ids)
        return self.cached(("metrics", tuple(run_ids), self.versions(run_ids)), lambda: self._metrics(run_ids, dirs))

    def _metrics(self, run_ids: list[str], dirs: list[str]) -> list[dict[str, Any]]:
        counted = self._metrics_from_footers(run_ids, dirs)
        if counted is not None:
            return counted
        try:
            return self.query("ui_metrics", {"run_ids": run_ids}, dirs)
        except QueryError:
            merged: dict[str, dict[str, Any]] = {}
            for run_id in run_ids:  # one unreadable run must not hide the others' metrics
                try:
                    rows = self.query("ui_metrics", {"run_ids": [run_id]}, self.dirs_of([run_id]))
                except QueryError:
                    continue
                for r in rows:
                    m = merged.setdefault(r["metric"], {"metric": r["metric"], "n": 0, "runs": []})
                    m["n"] += r["n"]
                    m["runs"] += r["runs"] or []
            return [merged[k] for k in sorted(merged)]

    def _metrics_from_footers(self, run_ids: list[str], dirs: list[str]) -> list[dict[str, Any]] | None:
        """ui_metrics' rows counted from the step files' footers (each column chunk's rows less its
        NULLs) instead of every value of every column through the views (~0.3 s for three
        100k-step runs), for runs whose files the view reads as they are (series_plan); None when
        some run must be counted through the views, or a footer lacks a null count. NaN and inf
        count as values in both, as count() counts them."""
        files = {d: list_run_files(d) for d in dict.fromkeys(dirs)}
        plan = self.series_plan(run_ids, files)
        if plan is None:
            return None
        try:
            numeric = self._columns(dirs, files)
        except QueryError:
            return None
        facts = self.step_files.get(k for _, k in plan)
        counts: dict[str, dict[str, int]] = {}  # metric -> run_id -> values
        for run_id, key in plan:
            values = facts[key].values
            if values is None:
                return None
            for metric, n in values:
                if metric in numeric:
                    by_run = counts.setdefault(metric, {})
                    by_run[run_id] = by_run.get(run_id, 0) + n
        rows = []
        for metric in sorted(counts):
            n = sum(counts[metric].values())
            if n > 0:
                rows.append({"metric": metric, "n": n, "runs": sorted(r for r, v in counts[metric].items() if v > 0)})
        return rows

    def series(self, run_ids: Sequence[str], metrics: Sequence[str], *, x: str = "step", bins: int = 1000,
               lo: float | None = None, hi: float | None = None) -> dict[str, Any]:
        """The metrics of the runs cut into bins on the x axis, min/max per bin (sql/v1/ui/queries/ui_series.sql).

        Returns {"series": {run_id: {metric: columns as RawJSON}}, "errors": {run_id: line}, "sql":
        the query as text, "sql_by_metric": each metric's query}; rlprobe.ui.catalog.dumps writes it. A run that cannot be read is reported in
        errors; the others are drawn. Metric names are checked against the steps view's numeric
        columns first: a name no run has draws nothing and never reaches the SQL.
        """
        run_ids, dirs = self._resolve(run_ids)
        if x not in X_AXES:
            raise BadRequest(f"x must be one of {', '.join(X_AXES)}, not {x!r}")
        if not metrics or len(metrics) > MAX_METRICS:
            raise BadRequest(f"give between 1 and {MAX_METRICS} metrics")
        bins = max(1, min(int(bins), MAX_BINS))
        key = ("series", tuple(run_ids), tuple(metrics), x, bins, lo, hi, self.versions(run_ids))
        return self.cached(key, lambda: self._series(run_ids, dirs, list(metrics), x, bins, lo, hi))

    def _series(self, run_ids: list[str], dirs: list[str], metrics: list[str], x: str, bins: int,
                lo: float | None, hi: float | None) -> dict[str, Any]:
        out: dict[str, Any] = {"series": {}, "errors": {}, "bins": bins, "x": x, "lo": lo, "hi": hi}
        files = {d: list_run_files(d) for d in dict.fromkeys(dirs)}  # stat() alone
        try:
            known = self._columns(dirs, files)
        except QueryError:
            known = set()
            for run_id in run_ids:
                try:
                    known |= {r["metric"] for r in self.query("ui_columns", None, self.dirs_of([run_id]))}
                except QueryError as exc:
                    out["errors"][run_id] = str(exc)
        wanted = [m for m in dict.fromkeys(metrics) if m in known]
        listing = self.runs()
        live = [r for r in run_ids if (listing.by_id(r) or {}).get("status") != "closed"]
        params = {"run_ids": list(run_ids), "metrics": wanted, "live_run_ids": live, "x": x, "bins": bins, "lo": lo, "hi": hi}
        template = sqlfiles.query("ui_series")
        # the query shown is the one over the views, which anyone can run; the files read
        # directly give the same rows (tests/test_ui_series.py)
        out["sql"] = inline_params(template, params)
        out["sql_by_metric"] = {m: inline_params(template, {**params, "metrics": [m]}) for m in wanted}
        if not wanted:
            return out
        drawn = None if out["errors"] else self._series_direct(run_ids, files, wanted, x, bins, lo, hi)
        if drawn is None:
            drawn = self._series_views(run_ids, dirs, params, live, out["errors"])
        for run_id, metric, text in drawn:
            out["series"].setdefault(run_id, {})[metric] = RawJSON(text)
        return out

    def _series_json(self, name: str, params: dict[str, Any], dirs: Sequence[str] | None = None) -> list[tuple[str, str, str]]:
        """(run_id, metric, JSON columns) of the series query `name` (ui_series or ui_series_files):
        ui_series_json over it in the same statement, so its rows go straight into the lists
        instead of out to Arrow and back in."""
        sql = f"WITH series AS ({sqlfiles.query(name)})\n{sqlfiles.query('ui_series_json')}"
        with self.session(dirs) as cur:
            return run(cur, sql, params, "tuples")

    def _columns(self, dirs: list[str], files: dict[str, RunFiles]) -> set[str]:
        """The numeric columns of the steps view over dirs (ui_columns), kept while none of the
        step files it reads (rank sub-recordings' too) changes."""
        key = ("columns", tuple(dirs), tuple(k for d in dirs for k in files[d].everything))
        return self.cached(key, lambda: {r["metric"] for r in self.query("ui_columns", None, dirs)}, self._by_files)

    def _series_views(self, run_ids: list[str], dirs: list[str], params: dict[str, Any], live: list[str],
                      errors: dict[str, str]) -> list[tuple[str, str, str]]:
        """ui_series over the views, as JSON: every run in one query, or one by one when some cannot be read."""
        try:
            return self._series_json("ui_series", params, dirs)
        except QueryError:
            drawn: list[tuple[str, str, str]] = []
            for run_id in run_ids:
                if run_id in errors:
                    continue
                try:
                    one = {**params, "run_ids": [run_id], "live_run_ids": [r for r in live if r == run_id]}
                    drawn += self._series_json("ui_series", one, self.dirs_of([run_id]))
                except QueryError as exc:
                    errors[run_id] = str(exc)
            return drawn

    def series_plan(self, run_ids: Sequence[str], files: dict[str, RunFiles] | None = None) -> list[tuple[str, FileKey]] | None:
        """The step files a chart of run_ids reads directly, each with its run, or None when some
        run must be read through the views: a run_id held by two directories, a recording whose
        files repeat a step or overlap (the view merges them), a file whose steps could not be
        counted cheaply or read (the view says which run is broken)."""
        listing = self.runs()
        plan: list[tuple[str, FileKey]] = []
        runs: list[tuple[str, RunFiles]] = []
        for run_id in run_ids:
            rows = [r for r in listing.rows if r["run_id"] == run_id]
            if len(rows) != 1 or rows[0].get("status") == "broken":
                return None
            run_dir = rows[0]["run_dir"]
            runs.append((run_id, (files or {}).get(run_dir) or list_run_files(run_dir)))
        keys = [k for _, f in runs for k in ([f.compacted] if f.compacted else []) + list(f.parts)]
        try:
            facts = self.step_files.get(keys)
        except QueryError:
            return None
        for run_id, f in runs:
            chosen = chosen_files(f, facts)
            if needs_merge(chosen, facts) is not False:
                return None
            plan += [(run_id, k) for k in chosen]
        return plan

    def _series_direct(self, run_ids: list[str], files: dict[str, RunFiles], metrics: list[str], x: str, bins: int,
                       lo: float | None, hi: float | None) -> list[tuple[str, str, str]] | None:
        """ui_series' rows read straight from the runs' step files (ui_series_files), as JSON, or
        None when some run must be read through the views (series_plan) or a file changed under
        the read."""
        plan = self.series_plan(run_ids, files)
        if plan is None:
            return None
        facts = self.step_files.get(k for _, k in plan)
        # a metric no file holds has no rows to draw (as through the view); naming it would fail
        present = [m for m in metrics if any(m in facts[k].columns for _, k in plan)]
        if not plan or not present:
            return []
        lo, hi = files_extent(x, [(r, facts[k]) for r, k in plan], lo, hi)
        params = {"file_run_ids": [r for r, _ in plan], "metrics": present,
                  "file_first_wall_times": [facts[k].first_wall_time for _, k in plan],
                  "x": x, "bins": bins, "lo": lo, "hi": hi}
        files = [(k, facts[k]) for _, k in plan]
        try:
            drawn = self._series_held(files, params) if self.columns.fits([f for _, f in files], present) else None
            if drawn is None:  # more than the cache holds: read the files, aggregating every metric with its CASEs
                drawn = self._series_json("ui_series_files", {**params, "files": [k[0] for k, _ in files], "clean": []})
        except QueryError:
            return None  # a part compacted away meanwhile, a file the facts did not foresee: the views decide
        if any(stat_key(k[0]) != k for _, k in plan):
            return None  # a file was replaced while it was read: its facts may not hold
        return drawn

    def _series_held(self, files: list[tuple[FileKey, FileFacts]], params: dict[str, Any]) -> list[tuple[str, str, str]] | None:
        """ui_series_held over the files' columns held in memory (read now where not held yet), as
        JSON; None when the rows read did not line up with the files' facts."""
        metrics = params["metrics"]
        try:
            held = self.columns.get(files, metrics)
        except ValueError:
            return None
        # a metric is aggregated without series_bins' CASEs only where every file holds it, finite in every row
        clean = [m for m in metrics if all(m in held[k] and held[k][m].clean for k, _ in files)]
        rows = held_rows(files, held, metrics)
        sql = f"WITH series AS ({sqlfiles.query('ui_series_held')})\n{sqlfiles.query('ui_series_json')}"
        with self.session() as cur:
            cur.register("ui_held_rows", rows)
            try:
                return run(cur, sql, {**params, "clean": clean}, "tuples")
            finally:
                cur.unregister("ui_held_rows")

    def _read_columns(self, paths: list[str], metrics: list[str]) -> Any:
        """ui_step_file_columns' Arrow table (rlprobe.ui.columns.ColumnCache reads with it)."""
        with self.session() as cur:
            return run(cur, sqlfiles.query("ui_step_file_columns"), {"files": paths, "metrics": metrics}, "arrow")

    def events(self, run_ids: Sequence[str], *, quiet: bool = False, per_kind: int = 2000, max_chars: int = 300) -> list[dict[str, Any]]:
        """The runs' events in time order; quiet=True keeps the lifecycle bookkeeping too."""
        run_ids, dirs = self._resolve(run_ids)
        params = {"run_ids": list(run_ids), "skip_kinds": [] if quiet else list(QUIET_EVENTS), "per_kind": per_kind,
                  "max_chars": max_chars}
        try:
            return json_safe(self.query("ui_events", params, dirs))
        except QueryError:
            rows: list[dict[str, Any]] = []
            for run_id in run_ids:
                try:
                    rows += self.query("ui_events", {**params, "run_ids": [run_id]}, self.dirs_of([run_id]))
                except QueryError:
                    continue
            return json_safe(rows)

    def _resolve(self, run_ids: Sequence[str]) -> tuple[list[str], list[str]]:
        """The distinct run ids asked for and their directories (NotFound, BadRequest)."""
        run_ids = list(dict.fromkeys(run_ids))
        if not run_ids:
            raise BadRequest("give at least one run")
        if len(run_ids) > MAX_SERIES_RUNS:
            raise BadRequest(f"at most {MAX_SERIES_RUNS} runs at once")
        return run_ids, self.dirs_of(run_ids)

    # -- the SQL console ----------------------------------------------------------------------
    def console(self, sql: str, limit: int = CONSOLE_ROWS, timeout_s: float = CONSOLE_TIMEOUT_S) -> dict[str, Any]:
        """Run one SELECT over the views: at most `limit` rows, stopped after timeout_s.

        Read-only twice over: anything but a single SELECT is refused before it runs (DuckDB's own
        parser says what the statement is), and the database cannot reach files outside the root.
        """
        limit = max(1, min(int(limit), CONSOLE_MAX_ROWS))
        if not sql.strip():
            raise BadRequest("the query is empty")
        with self.session() as cur:
            try:
                statements = cur.extract_statements(sql)
            except duckdb.Error as exc:
                raise BadRequest(_first_line(exc)) from exc
            if len(statements) != 1 or statements[0].type != duckdb.StatementType.SELECT:
                kinds = ", ".join(s.type.name for s in statements) or "nothing"
                raise BadRequest(f"the console runs one SELECT statement (read-only); this is {kinds}")
            dirs = Store(cur, self.target).scope_for(sql)
            if dirs is not None:
                cur.execute("SET VARIABLE rlprobe_scope = ?::VARCHAR[]", [dirs])
            timer = threading.Timer(timeout_s, cur.interrupt)
            t0 = time.perf_counter()
            timer.start()
            try:
                rel = cur.sql(sql)
                if rel is None:
                    raise BadRequest("the statement returned no rows")
                types = [str(t) for t in rel.types]
                table = rel.limit(limit + 1).to_arrow_table()
            except duckdb.InterruptException as exc:
                raise BadRequest(f"the query ran longer than the console's limit of {timeout_s:g} s and was stopped") from exc
            except duckdb.Error as exc:
                raise BadRequest(_first_line(exc)) from exc
            finally:
                timer.cancel()
            elapsed = time.perf_counter() - t0
        columns = table.column_names
        rows = table.slice(0, limit).to_pylist()
        cut = 0
        out_rows = []
        for r in rows:
            cells = []
            for c in columns:
                v = r[c]
                if isinstance(v, str) and len(v) > CELL_CHARS:
                    v, cut = v[:CELL_CHARS] + "…", cut + 1
                cells.append(json_safe(v))
            out_rows.append(cells)
        return {"columns": columns, "types": types, "rows": out_rows, "truncated": table.num_rows > limit,
                "limit": limit, "cells_cut": cut, "elapsed_s": round(elapsed, 4)}


def files_extent(x: str, files: Sequence[tuple[str, FileFacts]], lo: float | None,
                 hi: float | None) -> tuple[float | None, float | None]:
    """The x range of a chart of these files (each with its run) where lo or hi is left open: what
    ui_series takes from the rows of the same runs (sql/v1/ui/queries/ui_series.sql, extent), from
    each file's first and last step and wall_time instead. The step axis spans the runs' first to
    last step, the wall_time axis their first to last wall_time, the relative axis 0 to the
    longest run's span; None where no file says (then nothing is drawn, as through the views).
    Values are ordered as DuckDB orders them (NaN above everything), so the figures are SQL's."""
    if lo is not None and hi is not None:
        return lo, hi
    if x == "step":
        low = _sql_min(None if f.first_step is None else float(f.first_step) for _, f in files)
        high = _sql_max(None if f.last_step is None else float(f.last_step) for _, f in files)
    elif x == "wall_time":
        low, high = _sql_min(f.first_wall_time for _, f in files), _sql_max(f.last_wall_time for _, f in files)
    else:
        runs = dict.fromkeys(r for r, _ in files)
        t0 = {r: _sql_min(f.first_wall_time for q, f in files if q == r) for r in runs}
        t1 = {r: _sql_max(f.last_wall_time for q, f in files if q == r) for r in runs}
        low, high = 0.0, _sql_max(None if t0[r] is None or t1[r] is None else t1[r] - t0[r] for r in runs)
    return (low if lo is None else lo), (high if hi is None else hi)


def _sql_order(value: float) -> tuple[bool, float]:
    return (math.isnan(value), 0.0 if math.isnan(value) else value)


def _sql_min(values: Iterable[float | None]) -> float | None:
    """min() as SQL takes it: NULLs left out, NaN above every number."""
    return min((v for v in values if v is not None), key=_sql_order, default=None)


def _sql_max(values: Iterable[float | None]) -> float | None:
    """max() as SQL takes it: NULLs left out, NaN above every number."""
    return max((v for v in values if v is not None), key=_sql_order, default=None)


class RawJSON:
    """Text that is already JSON (written by DuckDB): sent as it is, never encoded again. It holds
    the text instead of being a str, because making a str subclass of a str copies it: ~8 MB and
    ~6 ms for an 8-metric chart of ten 100k-step runs."""

    __slots__ = ("text",)

    def __init__(self, text: str) -> None:
        self.text = text


def dumps(value: Any) -> str:
    """Strict JSON of value, with RawJSON parts put in as they are (see rlprobe.ui.app)."""
    parts: list[str] = []
    _write_json(value, parts)
    return "".join(parts)  # one copy of the parts: an 8-metric chart of 10 runs is ~8 MB of them


def _write_json(value: Any, parts: list[str]) -> None:
    import json

    if isinstance(value, RawJSON):
        parts.append(value.text)
    elif isinstance(value, dict) and _holds_raw(value):
        parts.append("{")
        for i, (k, v) in enumerate(value.items()):
            parts.append(("," if i else "") + json.dumps(str(k), ensure_ascii=False) + ":")
            _write_json(v, parts)
        parts.append("}")
    else:
        parts.append(json.dumps(json_safe(value), ensure_ascii=False, allow_nan=False, separators=(",", ":")))


def _holds_raw(value: dict[Any, Any]) -> bool:
    """True when a RawJSON is among the dict's values, at any depth of dicts (where series put them)."""
    return any(isinstance(v, RawJSON) or (isinstance(v, dict) and _holds_raw(v)) for v in value.values())
