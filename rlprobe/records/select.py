"""`records select`: build a frozen exclusion table of prompts whose evidence shows a constant reward.

The evidence per prompt (valid responses only, deterministic seeds counted once, conflicts
flagged) is the records_evidence SQL query; the rule, the confidence bound and readmission are
decided here, once, and written into the table, so a table never changes after it is built.
"""

from __future__ import annotations

import hashlib
import json
import math
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Sequence

from rlprobe.errors import RecordsAmbiguous, RecordsNotFound
from rlprobe.records.identity import POLICY_SCOPES
from rlprobe.records.sqlstore import RecordsStore
from rlprobe.records.summary import protocols, snapshot

SELECTION_FORMAT = "rlprobe.records.selection/v1"
SKIP_RULES = ("all_zero", "all_full", "zero_variance")


def upper_bound(deviations: int, n: int, confidence: float = 0.95) -> float:
    """One-sided upper confidence bound on a rate after `deviations` events in n draws (Clopper-Pearson).

    With zero deviations it is 1 - (1 - confidence)^(1/n): 0.17 at n = 16, 0.09 at n = 32.
    """
    if n <= 0 or deviations >= n:
        return 1.0
    alpha = 1.0 - confidence
    if deviations == 0:
        return 1.0 - alpha ** (1.0 / n)

    def cdf(p: float) -> float:  # P(X <= deviations) for X ~ Binomial(n, p), decreasing in p
        return sum(math.comb(n, i) * p**i * (1 - p) ** (n - i) for i in range(deviations + 1))

    lo, hi = deviations / n, 1.0
    for _ in range(100):
        mid = (lo + hi) / 2
        if cdf(mid) > alpha:
            lo = mid
        else:
            hi = mid
    return hi


def readmit_draw(seed: int, input_key: str) -> float:
    """A prompt's fixed draw in [0, 1) for readmission: the same seed readmits the same prompts."""
    digest = hashlib.sha256(f"{seed}:{input_key}".encode("utf-8")).digest()
    return int.from_bytes(digest[:8], "big") / 2**64


@dataclass
class Selection:
    """A built exclusion table: its content, its exact bytes and their SHA-256."""

    table: dict[str, Any]
    text: str

    @property
    def sha256(self) -> str:
        """SHA-256 of the table file's bytes: the digest a run pins."""
        return hashlib.sha256(self.text.encode("utf-8")).hexdigest()

    def write(self, path: str | os.PathLike[str]) -> str:
        """Write the table (temporary file, then rename) and return its SHA-256."""
        out = Path(path)
        out.parent.mkdir(parents=True, exist_ok=True)
        tmp = out.with_name(f".{out.name}.tmp")
        tmp.write_bytes(self.text.encode("utf-8"))
        os.replace(tmp, out)
        return self.sha256


def _pick(kind: str, present: list[str], wanted: str | None, flag: str) -> str:
    if wanted is not None:
        if wanted not in present:
            raise RecordsNotFound(f"no records of {kind} {wanted} in the store; present: {', '.join(present) or 'none'}")
        return wanted
    if len(present) == 1:
        return present[0]
    if not present:
        raise RecordsNotFound(f"the store has no readable manifest, so no {kind} to select from")
    raise RecordsAmbiguous(f"the store holds {len(present)} {kind}s ({', '.join(present)}): choose one with {flag}")


def decide(row: dict[str, Any], skip: Sequence[str], *, full_reward: float, min_observations: int, min_units: int,
           confidence: float, max_deviation_rate: float) -> tuple[list[str], str]:
    """(the rules a prompt's evidence meets, why it is kept or 'exclude')."""
    if row["conflicting"]:
        return [], "conflicting rewards for one deterministic seed"
    if row["min_reward"] != row["max_reward"]:
        return [], "reward not constant"
    value = row["min_reward"]
    rules = [r for r in skip if r == "zero_variance" or (r == "all_zero" and value == 0)
             or (r == "all_full" and value == full_reward)]
    if not rules:
        return [], "constant reward no rule skips"
    if row["observations"] < min_observations:
        return rules, f"{row['observations']} observations < {min_observations}"
    if row["units"] < min_units:
        return rules, f"{row['units']} independent units < {min_units}"
    if upper_bound(0, row["observations"], confidence) >= max_deviation_rate:
        return rules, "upper bound not below the deviation rate"
    return rules, "exclude"


