"""`rlprobe import`: build a recording from a run rlprobe never recorded."""

from __future__ import annotations

import json
from pathlib import Path

import click

from rlprobe.cli import cli

# Kept here (not imported from rlprobe.importers) so `rlprobe --help` does not load the importers.
_FORMATS = ("auto", "trainer_state", "jsonl", "json", "csv", "console", "xtuner", "trl_completions",
            "tensorboard", "wandb", "mlflow")


@cli.command("import")
@click.argument("source", type=click.Path(path_type=str))
@click.argument("run_dir", type=click.Path(path_type=str))
@click.option("--format", "kind", type=click.Choice(_FORMATS), default="auto", show_default=True,
              help="What SOURCE is; auto sniffs it from its name and contents.")
@click.option("--step-every", type=click.IntRange(min=1), default=None,
              help="Logging interval (logging_steps) for sources whose entries carry no step: entry i "
                   "becomes step N*(i+1). Default: logging_steps if the log prints it or it can be "
                   "inferred, else 1.")
@click.option("--group-size", type=click.IntRange(min=2), default=None,
              help="Rollouts per prompt (GRPO's num_generations). With --binary-rewards, the share of degenerate "
                   "groups is derived from TRL's reward_std where that is exact (groups of 2 or 3; docs/import.md).")
@click.option("--binary-rewards", is_flag=True,
              help="Every reward is 0 or 1 (a log cannot show it); see --group-size.")
@click.option("--algorithm", default=None, help="Record this algorithm (grpo, ppo, rloo, ...) in the manifest.")
@click.option("--model", "model_name", default=None, help="Record this model name in the manifest.")
@click.option("--run-id", default=None, help="run_id of the new recording (default: generated).")
@click.option("--name", default=None, help="Name the run in the manifest (shown by ls, report and ui; default: its run_id). "
                                           "A folder of runs: each is named NAME and its folder's name.")
@click.option("--tag", "tags", multiple=True, metavar="TAG", help="Tag the run in the manifest. Repeatable.")
@click.option("--json", "as_json", is_flag=True, help="Print the import report as JSON.")
def import_command(source: str, run_dir: str, kind: str, step_every: int | None, group_size: int | None,
                   binary_rewards: bool, algorithm: str | None, model_name: str | None, run_id: str | None,
                   name: str | None, tags: tuple[str, ...], as_json: bool) -> None:
    """Import a run rlprobe did not record into a new recording RUN_DIR.

    SOURCE is a Hugging Face trainer_state.json, an output or checkpoint dir holding one (TRL's
    completions/*.parquet there become samples), a JSONL / JSON / CSV file of metric dicts (TRL,
    HF, verl or OpenRLHF names such as actor/entropy, critic/score/mean), a console log (the
    dicts the Trainer printed, verl's step lines, XTuner's rollout blocks), or a tracker's own
    files: a TensorBoard logdir or event file, a W&B run folder or wandb/ folder (offline or
    synced), an MLflow store (mlruns/ or a sqlite file). A folder of many tracker runs becomes a
    runs root at RUN_DIR, one recording per run. SOURCE is only read. RUN_DIR must not exist or
    be empty: an import never overwrites. Metric names rlprobe does not know are kept as
    extra.<name> and listed.

    `rlprobe doctor SOURCE` imports to a temporary recording by itself; import once to query,
    compare or keep the run.

    Example:

    \b
        rlprobe import out/checkpoint-200 runs/imported
        rlprobe import train.log runs/from-log --step-every 5 --algorithm grpo
        rlprobe import metrics.jsonl runs/verl-run && rlprobe doctor runs/verl-run
        rlprobe import tb_logs/ runs/from-tensorboard       # a logdir: one recording per run
        rlprobe import wandb/ runs/from-wandb
        rlprobe import mlruns/ runs/from-mlflow
        rlprobe import train.log runs/baseline --name "baseline, lr 1e-6" --tag sweep-3 --tag baseline
        rlprobe import trainer_state.json runs/g2 --group-size 2 --binary-rewards  # degenerate groups, exactly
    """
    from rlprobe.cli.progress import Progress
    from rlprobe.importers import import_source
    from rlprobe.importers.write import torn_notes

    with Progress(not as_json) as bar:
        report = import_source(source, run_dir, kind=kind, step_every=step_every, algorithm=algorithm,
                               model_name=model_name, run_id=run_id, progress=bar.update, group_size=group_size,
                               binary_rewards=binary_rewards)
    if name is not None or tags:
        # a tracker's folder of runs became one recording per run: each gets the tags, and the
        # name followed by its own folder's name (one name for many runs would tell none apart)
        runs = getattr(report, "runs", None)
        for one in runs if runs is not None else [report]:
            shown = name if runs is None or name is None else f"{name} {Path(one.run_dir).name}"
            _name_recording(Path(one.run_dir), shown, list(tags))
    if as_json:
        out = report.to_dict()
        if name is not None or tags:
            out.update(name=name, tags=list(tags))
        click.echo(json.dumps(out, indent=2, default=str))
    else:
        click.echo(report.summary(torn=False))
    # A torn tail is a warning about the source, not part of the report: on stderr, so it is seen
    # when the report goes to a file or a pipe (--json); what was whole is imported: exit 0.
    for note in torn_notes(report):
        click.echo(f"torn: {note}", err=True)


def _name_recording(run_dir: Path, name: str | None, tags: list[str]) -> None:
    """Put name and tags into the manifest of the recording this command just wrote.

    import_source takes no name or tags (yet), so they are added here, before anyone else has
    been told the recording exists, by the same atomic replace every manifest write uses.
    """
    from rlprobe.record.writer import atomic_write_bytes
    from rlprobe.schemas import RunManifest

    path = run_dir / "manifest.json"
    manifest = RunManifest.model_validate_json(path.read_bytes())
    manifest = manifest.model_copy(update={"name": name, "tags": tags})
    atomic_write_bytes(path, manifest.model_dump_json(indent=2).encode())
