"""`rlprobe watch`: live-tail a run, print each new finding once, alert a webhook, gate on critical."""

from __future__ import annotations

import json
import sys
import tempfile
import time
from contextlib import contextmanager
from datetime import datetime, timezone
from typing import Any, Iterator

import click

from rlprobe.cli import cli
from rlprobe.cli.options import display_options, style

_SINK_CLOSE_S = 10.0  # at exit, how long queued webhook posts may take before we give up on them


def _now() -> datetime:
    return datetime.now(timezone.utc)


def _print_finding(finding: Any, was: str | None, as_json: bool) -> None:
    when = _now()
    if as_json:
        record = {"time": when.isoformat(timespec="seconds"), "escalated_from": was, **finding.model_dump(mode="json")}
        click.echo(json.dumps(record, ensure_ascii=False, allow_nan=False, default=str))
        return
    head = (
        f"[{when:%H:%M:%S}] {finding.severity.upper():<8} {finding.signature_id:<26} "
        f"from step {finding.first_step}  confidence {finding.confidence:.2f}"
        + (f"  (was {was})" if was else "")
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

    Exit code: 1 if any critical finding was seen, 0 otherwise, when --max-ticks is reached or
    on Ctrl-C; 2 when the run cannot be read (a newer recording format, a bad --config, a
    source that is not what its name says) or RUN never appeared in --max-ticks looks.

    Example:

    \b
        rlprobe watch runs/my-run --poll 3.0 --webhook https://hooks.slack.com/services/T000/B000/XXXX
        rlprobe watch runs/my-run --max-ticks 1 --json     # one look, as JSON lines
        rlprobe watch train.log --into runs/live-from-log  # a trainer's stdout, as it grows
        rlprobe watch tb_logs/grpo-1/ --poll 10            # a TensorBoard run
    """
    from rlprobe.doctor.findings import SEVERITY_ORDER
    from rlprobe.doctor.live import RunWatcher, webhook_sink

    try:
        sinks = [webhook_sink(url) for url in webhooks]
    except ValueError as exc:
        raise click.BadParameter(str(exc), param_hint="--webhook") from exc
    source = _source_to_follow(run, kind)
    with _followed(source, kind, step_every, into) as followed:
        target = str(followed.run_dir) if followed is not None else run
        watcher = RunWatcher(target, sinks=sinks, config_path=config_path)
        worst: dict[str, str] = {}
        state: dict[str, Any] = {"critical": False, "status": None, "errors_seen": 0, "beat": time.monotonic()}

        def look() -> None:
            new = watcher.tick()
            status = watcher.status
            if followed is not None and not followed.follower.source.exists():
                status = "waiting for source"
            if status != state["status"]:
                state["status"] = status
                where = f"{run} (as {target})" if followed is not None else run
                _note(f"{status}: {where}" + (f" ({watcher.steps} steps)" if status == "watching" else ""))
            for error in watcher.errors[state["errors_seen"]:]:
                _note(error)
            state["errors_seen"] = len(watcher.errors)
            for finding in new:
                was = worst.get(finding.signature_id)
                worst[finding.signature_id] = finding.severity
                state["critical"] = state["critical"] or finding.severity == "critical"
                _print_finding(finding, was if was and SEVERITY_ORDER[was] < SEVERITY_ORDER[finding.severity] else None, as_json)
            if new or status != state["status"]:
                state["beat"] = time.monotonic()
            elif heartbeat_s and time.monotonic() - state["beat"] >= heartbeat_s:
                state["beat"] = time.monotonic()
                _note(_heartbeat(status, watcher, worst, run))

        try:
            while True:
                if followed is not None:
                    _sync(followed, followed.sync, watcher, worst)
                look()
                if max_ticks is not None and watcher.ticks >= max_ticks:
                    if str(watcher.status).startswith("waiting") or state["status"] == "waiting for source":
                        state["never_appeared"] = True
                    break
                time.sleep(poll_s)
        except KeyboardInterrupt:
            _note("interrupted")
        finally:
            if followed is not None:
                # the step held back (its values may have been incomplete) is written now
                _sync(followed, followed.close, watcher, worst)
                if followed.steps:
                    look()
                if into:
                    _note(f"the recording of {run} is in {into} ({followed.steps} steps, step numbers: "
                          f"{followed.follower.step_rule or '-'})")
            watcher.close()
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


def _sync(followed: Any, feed: Any, watcher: Any, worst: dict[str, str]) -> None:
    """Feed the live recording what the source added (sync or close); when that renumbered its
    steps, say so and report the findings again (the steps they named came from a replaced rule)."""
    renumbered = followed.renumbered
    feed()
    if followed.renumbered != renumbered:
        _note(f"step numbers revised, {followed.steps} steps rewritten: {followed.follower.step_rule}"
              + ("; findings so far are reported again with the new numbers" if worst else ""))
        watcher.reported.clear()
        worst.clear()


def _heartbeat(status: str, watcher: Any, worst: dict[str, str], run: str) -> str:
    """The quiet-interval line: where the run is, and what was found so far."""
    when = _now()
    if status != "watching":
        return f"[{when:%H:%M:%S}] still {status}: {run} ({watcher.ticks} looks)"
    counts = {sev: sum(1 for s in worst.values() if s == sev) for sev in ("critical", "warn", "info")}
    found = ", ".join(f"{n} {sev}" for sev, n in counts.items() if n)
    return (f"[{when:%H:%M:%S}] still watching {run}: step {watcher.last_step} reached ({watcher.steps} steps), "
            f"{len(worst)} finding{'s' if len(worst) != 1 else ''} so far" + (f" ({found})" if found else ""))


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


@contextmanager
def _followed(source: str | None, kind: str, step_every: int | None, into: str | None) -> Iterator[Any]:
    """The live recording a source feeds (in --into or a temporary directory), or None for a recording."""
    if source is None:
        if into:
            raise click.UsageError("--into is for following a source (a log, JSONL, trainer_state.json, TensorBoard run)")
        yield None
        return
    from pathlib import Path

    from rlprobe.errors import ImportRefused, SourceUnreadable
    from rlprobe.importers.follow import FollowedRecording, SourceFollower, follow_kind
    from rlprobe.importers.trackers import tracker_kind

    path = Path(source)
    found = follow_kind(path) if kind == "auto" else kind
    if found == "tensorboard" and path.is_dir():
        from rlprobe.importers.tensorboard import event_files, find_runs

        runs = find_runs(path)
        if not event_files(path) and len(runs) != 1:
            raise SourceUnreadable(f"{source}: a TensorBoard logdir with {len(runs)} runs; watch one run folder")
        path = runs[0] if not event_files(path) else path
    elif path.is_dir() and tracker_kind(path) is not None:
        raise SourceUnreadable(f"{source}: `rlprobe watch` follows a log, a JSONL file, a trainer_state.json or a "
                               f"TensorBoard run; import this {tracker_kind(path)} folder instead")
    follower = SourceFollower(path, found, step_every)
    if into:
        dest = Path(into)
        if dest.exists() and any(dest.iterdir()):
            raise ImportRefused(f"--into {into} already exists and is not empty; choose a new directory")
        recording = FollowedRecording(follower, dest, run_id=path.name)
        try:
            yield recording
        finally:
            recording.close()
        return
    with tempfile.TemporaryDirectory(prefix="rlprobe-watch-") as tmp:
        recording = FollowedRecording(follower, Path(tmp) / "run", run_id=path.name)
        try:
            yield recording
        finally:
            recording.close()
