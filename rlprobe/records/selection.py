"""Use a selection table in a run: verify it, then skip its excluded prompts before generation.

Standard library only: this runs inside the training process.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import warnings
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterable, Iterator

from rlprobe.errors import SelectionExhausted, SelectionMismatch

log = logging.getLogger("rlprobe.records")

LIMITS_WARNING = (
    "selection table {path}: its checks cover the recorded sampling settings, template and tokenizer files and "
    "the verifier registry hash, not verifier implementation changes or a judge's model; confirm its evidence "
    "still reflects the reward you train on, or build a new table from fresh records")


@dataclass(frozen=True)
class SelectionTable:
    """A verified exclusion table: the prompts (by input_key) a run skips."""

    path: Path
    sha256: str
    lineage: str
    protocol_digest: str
    excluded: frozenset[str]
    domain_of: dict[str, str] = field(repr=False)
    content: dict[str, Any] = field(repr=False)


def load_selection(path: str | os.PathLike[str], sha256: str, *, lineage: str, protocol_digest: str) -> SelectionTable:
    """Load a table and check its SHA-256, lineage and protocol digest against this run; any mismatch raises."""
    p = Path(path)
    try:
        data = p.read_bytes()
    except OSError as exc:
        raise SelectionMismatch(f"selection table {path} cannot be read: {exc.strerror or exc}") from exc
    digest = hashlib.sha256(data).hexdigest()
    if digest != sha256.strip().lower():
        raise SelectionMismatch(f"selection table {path} has SHA-256 {digest}, but the run pins {sha256}: "
                                "the file changed since it was pinned, or the wrong file is configured")
    try:
        content = json.loads(data)
    except ValueError as exc:
        raise SelectionMismatch(f"selection table {path} is not JSON: {exc}") from exc
    if content.get("lineage") != lineage:
        raise SelectionMismatch(f"selection table {path} was built from lineage {content.get('lineage')}, "
                                f"but this run starts from lineage {lineage}")
    if content.get("protocol_digest") != protocol_digest:
        raise SelectionMismatch(f"selection table {path} was built under protocol {content.get('protocol_digest')}, "
                                f"but this run's protocol is {protocol_digest} (sampling, templates or reward config changed)")
    warnings.warn(LIMITS_WARNING.format(path=path), UserWarning, stacklevel=2)
    entries = content.get("excluded", [])
    return SelectionTable(path=p, sha256=digest, lineage=lineage, protocol_digest=protocol_digest,
                          excluded=frozenset(e["input_key"] for e in entries),
                          domain_of={e["input_key"]: e.get("domain", "") for e in entries}, content=content)


class SelectionFilter:
    """Skips a table's excluded prompts from a stream, keeping the order of the rest.

    key maps an item to its input_key, computed exactly as the recorder does
    (rlprobe.records.prompt_identity). skipped counts the skips by domain. A whole dataset's
    worth of consecutive excluded prompts raises SelectionExhausted: the run would never get
    a prompt.
    """

    def __init__(self, table: SelectionTable, key: Callable[[Any], str]) -> None:
        self.table = table
        self.key = key
        self.skipped: Counter[str] = Counter()

    def __call__(self, items: Iterable[Any], dataset_size: int | None = None) -> Iterator[Any]:
        """Yield the items whose input_key the table does not exclude."""
        if dataset_size is None and hasattr(items, "__len__"):
            dataset_size = len(items)  # type: ignore[arg-type]
        run = seen = 0
        for item in items:
            seen += 1
            k = self.key(item)
            if k in self.table.excluded:
                self.skipped[self.table.domain_of.get(k, "")] += 1
                run += 1
                if dataset_size and run >= dataset_size:
                    raise self._exhausted(run)
                continue
            run = 0
            yield item
        if seen and run == seen:
            raise self._exhausted(run)
        self.log_skips()

    def dataset(self, ds: Any) -> Any:
        """A datasets.Dataset without the excluded prompts (same order; Dataset.select keeps it)."""
        keep = []
        for i, row in enumerate(ds):
            k = self.key(row)
            if k in self.table.excluded:
                self.skipped[self.table.domain_of.get(k, "")] += 1
            else:
                keep.append(i)
        if len(ds) and not keep:
            raise self._exhausted(len(ds))
        self.log_skips()
        return ds.select(keep)

    def log_skips(self) -> None:
        """Log the prompts skipped so far, by domain."""
        if self.skipped:
            log.info("selection table %s skipped %s", self.table.path,
                     ", ".join(f"{n} {domain or '(no domain)'}" for domain, n in sorted(self.skipped.items())))

    def _exhausted(self, run: int) -> SelectionExhausted:
        return SelectionExhausted(f"selection table {self.table.path} excluded {run} consecutive prompts, a whole "
                                  "dataset's worth: this run would get no prompts; build a table with other rules")
