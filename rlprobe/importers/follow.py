"""Follow a source that is still being written: each poll returns only the steps that are new.

What `rlprobe watch train.log` needs: the trainer appends to a log, a JSONL file, a TensorBoard
event file, or rewrites trainer_state.json at each checkpoint, and every poll turns what is
new into entries, never an entry twice.

- console logs (HF dicts, verl lines, OpenRLHF's Episode bar postfixes) and JSONL are read from the byte offset where the last poll stopped, whole lines
  only (a line still being written waits for its newline);
- a TensorBoard run is read by tensorboard's record reader, which keeps its offset;
- trainer_state.json is read whole when it changes (the Trainer rewrites it), entries past the
  last step taken;
- an XTuner log is parsed whole when it grew (a rollout's lines are far apart), rollouts past
  the last one taken.

A step whose values may still be arriving (TensorBoard writes one event per tag; an XTuner
rollout prints its blocks over minutes) is held back until a later step appears or `close()`:
a step written twice would be a step the doctor sees twice.

Console dicts carry no step: entry i is step N*(i+1) with N from --step-every or a
`logging_steps=N` printed before the first dict, else 1 (the inference from the run's last step
needs the run to end; the rule is fixed once a step is written and said in `step_rule`).
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any, Callable

from rlprobe.errors import SourceUnreadable
from rlprobe.importers import console_log, metrics_file, tensorboard, trainer_state, xtuner_log
from rlprobe.importers._common import Entry, Parsed, classify
from rlprobe.keymap import map_metrics

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
        self._offset = 0
        self._pending = ""  # a text line without its newline yet
        self._line = 0
        self._entries_seen = 0
        self._every: int | None = step_every
        self._released: int | None = None  # the last step handed out
        self._held: Entry | None = None
        self._signature: tuple[int, int] | None = None
        self._reader: tensorboard.EventReader | None = None
        self._text_head = ""
        self._last_postfix: str | None = None
        self._postfixes = 0
        self._poll: Callable[[], list[Entry]] = {
            "console": self._poll_console, "jsonl": self._poll_jsonl, "trainer_state": self._poll_trainer_state,
            "tensorboard": self._poll_tensorboard, "xtuner": self._poll_xtuner,
        }[kind]

    # -- public --------------------------------------------------------------------------
    def poll(self) -> list[Entry]:
        """The entries that became complete since the last poll (in step order)."""
        if not self.source.exists():
            return []
        return self._poll()

    def close(self) -> list[Entry]:
        """What is left: the held-back step, now that nothing more will come."""
        out = self.poll()
        if self._held is not None:
            out.append(self._held)
            self._held = None
        return out

    # -- helpers ---------------------------------------------------------------------------
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
    def _poll_console(self) -> list[Entry]:
        lines = self._new_lines()
        if not lines:
            return []
        chunk = "\n".join(line for _, line in lines)
        if self._every is None:
            self._text_head += chunk[: 1 << 20]
        dicts, verl, bad = console_log.scan(chunk)
        first = lines[0][0] - 1
        self.parsed.bad_lines += [first + n for n in bad]
        entries: list[Entry] = []
        for number, item in dicts:
            mapped = classify(item, self.parsed)
            if mapped is None or not console_log.has_known_metric(mapped):
                continue
            if self._every is None:
                found = console_log._LOGGING_STEPS.search(self._text_head)
                self._every = int(found.group(1)) if found and int(found.group(1)) > 0 else 1
                self.step_rule = (f"entry i is step {self._every}*(i+1) "
                                  + ("(--step-every)" if self.step_every else
                                     f"(logging_steps={self._every} printed in the log)" if found else
                                     "(logging_steps not printed before the first entry; pass --step-every N)"))
            self._entries_seen += 1
            entries.append(Entry(step=self._every * self._entries_seen, mapped=mapped, line=first + number))
        for number, step, item in verl:
            mapped = map_metrics(item)
            if console_log.has_known_metric(mapped):
                entries.append(Entry(step=step, mapped=mapped, line=first + number))
                self.step_rule = self.step_rule or "the step:N of each verl line"
        if not dicts and not verl:
            postfixes, self._last_postfix = console_log.episode_postfixes(chunk, self._last_postfix)
            for number, item in postfixes:
                mapped = classify(item, self.parsed)
                if mapped is not None and console_log.has_known_metric(mapped):
                    self._postfixes += 1
                    entries.append(Entry(step=self._postfixes, mapped=mapped, line=first + number))
                    self.step_rule = "the k-th distinct postfix of OpenRLHF's Episode progress bar is global step k"
        return self._release(entries, hold_last=False)

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
    """

    def __init__(self, follower: SourceFollower, run_dir: str | os.PathLike[str], *, algorithm: str | None = None,
                 run_id: str | None = None) -> None:
        from rlprobe.record.writer import RunWriter
        from rlprobe.schemas import Event, RunManifest, new_run_id

        self.follower = follower
        self.run_dir = Path(run_dir)
        self.steps = 0
        self.last_step: int | None = None
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

        if not entries:
            return 0
        rows = _step_rows(Parsed(kind=self.follower.kind, entries=entries))
        self._writer.write_steps(rows)
        self.steps += len(entries)
        self.last_step = entries[-1].step
        return len(entries)
