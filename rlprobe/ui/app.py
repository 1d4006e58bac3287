"""The dashboard as an ASGI app (Starlette): pages, a JSON API over the catalog, and the guard.

Pages are small templates; what they show comes from /api/* as JSON and is put on the page by
the script with textContent only, so nothing a run holds (a completion, a metric name, a config
value, an event message) is ever parsed as HTML. The guard in front of everything:

- answers only to the Host names it was started for (no DNS rebinding of 127.0.0.1),
- with a token (any host other than loopback), refuses every request that does not carry it,
- sends a Content-Security-Policy that runs scripts from this server's /static/ only: no inline
  script, no eval, nothing from another origin,
- and accepts one method besides GET: a POST of JSON to the SQL console, which runs one SELECT.
"""

from __future__ import annotations

import json
import os
import re
import secrets
import time
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any, AsyncIterator, Awaitable, Callable, Sequence

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import HTMLResponse, JSONResponse, PlainTextResponse, RedirectResponse, Response
from starlette.routing import Route

from rlprobe import __version__
from rlprobe.errors import RlprobeError
from rlprobe.jsonsafe import json_safe
from rlprobe.ui.catalog import BadRequest, Catalog, NotFound, dumps, fingerprint
from rlprobe.ui.findings import Doctor

_HERE = Path(__file__).resolve().parent
_REPORT = _HERE.parent / "report"
# Every file the server can send, by the name a page asks for: nothing else on disk is reachable.
STATIC: dict[str, tuple[Path, str]] = {
    "ui.js": (_HERE / "static" / "ui.js", "text/javascript"),
    "ui.css": (_HERE / "static" / "ui.css", "text/css"),
    "report.css": (_REPORT / "static" / "report.css", "text/css"),
    "uPlot.iife.min.js": (_REPORT / "static" / "uPlot.iife.min.js", "text/javascript"),
    "uPlot.min.css": (_REPORT / "static" / "uPlot.min.css", "text/css"),
}
LOOPBACK_HOSTS = ("127.0.0.1", "localhost", "::1")
TOKEN_COOKIE = "rlprobe_ui_token"
CSP = ("default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; connect-src 'self'; "
       "base-uri 'none'; form-action 'none'; frame-ancestors 'none'")
SECURITY_HEADERS = [
    (b"content-security-policy", CSP.encode()),
    (b"x-content-type-options", b"nosniff"),
    (b"x-frame-options", b"DENY"),
    (b"referrer-policy", b"no-referrer"),
    (b"cross-origin-opener-policy", b"same-origin"),
    (b"cross-origin-resource-policy", b"same-origin"),
]
MAX_BODY_BYTES = 256 * 1024  # a console query; nothing else is posted


def is_loopback(host: str) -> bool:
    """True for the names and addresses of this machine only (127.0.0.0/8, ::1, localhost)."""
    import ipaddress

    if host.strip("[]").lower() == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def _host_name(header: str) -> str:
    """The name of a Host header without its port ("[::1]:8765" -> "::1")."""
    if header.startswith("["):
        return header[1:].split("]", 1)[0].lower()
    return header.rsplit(":", 1)[0].lower() if header.count(":") == 1 else header.lower()


class Guard:
    """ASGI middleware: Host check, token check, security headers (see the module docstring)."""

    def __init__(self, app: Any, token: str | None, allowed_hosts: Sequence[str] | None) -> None:
        self.app = app
        self.token = token
        self.allowed = None if allowed_hosts is None else {h.strip("[]").lower() for h in allowed_hosts}

    async def __call__(self, scope: dict[str, Any], receive: Callable[..., Awaitable[Any]], send: Callable[..., Awaitable[Any]]) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return

        async def send_with_headers(message: dict[str, Any]) -> None:
            if message["type"] == "http.response.start":
                message.setdefault("headers", [])
                message["headers"] = list(message["headers"]) + SECURITY_HEADERS
            await send(message)

        request = Request(scope)
        host = _host_name(request.headers.get("host", ""))
        if self.allowed is not None and host not in self.allowed:
            await PlainTextResponse(f"rlprobe ui: this server answers to {', '.join(sorted(self.allowed))}, not {host!r}",
                                    status_code=421)(scope, receive, send_with_headers)
            return
        if self.token is not None:
            given = request.query_params.get("token")
            if given is not None and secrets.compare_digest(given.encode(), self.token.encode()):
                # Swap the token in the address for a cookie, so it leaves the address bar and history.
                from urllib.parse import urlencode

                keep = [(k, v) for k, v in request.query_params.multi_items() if k != "token"]
                # one leading slash: "//host/..." would send the browser to another site
                url = "/" + request.url.path.lstrip("/") + ("?" + urlencode(keep) if keep else "")
                response = RedirectResponse(url, status_code=303)
                response.set_cookie(TOKEN_COOKIE, self.token, httponly=True, samesite="strict", path="/")
                await response(scope, receive, send_with_headers)
                return
            carried = request.cookies.get(TOKEN_COOKIE) or _bearer(request.headers.get("authorization", ""))
            if not carried or not secrets.compare_digest(carried.encode(), self.token.encode()):
                await PlainTextResponse("rlprobe ui: open the address with ?token=... that `rlprobe ui` printed when it started",
                                        status_code=401)(scope, receive, send_with_headers)
                return
        await self.app(scope, receive, send_with_headers)


