"""Write what a reader parsed as a normal, closed recording, and say what was imported.

The recording is built under a hidden temporary name next to RUN_DIR and renamed into place
at the end, so a failed import leaves nothing behind and a reader never sees half of one.
It carries the lifecycle events a Recorder writes (recorder_open, recorder_close), so the runs
view shows it as closed, and an `imported` event naming the source and what was (not) mapped.
"""

from __future__ import annotations

import os
import shutil
import uuid
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from rlprobe import __version__
from rlprobe.importers._common import Parsed, torn_note
from rlprobe.keymap import why_extra
from rlprobe.schemas import EXTRA_PREFIX, REWARD_COMPONENT_PREFIX, STEP_COLUMN_TYPES, Event, RunManifest, new_run_id

if TYPE_CHECKING:
    import pyarrow as pa

_MAX_LISTED_LINES = 50  # an event line stays small even for a log that is all garbage


@dataclass
class ImportReport:
    """What an import read and wrote: counts, step range, mapped and unmapped keys."""

    source: str
    kind: str
    run_dir: str
    run_id: str
    steps: int
    samples: int
    first_step: int | None
    last_step: int | None
    step_rule: str
    fields: list[str] = field(default_factory=list)
    components: list[str] = field(default_factory=list)
    unmapped: list[str] = field(default_factory=list)
    known_extra: list[str] = field(default_factory=list)
    shadowed: list[str] = field(default_factory=list)
    derived: list[str] = field(default_factory=list)
    non_numeric: list[str] = field(default_factory=list)
    bad_lines: list[int] = field(default_factory=list)
    skipped: dict[str, int] = field(default_factory=dict)
    files: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    torn: list[dict[str, Any]] = field(default_factory=list)  # {file, tail_bytes, records, cut}: a tail not read
    algorithm: str | None = None
    algorithm_rule: str = ""
    model_name: str | None = None

    def to_dict(self) -> dict[str, Any]:
        """The report as a JSON-ready dict (what the `imported` event carries)."""
        out = asdict(self)
        if len(self.bad_lines) > _MAX_LISTED_LINES:
            out["bad_lines"] = self.bad_lines[:_MAX_LISTED_LINES]
        out["bad_line_count"] = len(self.bad_lines)
        return out

    def summary(self, torn: bool = True) -> str:
        """A few human lines: what was imported, from where, and what was not understood.

        torn=False leaves out the lines on files whose tail was not read (`rlprobe import` prints
        those on stderr, where a warning about the source belongs: see torn_notes).
        """
        span = f"steps {self.first_step}..{self.last_step}" if self.steps else "no steps"
        lines = [
            f"imported {self.kind} {self.source}",
            f"  -> {self.run_dir}  (run_id {self.run_id})",
            f"  {self.steps} steps ({span}), {self.samples} samples",
            f"  step numbers: {self.step_rule}" if self.step_rule else "",
            f"  mapped fields: {', '.join(self.fields) or '(none)'}",
        ]
        if self.model_name or self.algorithm:
            why = f" (inferred: {self.algorithm_rule})" if self.algorithm_rule else ""
            lines.append(f"  model: {self.model_name or '?'}, algorithm: {self.algorithm or '?'}{why}")
        if self.derived:
            lines.append(f"  derived fields (exact, see docs/import.md): {', '.join(self.derived)}")
        if self.components:
            lines.append(f"  reward components: {', '.join(self.components)}")
        unknown = [k for k in self.unmapped if k not in set(self.known_extra)]
        if self.known_extra:
            lines.append(f"  known keys without a field ({len(self.known_extra)}, kept as extra.<key>; docs/import.md "
                         f"says why): {', '.join(self.known_extra)}")
        if unknown:
            lines.append(f"  unmapped keys ({len(unknown)}, kept as extra.<key>): {', '.join(unknown)}")
        if self.shadowed:
            lines.append(f"  second spellings of a mapped field (kept as extra.<key>): {', '.join(self.shadowed)}")
        if self.non_numeric:
            lines.append(f"  not numbers, not imported: {', '.join(self.non_numeric)}")
        if self.skipped:
            lines.append("  left out: " + ", ".join(f"{n} {reason}" for reason, n in sorted(self.skipped.items())))
        if self.bad_lines:
            shown = ", ".join(map(str, self.bad_lines[:10])) + (", ..." if len(self.bad_lines) > 10 else "")
            lines.append(f"  malformed lines skipped ({len(self.bad_lines)}): {shown}")
        lines += [f"  torn: {torn_note(t)}" for t in self.torn] if torn else []
        lines += [f"  note: {n}" for n in self.notes]
        return "\n".join(line for line in lines if line)


