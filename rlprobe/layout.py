"""File names inside a recording that both the writer and the readers must agree on.

Sample shards are never rewritten: a file, once it has its name, keeps its bytes until it is
deleted (a reader that listed a file must find the same bytes when it opens it; DuckDB reads a
parquet footer at bind time and the pages later). While shard N fills, each flush writes only
its new rows, as the next delta ``shard-NNNNN.delta-VVVVVV.parquet`` (V counts from 1): nothing
already written is written again, so a flush needs room for its own rows only, and a full disk
costs the rows of that flush, retried later, never the shard. Every few deltas the writer merges
what the shard holds so far into ``shard-NNNNN.open-VVVVVV.parquet``, which holds deltas 1..V
(so a live shard is never more than a few small files). When the shard holds
SAMPLES_PER_SHARD rows, or the recording closes, it is written once as the sealed
``shard-NNNNN.parquet``. Files a merge or a seal replaces are deleted a little later (a reader
that listed them just before still finds them), and at close.

For each shard index a reader keeps: the sealed file when there is one (over anything left
beside it), else the newest open version and every delta newer than it. Earlier rlprobe versions
wrote only open versions (a whole copy of the filling shard at each flush); the same rule reads
them, and a resumed writer seals them.
"""

from __future__ import annotations

import re
from typing import Iterable, Optional

SHARD_RE = re.compile(r"^shard-(\d+)(?:\.(open|delta)-(\d+))?\.parquet$")
SEALED = 1 << 62  # the rank of a sealed shard: above any open version
DELTA = 1 << 61  # the rank of a delta: below the sealed shard, above any open version


def shard_name(index: int, version: Optional[int] = None) -> str:
    """The file name of shard index: sealed when version is None, else that (legacy) open version."""
    if version is None:
        return f"shard-{index:05d}.parquet"
    return f"shard-{index:05d}.open-{version:06d}.parquet"


def delta_name(index: int, version: int) -> str:
    """The file name of delta version (from 1) of shard index: the rows of one flush."""
    return f"shard-{index:05d}.delta-{version:06d}.parquet"


def parse_shard(name: str) -> Optional[tuple[int, int]]:
    """(shard index, rank) of a shard file name: SEALED for a sealed shard, DELTA for a delta,
    the version for an open version; None for any other name."""
    parsed = parse_shard_file(name)
    if parsed is None:
        return None
    index, kind, version = parsed
    return index, {"sealed": SEALED, "delta": DELTA}.get(kind, version)


def parse_shard_file(name: str) -> Optional[tuple[int, str, int]]:
    """(shard index, kind, version) of a shard file name; kind is sealed, delta or open."""
    m = SHARD_RE.match(name)
    if m is None:
        return None
    if m.group(2) is None:
        return int(m.group(1)), "sealed", 0
    return int(m.group(1)), m.group(2), int(m.group(3))


def newest_shards(names: Iterable[str]) -> list[str]:
    """Of the shard file names in one folder, the files a reader must read (each row once):
    per shard, the sealed file, else its newest open version and the deltas newer than it."""
    by_index: dict[int, dict[str, list[tuple[int, str]]]] = {}
    for name in names:
        parsed = parse_shard_file(name)
        if parsed is None:
            continue
        index, kind, version = parsed
        by_index.setdefault(index, {}).setdefault(kind, []).append((version, name))
    out: list[str] = []
    for index in sorted(by_index):
        kinds = by_index[index]
        if "sealed" in kinds:
            out.append(kinds["sealed"][0][1])
            continue
        covered = 0
        if "open" in kinds:
            covered, name = max(kinds["open"])
            out.append(name)
        out += [name for version, name in sorted(kinds.get("delta", [])) if version > covered]
    return out
