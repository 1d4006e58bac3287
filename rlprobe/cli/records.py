"""`rlprobe records`: summarize an inference-records store, build a prompt-selection table.

Thin over rlprobe.records; both commands read the store through the records SQL
(sql/records/v1/) and import DuckDB only when they run.
"""

from __future__ import annotations

import click

from rlprobe.cli import cli

_SKIP_RULES = ("all_zero", "all_full", "zero_variance")
_SCOPES = ("start_checkpoint", "run_version", "mixed")


@cli.group("records")
def records_group() -> None:
    """Inference records: the outcome of every scored rollout group, in a shared store.

    A store holds <lineage>/<run name>-<run id>/manifest-<attempt>.json and
    records-<attempt>.jsonl, written by rlprobe.records.RecordsWriter (or a peer system
    writing the same format). See docs/records.md.

    Example:

    \b
        rlprobe records summarize /data/inference-records --output /tmp/records-summary
        rlprobe records select /data/inference-records --skip all_zero --output all-zero-v1.json
    """


@records_group.command("summarize")
@click.argument("store", type=click.Path(path_type=str))
@click.option("--output", "-o", required=True, type=click.Path(path_type=str),
              help="Folder to write prompts.jsonl, tokens.json and summary.json into (created if missing).")
def summarize_command(store: str, output: str) -> None:
    """Summarize a records STORE (the records root or one lineage directory).

    Reads only complete JSON lines and writes three files: prompts.jsonl (one row per input_key
    and policy_scope: group outcomes, filter decisions, validity, valid-only reward statistics,
    unknown-validity statistics kept apart, independent units), tokens.json (groups, responses
    and tokens per domain and disposition) and summary.json (the input snapshot with sizes and
    SHA-256, lineages, protocols, counts and warnings). Warnings are also printed to stderr.

    Example:

    \b
        rlprobe records summarize /data/inference-records --output /tmp/records-summary
    """
    from rlprobe.records.summary import summarize

    result = summarize(store, output)
    for warning in result.warnings:
        click.echo(f"warning: {warning}", err=True)
    counts = result.summary["counts"]
    click.echo(f"{counts['group_rows']} groups, {counts['responses']} responses, {counts['prompt_rows']} prompt rows "
               f"from {counts['record_files']} record files; wrote " + ", ".join(str(p) for p in result.files))


@records_group.command("select")
@click.argument("store", type=click.Path(path_type=str))
@click.option("--skip", multiple=True, type=click.Choice(_SKIP_RULES),
              help="Skip prompts whose valid rewards are all 0 (all_zero), all --full-reward (all_full), or any "
                   "one constant value (zero_variance). Required; repeatable.")
@click.option("--full-reward", type=float, default=1.0, show_default=True, help="The reward all_full means.")
@click.option("--lineage", default=None, help="Lineage to use; required when the store holds several.")
@click.option("--protocol", default=None, help="Protocol digest to use; required when the lineage has several.")
@click.option("--scope", "scopes", multiple=True, type=click.Choice(_SCOPES),
              help="Policy scopes whose responses count (default start_checkpoint). run_version or mixed mark "
                   "the table approximate_policy. Repeatable.")
@click.option("--min-observations", type=click.IntRange(min=1), default=16, show_default=True,
              help="Valid responses (deterministic seeds once) a prompt needs.")
@click.option("--min-units", type=click.IntRange(min=1), default=2, show_default=True,
              help="Independent attempts a prompt needs (with deterministic inference, attempts sharing a rollout seed count once).")
@click.option("--confidence", type=click.FloatRange(0, 1, min_open=True, max_open=True), default=0.95, show_default=True,
              help="Confidence of the one-sided upper bound on the rate of any other reward.")
@click.option("--max-deviation-rate", type=click.FloatRange(0, 1, min_open=True), default=0.2, show_default=True,
              help="Exclude only if that upper bound is below this rate.")
@click.option("--readmit-fraction", type=click.FloatRange(0, 1), default=0.05, show_default=True,
              help="Deterministic share of otherwise excluded prompts kept anyway, so evidence can be refreshed.")
@click.option("--seed", type=int, default=0, show_default=True, help="Seed of the readmission draw.")
@click.option("--output", "-o", required=True, type=click.Path(path_type=str), help="Where to write the table (JSON).")
def select_command(store: str, skip: tuple[str, ...], full_reward: float, lineage: str | None, protocol: str | None,
                   scopes: tuple[str, ...], min_observations: int, min_units: int, confidence: float,
                   max_deviation_rate: float, readmit_fraction: float, seed: int, output: str) -> None:
    """Build a frozen exclusion table from a records STORE and print its SHA-256.

    Only responses with validity.valid = true count. A prompt is excluded when all its valid
    rewards equal the skipped value, it has --min-observations and --min-units, and the
    one-sided upper confidence bound on the rate of any other reward (1 - (1 - confidence)^(1/n)
    with none seen in n) is below --max-deviation-rate. A deterministic seed recorded with two
    rewards is a conflict and never excluded. Readmission is drawn now, so the table never
    changes. Pin the printed digest in the run that loads the table.

    Example:

    \b
        rlprobe records select /data/inference-records --skip all_zero --output all-zero-v1.json
    """
    from rlprobe.records.select import build_selection

    if not skip:  # checked here: click's own message for a required Choice spans several lines
        raise click.UsageError(f"Missing option '--skip' (one or more of {', '.join(_SKIP_RULES)})")
    selection = build_selection(
        store, skip, lineage=lineage, protocol=protocol, scopes=scopes or ("start_checkpoint",),
        min_observations=min_observations, min_units=min_units, confidence=confidence,
        max_deviation_rate=max_deviation_rate, readmit_fraction=readmit_fraction, seed=seed, full_reward=full_reward)
    digest = selection.write(output)
    table = selection.table
    click.echo(f"excluded {len(table['excluded'])}, readmitted {len(table['readmitted'])} of "
               f"{sum(d['prompts'] for d in table['domains'])} prompts with evidence; wrote {output}", err=True)
    click.echo(digest)