@dataclass
class RootReport:
    """What a root import (a tracker's folder of many runs) wrote: one report per run, and the failures."""

    source: str
    kind: str
    run_dir: str
    runs: list[ImportReport] = field(default_factory=list)
    failed: list[tuple[str, str]] = field(default_factory=list)  # (run name, why)

    @property
    def steps(self) -> int:
        """Steps imported over all runs."""
        return sum(r.steps for r in self.runs)

    @property
    def step_rule(self) -> str:
        """The step rules the runs used."""
        return "; ".join(dict.fromkeys(r.step_rule for r in self.runs))

    def to_dict(self) -> dict[str, Any]:
        """The report as a JSON-ready dict."""
        return {"source": self.source, "kind": self.kind, "run_dir": self.run_dir,
                "runs": [r.to_dict() for r in self.runs], "failed": [{"run": n, "error": e} for n, e in self.failed]}

    def summary(self, torn: bool = True) -> str:
        """One line per run (and its torn files, unless torn=False), then the runs that could not be imported."""
        lines = [f"imported {len(self.runs)} {self.kind} runs from {self.source}", f"  -> {self.run_dir} (a runs root)"]
        for r in self.runs:
            name = os.path.relpath(r.run_dir, self.run_dir)
            span = f"steps {r.first_step}..{r.last_step}" if r.steps else "no steps"
            lines.append(f"  {name}: {r.steps} steps ({span}), {r.samples} samples, {len(r.fields)} fields mapped"
                         + (f", {len(r.unmapped)} keys kept as extras" if r.unmapped else ""))
            lines += [f"    torn: {torn_note(t)}" for t in r.torn] if torn else []
        for name, why in self.failed:
            lines.append(f"  not imported: {name}: {why}")
        return "\n".join(lines)


def torn_notes(report: ImportReport | RootReport) -> list[str]:
    """One line per file whose tail was not imported, over a run or every run of a root."""
    return [torn_note(t) for one in getattr(report, "runs", [report]) for t in one.torn]


def _ordered_union(lists: list[list[str]]) -> list[str]:
    seen: dict[str, None] = {}
    last: list[str] | None = None
    for names in lists:
        if names != last:  # a source repeats the same keys step after step
            seen.update(dict.fromkeys(names))
            last = names
    return list(seen)


def _step_rows(parsed: Parsed) -> list[dict[str, Any]]:
    component_col = {}
    extra_col = {}
    rows = []
    for entry in parsed.entries:
        row: dict[str, Any] = {"step": entry.step, **entry.mapped.fields}
        for k, v in entry.mapped.components.items():
            name = component_col.get(k)
            if name is None:
                name = component_col[k] = REWARD_COMPONENT_PREFIX + k
            row[name] = v
        for k, v in entry.mapped.extra.items():
            name = extra_col.get(k)
            if name is None:
                name = extra_col[k] = EXTRA_PREFIX + k
            row[name] = v
        rows.append(row)
    return rows


def _steps_table(parsed: Parsed) -> pa.Table | None:
    """The table RunWriter.write_steps makes of _step_rows(parsed), built from columns.

    A large import (100k steps x 30 metrics) spent seconds building a dict per step and then
    looking every column up in every one of them. A source repeats its keys step after step, so
    the steps are grouped by their keys and each group's values transposed into columns at once.
    Same names, types, column order and values. None when the rows are not plain (a column name
    two parts share, a value Arrow refuses): the rows path then sets aside a row Arrow cannot hold.
    """
    import pyarrow as pa

    # What building a column raises for a value Arrow cannot hold (as RunWriter's rows path).
    data_errors = (pa.ArrowException, OverflowError, UnicodeError, TypeError, ValueError)
    column_types = {"BIGINT": pa.int64(), "DOUBLE": pa.float64()}
    entries = parsed.entries
    n = len(entries)
    columns: dict[str, list[Any]] = {"step": [e.step for e in entries]}
    for dicts, prefix in (([e.mapped.fields for e in entries], ""),
                          ([e.mapped.components for e in entries], REWARD_COMPONENT_PREFIX),
                          ([e.mapped.extra for e in entries], EXTRA_PREFIX)):
        part: dict[str, list[Any]] = {}
        for keys, (rows, values) in _by_keys(dicts).items():
            for key, column in zip(keys, zip(*values)):
                if len(rows) == n:  # every step logs this key (rows is then every step, in order)
                    part[key] = list(column)
                    continue
                full = part.setdefault(key, [None] * n)
                for row, value in zip(rows, column):
                    full[row] = value
        for key, column in part.items():
            if prefix + key in columns:
                return None  # a row dict would hold one of the two: leave it to the rows
            columns[prefix + key] = column
    ordered = [c for c in STEP_COLUMN_TYPES if c in columns]
    ordered += sorted(c for c in columns if c not in STEP_COLUMN_TYPES)
    arrays = []
    try:
        for name in ordered:
            arrow_type = column_types.get(STEP_COLUMN_TYPES.get(name, "DOUBLE"))
            if arrow_type is None:
                return None
            arrays.append(pa.array(columns[name], type=arrow_type))
    except data_errors:
        return None
    return pa.Table.from_arrays(arrays, names=ordered)


