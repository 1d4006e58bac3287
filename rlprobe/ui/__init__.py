"""`rlprobe ui`: a live local dashboard over a run or a runs root (the optional `ui` extra).

    from rlprobe.ui import create_app, serve
    serve("runs/", port=8765)                  # what `rlprobe ui runs/` does
    app = create_app("runs/")                  # the ASGI app, for tests or another server

A runs table (name, tags, status, progress, worst finding), overlay charts of the selected runs
with the doctor's findings of each run drawn in its colour, a run page (the report's content,
live), a compare page (diff_runs drawn) and a bounded, read-only SQL console. Series are
min/max-downsampled in SQL (sql/v1/ui/queries/). Nothing it serves writes into a recording or
reads outside the root. Needs starlette and uvicorn (`pip install "rlprobe[ui]"`), imported only
here: the recorder, reader and doctor never import this package.
"""

from __future__ import annotations

from typing import Any

INSTALL_HINT = 'rlprobe ui needs the ui extra: pip install "rlprobe[ui]" (starlette and uvicorn)'


def create_app(*args: Any, **kwargs: Any) -> Any:
    """The dashboard's ASGI app (rlprobe.ui.app.create_app)."""
    from rlprobe.ui.app import create_app as build

    return build(*args, **kwargs)


def serve(*args: Any, **kwargs: Any) -> None:
    """Serve the dashboard until interrupted (rlprobe.ui.server.serve)."""
    from rlprobe.ui.server import serve as run

    run(*args, **kwargs)


__all__ = ["INSTALL_HINT", "create_app", "serve"]
