"""`rlprobe doctor`: ranked diagnosis of a run, or of every run below a root."""

from __future__ import annotations

import json
import os
import sys
from typing import Any, Callable

import click

from rlprobe.cli import cli
from rlprobe.cli.options import display_options, format_table, show, style
from rlprobe.cli.progress import Progress


def _evidence_line(evidence: dict, limit: int = 5) -> str:
    parts = []
    for key, value in list(evidence.items())[:limit]:
        parts.append(f"{key}={value:.4g}" if isinstance(value, float) else f"{key}={value}")
    return ", ".join(parts)


def samples_hint(shown: str, sample_ids: list[str], imported: bool) -> str:
    """A command to paste that prints the samples a finding cites (the real path and ids)."""
    import shlex

    ids = ", ".join("'" + s.replace("'", "''") + "'" for s in sample_ids)
    sql = f"SELECT step, sample_id, reward_total, completion_text FROM samples WHERE sample_id IN ({ids}) ORDER BY step"
    # double quotes read best around SQL's single quotes; anything a shell would expand inside them
    # falls back to shlex's quoting, which is always safe
    quoted = f'"{sql}"' if not any(c in sql for c in '"$`\\!') else shlex.quote(sql)
    if imported:  # the temporary recording is gone: keep one first
        return f"rlprobe import {shlex.quote(shown)} runs/imported && rlprobe query runs/imported {quoted}"
    return f"rlprobe query {shlex.quote(shown)} {quoted}"


def diagnosis_lines(d: Any, shown: str, imported: bool = False) -> list[str]:
    """One run's diagnosis as text: each finding, its symptoms under it, and what was skipped."""
    title = f"{d.run_id}  ({d.run_dir})  {d.steps} steps"
    out = [f"{title}: no findings" if not d.findings else
           f"{title}: {len(d.findings)} finding{'s' if len(d.findings) != 1 else ''}"]
    for f in d.findings:
        symptom = f.explained_by is not None
        pad = "    " if symptom else "  "
        head = f"{f.severity.upper():<8} {f.signature_id:<26} from step {f.first_step}"
        if f.ongoing is False and f.last_step is not None:
            head += f", ended at step {f.last_step}"
        head += f"  confidence {f.confidence:.2f}"
        out.append("")
        out.append(f"  ↳ {style(head, f.severity)}  (symptom of {f.explained_by})" if symptom else style(head, f.severity))
        out.append(f"{pad}{f.explanation}")
        if f.evidence:
            out.append(f"{pad}evidence: {_evidence_line(f.evidence)}")
        for action in f.suggested_actions[:3]:
            out.append(f"{pad}try: {action}")
        if f.links_to_samples:
            out.append(f"{pad}samples: {samples_hint(shown, f.links_to_samples[:5], imported)}")
    # a detector that raised is a bug in rlprobe, not a missing input: said apart, with its error
    failed = [s for s in d.skipped if s.reason.startswith("detector error")]
    skipped = [s for s in d.skipped if s not in failed]
    if skipped:
        names = ", ".join(s.signature_id for s in skipped)
        out.append(f"\nskipped {len(skipped)} detector{'s' if len(skipped) != 1 else ''} "
                   f"(inputs not logged or disabled; --json has reasons): {names}")
    for s in failed:
        out.append(f"{s.signature_id} failed on this run and was not checked (please report it): {s.reason}")
    return out


@cli.command("doctor")
@click.argument("run", metavar="RUN_OR_ROOT_OR_SOURCE", type=click.Path(path_type=str))
@click.option("--json", "as_json", is_flag=True, help="Print findings and skipped detectors as JSON.")
@click.option("--config", "config_path", type=click.Path(dir_okay=False, path_type=str), help="doctor.toml with per-detector thresholds.")
@click.option("--strict", is_flag=True, help="Fail on a broken run below a root instead of leaving it out with a warning.")
@display_options
def doctor_command(run: str, as_json: bool, config_path: str | None, strict: bool) -> None:
    """Diagnose a run: ranked findings with onset, evidence and what to try.

    A finding another one explains (a symptom) is printed under its cause, marked with ↳; an
    episode the run recovered from says where it ended. On a runs root, diagnoses every run
    (a progress bar per run on a terminal) and lists them ranked by their worst finding; a run
    whose files cannot be read is left out with a warning naming the file (--strict fails).
    Exit code: 1 when any critical finding exists, 0 otherwise, 2 when the input is unusable,
    so it drops into CI gates and shell automation.

    A run rlprobe did not record (a trainer_state.json or an output dir holding one, a JSONL/CSV
    of metrics, a console log of the Trainer's dicts; see `rlprobe import`) is imported to a
    temporary recording, diagnosed, and the temporary recording removed.

    Example:

    \b
        rlprobe doctor runs/my-run
        rlprobe doctor runs/ --json > findings.json
        rlprobe doctor out/checkpoint-200/trainer_state.json
    """
    from rlprobe.sources import as_recording
    from rlprobe.store.engine import is_url

    if is_url(run):  # object storage holds recordings only: nothing there to import
        if _diagnose(run, run, as_json, config_path, strict=strict):
            sys.exit(1)
        return
    with as_recording(run) as rec:
        if rec.report is not None:
            r = rec.report
            click.echo(f"(imported {r.kind} {run} to a temporary recording: {r.steps} steps, step numbers: "
                       f"{r.step_rule}; `rlprobe import` keeps one)", err=True)
        for line in rec.torn_lines():
            click.echo(line, err=True)
        # An imported source is named as the user gave it (a root's runs by their source run), not by
        # the temporary folder that is removed.
        shown = None if rec.report is None else (rec.shown_as if hasattr(rec.report, "runs") else (lambda _: run))
        critical = _diagnose(str(rec.path), run, as_json, config_path, shown_as=shown, strict=strict)
    if critical:
        sys.exit(1)


def _diagnose(run: str, given: str, as_json: bool, config_path: str | None,
              shown_as: Callable[[str], str] | None = None, strict: bool = False) -> bool:
    """Print the diagnosis of a run or root (given: the path as the user typed it); True when a finding is critical."""
    from rlprobe.doctor import diagnose_path
    from rlprobe.store import resolve

    target = resolve(run)
    with Progress(not as_json, label="diagnosing") as bar:
        diagnoses = diagnose_path(run, config_path=config_path, strict=strict, progress=bar.update)
    if shown_as is not None:  # an imported source: name it, not the temporary folder that is removed
        for d in diagnoses:
            d.run_dir = shown_as(d.run_dir)
    critical = any(d.has_critical for d in diagnoses)
    if as_json:
        payload = [d.model_dump(mode="json") for d in diagnoses]
        click.echo(json.dumps(payload[0] if target.kind == "run" and len(payload) == 1 else payload, indent=2))
    elif target.kind == "run" and len(diagnoses) == 1:
        show("\n".join(diagnosis_lines(diagnoses[0], given, imported=shown_as is not None)))
    else:
        from rlprobe.doctor.findings import rank_key

        def worst_key(d):  # type: ignore[no-untyped-def]
            return rank_key(d.worst) if d.worst else (1, 0, 0.0, 2**62)

        rows = []
        for d in sorted(diagnoses, key=worst_key):
            w = d.worst
            path = os.path.relpath(d.run_dir, target.path) if d.run_dir and shown_as is None else (d.run_dir or "")
            rows.append((path, w.severity if w else "ok", w.signature_id if w else "", w.first_step if w else None,
                         round(w.confidence, 2) if w else None, len(d.findings), d.run_id))
        show(format_table(["run", "worst", "signature", "first_step", "confidence", "findings", "run_id"], rows))
    return critical