def _by_keys(dicts: list[dict[str, Any]]) -> dict[tuple[str, ...], tuple[list[int], list[tuple[Any, ...]]]]:
    """{keys: (row numbers, each row's values in that key order)} of dicts, in row order."""
    groups: dict[tuple[str, ...], tuple[list[int], list[tuple[Any, ...]]]] = {}
    for i, d in enumerate(dicts):
        keys = tuple(d)
        group = groups.get(keys)
        if group is None:
            group = groups[keys] = ([], [])
        group[0].append(i)
        group[1].append(tuple(d.values()))
    return groups


def write_recording(parsed: Parsed, source: Path, run_dir: Path, *, algorithm: str | None = None,
                    model_name: str | None = None, run_id: str | None = None) -> ImportReport:
    """Write parsed as a closed recording at run_dir (which must not hold anything yet)."""
    from rlprobe.record.coerce import sample_row
    from rlprobe.record.writer import RunWriter

    steps = sorted({e.step for e in parsed.entries})
    report = ImportReport(
        source=str(source), kind=parsed.kind, run_dir=str(run_dir), run_id=run_id or new_run_id(),
        steps=len(steps), samples=len(parsed.samples),
        first_step=steps[0] if steps else None, last_step=steps[-1] if steps else None,
        step_rule=parsed.step_rule,
        fields=sorted({f for e in parsed.entries for f in e.mapped.fields}),
        components=sorted({c for e in parsed.entries for c in e.mapped.components}),
        unmapped=_ordered_union([e.mapped.unmapped for e in parsed.entries]),
        known_extra=[k for k in _ordered_union([e.mapped.unmapped for e in parsed.entries]) if why_extra(k)],
        shadowed=_ordered_union([e.mapped.shadowed for e in parsed.entries]),
        derived=_ordered_union([e.mapped.derived for e in parsed.entries]),
        non_numeric=_ordered_union([e.mapped.skipped for e in parsed.entries]),
        bad_lines=list(parsed.bad_lines), skipped=dict(parsed.skipped), files=list(parsed.files),
        notes=list(parsed.notes), torn=list(parsed.torn), algorithm=algorithm or parsed.algorithm,
        algorithm_rule="" if algorithm else parsed.algorithm_rule, model_name=model_name or parsed.model_name,
    )
    manifest = RunManifest(
        run_id=report.run_id, algorithm=report.algorithm, model_name=report.model_name,
        trainer_config=parsed.trainer_config, imported_from={"source": str(source), "kind": parsed.kind},
    )
    run_dir.parent.mkdir(parents=True, exist_ok=True)
    tmp = run_dir.parent / f".{run_dir.name}.import-{uuid.uuid4().hex[:8]}.tmp"
    try:
        writer = RunWriter(tmp, manifest)
        writer.append_event(Event(kind="recorder_open", message="import", data={"run_id": report.run_id}))
        if parsed.entries:
            table = _steps_table(parsed)
            if table is not None:
                writer.write_steps_table(table)
            else:
                writer.write_steps(_step_rows(parsed))
        if parsed.samples:
            samples = []
            for sample in parsed.samples:
                row, _ = sample_row(sample, sample["step"], 0)
                if row is not None:
                    samples.append(row)
            writer.write_samples(samples)
        writer.append_event(Event(kind="imported", message=f"imported from {parsed.kind} {source}",
                                  data={**report.to_dict(), "rlprobe_version": __version__}))
        writer.compact()
        writer.append_event(Event(kind="recorder_close", message="import complete"))
        os.replace(tmp, run_dir)  # POSIX rename replaces an empty directory (the caller checked it is)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    return report
