"""`rlprobe batch-age`: each trained step's batch age, from a rollout trace, through SQL."""

from __future__ import annotations

import click

from rlprobe.cli import cli
from rlprobe.cli.options import Output, output_options


@cli.command("batch-age")
@click.argument("run", metavar="RUN_OR_TRACE", type=click.Path(path_type=str))
@click.option("--trace", "traces", multiple=True, type=click.Path(path_type=str),
              help="Another trace file to read (repeatable); with a run directory it belongs to that run.")
@output_options
def batch_age_command(run: str, traces: tuple[str, ...], output: Output) -> None:
    """Print each trained step's batch age from the rollout trace.

    Batch age is the token-weighted number of policy updates between generating a token and
    training on it. RUN_OR_TRACE is a run directory (its rollout_trace.jsonl), a runs root, or a
    trace file anywhere. A refit splits a running call's tokens between the old and the new
    weights; a step trained again after a resume keeps the later value. groups counts the
    groups published for the step, derived_groups those whose tokens by version were derived
    from their calls and refits. The numbers are the SQL view batch_age (rlprobe query RUN
    "SELECT * FROM batch_age").

    Example:

    \b
        rlprobe batch-age runs/my-run
        rlprobe batch-age logs/exp1/rollout_trace.jsonl --csv
    """
    from rlprobe.rollouts.views import BATCH_AGE_COLUMNS, open_traces

    store = open_traces(run, traces)
    for warning in store.warnings:
        click.echo(f"rlprobe: warning: {warning}", err=True)
    sql = f"SELECT {BATCH_AGE_COLUMNS} FROM batch_age ORDER BY run_id, step"
    from rlprobe.cli.query import emit_query

    emit_query(store, sql, output)
