"""`rlprobe ui`: a live local dashboard over a run or a runs root (needs the ui extra)."""

from __future__ import annotations

import click

from rlprobe.cli import cli


@cli.command("ui")
@click.argument("path", metavar="ROOT_OR_RUN", type=click.Path(path_type=str))
@click.option("--port", type=click.IntRange(0, 65535), default=8765, show_default=True,
              help="Port to listen on (0: any free port; the address is printed).")
@click.option("--host", default="127.0.0.1", show_default=True,
              help="Address to listen on. Any but 127.0.0.1, localhost or ::1 needs the token printed at start.")
@click.option("--open", "open_browser", is_flag=True, help="Open the dashboard in the default browser.")
@click.option("--config", "config_path", type=click.Path(dir_okay=False, path_type=str),
              help="doctor.toml with per-detector thresholds, for the findings shown.")
@click.option("--poll", "poll_s", type=click.FloatRange(min=0.25), default=2.0, show_default=True,
              help="Seconds between two looks for new steps and findings.")
def ui_command(path: str, port: int, host: str, open_browser: bool, config_path: str | None, poll_s: float) -> None:
    """Serve a live dashboard over ROOT_OR_RUN: runs table, overlay charts with findings, SQL console.

    Every run below ROOT_OR_RUN in a table (name, tags, status, progress, worst finding); the
    selected runs overlaid on charts of any logged metric, with each run's findings drawn in its
    colour; a page per run (findings, evidence, samples, events, config) and a compare page for
    two. Runs still recording update on their own. Nothing is written into a recording, nothing
    outside ROOT_OR_RUN is read, nothing is fetched from the network. Needs
    the ui extra (pip install -e ".[ui]" in rlprobe's clone).

    Example:

    \b
        rlprobe ui runs/ --open
        rlprobe ui runs/ --host 0.0.0.0 --port 9000      # prints an address with a token
    """
    from rlprobe.ui import serve

    try:
        serve(path, host=host, port=port, open_browser=open_browser, config_path=config_path, poll_s=poll_s, echo=click.echo)
    except KeyboardInterrupt:
        pass
    click.echo("rlprobe ui: stopped", err=True)
