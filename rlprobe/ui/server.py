"""Serve the dashboard with uvicorn: bind, print the address (with the token when one is needed), run."""

from __future__ import annotations

import os
import secrets
import socket
import threading
from typing import Any, Callable

from rlprobe.errors import RlprobeError, ToolMissing
from rlprobe.ui import INSTALL_HINT


class CannotListen(RlprobeError):
    """The address to serve on is taken or cannot be bound."""


def bind(host: str, port: int) -> socket.socket:
    """A listening socket on host:port (port 0: any free port), or CannotListen saying why not."""
    family = socket.AF_INET6 if ":" in host.strip("[]") else socket.AF_INET
    try:
        return socket.create_server((host.strip("[]"), port), family=family)
    except OSError as exc:
        raise CannotListen(f"cannot listen on {host}:{port}: {exc.strerror or exc} (pick another --port, or --port 0 for any free one)") from exc


def url_of(host: str, port: int, token: str | None) -> str:
    """The address to open: the machine's name for a wildcard host, brackets around IPv6."""
    shown = socket.gethostname() if host in ("0.0.0.0", "::", "") else host
    if ":" in shown and not shown.startswith("["):
        shown = f"[{shown}]"
    return f"http://{shown}:{port}/" + (f"?token={token}" if token else "")


def serve(path: str | os.PathLike[str], *, host: str = "127.0.0.1", port: int = 8765, open_browser: bool = False,
          config_path: str | os.PathLike[str] | None = None, poll_s: float = 2.0, echo: Callable[[str], Any] = print) -> None:
    """Serve the dashboard over path until Ctrl-C.

    On 127.0.0.1, localhost or ::1 it answers only to those names; on any other host it makes a
    token, prints it in the address, and refuses every request without it.
    """
    try:
        import starlette  # noqa: F401  (the app's; imported here to say what to install, once)
        import uvicorn
    except ImportError:
        raise ToolMissing(INSTALL_HINT) from None

    from rlprobe.ui.app import LOOPBACK_HOSTS, create_app, is_loopback

    if config_path is not None:
        from rlprobe.doctor import load_config

        load_config(config_path)  # a bad doctor.toml is one line now, not an error on every run later
    token = None if is_loopback(host) else secrets.token_urlsafe(24)
    app = create_app(path, token=token, allowed_hosts=LOOPBACK_HOSTS if token is None else None,
                     config_path=config_path, poll_s=poll_s)
    catalog = app.state.catalog
    for warning in catalog.warnings:
        echo(f"rlprobe ui: warning: {warning}")
    sock = bind(host, port)
    url = url_of(host, sock.getsockname()[1], token)
    runs = len(catalog.runs().rows)
    echo(f"rlprobe ui: {runs} run{'' if runs == 1 else 's'} in {catalog.root}, read-only")
    echo(f"rlprobe ui: open {url}")
    if token:
        echo(f"rlprobe ui: listening on {host}, beyond this machine: anyone with the address above (token included) can read these runs")
    echo("rlprobe ui: Ctrl-C to stop")
    if open_browser:
        import webbrowser

        threading.Timer(0.5, webbrowser.open, [url]).start()
    config = uvicorn.Config(app, log_level="warning", access_log=False, lifespan="on")
    try:
        uvicorn.Server(config).run(sockets=[sock])
    finally:
        sock.close()