def build_selection(
    store_path: str | os.PathLike[str],
    skip: Sequence[str],
    *,
    lineage: str | None = None,
    protocol: str | None = None,
    scopes: Sequence[str] = ("start_checkpoint",),
    min_observations: int = 16,
    min_units: int = 2,
    confidence: float = 0.95,
    max_deviation_rate: float = 0.2,
    readmit_fraction: float = 0.05,
    seed: int = 0,
    full_reward: float = 1.0,
) -> Selection:
    """Build the frozen exclusion table from a records store (see docs/records.md)."""
    skip = list(dict.fromkeys(skip))
    if not skip or any(r not in SKIP_RULES for r in skip):
        raise ValueError(f"skip must name one or more of {', '.join(SKIP_RULES)}")
    scopes = list(dict.fromkeys(scopes))
    if not scopes or any(s not in POLICY_SCOPES for s in scopes):
        raise ValueError(f"scopes must be among {', '.join(POLICY_SCOPES)}")
    if not 0 < confidence < 1 or not 0 < max_deviation_rate <= 1 or not 0 <= readmit_fraction <= 1:
        raise ValueError("confidence must be in (0, 1), max_deviation_rate in (0, 1], readmit_fraction in [0, 1]")
    with RecordsStore(store_path) as store:
        protos = protocols(store)
        lineage = _pick("lineage", sorted({p["lineage"] for p in protos if p["lineage"]}), lineage, "--lineage")
        of_lineage = [p for p in protos if p["lineage"] == lineage]
        protocol = _pick("protocol", sorted({p["protocol_digest"] for p in of_lineage if p["protocol_digest"]}),
                         protocol, "--protocol")
        evidence = store.rows("records_evidence", {"lineage": lineage, "protocol": protocol, "scopes": scopes})
        inputs = snapshot(store)
    protocol_body = next(p["protocol"] for p in of_lineage if p["protocol_digest"] == protocol)
    params = dict(full_reward=full_reward, min_observations=min_observations, min_units=min_units,
                  confidence=confidence, max_deviation_rate=max_deviation_rate)
    excluded, readmitted = [], []
    domains: dict[str, dict[str, Any]] = {}
    for row in evidence:
        d = domains.setdefault(row["domain"], {"domain": row["domain"], "verifiers": row["verifiers"],
                                               "prompts": 0, "excluded": 0, "readmitted": 0})
        d["prompts"] += 1
        rules, verdict = decide(row, skip, **params)
        if verdict != "exclude":
            continue
        entry = {"input_key": row["input_key"], "task_key": row["task_key"], "query_sha256": row["query_sha256"],
                 "domain": row["domain"], "verifiers": row["verifiers"], "rules": rules, "reward": row["min_reward"],
                 "responses": row["responses"], "observations": row["observations"], "units": row["units"],
                 "upper_bound": upper_bound(0, row["observations"], confidence)}
        if readmit_draw(seed, row["input_key"]) < readmit_fraction:
            readmitted.append(entry)
            d["readmitted"] += 1
        else:
            excluded.append(entry)
            d["excluded"] += 1
    table = {
        "format": SELECTION_FORMAT,
        "lineage": lineage,
        "protocol_digest": protocol,
        "protocol": protocol_body,
        "rules": {"skip": skip, "scopes": scopes, "readmit_fraction": readmit_fraction, "seed": seed, **params},
        "approximate_policy": any(s != "start_checkpoint" for s in scopes),
        "inputs": inputs,
        "domains": sorted(domains.values(), key=lambda d: d["domain"]),
        "excluded": excluded,
        "readmitted": readmitted,
    }
    return Selection(table, json.dumps(table, indent=2, sort_keys=True) + "\n")
