"""Detector quality on synthetic runs the detectors were not tuned on, drawn the way real logs look.

For every signature, N pathological runs and M healthy runs across every healthy family are
generated with rlprobe.synth and diagnosed in memory (the same SQL features and detectors as
`rlprobe doctor`). Each run draws its setup from its seed (rlprobe.synth.draw_setup): dense or
sparse logging (20-60 points at a stride of 5-10, window means, grad_norm of one step), two
optimizer updates per batch, binary rewards with small groups, reward_std as the group or the
batch std, placeholder metrics, the variants made only on request (dead from the first step,
episodes that end, a diverging loss, a length bias present from step 1) and, for healthy runs,
easy or saturating tasks, a one-step KL/grad spike and an unexploited length bias. Lengths are
log-uniform in 150..5000 steps (a sparse log is logging_steps x points long). `--plain` draws
none of that: the runs the generator made before it had options.

Reported per signature: recall@1 (a warn or critical finding whose signature fits the run,
truth.fit, ranked first among the warn and critical findings), recall at any rank, median and
p90 detection lag (first_step of the best-ranked fitting finding minus the true onset, the first
logged step where the failure is in the data), how often that first_step comes before the
onset, and for episodes that ended how often they are caught by their end. Per option value
(sparse vs dense, binary vs default, ...), recall@1 and recall over all signatures. On healthy
runs: the share with any critical finding and with any warn finding, on whole runs and on their
30% and 60% prefixes (the first 30% / 60% of the logged steps, what a live watcher sees), per
family and per option value, and which signatures fired.

Seeds: --split holdout (the default, what we report) uses seeds from 1,000,000 up; --split
train uses seeds below 100,000 and is the only range to look at while tuning thresholds.

    python benchmarks/detectors.py                       # full: 50/signature, 300 healthy (x3 with prefixes)
    python benchmarks/detectors.py --quick               # 8/signature, 48 healthy: a few minutes
    python benchmarks/detectors.py --split train --only ENTROPY_COLLAPSE,KL_BLOWUP
    python benchmarks/detectors.py --plain               # the runs without options, as before
"""

from __future__ import annotations

import argparse
import math
import random
import statistics
import sys
import time
from collections import Counter, defaultdict
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import machine_info, write_json  # noqa: E402

from rlprobe.doctor.engine import diagnose_tables  # noqa: E402
from rlprobe.record.sampling import SamplingConfig, select  # noqa: E402
from rlprobe.synth import HEALTHY_FAMILIES, SIGNATURES, Options, draw_setup, make_run  # noqa: E402

SPLITS = {"train": 0, "holdout": 1_000_000}
INFO_ONLY = frozenset({"THROUGHPUT_ROT"})  # info unless the system (not the length) slowed down: counted at any severity
ALARMS = ("warn", "critical")
PREFIXES = (0.3, 0.6)
_SAMPLE_STEPS = 400  # per run, samples are captured at up to this many evenly spaced steps


def run_length(rng: random.Random, lo: int, hi: int) -> int:
    """Log-uniform run length, so short and long runs are equally represented."""
    return int(round(math.exp(rng.uniform(math.log(lo), math.log(hi)))))


