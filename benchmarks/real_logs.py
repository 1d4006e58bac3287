"""The doctor on real training logs: imports and diagnoses every log of an annotated corpus.

The corpus (../shared/realdata/corpus/ by default) holds real public GRPO/PPO logs, each read
by a person from its numbers before any tool ran on it; labels.json has the verdicts and
README.md the reading and the scoring rule, which this script applies as written:

- a bad log is *caught* when a warn or critical finding with a fitting signature has
  first_step <= by_step; it is *top-1* when, in addition, that finding is the one ranked first;
- an ok log raises a *false alarm* on any critical finding, or on a warn whose signature is not
  tolerated; ambiguous logs are diagnosed and shown, not scored;
- *live* false alarms: the same rule on the 30% and 60% prefixes of each ok log (what a
  watcher sees while the run is still going), diagnosed in memory.

One line per log, then `caught=A/B top1=T/B false_alarms=C/D live_false_alarms=E/F`, then the
same figures per repository and leave-one-repository-out (every repository but one), so a change
that only helps the logs of one repository shows up as such. `--compare OLD.json` prints what
changed per log against an earlier run of this script.

    python benchmarks/real_logs.py
    python benchmarks/real_logs.py --only rho1.50 --verbose      # files whose name contains rho1.50
    python benchmarks/real_logs.py --compare benchmarks/results/real_logs.prev.json
"""

from __future__ import annotations

import argparse
import json
import os
import re
import sys
import time
import warnings
from collections import defaultdict
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import REPO, machine_info, write_json  # noqa: E402

# ../shared beside the checkout (CI's layout), else the nearest above it (a git worktree sits
# deeper), or RLPROBE_SHARED: the rule tests/shared_data.py follows.
DEFAULT_CORPUS = (Path(os.environ["RLPROBE_SHARED"]) if os.environ.get("RLPROBE_SHARED") else next(
    (p / "shared" for p in REPO.parents if (p / "shared" / "realdata").is_dir()), REPO.parent / "shared")) / "realdata" / "corpus"
PREFIXES = (0.3, 0.6)


def repositories(readme: Path) -> dict[str, str]:
    """File name -> public repository it was taken from, as the corpus README states."""
    out: dict[str, str] = {}
    current = None
    for line in readme.read_text(encoding="utf-8").splitlines():
        head = re.match(r"^## \d+\. `([^`]+)`", line)
        if head:
            current = head.group(1)
            continue
        repo = re.search(r"\*\*Source:\*\* repo `([^`]+)`", line)
        if repo and current is not None:
            out[current] = repo.group(1)
    return out


def _brief(f: Any) -> dict[str, Any]:
    return {"signature": f.signature_id, "severity": f.severity, "first_step": f.first_step,
            "last_step": f.last_step, "confidence": f.confidence, "explained_by": getattr(f, "explained_by", None)}


def score(label: dict[str, Any], findings: list[dict[str, Any]]) -> dict[str, Any]:
    """The corpus README's rule applied to one log's ranked findings."""
    kind = label["kind"]
    loud = [f for f in findings if f["severity"] in ("warn", "critical")]
    if kind == "bad":
        fit, by = set(label["fit"]), label["by_step"]
        hits = [f for f in loud if f["signature"] in fit and f["first_step"] is not None and f["first_step"] <= by]
        top = findings[0] if findings else None
        top1 = bool(top and top in hits)
        return {"caught": bool(hits), "top1": top1, "hit": hits[0] if hits else None}
    if kind == "ok":
        tolerated = set(label.get("tolerated", []))
        alarms = [f for f in loud if f["severity"] == "critical" or f["signature"] not in tolerated]
        return {"false_alarm": bool(alarms), "alarms": alarms}
    return {}


def diagnose_file(path: Path) -> tuple[dict[str, Any], list[dict[str, Any]], dict[float, list[dict[str, Any]]]]:
    """Import a log, diagnose it whole and its prefixes; (import info, findings, prefix findings)."""
    from rlprobe.doctor.engine import diagnose_path, diagnose_tables
    from rlprobe.importers import as_recording
    from rlprobe.store import connect

    with as_recording(path) as rec:
        info = {"steps": rec.report.steps if rec.report else None,
                "step_rule": rec.report.step_rule if rec.report else None,
                "kind": rec.report.kind if rec.report else None}
        t0 = time.perf_counter()
        diagnosis = diagnose_path(rec.path)[0]
        info["doctor_s"] = round(time.perf_counter() - t0, 3)
        findings = [_brief(f) for f in diagnosis.findings]
        steps = connect(rec.path).sql("SELECT * FROM steps ORDER BY step").arrow()
        if hasattr(steps, "read_all"):
            steps = steps.read_all()
    prefixes: dict[float, list[dict[str, Any]]] = {}
    for share in PREFIXES:
        k = max(1, int(round(share * steps.num_rows)))
        prefix = diagnose_tables(steps.slice(0, k))[0]
        prefixes[share] = [_brief(f) for f in prefix.findings]
    return info, findings, prefixes


def _tally(rows: list[dict[str, Any]]) -> dict[str, int]:
    bad = [r for r in rows if r["label"]["kind"] == "bad"]
    ok = [r for r in rows if r["label"]["kind"] == "ok"]
    live = [(r, s) for r in ok for s in PREFIXES if r.get("prefix_score")]
    return {
        "caught": sum(r["score"].get("caught", False) for r in bad), "bad": len(bad),
        "top1": sum(r["score"].get("top1", False) for r in bad),
        "false_alarms": sum(r["score"].get("false_alarm", False) for r in ok), "ok": len(ok),
        "live_false_alarms": sum(r["prefix_score"][str(s)]["false_alarm"] for r, s in live), "live": len(live),
    }


