"""Where the shared real data is: shared/realdata (real training logs) and its corpus/.

CI clones the repository with shared/ beside it (<clone>/../shared), the rule the tests always
used. A git worktree sits deeper (/work/wt/NAME) and has no shared/ beside it, so the nearest
folder above the checkout that holds shared/realdata is taken; RLPROBE_SHARED, when set, names
the shared folder outright. Tests that need the data skip when it is absent.
"""

from __future__ import annotations

import os
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def shared_dir() -> Path:
    """RLPROBE_SHARED, else the nearest <ancestor>/shared holding realdata/, else <repo>/../shared."""
    given = os.environ.get("RLPROBE_SHARED")
    if given:
        return Path(given).expanduser()
    for parent in REPO.parents:  # REPO.parent first: CI's layout is found as before
        if (parent / "shared" / "realdata").is_dir():
            return parent / "shared"
    return REPO.parent / "shared"


SHARED = shared_dir()
REALDATA = SHARED / "realdata"
CORPUS = REALDATA / "corpus"
