"""Follow a source that is still being written: each poll returns only the steps that are new.

What `rlprobe watch train.log` needs: the trainer appends to a log, a JSONL file, a TensorBoard
event file, or rewrites trainer_state.json at each checkpoint, and every poll turns what is
new into entries, never an entry twice.

- console logs (HF dicts, metric lines, OpenRLHF's Episode bar postfixes) and JSONL are read from the byte offset where the last poll stopped, whole lines
  only (a line still being written waits for its newline);
- a TensorBoard run is read by tensorboard's record reader, which keeps its offset;
- trainer_state.json is read whole when it changes (the Trainer rewrites it), entries past the
  last step taken;
- an XTuner log is parsed whole when it grew (a rollout's lines are far apart), rollouts past
  the last one taken.

A step whose values may still be arriving (TensorBoard writes one event per tag; an XTuner
rollout prints its blocks over minutes) is held back until a later step appears or `close()`:
a step written twice would be a step the doctor sees twice.

Console dicts carry no step: entry i is step N*(i+1), with N found by the rule `rlprobe import`
uses on the text read so far (console_log.StepEvidence): --step-every, a printed
`logging_steps=N`, the progress bar's counts while the run is going, its totals once it ended.
When more text changes N (each entry can only lower the bound the bar gives; the totals at the
end can settle it), the poll returns every entry again, renumbered, with `renumbered` set: the
steps a follower has handed out are always what an import of the same text would give.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any, Callable

from rlprobe.errors import SourceUnreadable
from rlprobe.importers import console_log, metrics_file, tensorboard, trainer_state, xtuner_log
from rlprobe.importers._common import EVALUATION_FIRST, Entry, Parsed, before_training, classify
from rlprobe.keymap import MappedMetrics

FOLLOWED = ("console", "jsonl", "trainer_state", "tensorboard", "xtuner")


class SourceFollower:
    """New entries of a growing source, poll by poll; see the module doc for each kind."""

    def __init__(self, source: str | os.PathLike[str], kind: str, step_every: int | None = None) -> None:
        if kind not in FOLLOWED:
            raise SourceUnreadable(f"{source}: `rlprobe watch` follows {', '.join(FOLLOWED)} sources, not {kind}")
        self.source = Path(source)
        self.kind = kind
        self.step_every = step_every
        self.parsed = Parsed(kind=kind, files=[str(self.source)])  # counts (skipped, bad lines) across polls
        self.step_rule = ""
        self.renumbered = False  # the last poll's entries replace every entry handed out before
        self._offset = 0
        self._pending = ""  # a text line without its newline yet
        self._line = 0
        self._entries_seen = 0
        self._every: int | None = step_every
        self._released: int | None = None  # the last step handed out
        self._held: Entry | None = None
        self._signature: tuple[int, int] | None = None
        self._reader: tensorboard.EventReader | None = None
        self._evidence = console_log.StepEvidence()
        self._dicts: list[tuple[MappedMetrics, int]] = []  # every Trainer dict taken: (mapped, line)
        self._others: list[Entry] = []  # metric lines and OpenRLHF postfixes handed out (they carry their step)
        self._last_postfix: str | None = None
        self._postfixes = 0
        self._waiting: list[Entry] = []  # entries read before any row mapped a training field
        self._first_trained: int | None = None  # the first step that did (_training)
        self._evaluation_first: set[int] = set()  # steps left out as rows before training
        self._poll: Callable[[], list[Entry]] = {
            "console": self._poll_console, "jsonl": self._poll_jsonl, "trainer_state": self._poll_trainer_state,
            "tensorboard": self._poll_tensorboard, "xtuner": self._poll_xtuner,
        }[kind]

    # -- public --------------------------------------------------------------------------
    def poll(self) -> list[Entry]:
        """The entries that became complete since the last poll (in step order)."""
        self.renumbered = False
        if not self.source.exists():
            return []
        return self._training(self._poll())

    def close(self) -> list[Entry]:
        """What is left: the held-back step, now that nothing more will come."""
        out = self.poll()
        if self._held is not None:
            out += self._training([self._held])
            self._held = None
        if self._waiting:  # no row ever mapped a training field: what was read is all there is
            out = sorted(self._waiting + out, key=lambda e: e.step)
            self._waiting = []
        if self._reader is not None:
            self._reader.close()  # the event files it holds open
            self._reader = None
        return out

    # -- helpers ---------------------------------------------------------------------------
    def _training(self, entries: list[Entry]) -> list[Entry]:
        """Entries without rows before training that map no field, as `rlprobe import` leaves
        them out (_common.before_training): rows wait until a row maps a field, which decides."""
        if self.renumbered:  # every entry is handed out again: decide on them all
            self._waiting, self._first_trained = [], None
        if self._first_trained is None:
            entries = self._waiting + entries
            self._first_trained = before_training(entries)
            if self._first_trained is None:
                self._waiting = entries
                return []
            self._waiting = []
        kept = []
        for e in entries:
            if e.mapped.fields or e.step >= self._first_trained:
                kept.append(e)
            else:
                self._evaluation_first.add(e.step)
        if self._evaluation_first:
            self.parsed.skipped[EVALUATION_FIRST] = len(self._evaluation_first)
        return sorted(kept, key=lambda e: e.step)

    def _release(self, entries: list[Entry], hold_last: bool) -> list[Entry]:
        """Entries past the last step released; with hold_last the newest step waits for a later one."""
        fresh = [e for e in entries if self._released is None or e.step > self._released]
        if self._held is not None:
            held = self._held
            for e in fresh:
                if e.step == held.step:  # the held step got more (or newer) values: merge them in
                    held.mapped.fields.update(e.mapped.fields)
                    held.mapped.components.update(e.mapped.components)
                    held.mapped.extra.update(e.mapped.extra)
            fresh = [e for e in fresh if e.step != held.step]
            if any(e.step > held.step for e in fresh):
                fresh.append(held)
                self._held = None
        fresh.sort(key=lambda e: e.step)
        if hold_last and fresh:
            self._held = fresh.pop()
        if fresh:
            self._released = fresh[-1].step
        return fresh

    def _new_lines(self) -> list[tuple[int, str]]:
        size = self.source.stat().st_size
        if size < self._offset:  # the file was replaced or truncated: start over
            self._offset, self._pending, self._line = 0, "", 0
            self._restart()
        if size == self._offset:
            return []
        with open(self.source, "rb") as fh:
            fh.seek(self._offset)
            data = fh.read(size - self._offset)
        self._offset = size
        text = self._pending + data.decode("utf-8", errors="replace")
        lines = text.split("\n")
        self._pending = lines.pop()  # no newline yet: the next poll finishes it
        out = []
        for line in lines:
            self._line += 1
            out.append((self._line, line))
        return out

    def _changed(self) -> bool:
        st = self.source.stat()
        signature = (st.st_size, st.st_mtime_ns)
        if signature == self._signature:
            return False
        self._signature = signature
        return True

    # -- per kind ----------------------------------------------------------------------------
    def _restart(self) -> None:
        """A console log read again from its start: what it holds now replaces what was handed out."""
        if self.kind == "console" and (self._dicts or self._others):
            self._evidence = console_log.StepEvidence()
            self._dicts, self._others, self._every = [], [], self.step_every
            self._last_postfix, self._postfixes, self._released = None, 0, None
            self.renumbered = True

    def _poll_console(self) -> list[Entry]:
        lines = self._new_lines()
        if not lines:
            return []
        chunk = "\n".join(line for _, line in lines)
        offsets: list[int] = []
        dicts, metric_lines, bad = console_log.scan(chunk, offsets)
        first = lines[0][0] - 1
        self.parsed.bad_lines += [first + n for n in bad]
        taken = len(self._dicts)
        kept_at: list[int] = []
        completed = False
        for (number, item), at in zip(dicts, offsets):
            completed = completed or console_log.is_summary(item)
            mapped = classify(item, self.parsed)
            if mapped is None:
                continue
            if not console_log.has_known_metric(mapped):
                self.parsed.skip("other dicts")
                continue
            self._dicts.append((mapped, first + number))
            kept_at.append(at)
        self._evidence.feed(chunk, kept_at, completed)
        others: list[Entry] = []
        for number, step, item in metric_lines:
            mapped = classify(item, self.parsed)
            if mapped is not None and console_log.has_known_metric(mapped):
                others.append(Entry(step=step, mapped=mapped, line=first + number))
                self.step_rule = self.step_rule or console_log.LINE_STEP_RULE
        if not dicts and not metric_lines:
            postfixes, self._last_postfix = console_log.episode_postfixes(chunk, self._last_postfix)
            for number, item in postfixes:
                mapped = classify(item, self.parsed)
                if mapped is not None and console_log.has_known_metric(mapped):
                    self._postfixes += 1
                    others.append(Entry(step=self._postfixes, mapped=mapped, line=first + number))
                    self.step_rule = "the k-th distinct postfix of OpenRLHF's Episode progress bar is global step k"
        if not self._dicts:
            entries = self._release(others, hold_last=False)
            self._others += entries
            return entries
        if self.step_every is not None:
            every, self.step_rule = self.step_every, f"entry i is step {self.step_every}*(i+1) (--step-every)"
        else:
            every, self.step_rule = self._evidence.rule()
        if self.renumbered or (self._every is not None and every != self._every and taken):
            # The rule changed under entries already handed out: hand them all out again.
            self._every, self.renumbered = every, True
            self._others += others
            entries = [Entry(step=every * (i + 1), mapped=m, line=n) for i, (m, n) in enumerate(self._dicts)]
            entries = sorted(entries + self._others, key=lambda e: e.step)
            self._released = entries[-1].step if entries else None
            return entries
        self._every = every
        fresh = [Entry(step=every * (i + 1), mapped=m, line=n) for i, (m, n) in enumerate(self._dicts[taken:], start=taken)]
        entries = self._release(fresh + others, hold_last=False)
        handed = {id(e) for e in entries}
        self._others += [e for e in others if id(e) in handed]
        return entries

    def _poll_jsonl(self) -> list[Entry]:
        entries: list[Entry] = []
        for number, line in self._new_lines():
            text = line.strip()
            if not text:
                continue
            try:
                row = json.loads(text)
            except ValueError:
                self.parsed.bad_lines.append(number)
                continue
            if not isinstance(row, dict):
                self.parsed.bad_lines.append(number)
                continue
            mapped = classify(metrics_file.flatten(row), self.parsed)
            if mapped is None:
                continue
            self._entries_seen += 1
            if mapped.step is not None:
                step, self.step_rule = mapped.step, "the step column of each row"
            else:
                every = self.step_every or 1
                step, self.step_rule = every * self._entries_seen, f"no step column: entry i is step {every}*(i+1)"
            entries.append(Entry(step=step, mapped=mapped, line=number))
        return self._release(entries, hold_last=False)

    def _poll_trainer_state(self) -> list[Entry]:
        if not self._changed():
            return []
        try:
            parsed = trainer_state.parse(self.source, self.step_every)
        except SourceUnreadable:
            return []  # caught mid-rewrite (the Trainer writes it in place): read it next poll
        self.step_rule = parsed.step_rule
        return self._release(parsed.entries, hold_last=False)

    def _poll_tensorboard(self) -> list[Entry]:
        if self._reader is None:
            self._reader = tensorboard.EventReader(self.source)
        rows: dict[int, dict[str, Any]] = {}
        for step, wall, scalars, _texts in self._reader.read():
            row = rows.setdefault(step, {})
            row.update(scalars)
            if wall > 0:  # 0 is an unset wall_time
                row["wall_time"] = wall
        entries = []
        for step in sorted(rows):
            mapped = classify(rows[step], self.parsed)
            if mapped is not None:
                entries.append(Entry(step=step, mapped=mapped))
        self.step_rule = "the step of each TensorBoard event"
        return self._release(entries, hold_last=True)

    def _poll_xtuner(self) -> list[Entry]:
        if not self._changed():
            return []
        parsed = xtuner_log.parse(self.source)
        self.step_rule = parsed.step_rule
        return self._release(parsed.entries, hold_last=True)


def follow_kind(source: Path) -> str:
    """The kind of a source to follow: detected when it exists, else guessed from its name."""
    from rlprobe.importers import detect

    if source.exists():
        return detect(source)
    if source.name == "trainer_state.json":
        return "trainer_state"
    if source.suffix.lower() in (".jsonl", ".ndjson"):
        return "jsonl"
    if source.suffix.lower() in (".log", ".txt", ".out", ".err"):
        return "console"
    raise SourceUnreadable(f"{source}: does not exist yet, and its name does not say what it will be; "
                           "pass --format (console, jsonl, trainer_state, tensorboard, xtuner)")


class FollowedRecording:
    """A recording at run_dir that a SourceFollower feeds: each sync() writes the new steps as one part.

    The recording is what a Recorder would leave (manifest, recorder_open, step parts), so the
    live watcher and every reader treat it as a live run; close() writes the held-back step,
    compacts and writes recorder_close. An `imported` event at close says what was followed.
    When the follower renumbers its entries, the steps written so far are replaced (one new part
    with all of them, then the old parts are deleted: the watcher drops the rows of files that
    vanished), a `steps_renumbered` event says why, and `renumbered` counts it.
    """

    def __init__(self, follower: SourceFollower, run_dir: str | os.PathLike[str], *, algorithm: str | None = None,
                 run_id: str | None = None) -> None:
        from rlprobe.record.writer import RunWriter
        from rlprobe.schemas import Event, RunManifest, new_run_id

        self.follower = follower
        self.run_dir = Path(run_dir)
        self.steps = 0
        self.last_step: int | None = None
        self.renumbered = 0  # times the steps written were replaced by renumbered ones
        manifest = RunManifest(run_id=run_id or new_run_id(), algorithm=algorithm,
                               imported_from={"source": str(follower.source.resolve()), "kind": follower.kind,
                                              "followed": True})
        self._writer = RunWriter(self.run_dir, manifest)
        self._writer.append_event(Event(kind="recorder_open", message="rlprobe watch: following a source",
                                        data={"run_id": manifest.run_id, "source": str(follower.source)}))
        self._closed = False

    def sync(self) -> int:
        """Write what the source added since the last sync; the number of steps written."""
        return self._write(self.follower.poll())

    def close(self) -> None:
        """Write the held-back step, compact, and close the recording (idempotent)."""
        if self._closed:
            return
        from rlprobe.schemas import Event

        self._closed = True
        self._write(self.follower.close())
        parsed = self.follower.parsed
        self._writer.append_event(Event(kind="imported", message=f"followed {self.follower.kind} {self.follower.source}",
                                        data={"source": str(self.follower.source), "kind": self.follower.kind,
                                              "steps": self.steps, "step_rule": self.follower.step_rule,
                                              "bad_lines": parsed.bad_lines[:50], "skipped": parsed.skipped}))
        self._writer.compact()
        self._writer.append_event(Event(kind="recorder_close", message="rlprobe watch stopped following"))

    def _write(self, entries: list[Entry]) -> int:
        from rlprobe.importers.write import _step_rows

        if self.follower.renumbered:
            return self._replace(entries)
        if not entries:
            return 0
        rows = _step_rows(Parsed(kind=self.follower.kind, entries=entries))
        self._writer.write_steps(rows)
        self.steps += len(entries)
        self.last_step = entries[-1].step
        return len(entries)

    def _replace(self, entries: list[Entry]) -> int:
        """Every step written so far, renumbered: the new part first, then the old parts go."""
        from rlprobe.importers.write import _step_rows
        from rlprobe.schemas import Event

        old = sorted(self._writer.steps_dir.glob("part-*.parquet"))
        was = (self.steps, self.last_step)
        if entries:
            self._writer.write_steps(_step_rows(Parsed(kind=self.follower.kind, entries=entries)))
        for part in old:
            part.unlink(missing_ok=True)
        self.steps = len(entries)
        self.last_step = entries[-1].step if entries else None
        self.renumbered += 1
        self._writer.append_event(Event(
            kind="steps_renumbered", message=f"the {was[0]} steps written so far were renumbered: {self.follower.step_rule}",
            data={"steps_before": was[0], "last_step_before": was[1], "steps": self.steps, "last_step": self.last_step,
                  "step_rule": self.follower.step_rule}))
        return len(entries)
