"""Forensic commands: `show` a step, rank `samples`, find the `spikes` drivers, `diff` two runs.

Thin over rlprobe.forensics and rlprobe.diff. Every command takes a run directory (samples also
a runs root) or a source rlprobe can import (trainer_state.json, a metrics file, a console log),
imported to a temporary recording first, as `rlprobe doctor` does.
"""

from __future__ import annotations

import json
from contextlib import ExitStack, contextmanager
from typing import Any, Iterator, Sequence

import click

from rlprobe.cli import cli
from rlprobe.cli.options import Output, display_options, emit, format_table, indented, output_options, show
from rlprobe.cli.progress import Progress

_CUT = 60  # characters of a text cell in terminal tables; --full prints whole texts
_SORTS = ("reward", "advantage", "kl", "length", "logprob")
_SAMPLE_COLUMNS = ("reward_total", "advantage", "kl_contribution", "completion_len", "logprob_mean")
_SHOW_WINDOW_COLUMNS = 8


@contextmanager
def _recording(path: str) -> Iterator[tuple[str, Any]]:
    """(path to read, import report or None): a source is imported to a temporary recording."""
    from rlprobe.sources import as_recording

    with as_recording(path) as rec:
        if rec.report is not None:
            r = rec.report
            click.echo(f"(imported {r.kind} {path} to a temporary recording: {r.steps} steps, {r.samples} samples; "
                       "`rlprobe import` keeps one)", err=True)
        for line in rec.torn_lines():
            click.echo(line, err=True)
        yield str(rec.path), rec.report


def _usage(exc: Exception) -> click.UsageError:
    return click.UsageError(str(exc))


def _cut(text: Any, full: bool) -> Any:
    if not isinstance(text, str) or full:
        return text
    flat = text.replace("\n", "\\n")
    return flat if len(flat) <= _CUT else flat[: _CUT - 1] + "…"


def _samples_full(rows: Sequence[dict[str, Any]], columns: Sequence[str]) -> list[str]:
    """One block per sample with its whole prompt and completion (what --full prints)."""
    out: list[str] = []
    for i, row in enumerate(rows):
        if i:
            out.append("")
        head = "  ".join(f"{c}={_fmt(row.get(c))}" for c in columns if c not in ("prompt_text", "completion_text"))
        out += [f"-- {head}", "prompt:", _indent(row.get("prompt_text")), "completion:", _indent(row.get("completion_text"))]
    return out


def _indent(text: Any) -> str:
    return "\n".join("    " + line for line in (text if isinstance(text, str) else "NULL").splitlines() or [""])


def _fmt(value: Any) -> str:
    if value is None:
        return "NULL"
    if isinstance(value, float):
        return f"{value:.6g}"
    return str(value)


def _refuse_output_inside(path: str, output: Output) -> None:
    """An --out file inside the recording (or below the root) is refused before anything runs."""
    if output.out is not None:
        from rlprobe.store import open_store

        open_store(path).refuse_output_inside(output.out)


def _emit_sample_table(table: Any, columns: list[str], output: Output, full: bool, key: str = "") -> None:
    """Print ranked samples: every column in --json/--csv/--out, the chosen ones on a terminal."""
    if not output.to_terminal:
        emit(table.column_names, [str(t) for t in table.schema.types], table, output)
        return
    rows = table.to_pylist()
    if full:
        show("\n".join(_samples_full(rows, columns)))
        return
    # on a narrow terminal the secondary numbers go first; the rank key, ids and texts stay
    drop = [c for c in reversed(columns) if c in _SAMPLE_COLUMNS + ("weight_share",) and c != key] + ["capture_reason"]
    show(format_table(columns, [tuple(_cut(r.get(c), False) for c in columns) for r in rows], headers=output.headers,
                      drop_first=drop))


@cli.command("samples")
@click.argument("run", metavar="RUN_OR_ROOT", type=click.Path(path_type=str))
@click.option("--sort", type=click.Choice(_SORTS), default="reward", show_default=True,
              help="Rank by reward_total, advantage, kl_contribution, completion_len or logprob_mean.")