def _bearer(header: str) -> str | None:
    return header[7:].strip() if header.lower().startswith("bearer ") else None


# -- pages ----------------------------------------------------------------------------------------

def _environment() -> Any:
    import jinja2

    return jinja2.Environment(
        loader=jinja2.FileSystemLoader(str(_HERE / "templates")),
        autoescape=True,  # every value is escaped; page data goes in a JSON island (report.render.script_json)
        undefined=jinja2.StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
    )


def _page(request: Request, template: str, **config: Any) -> HTMLResponse:
    from rlprobe.report.data import KEY_SERIES
    from rlprobe.report.render import script_json

    catalog: Catalog = request.app.state.catalog
    config = {"root": str(catalog.root), "kind": catalog.target.kind, "version": __version__,
              "poll_s": request.app.state.poll_s, "key_series": list(KEY_SERIES), **config}
    html = request.app.state.templates.get_template(template).render(
        {**config, "config": script_json(json_safe(config))})
    return HTMLResponse(html, headers={"cache-control": "no-store"})


def page_runs(request: Request) -> Response:
    """The runs table, the overlay charts of the selected runs and the SQL console."""
    return _page(request, "runs.html.j2", page="runs")


def page_run(request: Request) -> Response:
    """One run: the report's content, live."""
    run_id = request.query_params.get("id", "")
    return _page(request, "run.html.j2", page="run", run_id=run_id)


def page_compare(request: Request) -> Response:
    """Two runs compared (diff_runs) and drawn."""
    return _page(request, "compare.html.j2", page="compare", a=request.query_params.get("a", ""), b=request.query_params.get("b", ""))


def static_file(request: Request) -> Response:
    """One of the STATIC files, by name; anything else is 404."""
    found = STATIC.get(request.path_params["name"])
    if found is None:
        return PlainTextResponse("not found", status_code=404)
    path, media_type = found
    return Response(path.read_bytes(), media_type=media_type, headers={"cache-control": "no-cache"})


# -- the API --------------------------------------------------------------------------------------

def api(handler: Callable[[Request], Any]) -> Callable[[Request], Response]:
    """A JSON endpoint: the handler's value as JSON; its errors as {"error": one line} with a status."""

    def endpoint(request: Request) -> Response:
        try:
            body = handler(request)
        except NotFound as exc:
            return JSONResponse({"error": str(exc)}, status_code=404)
        except BadRequest as exc:
            return JSONResponse({"error": str(exc)}, status_code=400)
        except RlprobeError as exc:  # a run that cannot be read: say so, keep serving the others
            return JSONResponse({"error": str(exc)}, status_code=503)
        return Response(dumps(body), media_type="application/json", headers={"cache-control": "no-store"})

    endpoint.__name__ = handler.__name__
    endpoint.__doc__ = handler.__doc__
    return endpoint


def _int(request: Request, name: str, default: int | None, lo: int | None = None, hi: int | None = None) -> int | None:
    text = request.query_params.get(name)
    if text is None or text == "":
        return default
    try:
        value = int(text)
    except ValueError:
        raise BadRequest(f"{name} must be an integer, not {text[:40]!r}") from None
    if lo is not None:
        value = max(lo, value)
    if hi is not None:
        value = min(hi, value)
    return value


