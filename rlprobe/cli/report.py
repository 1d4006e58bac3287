"""`rlprobe report`: a run's post-mortem as one self-contained HTML file."""

from __future__ import annotations

import click

from rlprobe.cli import cli
from rlprobe.cli.progress import Progress


@cli.command("report")
@click.argument("run", metavar="RUN_OR_SOURCE", type=click.Path(path_type=str))
@click.option("--out", "out_path", type=click.Path(dir_okay=False, path_type=str),
              help="Write the report to FILE (default: ./<run_id>-report.html). Never inside the recording.")
@click.option("--config", "config_path", type=click.Path(exists=True, dir_okay=False, path_type=str),
              help="doctor.toml with per-detector thresholds.")
def report_command(run: str, out_path: str | None, config_path: str | None) -> None:
    """Write a run's post-mortem as one HTML file that opens offline.

    The file holds the manifest and config, charts of the key series (zoomable, with
    synchronized step axes) with every finding overlaid at its onset and over the steps where
    it held, the ranked findings with links to the samples they cite, a sample browser (best
    and worst by reward, by step range) and the events. Works on a closed, live or crashed
    run; a source rlprobe imports (a trainer_state.json, a metrics JSONL/CSV, a console log) is
    imported to a temporary recording first. Prints the path of the file written.

    Example:

    \b
        rlprobe report runs/my-run
        rlprobe report runs/my-run --out /tmp/my-run.html --config doctor.toml
        rlprobe report out/checkpoint-200/trainer_state.json
    """
    from rlprobe.sources import is_importable
    from rlprobe.report import render_report
    from rlprobe.report.data import STAGES

    if is_importable(run):
        click.echo(f"(importing {run} to a temporary recording; `rlprobe import` keeps one)", err=True)
    notices: list[str] = []  # said once the bar, which draws on stderr too, is gone
    try:
        with Progress(label="rendering report") as bar:
            def progress(stage: str) -> None:
                # called as each stage starts: the ones before it are done
                bar.update(f"report: {stage}", STAGES.index(stage) if stage in STAGES else 0, len(STAGES))

            path = render_report(run, out_path, config_path=config_path, progress=progress, notice=notices.append)
    finally:
        for line in notices:
            click.echo(line, err=True)
    click.echo(str(path))