@click.option("--around", type=int, metavar="N", help="Only steps N-K..N+K (K from --window).")
@click.option("--window", type=click.IntRange(min=0), metavar="K", help="Half-width of --around's range.  [default: 5]")
@click.option("--from", "step_from", type=int, metavar="A", help="Only steps >= A.")
@click.option("--to", "step_to", type=int, metavar="B", help="Only steps <= B.")
@click.option("--asc", "ascending", is_flag=True, help="Lowest first (default: highest first).")
@click.option("-k", "k", type=click.IntRange(min=1), default=10, show_default=True, help="How many samples.")
@click.option("--full", is_flag=True, help="Print whole prompts and completions (tables cut text at 60 characters).")
@output_options
def samples_command(run: str, sort: str, around: int | None, window: int | None, step_from: int | None,
                    step_to: int | None, ascending: bool, k: int, full: bool, output: Output) -> None:
    """Rank the captured samples of a run by reward, advantage, kl, length or logprob.

    Samples with no value for the sort key come last; ties break on step, then sample_id.
    Give a step range with --around N --window K or with --from A --to B (not both). On a runs
    root, every run's samples are ranked together and the table has a run_id column. Samples
    are what the recorder kept (by default the 2 best, 2 worst and 4 random of each step), not
    whole batches.

    Example:

    \b
        rlprobe samples runs/my-run --sort advantage --around 120 --window 5 -k 5
        rlprobe samples runs/my-run --sort length --from 0 --to 50 --asc --json
    """
    from rlprobe.forensics import BadForensicsArgument, SORT_KEYS, query_samples, step_range
    from rlprobe.store import resolve

    try:
        lo, hi = step_range(around=around, window=window, step_from=step_from, step_to=step_to)
    except BadForensicsArgument as exc:
        raise _usage(exc) from exc
    with Progress(output.to_terminal) as bar, _recording(run) as (path, _):
        bar.update("ranking samples")
        _refuse_output_inside(path, output)
        on_root = resolve(path).kind == "root"
        table = query_samples(path, sort=sort, step_from=lo, step_to=hi, k=k, ascending=ascending)
    matched = table.column("matched")[0].as_py() if table.num_rows else 0
    if not output.to_terminal:
        _emit_sample_table(table.drop_columns(["matched"]), [], output, full)
        return
    key = SORT_KEYS[sort]
    columns = (["run_id"] if on_root else []) + ["step", "sample_id", key]
    columns += [c for c in _SAMPLE_COLUMNS if c != key] + ["capture_reason", "prompt_text", "completion_text"]
    _emit_sample_table(table, columns, output, full, key)
    where = "all steps" if lo is None and hi is None else f"steps {'' if lo is None else lo}..{'' if hi is None else hi}"
    click.echo(f"top {table.num_rows} of {matched} captured samples in {where} by {key} "
               f"{'ascending' if ascending else 'descending'}", err=True)


@cli.command("spikes")
@click.argument("run", metavar="RUN", type=click.Path(path_type=str))
@click.option("--step", required=True, type=int, metavar="N", help="The step of the spike.")
@click.option("--window", type=click.IntRange(min=0), default=5, show_default=True, metavar="K",
              help="Look at steps N-K..N+K.")
@click.option("-k", "k", type=click.IntRange(min=1), default=8, show_default=True, help="How many samples.")
@click.option("--full", is_flag=True, help="Print whole prompts and completions (tables cut text at 60 characters).")
@output_options
def spikes_command(run: str, step: int, window: int, k: int, full: bool, output: Output) -> None:
    """The samples that drove the update around a step: largest |advantage| first.

    In a policy-gradient update a sample's gradient is weighted by its advantage, so these are
    the completions the policy was pushed toward (advantage > 0) or away from (< 0) hardest
    around step N. weight_share is a sample's share of the |advantage| of the captured samples
    in the window (a share of what was kept, not of the whole batch).

    Example:

    \b
        rlprobe spikes runs/my-run --step 117
        rlprobe spikes runs/my-run --step 117 --window 2 -k 4 --full
    """
    from rlprobe.forensics import spike_drivers

    with Progress(output.to_terminal) as bar, _recording(run) as (path, _):
        bar.update("ranking samples")
        _refuse_output_inside(path, output)
        table = spike_drivers(path, step, window=window, k=k)
    matched = table.column("matched")[0].as_py() if table.num_rows else 0
    with_adv = table.column("with_advantage")[0].as_py() if table.num_rows else 0
    if not output.to_terminal:
        _emit_sample_table(table.drop_columns(["matched", "with_advantage"]), [], output, full)
        return
    if not table.num_rows:
        click.echo(f"no captured samples in steps {step - window}..{step + window}")
        return
    columns = ["step", "sample_id", "advantage", "weight_share", "reward_total", "completion_len", "capture_reason",
               "prompt_text", "completion_text"]
    _emit_sample_table(table, columns, output, full, "advantage")
    note = f"top {table.num_rows} of {matched} captured samples in steps {step - window}..{step + window} by |advantage|"
    if with_adv < matched:
        note += f"; {matched - with_adv} have no advantage recorded and rank last"
    click.echo(note, err=True)


@cli.command("show")
@click.argument("run", metavar="RUN", type=click.Path(path_type=str))
@click.option("--step", required=True, type=int, metavar="N", help="The step to show.")
@click.option("--window", type=click.IntRange(min=0), default=5, show_default=True, metavar="K",
              help="Show steps N-K..N+K around it.")
