"""`rlprobe watch`: live-tail a run, print each new finding once, alert a webhook, gate on critical."""

from __future__ import annotations

import json
import sys
import time
from datetime import datetime, timezone
from typing import Any

import click

from rlprobe.cli import cli

_COLOURS = {"critical": "red", "warn": "yellow", "info": "cyan"}
_SINK_CLOSE_S = 10.0  # at exit, how long queued webhook posts may take before we give up on them


def _now() -> datetime:
    return datetime.now(timezone.utc)


def _print_finding(finding: Any, was: str | None, as_json: bool, colour: bool) -> None:
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
    click.echo(click.style(head, fg=_COLOURS[finding.severity], bold=True) if colour else head)
    click.echo(f"  {finding.explanation}")
    for action in finding.suggested_actions[:3]:
        click.echo(f"  try: {action}")
    sys.stdout.flush()


def _note(text: str) -> None:
    click.echo(f"rlprobe watch: {text}", err=True)


@cli.command("watch")
@click.argument("run", metavar="RUN", type=click.Path(path_type=str))
@click.option("--poll", "poll_s", type=click.FloatRange(min=0.0), default=3.0, show_default=True,
              help="Seconds between two looks at the run.")
@click.option("--webhook", "webhooks", metavar="URL", multiple=True,
              help="POST each new finding as Slack-compatible JSON to URL (a Slack incoming webhook). Repeatable.")
@click.option("--max-ticks", type=click.IntRange(min=1), default=None,
              help="Stop after N looks (default: until Ctrl-C).")
@click.option("--config", "config_path", type=click.Path(dir_okay=False, path_type=str),
              help="doctor.toml with per-detector thresholds.")
@click.option("--json", "as_json", is_flag=True, help="Print one JSON object per finding, one per line.")
def watch_command(run: str, poll_s: float, webhooks: tuple[str, ...], max_ticks: int | None, config_path: str | None, as_json: bool) -> None:
    """Live-tail a run: print each new finding as it appears, again if it worsens.

    RUN may not exist yet: the watcher waits for it. Each look reads only what the recorder
    wrote since the last one and runs the doctor's full catalog, with the same findings
    `rlprobe doctor` would give at that moment. A finding is printed once, and again only when
    its severity rises (warn -> critical). Status notes go to stderr, findings to stdout.

    Exit code: 1 if any critical finding was seen, 0 otherwise, when --max-ticks is reached or
    on Ctrl-C; 2 when the run cannot be read (a newer recording format, a bad --config).

    Example:

    \b
        rlprobe watch runs/my-run --poll 3.0 --webhook https://hooks.slack.com/services/T000/B000/XXXX
        rlprobe watch runs/my-run --max-ticks 1 --json     # one look, as JSON lines
    """
    from rlprobe.doctor.findings import SEVERITY_ORDER
    from rlprobe.doctor.live import RunWatcher, webhook_sink

    try:
        sinks = [webhook_sink(url) for url in webhooks]
    except ValueError as exc:
        raise click.BadParameter(str(exc), param_hint="--webhook") from exc
    watcher = RunWatcher(run, sinks=sinks, config_path=config_path)
    colour = sys.stdout.isatty() and not as_json
    worst: dict[str, str] = {}
    critical = False
    status = None
    errors_seen = 0
    try:
        while True:
            new = watcher.tick()
            if watcher.status != status:
                status = watcher.status
                _note(f"{status}: {run}" + (f" ({watcher.steps} steps)" if status == "watching" else ""))
            for error in watcher.errors[errors_seen:]:
                _note(error)
            errors_seen = len(watcher.errors)
            for finding in new:
                was = worst.get(finding.signature_id)
                worst[finding.signature_id] = finding.severity
                critical = critical or finding.severity == "critical"
                _print_finding(finding, was if was and SEVERITY_ORDER[was] < SEVERITY_ORDER[finding.severity] else None, as_json, colour)
            if max_ticks is not None and watcher.ticks >= max_ticks:
                break
            time.sleep(poll_s)
    except KeyboardInterrupt:
        _note("interrupted")
    finally:
        watcher.close()
        deadline = time.monotonic() + _SINK_CLOSE_S
        for sink in sinks:
            if not sink.close(max(0.0, deadline - time.monotonic())):
                _note(f"{sink.pending} webhook post(s) to {sink.url} still pending at exit")
            if sink.failed or sink.dropped:
                _note(f"webhook {sink.url}: {sink.sent} sent, {sink.failed} failed, {sink.dropped} dropped; last error: {sink.last_error}")
    sys.exit(1 if critical else 0)
