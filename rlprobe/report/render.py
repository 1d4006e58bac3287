"""render_report: gather a run's report data and write it as one self-contained HTML file."""

from __future__ import annotations

import json
import os
import re
import tempfile
from datetime import datetime, timezone
from functools import lru_cache
from pathlib import Path
from typing import Any, Callable

from rlprobe import __version__
from rlprobe.errors import RlprobeError
from rlprobe.report.data import Progress, ReportData, gather

_HERE = Path(__file__).resolve().parent
_STATIC = _HERE / "static"
_TEMPLATES = _HERE / "templates"
UPLOT_VERSION = "1.6.32"


class ReportRefused(RlprobeError):
    """The report would be written into a recording (the read side never writes there)."""


def default_out_path(run_id: str, directory: str | os.PathLike[str] | None = None) -> Path:
    """Where a report goes when no path is given: ``<run_id>-report.html`` in the current folder."""
    safe = re.sub(r"[^A-Za-z0-9._-]+", "_", run_id).strip("._") or "run"
    return Path(directory or os.getcwd()) / f"{safe}-report.html"


def script_json(payload: Any) -> str:
    """JSON that is safe inside <script type="application/json">: no '<', '>' or '&' survive,
    so no text in it can close the script element or open a comment."""
    text = json.dumps(payload, separators=(",", ":"), allow_nan=False, ensure_ascii=False)
    return text.replace("<", "\\u003c").replace(">", "\\u003e").replace("&", "\\u0026").replace("\u2028", "\\u2028").replace("\u2029", "\\u2029")


@lru_cache(maxsize=None)
def _static(name: str) -> str:
    text = (_STATIC / name).read_text(encoding="utf-8")
    # Inlined into <script>/<style>: a closing tag inside would end the element early.
    return text.replace("</script", "<\\/script").replace("</style", "<\\/style")


def _environment() -> Any:
    import jinja2

    env = jinja2.Environment(
        loader=jinja2.FileSystemLoader(str(_TEMPLATES)),
        autoescape=True,  # every value is escaped unless marked safe; model text never is
        undefined=jinja2.StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
    )
    env.filters["num"] = _fmt_num
    env.filters["pretty_json"] = lambda v: json.dumps(v, indent=2, ensure_ascii=False, default=str, sort_keys=False)
    env.filters["utc"] = lambda t: datetime.fromtimestamp(float(t), timezone.utc).strftime("%Y-%m-%d %H:%M:%S") if t is not None else ""
    return env


def _fmt_num(value: Any) -> str:
    if value is None:
        return "–"
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, float):
        return f"{value:.4g}"
    return str(value)


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


def _refuse_inside(out: Path, recording: Path) -> None:
    folder = recording.resolve()
    if folder.is_file():  # a run given as its manifest.json or steps.parquet
        folder = folder.parent
    try:
        out.resolve().relative_to(folder)
    except ValueError:
        return
    raise ReportRefused(f"{out} is inside the recording {folder}: a report is never written into a recording; "
                        "give an --out path outside it")


def render_html(data: ReportData) -> str:
    """The report page for gathered data (no file written)."""
    template = _environment().get_template("report.html.j2")
    return template.render(
        data=data,
        run=data.run,
        payload=script_json(data.chart_payload()),
        uplot_js=_static("uPlot.iife.min.js"),
        uplot_css=_static("uPlot.min.css"),
        report_js=_static("report.js"),
        report_css=_static("report.css"),
        uplot_version=UPLOT_VERSION,
        rlprobe_version=__version__,
        generated_at=datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M:%S UTC"),
    )


def render_report(run_dir: str | os.PathLike[str], out_path: str | os.PathLike[str] | None = None, *,
                  config_path: str | os.PathLike[str] | None = None, progress: Progress | None = None,
                  notice: Callable[[str], None] | None = None) -> Path:
    """Write a self-contained HTML post-mortem of one run and return its path.

    run_dir is a run directory (live, crashed or closed) or a source rlprobe imports (a
    trainer_state.json, a metrics JSONL/CSV, a console log; imported to a temporary recording
    that is removed afterwards). out_path defaults to ``./<run_id>-report.html``; a path inside
    the recording is refused. config_path is a doctor.toml; progress is called with each stage
    name of ``rlprobe.report.data.STAGES`` as it finishes. notice is called with each line the
    import of a source has to say about it (a cut tail: "(torn: ...)").
    """
    from rlprobe.sources import as_recording

    with as_recording(run_dir) as rec:
        if notice is not None:
            for line in rec.torn_lines():
                notice(line)
        shown_as = str(run_dir) if rec.report is not None else None
        recording = None if rec.report is not None else Path(rec.path)
        if out_path is not None and recording is not None:
            _refuse_inside(Path(out_path), recording)  # before the work, when we can
        data = gather(rec.path, config_path=config_path, shown_as=shown_as, progress=progress)
    out = Path(out_path) if out_path is not None else default_out_path(str(data.run["run_id"]))
    if recording is not None:
        _refuse_inside(out, recording)  # the default path, when run from inside the run directory
    if out.is_dir():
        raise ReportRefused(f"{out} is a directory: give a file name for the report")
    if not out.parent.is_dir():
        raise ReportRefused(f"{out.parent}: no such directory for the report")
    html = render_html(data)
    # Written under a temp name and renamed, so a reader never sees half a report.
    fd, tmp = tempfile.mkstemp(prefix=f".{out.name}.", suffix=".tmp", dir=out.parent)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            fh.write(html)
        os.chmod(tmp, 0o666 & ~_umask())  # mkstemp makes it owner-only; a report is a normal file
        os.replace(tmp, out)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise
    if progress:
        progress("write")
    return out

