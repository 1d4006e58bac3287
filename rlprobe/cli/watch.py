"""`rlprobe watch`: live-tail a run, print each new finding once, alert a webhook, gate on critical."""

from __future__ import annotations

import json
import sys
import tempfile
import time
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import datetime, timezone
from typing import Any, Iterator

import click

from rlprobe.cli import cli
from rlprobe.cli.options import display_options, style

_SINK_CLOSE_S = 10.0  # at exit, how long queued webhook posts may take before we give up on them


def _now() -> datetime:
    return datetime.now(timezone.utc)


def _print_finding(finding: Any, was: str | None, as_json: bool, run: str | None = None) -> None:
    when = _now()
    if as_json:
        record = {"time": when.isoformat(timespec="seconds"), "escalated_from": was, **finding.model_dump(mode="json")}
        if run is not None:
            record = {"run": run, **record}
        click.echo(json.dumps(record, ensure_ascii=False, allow_nan=False, default=str))
        return
    head = (
        f"[{when:%H:%M:%S}] {finding.severity.upper():<8} {finding.signature_id:<26} "
        f"from step {finding.first_step}  confidence {finding.confidence:.2f}"
        + (f"  (was {was})" if was else "")
        + (f"  in {run}" if run is not None else "")
    )
    click.echo(style(head, finding.severity))
    if finding.explained_by:
        click.echo(f"  (symptom of {finding.explained_by})")
    click.echo(f"  {finding.explanation}")
    for action in finding.suggested_actions[:3]:
        click.echo(f"  try: {action}")
    sys.stdout.flush()


def _note(text: str) -> None:
    click.echo(f"rlprobe watch: {text}", err=True)


_FOLLOWED = ("auto", "console", "jsonl", "trainer_state", "tensorboard", "xtuner")


@cli.command("watch")
@click.argument("run", metavar="RUN", type=click.Path(path_type=str))
@click.option("--poll", "poll_s", type=click.FloatRange(min=0.0), default=3.0, show_default=True,
              help="Seconds between two looks at the run.")
@click.option("--webhook", "webhooks", metavar="URL", multiple=True,
              help="POST each new finding as Slack-compatible JSON to URL (a Slack incoming webhook). Repeatable.")
@click.option("--max-ticks", type=click.IntRange(min=1), default=None,
              help="Stop after N looks (default: until Ctrl-C). A RUN that never appeared by then exits 2.")
@click.option("--heartbeat", "heartbeat_s", type=click.FloatRange(min=0.0), default=60.0, show_default=True,
              help="Seconds between two 'still watching' lines on stderr (step reached, findings so far); 0: none.")
@click.option("--config", "config_path", type=click.Path(dir_okay=False, path_type=str),
              help="doctor.toml with per-detector thresholds.")
@click.option("--json", "as_json", is_flag=True, help="Print one JSON object per finding, one per line.")
@click.option("--format", "kind", type=click.Choice(_FOLLOWED), default="auto", show_default=True,
              help="When RUN is a source to follow rather than a recording: what it is (auto sniffs it).")
@click.option("--step-every", type=click.IntRange(min=1), default=None,
              help="Following a console log whose dicts carry no step: logging_steps N (entry i is step N*(i+1)).")
@click.option("--into", "into", type=click.Path(file_okay=False, path_type=str), default=None,
              help="Following a source: keep the recording it becomes in this new directory (default: a "
                   "temporary one, removed at exit).")
