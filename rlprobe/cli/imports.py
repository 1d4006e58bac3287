"""`rlprobe import`: build a recording from a run rlprobe never recorded."""

from __future__ import annotations

import json

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
@click.option("--algorithm", default=None, help="Record this algorithm (grpo, ppo, rloo, ...) in the manifest.")
@click.option("--model", "model_name", default=None, help="Record this model name in the manifest.")
@click.option("--run-id", default=None, help="run_id of the new recording (default: generated).")
@click.option("--json", "as_json", is_flag=True, help="Print the import report as JSON.")
def import_command(source: str, run_dir: str, kind: str, step_every: int | None, algorithm: str | None,
                   model_name: str | None, run_id: str | None, as_json: bool) -> None:
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
    """
    from rlprobe.cli.forensics import _Progress
    from rlprobe.importers import import_source

    with _Progress(not as_json) as bar:
        report = import_source(source, run_dir, kind=kind, step_every=step_every, algorithm=algorithm,
                               model_name=model_name, run_id=run_id, progress=bar.update)
    if as_json:
        click.echo(json.dumps(report.to_dict(), indent=2, default=str))
    else:
        click.echo(report.summary())
