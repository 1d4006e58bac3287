"""File names inside a recording that both the writer and the readers must agree on.

Sample shards are never rewritten under the same name: a reader that listed a file must find
the same bytes when it opens it (DuckDB reads a parquet footer at bind time and the pages
later). A full or closed shard is ``shard-NNNNN.parquet``, written once. While a shard is
still filling, each flush writes the whole shard as a new version
``shard-NNNNN.open-VVVVVV.parquet`` and then deletes the version before it. A listing can
catch two copies of one shard for an instant; the newest wins: the sealed file over any open
version, a higher version over a lower one.
"""

from __future__ import annotations

import re
from typing import Iterable, Optional

SHARD_RE = re.compile(r"^shard-(\d+)(?:\.open-(\d+))?\.parquet$")
SEALED = 1 << 62  # the rank of a sealed shard: above any open version


def shard_name(index: int, version: Optional[int] = None) -> str:
    """The file name of shard index: sealed when version is None, else that open version."""
    if version is None:
        return f"shard-{index:05d}.parquet"
    return f"shard-{index:05d}.open-{version:06d}.parquet"


def parse_shard(name: str) -> Optional[tuple[int, int]]:
    """(shard index, rank) of a shard file name, rank SEALED for a sealed shard; None otherwise."""
    m = SHARD_RE.match(name)
    if m is None:
        return None
    return int(m.group(1)), (SEALED if m.group(2) is None else int(m.group(2)))


def newest_shards(names: Iterable[str]) -> list[str]:
    """Of the shard file names in one folder, the one copy of each shard a reader must use."""
    best: dict[int, tuple[int, str]] = {}
    for name in names:
        parsed = parse_shard(name)
        if parsed is None:
            continue
        index, rank = parsed
        if index not in best or rank > best[index][0]:
            best[index] = (rank, name)
    return [best[i][1] for i in sorted(best)]
