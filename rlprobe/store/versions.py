"""Recording-format versions: which ones this reader knows, and how older ones are migrated.

Policy (docs/format.md): additive changes keep the version; a breaking change bumps it. A
reader refuses a newer version with an explicit upgrade message and reads every older one by
migrating on read. Recordings are never rewritten: a migration is a set of SQL source files
that present an old layout under the current view contract.

Today v1 is the only version, so MIGRATIONS is empty and nothing consults it yet. The plan
for v2: sql/v2/sources/ reads v2 files, MIGRATIONS[1] names the sources under
sql/v2/migrations/from_v1/ that read v1 files into the same src_* views, and open_store()
applies them per run by its manifest's version (check() already lets migratable versions in).
"""

from __future__ import annotations

from rlprobe.errors import UPGRADE_HINT, CorruptRecording, SchemaTooNew
from rlprobe.schemas import SCHEMA_VERSION

READABLE_VERSIONS = frozenset(range(1, SCHEMA_VERSION + 1))

# version -> folder (relative to sql/v{SCHEMA_VERSION}/migrations/) whose sources read it.
MIGRATIONS: dict[int, str] = {}


def check(schema_version: int | None, where: str) -> None:
    """Refuse a recording this reader cannot read correctly."""
    if schema_version is None:
        return  # no or unreadable manifest: the data files alone are read as the current version
    if schema_version > SCHEMA_VERSION:
        raise SchemaTooNew(
            f"{where} uses recording format v{schema_version} but this rlprobe reads up to "
            f"v{SCHEMA_VERSION}: {UPGRADE_HINT}"
        )
    if schema_version not in READABLE_VERSIONS and schema_version not in MIGRATIONS:
        raise CorruptRecording(f"{where} declares recording format v{schema_version}, which no rlprobe release wrote")
