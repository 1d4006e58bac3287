"""`records summarize`: prompts.jsonl, tokens.json and summary.json from a records store.

The aggregation is the SQL in sql/records/v1/queries/ over one snapshot of the store; this
module turns its rows into the three files and its problem rows into warnings.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from rlprobe.records.sqlstore import RecordsStore

SUMMARY_FORMAT = "rlprobe.records.summary/v1"

_WARNINGS = {
    "incomplete_final_line": "{path}: incomplete final line (a stopped writer); {n} line skipped",
    "unparseable_line": "{path}: {n} complete line(s) are not a JSON object and were skipped (first at line {example})",
    "unreadable_records_file": "{path}: not UTF-8 text; the file was skipped",
    "records_without_manifest": "{path}: record file without a manifest (no manifest with its attempt beside it); "
                                "its lineage is taken from the folder name and it has no protocol",
    "unreadable_manifest": "{path}: the manifest is not a JSON object; its records count as without a manifest",
    "disposition_without_group": "{path}: {n} disposition row(s) name no group row in the store (first: {example})",
}


@dataclass
class Summary:
    """What summarize wrote: the three files' content, and the warnings."""

    prompts: list[dict[str, Any]]
    tokens: dict[str, Any]
    summary: dict[str, Any]
    files: list[Path] = field(default_factory=list)

    @property
    def warnings(self) -> list[str]:
        """The summary's warnings, in order."""
        return list(self.summary["warnings"])


def warnings_from(problems: list[dict[str, Any]]) -> list[str]:
    """One readable line per problem row of the records_problems query."""
    return [_WARNINGS[p["problem"]].format(**p) for p in problems]


def snapshot(store: RecordsStore) -> list[dict[str, Any]]:
    """Every manifest and records file read, with its size and SHA-256."""
    return store.rows("records_inputs")


def protocols(store: RecordsStore) -> list[dict[str, Any]]:
    """The (lineage, protocol digest) pairs of the store's manifests, with the protocol."""
    rows = store.rows("records_protocols")
    for row in rows:
        row["protocol"] = json.loads(row["protocol"]) if row["protocol"] else None
    return rows


def summarize(store_path: str | os.PathLike[str], output: str | os.PathLike[str] | None = None) -> Summary:
    """Summarize a records store (the root or one lineage directory); write the files if output is given."""
    with RecordsStore(store_path) as store:
        prompts = store.rows("records_prompts")
        token_rows = store.rows("records_tokens")
        counts = store.rows("records_counts")[0]
        problems = store.rows("records_problems")
        inputs = snapshot(store)
        protos = protocols(store)
        lineages = sorted({r["lineage"] for r in protos if r["lineage"]}
                          | {lin for p in prompts for lin in p["lineages"] if lin})
        store_dir = str(store.path)
    totals: dict[str, dict[str, int]] = {}
    for row in token_rows:
        t = totals.setdefault(row["disposition"], {k: 0 for k in ("groups", "responses", "tokens",
                                                                   "truncated_responses", "truncated_tokens")})
        for key in t:
            t[key] += int(row[key])
    tokens = {"rows": token_rows, "totals": [{"disposition": d, **v} for d, v in sorted(totals.items())]}
    summary = {
        "format": SUMMARY_FORMAT,
        "store": store_dir,
        "inputs": inputs,
        "lineages": lineages,
        "protocols": protos,
        "counts": {**counts, "prompt_rows": len(prompts)},
        "warnings": warnings_from(problems),
    }
    result = Summary(prompts, tokens, summary)
    if output is not None:
        out = Path(output)
        out.mkdir(parents=True, exist_ok=True)
        result.files = [out / "prompts.jsonl", out / "tokens.json", out / "summary.json"]
        _write(result.files[0], "".join(json.dumps(p, sort_keys=True) + "\n" for p in prompts))
        _write(result.files[1], json.dumps(tokens, indent=2, sort_keys=True) + "\n")
        _write(result.files[2], json.dumps(summary, indent=2, sort_keys=True) + "\n")
    return result


def _write(path: Path, text: str) -> None:
    tmp = path.with_name(f".{path.name}.tmp")
    tmp.write_text(text, encoding="utf-8")
    os.replace(tmp, path)