@display_options
def watch_command(run: str, poll_s: float, webhooks: tuple[str, ...], max_ticks: int | None, heartbeat_s: float,
                  config_path: str | None, as_json: bool, kind: str, step_every: int | None, into: str | None) -> None:
    """Live-tail a run: print each new finding as it appears, again if it worsens.

    RUN may not exist yet: the watcher waits for it. Each look reads only what the recorder
    wrote since the last one and runs the doctor's full catalog, with the same findings
    `rlprobe doctor` would give at that moment. A finding is printed once, and again only when
    its severity rises (warn -> critical). Status notes go to stderr, findings to stdout; while
    nothing new happens, a heartbeat line on stderr says the step reached and the findings so
    far (every --heartbeat seconds).

    RUN may also be a file a trainer is writing that rlprobe did not record: a console log
    (the Trainer's dicts, verl's step lines, XTuner's rollout blocks), a JSONL file of metric
    dicts, a trainer_state.json, or a TensorBoard run folder. Each look then reads only what the
    source added (new lines, new event records, a rewritten trainer state), writes it to a live
    recording (temporary, or --into DIR) and diagnoses that, with the same alerts, webhook and
    exit codes. This guards verl, OpenRLHF or any loop that prints metrics, with no code change.
    A TensorBoard logdir with runs in subfolders has each run watched (one recording each, below
    --into DIR; a run started later joins), and each finding names its run.

    Exit code: 1 if any critical finding was seen, 0 otherwise, when --max-ticks is reached or
    on Ctrl-C; 2 when the run cannot be read (a newer recording format, a bad --config, a
    source that is not what its name says) or RUN never appeared in --max-ticks looks.

    Example:

    \b
        rlprobe watch runs/my-run --poll 3.0 --webhook https://hooks.slack.com/services/T000/B000/XXXX
        rlprobe watch runs/my-run --max-ticks 1 --json     # one look, as JSON lines
        rlprobe watch train.log --into runs/live-from-log  # a trainer's stdout, as it grows
        rlprobe watch tb_logs/grpo-1/ --poll 10            # a TensorBoard run
        rlprobe watch tb_logs/ --into runs/live-tb         # every run of a TensorBoard logdir
    """
    from rlprobe.doctor.findings import SEVERITY_ORDER
    from rlprobe.doctor.live import RunWatcher, webhook_sink

    try:
        sinks = [webhook_sink(url) for url in webhooks]
    except ValueError as exc:
        raise click.BadParameter(str(exc), param_hint="--webhook") from exc
    source = _source_to_follow(run, kind)
    with _followed(source, kind, step_every, into) as followed:
        state: dict[str, Any] = {"critical": False, "beat": time.monotonic()}
        targets: list[_Target] = []

        def add_targets() -> None:
            found = followed.discover() if followed is not None else [(None, None)]
            for name, recording in found:
                path = str(recording.run_dir) if recording is not None else run
                targets.append(_Target(name, RunWatcher(path, sinks=sinks, config_path=config_path), recording))
            if followed is not None and followed.logdir and found:
                names = ", ".join(str(name) for name, _ in found)
                _note(f"new run in {run}: {names}" if len(targets) > len(found) else
                      f"following {len(found)} run{'s' if len(found) != 1 else ''} of the logdir {run}: {names}")

        def ticks() -> int:
            return max((t.watcher.ticks for t in targets), default=0)

        def look(target: _Target) -> None:
            watcher = target.watcher
            new = watcher.tick()
            status = watcher.status
            if target.followed is not None and not target.followed.follower.source.exists():
                status = "waiting for source"
            if status != target.status:
                target.status = status
                where = run if target.name is None else f"{run} :: {target.name}"
                if target.followed is not None:
                    where += f" (as {target.followed.run_dir})"
                _note(f"{status}: {where}" + (f" ({watcher.steps} steps)" if status == "watching" else ""))
                state["beat"] = time.monotonic()
            for error in watcher.errors[target.errors_seen:]:
                _note(error)
            target.errors_seen = len(watcher.errors)
            for finding in new:
                was = target.worst.get(finding.signature_id)
                target.worst[finding.signature_id] = finding.severity
                state["critical"] = state["critical"] or finding.severity == "critical"
                escalated = was if was and SEVERITY_ORDER[was] < SEVERITY_ORDER[finding.severity] else None
                _print_finding(finding, escalated, as_json, target.name)
            if new:
                state["beat"] = time.monotonic()

        def look_all() -> None:
            for target in targets:
                look(target)
            if heartbeat_s and time.monotonic() - state["beat"] >= heartbeat_s:
                state["beat"] = time.monotonic()
                _note(_heartbeat(targets, run))

        try:
            add_targets()
            while True:
                if followed is not None:
                    if followed.logdir:
                        add_targets()  # a run the trainer started since the last look
                    for target in targets:
                        _sync(target, target.followed.sync)
                look_all()
                if max_ticks is not None and ticks() >= max_ticks:
                    if len(targets) == 1 and (str(targets[0].watcher.status).startswith("waiting")
                                              or targets[0].status == "waiting for source"):
                        state["never_appeared"] = True
                    break
                time.sleep(poll_s)
        except KeyboardInterrupt:
            _note("interrupted")
        finally:
            for target in targets:
                if target.followed is not None:
                    # the step held back (its values may have been incomplete) is written now
                    _sync(target, target.followed.close)
                    if target.followed.steps:
                        look(target)
                    if into:
                        _note(f"the recording of {run}" + (f" :: {target.name}" if target.name else "")
                              + f" is in {target.followed.run_dir} ({target.followed.steps} steps, step numbers: "
                              f"{target.followed.follower.step_rule or '-'})")
                target.watcher.close()
            deadline = time.monotonic() + _SINK_CLOSE_S
            for sink in sinks:
                if not sink.close(max(0.0, deadline - time.monotonic())):
                    _note(f"{sink.pending} webhook post(s) to {sink.url} still pending at exit")
                if sink.failed or sink.dropped:
                    _note(f"webhook {sink.url}: {sink.sent} sent, {sink.failed} failed, {sink.dropped} dropped; last error: {sink.last_error}")
    if state.get("never_appeared"):
        from rlprobe.errors import RecordingNotFound

        raise RecordingNotFound(f"{run} never appeared in {max_ticks} look{'s' if max_ticks != 1 else ''} "
                                f"({poll_s:g} s apart): check the path, or give --max-ticks more time")
    sys.exit(1 if state["critical"] else 0)