@click.option("--max-samples", type=click.IntRange(min=0), default=10, show_default=True,
              help="Captured samples of step N to print, best reward first.")
@click.option("--full", is_flag=True, help="Print whole prompts and completions (tables cut text at 60 characters).")
@click.option("--json", "as_json", is_flag=True, help="Print everything as one JSON object (texts whole).")
@display_options
def show_command(run: str, step: int, window: int, max_samples: int, full: bool, as_json: bool) -> None:
    """Show one step: its metrics, the steps around it, events there, its captured samples.

    A step the run did not record is an error that names the nearest recorded steps.

    Example:

    \b
        rlprobe show runs/my-run --step 117
        rlprobe show runs/my-run --step 117 --window 10 --max-samples 4 --full
    """
    from rlprobe.forensics import show_step

    with Progress(not as_json) as bar, _recording(run) as (path, report):
        bar.update("reading step")
        detail = show_step(path, step, window=window, max_samples=max_samples)
    if report is not None:
        detail.run_dir = run
    if as_json:
        click.echo(json.dumps(detail.to_dict(), indent=2, ensure_ascii=False, default=str))
        return
    show("\n".join(_step_lines(detail, full)))


def _step_lines(d: Any, full: bool) -> list[str]:  # d: rlprobe.forensics.StepDetail
    from rlprobe.forensics.show import KEY_METRICS

    out = [f"{d.run_id}  ({d.run_dir}, {d.status})  step {d.step}", "", f"metrics at step {d.step}:"]
    metrics = {k: v for k, v in d.metrics.items() if k not in ("step", "wall_time")}
    ordered = [k for k in KEY_METRICS if k in metrics] + sorted(k for k in metrics if k not in KEY_METRICS)
    width = max((len(k) for k in ordered), default=0)
    for name in ordered:
        out.append(f"  {name:<{width}}  {_fmt(metrics[name]) if not isinstance(metrics[name], list) else json.dumps(metrics[name])}")
    shown = [c for c in KEY_METRICS if c in d.metric_names][:_SHOW_WINDOW_COLUMNS]
    if not shown:
        shown = [c for c in d.metric_names if c != "kl_positional"][:_SHOW_WINDOW_COLUMNS]
    out += ["", f"steps {d.window_from}..{d.window_to} ({len(d.window)} recorded; > marks step {d.step}):"]
    rows = [((">" if r["step"] == d.step else ""), r["step"], *[r.get(c) for c in shown]) for r in d.window]
    out += [indented(format_table(["", "step", *shown], rows, margin=2)), ""]
    if d.events:
        out.append(f"events in steps {d.window_from}..{d.window_to}:")
        rows = [(e["step"], e["kind"], e["rank"], _cut(e["message"], full), _cut(json.dumps(e["data"], default=str), full))
                for e in d.events]
        out.append(indented(format_table(["step", "kind", "rank", "message", "data"], rows, margin=2)))
    else:
        out.append(f"no events in steps {d.window_from}..{d.window_to}")
    out.append("")
    if not d.samples_at_step:
        out.append(f"no samples captured at step {d.step}")
        return out
    out.append(f"samples captured at step {d.step}: {d.samples_at_step}" +
               (f", showing {len(d.samples)} by reward" if d.samples else " (--max-samples 0)"))
    if not d.samples:
        return out
    columns = ["sample_id", "reward_total", "advantage", "completion_len", "capture_reason", "prompt_text", "completion_text"]
    if full:
        out += _samples_full(d.samples, columns)
    else:
        out.append(indented(format_table(columns, [tuple(_cut(s.get(c), False) for c in columns) for s in d.samples], margin=2)))
    return out


@cli.command("diff")
@click.argument("run_a", metavar="A", type=click.Path(path_type=str))
@click.argument("run_b", metavar="B", type=click.Path(path_type=str))
@click.option("--json", "as_json", is_flag=True, help="Print the RunDiff as JSON.")
@click.option("--z-thresh", type=float, default=4.0, show_default=True,
              help="How many robust spreads of its early noise the gap B - A must leave by.")
@click.option("--sustain", type=click.IntRange(min=1), default=5, show_default=True,
              help="For how many consecutive common steps it must stay out.")
@click.option("--max-prompts", type=click.IntRange(min=0), default=10, show_default=True,
              help="Per-prompt gaps to list.")