def to_tables(run: Any, run_id: str) -> tuple[pa.Table, pa.Table | None]:
    """A SynthRun as the steps and samples views would show it (NULL where not logged)."""
    n = len(run.steps)
    cols: dict[str, pa.Array] = {"run_id": pa.array([run_id] * n, pa.string()), "step": pa.array(run.steps, pa.int64())}
    for name, values in run.series.items():
        mask = run.logged(name)
        cols[name] = pa.array(np.asarray(values, dtype=float), pa.float64(), mask=~np.asarray(mask, dtype=bool))
    comp_mask = ~np.asarray(run.logged("reward_components"), dtype=bool)
    for name, values in run.components.items():
        cols[f"reward_component.{name}"] = pa.array(np.asarray(values, dtype=float), pa.float64(), mask=comp_mask)
    for name, values in run.extra.items():
        cols[f"extra.{name}"] = pa.array(np.asarray(values, dtype=float), pa.float64())
    if run.kl_positional is not None:
        cols["kl_positional"] = pa.array([list(map(float, row)) for row in run.kl_positional], pa.list_(pa.float64()))
    steps = pa.table(cols)

    rows: list[dict[str, Any]] = []
    rng = random.Random(run_id)
    stride = max(1, n // _SAMPLE_STEPS)
    for step in run.steps[::stride]:
        batch = run.samples(int(step))
        for i, reason in select(batch, SamplingConfig(), rng):
            s = dict(batch[i])
            comps = s.pop("reward_components", {}) or {}
            for k, v in comps.items():
                s[f"reward_component.{k}"] = v
            s.update(run_id=run_id, step=int(step), rank=0, sample_id=f"{step}-0-{i}", capture_reason=reason)
            s.pop("completion_token_ids", None)
            rows.append(s)
    return steps, pa.Table.from_pylist(rows) if rows else None


def prefix_tables(steps: pa.Table, samples: pa.Table | None, frac: float, run_id: str) -> tuple[pa.Table, pa.Table | None]:
    """The first ``frac`` of a run's logged steps (at least 2), as a live watcher would have seen them."""
    keep = max(2, int(math.ceil(frac * steps.num_rows)))
    head = steps.slice(0, keep)
    last = head["step"][-1].as_py()
    head = head.set_column(0, "run_id", pa.array([run_id] * head.num_rows, pa.string()))
    tail = None
    if samples is not None:
        tail = samples.filter(pc.less_equal(samples["step"], last))
        tail = tail.set_column(tail.column_names.index("run_id"), "run_id", pa.array([run_id] * tail.num_rows, pa.string()))
    return head, tail


def setup_of(kind: str, seed: int, plain: bool) -> dict[str, Any]:
    """The make_run keyword arguments of one benchmark run."""
    return {"options": Options(), "variant": None, "group_size": 8} if plain else draw_setup(kind, seed)


def dims_of(truth: Any) -> dict[str, str]:
    """The option values a run was made with, as the breakdown tables group them."""
    p = truth.params
    opts = p.get("options") or {}
    dims = {
        "logging": opts.get("logging", "dense"),
        "reward": opts.get("reward", "default"),
        "reward_std": p.get("reward_std_kind", "batch"),
        "updates": str(opts.get("updates", 1)),
        "placeholders": "+".join(opts.get("placeholders", [])) or "none",
    }
    if truth.pathology is None:
        dims.update(task=opts.get("task", "default"), spike=opts.get("spike", "none"), length_bias=opts.get("length_bias", "none"))
    else:
        dims["variant"] = truth.variant or "-"
    return dims


def evaluate(kinds: list[tuple[str, int, int]], batch: int, plain: bool) -> list[dict[str, Any]]:
    """Generate and diagnose runs (kind, seed, n_steps) in batches; one record per diagnosed table.

    Healthy runs are diagnosed whole and as their 30% and 60% prefixes (records with "prefix").
    """
    records = []
    for lo in range(0, len(kinds), batch):
        chunk = kinds[lo : lo + batch]
        steps_tables, sample_tables, meta = [], [], {}
        for kind, seed, n_steps in chunk:
            run = make_run(kind, n_steps=n_steps, seed=seed, **setup_of(kind, seed, plain))
            run_id = f"{kind}|{seed}"
            st, sa = to_tables(run, run_id)
            parts = [(run_id, None, st, sa)]
            if run.truth.pathology is None:
                parts += [(f"{run_id}|p{int(f * 100)}", f, *prefix_tables(st, sa, f, f"{run_id}|p{int(f * 100)}")) for f in PREFIXES]
            for rid, frac, s_t, s_a in parts:
                steps_tables.append(s_t)
                if s_a is not None and s_a.num_rows:
                    sample_tables.append(s_a)
                meta[rid] = (run.truth, frac, s_t.num_rows)
        steps = pa.concat_tables(steps_tables, promote_options="permissive")
        samples = pa.concat_tables(sample_tables, promote_options="permissive") if sample_tables else None
        for d in diagnose_tables(steps, samples):
            truth, frac, rows = meta[d.run_id]
            records.append({
                "run_id": d.run_id,
                "prefix": frac,
                "kind": truth.kind,
                "pathology": truth.pathology,
                "family": truth.family,
                "variant": truth.variant,
                "fit": list(truth.fit),
                "onset": truth.onset_step,
                "end": truth.end_step,
                "n_steps": truth.n_steps,
                "logged_points": rows,
                "dims": dims_of(truth),
                "findings": [(f.signature_id, f.severity, f.confidence, f.first_step) for f in d.findings],
                "skipped": [s.signature_id for s in d.skipped if s.reason.startswith("detector error")],
            })
        print(f"  diagnosed {min(lo + batch, len(kinds))}/{len(kinds)} runs", file=sys.stderr)
    return records


def score(r: dict[str, Any]) -> dict[str, Any]:
    """One pathological run: caught (any rank), caught ranked first, and the lag of the best fitting finding."""
    sig, fit = r["pathology"], set(r["fit"])
    # A signature the catalog reports as info when it is a symptom (THROUGHPUT_ROT explained by
    # longer completions) is counted at any severity: found, and first among those findings.
    counted = ("info", *ALARMS) if sig in INFO_ONLY else ALARMS
    alarms = [f for f in r["findings"] if f[1] in counted]
    hits = [f for f in alarms if f[0] in fit]
    out: dict[str, Any] = {"found": bool(hits), "first": bool(hits) and alarms[0][0] in fit, "lag": None, "by_end": None,
                           "top": alarms[0][0] if alarms else None}
    if hits and r["onset"] is not None and hits[0][3] is not None:
        out["lag"] = hits[0][3] - r["onset"]
        if r["end"] is not None:
            out["by_end"] = hits[0][3] <= r["end"]
    return out


def _rates(scored: list[dict[str, Any]]) -> dict[str, Any]:
    lags = [s["lag"] for s in scored if s["lag"] is not None]
    ended = [s["by_end"] for s in scored if s["by_end"] is not None]
    return {
        "runs": len(scored),
        "recall_ranked_first": sum(s["first"] for s in scored) / len(scored) if scored else None,
        "recall_any_rank": sum(s["found"] for s in scored) / len(scored) if scored else None,
        "median_lag_steps": statistics.median(lags) if lags else None,
        "p90_lag_steps": float(np.percentile(lags, 90)) if lags else None,
        "dated_before_onset": sum(lag < 0 for lag in lags) / len(lags) if lags else None,
        "episodes": len(ended),
        "caught_by_episode_end": sum(ended) / len(ended) if ended else None,
    }


def _alarm_rates(records: list[dict[str, Any]]) -> dict[str, Any]:
    crit = [r for r in records if any(f[1] == "critical" for f in r["findings"])]
    warn = [r for r in records if any(f[1] == "warn" for f in r["findings"])]
    return {
        "runs": len(records),
        "critical_rate": len(crit) / len(records) if records else None,
        "warn_rate": len(warn) / len(records) if records else None,
        "any_alarm_rate": len({r["run_id"] for r in crit + warn}) / len(records) if records else None,
    }


def summarize(records: list[dict[str, Any]], signatures: list[str]) -> dict[str, Any]:
    """Per-signature and per-option recall and lag; healthy false alarms on whole runs and prefixes."""
    sick = [r for r in records if r["pathology"] is not None]
    scored = {r["run_id"]: score(r) for r in sick}
    per_sig: dict[str, Any] = {}
    for sig in signatures:
        runs = [r for r in sick if r["pathology"] == sig]
        if not runs:
            continue
        entry = _rates([scored[r["run_id"]] for r in runs])
        entry["by_variant"] = {v: _rates([scored[r["run_id"]] for r in runs if (r["variant"] or "-") == v])
                               for v in sorted({r["variant"] or "-" for r in runs})}
        entry["by_logging"] = {v: _rates([scored[r["run_id"]] for r in runs if r["dims"]["logging"] == v])
                               for v in sorted({r["dims"]["logging"] for r in runs})}
        entry["misses"] = [r["run_id"] for r in runs if not scored[r["run_id"]]["found"]][:10]
        entry["outranked_by"] = dict(Counter(scored[r["run_id"]]["top"] for r in runs
                                             if scored[r["run_id"]]["found"] and not scored[r["run_id"]]["first"]))
        per_sig[sig] = entry
    by_option: dict[str, dict[str, Any]] = defaultdict(dict)
    for dim in ("logging", "reward", "reward_std", "updates", "placeholders"):
        for value in sorted({r["dims"][dim] for r in sick}):
            by_option[dim][value] = _rates([scored[r["run_id"]] for r in sick if r["dims"][dim] == value])

    healthy = [r for r in records if r["pathology"] is None]
    whole = [r for r in healthy if r["prefix"] is None]
    views = {"whole": whole, **{f"prefix_{int(f * 100)}": [r for r in healthy if r["prefix"] == f] for f in PREFIXES}}
    fired: dict[str, Counter[str]] = {k: Counter() for k in views}
    for key, rs in views.items():
        for r in rs:
            fired[key].update({f"{f[0]}:{f[1]}" for f in r["findings"] if f[1] in ALARMS})
    whole_sigs = {r["run_id"]: {f[0] for f in r["findings"] if f[1] in ALARMS} for r in whole}
    louder = [r["run_id"] for r in healthy if r["prefix"] is not None
              and {f[0] for f in r["findings"] if f[1] in ALARMS} - whole_sigs.get(r["run_id"].rsplit("|", 1)[0], set())]
    healthy_out: dict[str, Any] = {k: _alarm_rates(v) for k, v in views.items()}
    healthy_out["prefix_raises_more_than_whole"] = {"runs": len(louder), "examples": louder[:10]}
    healthy_out["by_family"] = {fam: {k: _alarm_rates([r for r in v if r["family"] == fam]) for k, v in views.items()}
                                for fam in sorted({r["family"] for r in whole})}
    healthy_out["by_option"] = {}
    for dim in ("logging", "reward", "reward_std", "updates", "placeholders", "task", "spike", "length_bias"):
        healthy_out["by_option"][dim] = {
            value: {k: _alarm_rates([r for r in v if r["dims"][dim] == value]) for k, v in views.items()}
            for value in sorted({r["dims"][dim] for r in whole})
        }
    healthy_out["fired"] = {k: dict(c.most_common()) for k, c in fired.items()}
    healthy_out["examples"] = [r["run_id"] for r in whole if any(f[1] in ALARMS for f in r["findings"])][:10]
    errors = Counter(s for r in records for s in r["skipped"])
    return {"signatures": per_sig, "by_option": dict(by_option), "healthy": healthy_out, "detector_errors": dict(errors)}


def _pct(v: float | None) -> str:
    return "-" if v is None else f"{v:.0%}"


def _num(v: float | None) -> str:
    return "-" if v is None else f"{v:.0f}"


def print_table(summary: dict[str, Any]) -> None:
    """Per-signature, per-option and healthy tables, each target printed with whether it is met."""
    print(f"{'signature':<28} {'runs':>5} {'recall@1':>9} {'recall':>7} {'lag_med':>8} {'lag_p90':>8} {'early':>6}"
          f" {'sparse@1':>9} {'dense@1':>8}  target (>= 97% recall@1)")
    for sig, s in summary["signatures"].items():
        ok = ("ok" if s["recall_ranked_first"] >= 0.97 else "BELOW 97%") + (" (counted at info too)" if sig in INFO_ONLY else "")
        bl = s["by_logging"]
        sparse = _pct(bl["sparse"]["recall_ranked_first"]) if "sparse" in bl else "-"
        dense = _pct(bl["dense"]["recall_ranked_first"]) if "dense" in bl else "-"
        print(f"{sig:<28} {s['runs']:>5} {s['recall_ranked_first']:>9.0%} {s['recall_any_rank']:>7.0%} {_num(s['median_lag_steps']):>8}"
              f" {_num(s['p90_lag_steps']):>8} {_pct(s['dated_before_onset']):>6} {sparse:>9} {dense:>8}  {ok}")
        if len(s["by_variant"]) == 1 and "-" in s["by_variant"]:
            continue
        for variant, v in s["by_variant"].items():
            ended = f", caught by episode end {_pct(v['caught_by_episode_end'])}" if v["episodes"] else ""
            print(f"  {'variant ' + ('drawn' if variant == '-' else variant):<26} {v['runs']:>5} {v['recall_ranked_first']:>9.0%}"
                  f" {v['recall_any_rank']:>7.0%} {_num(v['median_lag_steps']):>8} {_num(v['p90_lag_steps']):>8}{ended}")
    print("\npathological runs by option (all signatures):")
    print(f"  {'option=value':<34} {'runs':>5} {'recall@1':>9} {'recall':>7} {'lag_med':>8}")
    for dim, values in summary["by_option"].items():
        for value, v in values.items():
            print(f"  {dim + '=' + value:<34} {v['runs']:>5} {v['recall_ranked_first']:>9.0%} {v['recall_any_rank']:>7.0%} {_num(v['median_lag_steps']):>8}")
    h = summary["healthy"]
    if h["whole"]["runs"]:
        print("\nhealthy runs: any critical / any warn (targets: 0 critical, <= 2% warn)")
        for key in ("whole", *(f"prefix_{int(f * 100)}" for f in PREFIXES)):
            v = h[key]
            ok = "ok" if v["critical_rate"] == 0 and v["warn_rate"] <= 0.02 else "NOT MET"
            print(f"  {key:<12} {v['runs']:>5} runs  critical {v['critical_rate']:.1%}  warn {v['warn_rate']:.1%}  {ok}")
        print(f"  prefixes raising a signature the whole run does not: {h['prefix_raises_more_than_whole']['runs']}")
        print("  by family (whole / p30 / p60, any alarm): " + ", ".join(
            f"{fam} " + "/".join(_pct(v[k]["any_alarm_rate"]) for k in ("whole", "prefix_30", "prefix_60"))
            for fam, v in h["by_family"].items()))
        print("  by option (runs; whole critical/warn; p30 critical/warn; p60 critical/warn):")
        for dim, values in h["by_option"].items():
            for value, v in values.items():
                cells = "; ".join(f"{_pct(v[k]['critical_rate'])}/{_pct(v[k]['warn_rate'])}" for k in ("whole", "prefix_30", "prefix_60"))
                print(f"    {dim + '=' + value:<32} {v['whole']['runs']:>4}  {cells}")
        for key, fired in h["fired"].items():
            if fired:
                print(f"  fired on healthy ({key}): " + ", ".join(f"{k} x{v}" for k, v in fired.items()))
    if summary["detector_errors"]:
        print(f"detector errors: {summary['detector_errors']}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--per-signature", type=int, default=50)
    parser.add_argument("--healthy", type=int, default=300)
    parser.add_argument("--split", choices=sorted(SPLITS), default="holdout")
    parser.add_argument("--only", default="", help="comma-separated signatures (default: all)")
    parser.add_argument("--no-healthy", action="store_true")
    parser.add_argument("--plain", action="store_true", help="runs without options or extra variants (the generator before them)")
    parser.add_argument("--min-steps", type=int, default=150)
    parser.add_argument("--max-steps", type=int, default=5000)
    parser.add_argument("--batch", type=int, default=40)
    parser.add_argument("--quick", action="store_true", help="8 runs per signature, 48 healthy")
    parser.add_argument("--out", default=None, help="JSON figures (default benchmarks/results/detectors.json)")
    args = parser.parse_args()
    if args.quick:
        args.per_signature, args.healthy = 8, 48
    signatures = [s.strip().upper() for s in args.only.split(",") if s.strip()] or list(SIGNATURES)
    unknown = [s for s in signatures if s not in SIGNATURES]
    if unknown:
        parser.error(f"unknown signatures {', '.join(unknown)}")
    base = SPLITS[args.split]
    rng = random.Random(base + 17)
    kinds: list[tuple[str, int, int]] = []
    for sig in signatures:
        for i in range(args.per_signature):
            kinds.append((sig, base + i, run_length(rng, args.min_steps, args.max_steps)))
    if not args.no_healthy:
        # lengths of their own, so the healthy runs are the same whatever --only selects
        healthy_rng = random.Random(base + 23)
        families = list(HEALTHY_FAMILIES)
        for i in range(args.healthy):
            kinds.append((f"healthy:{families[i % len(families)]}", base + i, run_length(healthy_rng, args.min_steps, args.max_steps)))
    t0 = time.perf_counter()
    records = evaluate(kinds, args.batch, args.plain)
    elapsed = time.perf_counter() - t0
    summary = summarize(records, signatures)
    print_table(summary)
    print(f"\n{len(kinds)} runs ({len(records)} diagnoses with prefixes) in {elapsed:.0f} s "
          f"({args.split} seeds from {base}, {'plain' if args.plain else 'options drawn per run'})")
    write_json("detectors", args.out, {
        "benchmark": "detectors",
        "machine": machine_info(),
        "params": vars(args),
        "elapsed_s": elapsed,
        **summary,
    })


if __name__ == "__main__":
    main()