@dataclass
class _Target:
    """One run the command watches: its watcher, the recording a source feeds (if any), what it reported."""

    name: str | None  # the run's folder below a TensorBoard logdir; None when RUN is the one run
    watcher: Any
    followed: Any = None
    worst: dict[str, str] = field(default_factory=dict)
    status: str | None = None
    errors_seen: int = 0


def _sync(target: _Target, feed: Any) -> None:
    """Feed the live recording what the source added (sync or close); when that renumbered its
    steps, say so and report the findings again (the steps they named came from a replaced rule)."""
    followed = target.followed
    renumbered = followed.renumbered
    feed()
    if followed.renumbered != renumbered:
        _note(f"step numbers revised, {followed.steps} steps rewritten: {followed.follower.step_rule}"
              + ("; findings so far are reported again with the new numbers" if target.worst else ""))
        target.watcher.reported.clear()
        target.worst.clear()


def _heartbeat(targets: list[_Target], run: str) -> str:
    """The quiet-interval line: where the run (or each run of a logdir) is, and what was found so far."""
    when = _now()
    worst = {(t.name, sig): sev for t in targets for sig, sev in t.worst.items()}
    counts = {sev: sum(1 for s in worst.values() if s == sev) for sev in ("critical", "warn", "info")}
    found = ", ".join(f"{n} {sev}" for sev, n in counts.items() if n)
    findings = f"{len(worst)} finding{'s' if len(worst) != 1 else ''} so far" + (f" ({found})" if found else "")
    if len(targets) == 1:
        watcher, status = targets[0].watcher, targets[0].status or targets[0].watcher.status
        if status != "watching":
            return f"[{when:%H:%M:%S}] still {status}: {run} ({watcher.ticks} looks)"
        return (f"[{when:%H:%M:%S}] still watching {run}: step {watcher.last_step} reached ({watcher.steps} steps), "
                + findings)
    reached = ", ".join(f"{t.name} step {t.watcher.last_step}" for t in targets if t.watcher.steps)
    return f"[{when:%H:%M:%S}] still watching {len(targets)} runs of {run}: {reached or 'no steps yet'}; {findings}"


