"""Find, parse and order the versioned SQL files under sql/ (shipped as rlprobe/_sql in wheels)."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from functools import lru_cache
from importlib import resources
from pathlib import Path

_VERSION_DIR = re.compile(r"^v(\d+)$")
_HEADER = re.compile(r"^--\s*(\w+):\s?(.*)$")


@dataclass(frozen=True)
class SqlFile:
    """One view or source definition: a header of ``-- key: value`` lines, then SQL."""

    path: Path
    version: int
    name: str
    # "source" (engine-specific, reads files), "view" (portable SELECT), "feature" (the doctor's
    # views), or "query" (one parametrized SELECT that Python runs; never part of the views)
    kind: str
    depends: tuple[str, ...]
    doc: str
    columns: str
    sql: str = field(repr=False)

    @property
    def text(self) -> str:
        """The file as written, header included (what `rlprobe sql` prints)."""
        return self.path.read_text(encoding="utf-8")


def sql_root() -> Path:
    """The sql/ folder: inside the installed package, or at the top of a checkout."""
    packaged = resources.files("rlprobe") / "_sql"
    if packaged.is_dir():
        return Path(str(packaged))
    checkout = Path(__file__).resolve().parents[2] / "sql"
    if checkout.is_dir():
        return checkout
    raise FileNotFoundError("rlprobe's SQL files are missing from this installation: reinstall rlprobe")


def read_header(path: Path) -> tuple[dict[str, str], str]:
    """The ``-- key: value`` lines opening a .sql file (repeated keys joined) and the SQL after."""
    meta: dict[str, list[str]] = {}
    body: list[str] = []
    in_header = True
    for line in path.read_text(encoding="utf-8").splitlines():
        match = _HEADER.match(line) if in_header else None
        if match:
            meta.setdefault(match.group(1), []).append(match.group(2).strip())
            continue
        if in_header and not line.strip():
            continue
        in_header = False
        body.append(line)
    return {k: " ".join(v) for k, v in meta.items()}, "\n".join(body).strip() + "\n"


def parse(path: Path, version: int) -> SqlFile:
    """Read one .sql file and its header."""
    meta, body = read_header(path)
    if "name" not in meta or "kind" not in meta:
        raise ValueError(f"{path}: the header must give at least '-- name:' and '-- kind:'")
    depends = [d.strip() for d in meta.get("depends", "").split(",")]
    return SqlFile(
        path=path,
        version=version,
        name=meta["name"],
        kind=meta["kind"],
        depends=tuple(d for d in depends if d and not d.startswith(("(", "variable "))),
        doc=meta.get("doc", ""),
        columns=meta.get("columns", ""),
        sql=body,
    )


def _ordered(files: list[SqlFile]) -> list[SqlFile]:
    """Sources first, then views; within each, every file after what it depends on."""
    by_name = {f.name: f for f in files}
    done: dict[str, SqlFile] = {}

    def visit(f: SqlFile, trail: tuple[str, ...]) -> None:
        if f.name in done:
            return
        if f.name in trail:
            raise ValueError(f"circular dependency in sql/: {' -> '.join(trail + (f.name,))}")
        for dep in f.depends:
            if dep not in by_name:
                raise ValueError(f"{f.path}: depends on unknown '{dep}'")
            visit(by_name[dep], trail + (f.name,))
        done[f.name] = f

    for f in sorted(files, key=lambda f: (f.kind != "source", f.path.name)):
        visit(f, ())
    return list(done.values())


@lru_cache(maxsize=None)
def load(version: int) -> tuple[SqlFile, ...]:
    """All files of sql/v<version>/, in the order they must be run."""
    folder = sql_root() / f"v{version}"
    files = [parse(p, version) for p in sorted(folder.rglob("*.sql"))]
    return tuple(_ordered(files))


def versions() -> list[int]:
    """The view-contract versions present under sql/, oldest first."""
    return sorted(int(m.group(1)) for p in sql_root().iterdir() if (m := _VERSION_DIR.match(p.name)))


def public_views(version: int) -> list[SqlFile]:
    """The views users query (not the engine-specific sources)."""
    return [f for f in load(version) if f.kind == "view"]


def query(name: str, version: int | None = None) -> str:
    """The SELECT of a `kind: query` file (sql/v*/queries/<name>.sql), for run() with named $parameters."""
    version = version or max(versions())
    for f in load(version):
        if f.kind == "query" and f.name == name:
            return f.sql
    raise KeyError(f"no query named {name!r} in sql/v{version}/queries/")