def _fmt(t: dict[str, int]) -> str:
    return (f"caught={t['caught']}/{t['bad']} top1={t['top1']}/{t['bad']} false_alarms={t['false_alarms']}/{t['ok']} "
            f"live_false_alarms={t['live_false_alarms']}/{t['live']}")


def _line(r: dict[str, Any], verbose: bool) -> str:
    label, s = r["label"], r["score"]
    kind = label["kind"]
    if r.get("error"):
        verdict = "IMPORT FAILED"
    elif kind == "bad":
        verdict = ("caught" + (" top1" if s["top1"] else " (not top1)")) if s["caught"] else "MISSED"
        verdict += f" by {label['by_step']}"
    elif kind == "ok":
        live = [str(p) for p in PREFIXES if r.get("prefix_score") and r["prefix_score"][str(p)]["false_alarm"]]
        verdict = ("FALSE ALARM" if s["false_alarm"] else "quiet") + (f", live alarm at {'/'.join(live)}" if live else "")
    else:
        verdict = "(not scored)"
    found = ", ".join(f"{f['severity'][0].upper()}:{f['signature']}@{f['first_step']}" + (f"<{f['explained_by']}" if f.get("explained_by") else "")
                      for f in r.get("findings", []))
    out = f"{kind:>9}  {verdict:<28} {r['file']}\n{'':11}{found or 'no findings'}"
    if r.get("error"):
        out += f"\n{'':11}{r['error']}"
    if verbose and r.get("prefix_findings"):
        for p, fs in r["prefix_findings"].items():
            out += f"\n{'':11}prefix {p}: " + (", ".join(f"{f['severity'][0].upper()}:{f['signature']}@{f['first_step']}" for f in fs) or "none")
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--corpus", type=Path, default=DEFAULT_CORPUS, help="folder holding labels.json, README.md and the logs")
    ap.add_argument("--only", default=None, help="only files whose name contains this text")
    ap.add_argument("--verbose", action="store_true", help="also show the findings on each prefix")
    ap.add_argument("--compare", type=Path, default=None, help="an earlier JSON of this script: print what changed per log")
    ap.add_argument("--out", default=None, help="where to write the JSON (default benchmarks/results/real_logs.json)")
    ap.add_argument("--quick", action="store_true", help="accepted for symmetry with the other benchmarks (the corpus is small)")
    args = ap.parse_args()
    labels_path = args.corpus / "labels.json"
    if not labels_path.exists():
        print(f"no corpus at {args.corpus} (labels.json missing): pass --corpus", file=sys.stderr)
        return 2
    labels = json.loads(labels_path.read_text(encoding="utf-8"))
    repos = repositories(args.corpus / "README.md")
    rows: list[dict[str, Any]] = []
    t0 = time.perf_counter()
    for name in sorted(labels):
        if args.only and args.only not in name:
            continue
        row: dict[str, Any] = {"file": name, "repo": repos.get(name, "?"), "label": labels[name]}
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                info, findings, prefixes = diagnose_file(args.corpus / name)
        except Exception as exc:  # an import failure is a result to report, not a crash
            row.update(error=f"{type(exc).__name__}: {exc}", findings=[], score=score(labels[name], []))
        else:
            row.update(info=info, findings=findings, score=score(labels[name], findings),
                       prefix_findings={str(k): v for k, v in prefixes.items()},
                       prefix_score={str(k): score(labels[name], v) for k, v in prefixes.items()})
        rows.append(row)
        print(_line(row, args.verbose), flush=True)
    total = _tally(rows)
    print(f"\n{_fmt(total)}   ({time.perf_counter() - t0:.1f} s, {len(rows)} logs)")
    by_repo: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for r in rows:
        by_repo[r["repo"]].append(r)
    if len(by_repo) > 1:
        print("\nper repository                                   | leave that repository out")
        for repo in sorted(by_repo):
            rest = [r for r in rows if r["repo"] != repo]
            print(f"  {repo:<36} {_fmt(_tally(by_repo[repo]))}\n  {'':<36} without it: {_fmt(_tally(rest))}")
    if args.compare is not None and args.compare.exists():
        old = {r["file"]: r for r in json.loads(args.compare.read_text())["logs"]}
        print("\nchanged against", args.compare)
        for r in rows:
            o = old.get(r["file"])
            if o is None:
                continue
            before, after = _verdict(o), _verdict(r)
            if before != after:
                print(f"  {r['repo']:<36} {r['file']}: {before} -> {after}")
    write_json("real_logs", args.out, {"machine": machine_info(), "corpus": str(args.corpus), "totals": total, "logs": rows,
                                       "per_repository": {k: _tally(v) for k, v in by_repo.items()}})
    return 0


def _verdict(r: dict[str, Any]) -> str:
    s, kind = r["score"], r["label"]["kind"]
    if kind == "bad":
        return "top1" if s.get("top1") else "caught" if s.get("caught") else "missed"
    if kind == "ok":
        return "false_alarm" if s.get("false_alarm") else "quiet"
    return "-"


if __name__ == "__main__":
    sys.exit(main())