def _float(request: Request, name: str) -> float | None:
    text = request.query_params.get(name)
    if text is None or text == "":
        return None
    try:
        value = float(text)
    except ValueError:
        raise BadRequest(f"{name} must be a number, not {text[:40]!r}") from None
    if value != value or value in (float("inf"), float("-inf")):
        raise BadRequest(f"{name} must be a finite number")
    return value


def _runs_param(request: Request) -> list[str]:
    return [r for r in request.query_params.getlist("run") if r]


def _rel(path: str, root: Path) -> str:
    try:
        rel = os.path.relpath(path, root)
    except ValueError:
        return path
    return "." if rel == "." else rel


@api
def api_runs(request: Request) -> Any:
    """Every run: its row, version (changes when it grows), path below the root, and the doctor's summary."""
    catalog: Catalog = request.app.state.catalog
    doctor: Doctor = request.app.state.doctor
    listing = catalog.runs()
    runs = []
    for row in listing.rows:
        runs.append({**row, "version": fingerprint(row), "path": _rel(row["run_dir"], catalog.root),
                     "findings": doctor.get(row["run_id"]).summary()})
    return {"root": str(catalog.root), "kind": catalog.target.kind, "now": time.time(), "runs": runs,
            "warnings": catalog.warnings, "doctor": {"diagnoses": doctor.diagnoses}}


@api
def api_metrics(request: Request) -> Any:
    """The numeric metrics the given runs logged."""
    return {"metrics": request.app.state.catalog.metrics(_runs_param(request))}


@api
def api_series(request: Request) -> Any:
    """The given runs' metrics, min/max-downsampled in SQL to `bins` bins over [lo, hi] of x."""
    metrics = [m for m in request.query_params.getlist("metric") if m]
    return request.app.state.catalog.series(
        _runs_param(request), metrics, x=request.query_params.get("x", "step"),
        bins=_int(request, "bins", 1000, 1), lo=_float(request, "lo"), hi=_float(request, "hi"))


@api
def api_findings(request: Request) -> Any:
    """The doctor's latest findings of each given run (and puts those runs first in its line)."""
    catalog: Catalog = request.app.state.catalog
    doctor: Doctor = request.app.state.doctor
    run_ids = _runs_param(request)
    catalog.dirs_of(run_ids)  # 404 for an unknown run
    doctor.want(run_ids)
    return {"findings": {run_id: doctor.get(run_id).as_dict() for run_id in run_ids}}


@api
def api_events(request: Request) -> Any:
    """The given runs' events (quiet=1: the lifecycle bookkeeping too)."""
    quiet = request.query_params.get("quiet") in ("1", "true")
    return {"events": request.app.state.catalog.events(_runs_param(request), quiet=quiet)}


@api
def api_run(request: Request) -> Any:
    """One run's header, manifest and config, and its findings."""
    catalog: Catalog = request.app.state.catalog
    doctor: Doctor = request.app.state.doctor
    run_id = request.query_params.get("id", "")
    header = catalog.header(run_id)
    for key in ("trainer_config", "environment"):
        text = header.get(key)
        if isinstance(text, str):
            try:
                header[key] = json.loads(text)
            except ValueError:
                pass
    doctor.want([run_id])
    return {"run": {**header, "version": fingerprint(catalog.row(run_id)), "path": _rel(header["run_dir"], catalog.root)},
            "findings": doctor.get(run_id).as_dict()}


@api
def api_samples(request: Request) -> Any:
    """One page of a run's samples: text search, step range, order, the samples a finding cites."""
    cited_text = request.query_params.get("cited")
    cited = [c for c in cited_text.split(",") if c] if cited_text else None
    return request.app.state.catalog.samples(
        request.query_params.get("id", ""), q=request.query_params.get("q", ""), lo=_int(request, "lo", None),
        hi=_int(request, "hi", None), cited=cited, order=request.query_params.get("order", "top"),
        limit=_int(request, "limit", 20, 1, 200) or 20, offset=_int(request, "offset", 0, 0) or 0)


@api
def api_compare(request: Request) -> Any:
    """diff_runs(a, b): config delta, divergences, per-prompt gaps (cached until either run grows)."""
    from rlprobe.diff import diff_runs

    catalog: Catalog = request.app.state.catalog
    a, b = request.query_params.get("a", ""), request.query_params.get("b", "")
    row_a, row_b = catalog.row(a), catalog.row(b)
    key = (a, fingerprint(row_a), b, fingerprint(row_b))
    cache: dict[Any, Any] = request.app.state.compare_cache
    if key not in cache:
        if len(catalog.dirs_of([a])) != 1 or len(catalog.dirs_of([b])) != 1:
            raise BadRequest("two runs below this root share that run_id: compare them with rlprobe diff DIR_A DIR_B")
        result = diff_runs(row_a["run_dir"], row_b["run_dir"])
        while len(cache) >= 8:
            cache.pop(next(iter(cache)))
        cache[key] = result.model_dump(mode="json")
    return {"diff": cache[key], "a": row_a, "b": row_b}