@click.option("--full", is_flag=True, help="Print whole prompt texts (tables cut text at 60 characters).")
@display_options
def diff_command(run_a: str, run_b: str, as_json: bool, z_thresh: float, sustain: int, max_prompts: int, full: bool) -> None:
    """Compare run B with run A: config delta, where each metric first diverged, per-prompt gaps.

    Config: the flattened trainer_config keys whose values differ. Metrics are joined on step
    (runs of different lengths are compared where both have steps; metrics only one run logged
    are listed as such). A metric diverges at the first step where B - A leaves the band of
    its first common steps (median, robust spread) by --z-thresh spreads and stays out, on one
    side, for --sustain consecutive common steps. In the table, "B vs A" compares the two
    values shown at that step, and "B - A" says which way the gap left its early level (a gap
    that shrinks moves down even while B is still higher). Prompt gaps: prompts captured in
    both runs, ranked by the difference of their mean reward (B - A).

    Example:

    \b
        rlprobe diff runs/baseline runs/higher-lr
        rlprobe diff runs/baseline runs/higher-lr --z-thresh 6 --sustain 10 --json
    """
    from rlprobe.diff import BadDiffArgument, diff_runs

    if not (z_thresh > 0 and z_thresh != float("inf")):
        raise click.BadParameter(f"must be a positive number, got {z_thresh}", param_hint="--z-thresh")
    with Progress(not as_json) as bar, ExitStack() as stack:
        path_a, report_a = stack.enter_context(_recording(run_a))
        path_b, report_b = stack.enter_context(_recording(run_b))
        try:
            result = diff_runs(path_a, path_b, z_thresh=z_thresh, sustain=sustain, max_prompt_gaps=max_prompts,
                               progress=bar.update)
        except BadDiffArgument as exc:
            raise _usage(exc) from exc
    for side, given, report in ((result.a, run_a, report_a), (result.b, run_b, report_b)):
        if report is not None:
            side.run_dir, side.imported = given, True
    if as_json:
        click.echo(json.dumps(result.model_dump(mode="json"), indent=2, ensure_ascii=False, default=str))
        return
    show("\n".join(_diff_lines(result, full)))


def _diff_lines(d: Any, full: bool) -> list[str]:  # d: rlprobe.diff.RunDiff
    out = []
    for label, s in (("A", d.a), ("B", d.b)):
        steps = f"{s.steps} steps" + (f" ({s.first_step}..{s.last_step})" if s.first_step is not None else "")
        out.append(f"{label}: {s.run_id}  ({s.run_dir}, {s.status})  {steps}  {s.algorithm or '-'}  {s.model_name or '-'}")
    out += [f"{d.overlap_steps} common steps" + (f" ({d.overlap_from}..{d.overlap_to})" if d.overlap_steps else ""), ""]
    if d.config_delta:
        out.append(f"config: {len(d.config_delta)} key{'s' if len(d.config_delta) != 1 else ''} differ")
        rows = [(c.key, _config_value(c.a, c.only_in == "b"), _config_value(c.b, c.only_in == "a")) for c in d.config_delta]
        out.append(indented(format_table(["key", "A", "B"], rows, margin=2)))
    else:
        out.append("config: same trainer_config")
    out.append("")
    if d.divergences:
        out.append(f"divergences (|z| > {d.z_thresh:g} for {d.sustain} common steps), earliest first; "
                   "B vs A: the values shown, B - A: which way the gap left its early level:")
        rows = [(v.metric, v.first_step, v.a_value, v.b_value, v.b_is(), "rose" if v.direction == "b_higher" else "fell",
                 round(v.z, 1), v.peak_step, round(v.peak_z, 1)) for v in d.divergences]
        out.append(indented(format_table(["metric", "from_step", "A", "B", "B vs A", "B - A", "z", "peak_step", "peak_z"],
                                         rows, margin=2)))
    else:
        out.append(f"divergences: none (no metric left its early gap by {d.z_thresh:g} spreads for {d.sustain} steps)")
    if d.unchanged:
        out.append(f"  no divergence: {', '.join(d.unchanged)}")
    for label, names in (("apart from the first steps on (an offset, not a divergence)", d.apart_from_start),
                         ("only in A", d.only_in_a), ("only in B", d.only_in_b),
                         ("too few common steps to judge", d.too_short)):
        if names:
            out.append(f"  {label}: {', '.join(names)}")
    out.append("")
    if d.prompt_gaps:
        out.append(f"prompt gaps ({d.shared_prompts} prompts captured in both; mean reward B - A, largest first):")
        rows = [(_cut(g.prompt_text, full), round(g.gap, 4), g.reward_mean_a, g.reward_mean_b, g.n_a, g.n_b) for g in d.prompt_gaps]
        out.append(indented(format_table(["prompt", "gap", "reward_A", "reward_B", "n_A", "n_B"], rows, margin=2)))
    else:
        out.append("prompt gaps: no prompt captured in both runs" if not d.shared_prompts else "prompt gaps: not listed (--max-prompts 0)")
    return out


def _config_value(value: Any, missing: bool) -> str:
    if missing:
        return "(absent)"
    return json.dumps(value, default=str)