def _source_to_follow(run: str, kind: str) -> str | None:
    """run when it names a source to follow (not a recording or a runs root), else None."""
    from pathlib import Path

    from rlprobe.sources import is_importable

    path = Path(run)
    if kind != "auto":
        return run
    if path.exists():
        return run if is_importable(path) else None
    # Not there yet: a file name a trainer writes is a source, anything else a run directory to wait for.
    return run if path.suffix.lower() in (".log", ".txt", ".out", ".err", ".jsonl", ".ndjson") or path.name == "trainer_state.json" else None


class _Followed:
    """The live recordings a source feeds: one, or one per run of a TensorBoard logdir.

    A logdir's runs are looked for again at each look (`discover`), so a run the trainer starts
    while it is watched joins; each becomes <base>/<its path below the logdir>.
    """

    def __init__(self, path: Any, kind: str, step_every: int | None, base: Any, logdir: bool) -> None:
        self.path, self.kind, self.step_every, self.base, self.logdir = path, kind, step_every, base, logdir
        self.recordings: dict[str, Any] = {}

    def discover(self) -> list[tuple[str | None, Any]]:
        """(name, recording) of each run not followed yet (name None for a single source)."""
        from rlprobe.importers.follow import FollowedRecording, SourceFollower

        if not self.logdir:
            if self.recordings:
                return []
            recording = FollowedRecording(SourceFollower(self.path, self.kind, self.step_every), self.base,
                                          run_id=self.path.name)
            self.recordings[""] = recording
            return [(None, recording)]
        from rlprobe.importers import _safe_name
        from rlprobe.importers.tensorboard import find_runs

        out = []
        for folder in find_runs(self.path):
            name = folder.relative_to(self.path).as_posix()
            if name in self.recordings:
                continue
            recording = FollowedRecording(SourceFollower(folder, "tensorboard"), self.base / _safe_name(name),
                                          run_id=name)
            self.recordings[name] = recording
            out.append((name, recording))
        return out

    def close(self) -> None:
        for recording in self.recordings.values():
            recording.close()


@contextmanager
def _followed(source: str | None, kind: str, step_every: int | None, into: str | None) -> Iterator[_Followed | None]:
    """The live recordings a source feeds (in --into or a temporary directory), or None for a recording."""
    if source is None:
        if into:
            raise click.UsageError("--into is for following a source (a log, JSONL, trainer_state.json, TensorBoard run)")
        yield None
        return
    from pathlib import Path

    from rlprobe.errors import ImportRefused, SourceUnreadable
    from rlprobe.importers.follow import SourceFollower, follow_kind
    from rlprobe.importers.trackers import tracker_kind

    path = Path(source)
    found = follow_kind(path) if kind == "auto" else kind
    logdir = False
    if found == "tensorboard" and path.is_dir():
        from rlprobe.importers.tensorboard import event_files, find_runs

        if not event_files(path):  # a logdir: runs in subfolders, each watched (one is the usual case)
            if not find_runs(path):
                raise SourceUnreadable(f"{source}: no TensorBoard event file (events.out.tfevents.*) in this folder or below")
            logdir = True
    elif path.is_dir() and tracker_kind(path) is not None:
        raise SourceUnreadable(f"{source}: `rlprobe watch` follows a log, a JSONL file, a trainer_state.json or a "
                               f"TensorBoard logdir; import this {tracker_kind(path)} folder instead")
    SourceFollower(path, found, step_every)  # refuses a kind it cannot follow, before anything is made
    if into:
        dest = Path(into)
        if dest.exists() and any(dest.iterdir()):
            raise ImportRefused(f"--into {into} already exists and is not empty; choose a new directory")
        followed = _Followed(path, found, step_every, dest, logdir)
        try:
            yield followed
        finally:
            followed.close()
        return
    with tempfile.TemporaryDirectory(prefix="rlprobe-watch-") as tmp:
        followed = _Followed(path, found, step_every, Path(tmp) / "run", logdir)
        try:
            yield followed
        finally:
            followed.close()