async def api_query(request: Request) -> Response:
    """The SQL console: {"sql": "...", "limit": N} -> columns, rows; one SELECT, bounded."""
    from starlette.concurrency import run_in_threadpool

    if request.headers.get("content-type", "").split(";")[0].strip() != "application/json":
        return JSONResponse({"error": "post the query as application/json"}, status_code=415)
    body = await request.body()
    if len(body) > MAX_BODY_BYTES:
        return JSONResponse({"error": "the query is too long"}, status_code=413)
    try:
        payload = json.loads(body)
        sql = payload["sql"]
        limit = int(payload.get("limit") or 1000)
        if not isinstance(sql, str):
            raise TypeError
    except (ValueError, KeyError, TypeError):
        return JSONResponse({"error": 'post {"sql": "SELECT ...", "limit": N}'}, status_code=400)
    catalog: Catalog = request.app.state.catalog
    handler = api(lambda _req: catalog.console(sql, limit=limit, timeout_s=request.app.state.console_timeout_s))
    return await run_in_threadpool(handler, request)


def report_download(request: Request) -> Response:
    """The run's static HTML report (rlprobe report), as a file to save: it is not shown in this origin."""
    from rlprobe.report.data import gather
    from rlprobe.report.render import default_out_path, render_html

    catalog: Catalog = request.app.state.catalog
    try:
        row = catalog.row(request.query_params.get("id", ""))
        html = render_html(gather(row["run_dir"], config_path=request.app.state.config_path))
    except NotFound as exc:
        return PlainTextResponse(str(exc), status_code=404)
    except RlprobeError as exc:
        return PlainTextResponse(str(exc), status_code=503)
    name = default_out_path(str(row["run_id"]), "/").name
    name = re.sub(r"[^A-Za-z0-9._-]", "_", name)
    return Response(html, media_type="text/html", headers={
        "content-disposition": f'attachment; filename="{name}"', "cache-control": "no-store"})


def create_app(path: str | os.PathLike[str], *, token: str | None = None,
               allowed_hosts: Sequence[str] | None = LOOPBACK_HOSTS, config_path: str | os.PathLike[str] | None = None,
               poll_s: float = 2.0, console_timeout_s: float = 10.0, catalog: Catalog | None = None) -> Starlette:
    """The dashboard over a run or a runs root, as an ASGI app.

    token: required on every request when given (rlprobe ui sets one for any non-loopback host).
    allowed_hosts: the Host names it answers to (None: any; then only a token protects it).
    poll_s: how often pages look for new data and the doctor for changed runs. The doctor's
    thread starts with the app's lifespan (uvicorn, or TestClient used as a context manager).
    """
    catalog = catalog or Catalog(path)
    doctor = Doctor(catalog, config_path=config_path, poll_s=poll_s)

    @asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        doctor.start()
        try:
            yield
        finally:
            doctor.stop()

    routes = [
        Route("/", page_runs),
        Route("/run", page_run),
        Route("/compare", page_compare),
        Route("/static/{name}", static_file),
        Route("/api/runs", api_runs),
        Route("/api/metrics", api_metrics),
        Route("/api/series", api_series),
        Route("/api/findings", api_findings),
        Route("/api/events", api_events),
        Route("/api/run", api_run),
        Route("/api/samples", api_samples),
        Route("/api/compare", api_compare),
        Route("/api/query", api_query, methods=["POST"]),
        Route("/report", report_download),
    ]
    app = Starlette(routes=routes, lifespan=lifespan, max_body_size=MAX_BODY_BYTES)
    app.state.catalog = catalog
    app.state.doctor = doctor
    app.state.poll_s = poll_s
    app.state.config_path = config_path
    app.state.console_timeout_s = console_timeout_s
    app.state.compare_cache = {}
    app.state.templates = _environment()
    app.add_middleware(Guard, token=token, allowed_hosts=allowed_hosts)
    return app
