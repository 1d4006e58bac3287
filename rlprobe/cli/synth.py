"""`rlprobe synth`: write a synthetic healthy or pathological recording (ground truth beside it)."""

from __future__ import annotations

import click

from rlprobe.cli import cli


def _valid_kinds() -> str:
    from rlprobe.synth import HEALTHY_FAMILIES, SIGNATURES

    return ", ".join(list(SIGNATURES) + ["healthy"] + [f"healthy:{f}" for f in HEALTHY_FAMILIES])


def _check_kind(ctx: click.Context, param: click.Parameter, value: str) -> str:
    from rlprobe.synth import HEALTHY_FAMILIES, SIGNATURES

    low = value.strip().lower()
    if low == "healthy" or (low.startswith("healthy:") and low.split(":", 1)[1] in HEALTHY_FAMILIES):
        return low
    if value.strip().upper() in SIGNATURES:
        return value.strip().upper()
    raise click.BadParameter(f"unknown pathology {value!r}; valid: {_valid_kinds()}", ctx=ctx, param=param)


def _list() -> None:
    from rlprobe.synth import EXTRA_VARIANTS, HEALTHY_FAMILIES, OPTION_DOCS, PATHOLOGIES

    width = max(len(k) for k in PATHOLOGIES)
    click.echo("pathologies (--pathology NAME):")
    for name, text in PATHOLOGIES.items():
        click.echo(f"  {name:<{width}}  {text}")
    click.echo("\nhealthy families (--pathology healthy:<family>; 'healthy' draws one from the seed):")
    for name, text in HEALTHY_FAMILIES.items():
        click.echo(f"  {'healthy:' + name:<{width}}  {text}")
    click.echo("\nvariants made only on request (--pathology NAME --variant VARIANT):")
    for sig, variants in EXTRA_VARIANTS.items():
        for name, text in variants.items():
            click.echo(f"  {sig + ' ' + name:<{width + 16}}  {text}")
    click.echo("\noptions (--option KEY=VALUE, repeatable; --draw-options draws them from the seed):")
    for name, text in OPTION_DOCS.items():
        click.echo(f"  {name:<{width}}  {text}")


@cli.command("synth")
@click.argument("run_dir", metavar="DIR", required=False, type=click.Path(file_okay=False, path_type=str))
@click.option("--pathology", "kind", default="healthy", show_default=True, callback=_check_kind,
              help="A signature ID, 'healthy' (a family drawn from the seed) or 'healthy:<family>'.")
@click.option("--n-steps", type=click.IntRange(min=10), default=500, show_default=True, help="Optimizer steps to record.")
@click.option("--seed", type=int, default=0, show_default=True, help="Seed: onset, magnitude, noise and everything else.")
@click.option("--algorithm", type=click.Choice(["grpo", "ppo"], case_sensitive=False), default=None,
              help="Force the algorithm (default: drawn from the seed; some signatures force one).")
@click.option("--noise", type=click.FloatRange(min=0.0), default=None, help="Noise scale (1 = typical; default: drawn from the seed).")
@click.option("--samples-every", type=click.IntRange(min=0), default=1, show_default=True, help="Log samples every N steps (0 = none).")
@click.option("--group-size", type=click.IntRange(min=2), default=8, show_default=True, help="GRPO completions per prompt.")
@click.option("--variant", default=None, help="A variant made only on request (dead_start, transient, loss_divergence, "
              "bias_from_start; see --list).")
@click.option("--option", "options", multiple=True, metavar="KEY=VALUE",
              help="A real-log shape, e.g. logging=sparse, reward=binary, placeholders=entropy_mean (see --list).")
@click.option("--draw-options", is_flag=True, help="Draw the variant, options and group size from the seed, as "
              "benchmarks/detectors.py does.")
@click.option("--list", "list_only", is_flag=True, help="List the pathologies, healthy families, variants and options, then exit.")
def synth_command(run_dir: str | None, kind: str, n_steps: int, seed: int, algorithm: str | None, noise: float | None,
                  samples_every: int, group_size: int, variant: str | None, options: tuple[str, ...], draw_options: bool,
                  list_only: bool) -> None:
    """Write a synthetic healthy or pathological recording into DIR.

    The run goes through rlprobe.Recorder like a real one: step metrics with realistic
    dynamics and noise, per-sample text, events. What it really is (kind, onset step,
    magnitude, variant, options, every fitting signature) is written to DIR/synth_truth.json,
    not into the recording, so the doctor cannot see it. Same arguments, same run.

    Options give the run the shapes real logs take: sparse logging (logging=sparse: 20-60
    points at a stride of 5-10, window means, grad_norm of one step), two updates per batch,
    binary rewards with small groups, reward_std as the group or the batch std, placeholder
    metrics, and for healthy runs easy or saturating tasks, a one-step spike, an unexploited
    length bias.

    Example:

    \b
        rlprobe synth runs/ec --pathology ENTROPY_COLLAPSE --n-steps 800 --seed 3
        rlprobe synth runs/ok --pathology healthy:easy_task
        rlprobe synth runs/dead --pathology TRUNCATION_STARVE --variant dead_start --option logging=sparse
        rlprobe synth runs/bin --pathology REWARD_COLLAPSE --option reward=binary --group-size 4
        rlprobe synth runs/any --pathology healthy --seed 7 --draw-options
        rlprobe synth --list
    """
    from rlprobe.synth import draw_setup, write_run

    if list_only:
        _list()
        return
    if run_dir is None:
        raise click.UsageError("missing argument DIR (or use --list)")
    if draw_options:
        if variant or options:
            raise click.UsageError("--draw-options draws the variant and options; give them or draw them, not both")
        drawn = draw_setup(kind, seed)
        variant, chosen, group_size = drawn["variant"], drawn["options"], drawn["group_size"]
    else:
        chosen = list(options)
    try:
        truth = write_run(run_dir, kind, n_steps=n_steps, seed=seed, algorithm=algorithm, noise=noise, samples_every=samples_every,
                          group_size=group_size, variant=variant, options=chosen)
    except FileExistsError as exc:
        raise click.UsageError(str(exc)) from exc
    except ValueError as exc:
        raise click.UsageError(str(exc)) from exc
    what = truth.pathology or f"healthy:{truth.family}"
    onset = f", onset at step {truth.onset_step}" if truth.onset_step is not None else ""
    ended = f", ended at step {truth.end_step}" if truth.end_step is not None else ""
    variant_text = f" ({truth.variant})" if truth.variant else ""
    shaped = truth.params.get("options") or {}
    shape = " with " + ", ".join(f"{k}={','.join(v) if isinstance(v, list) else v}" for k, v in shaped.items()) if shaped else ""
    click.echo(f"wrote {truth.n_steps} steps of {what}{variant_text}{onset}{ended} [{truth.algorithm}]{shape} to {run_dir}; "
               "truth in synth_truth.json")
