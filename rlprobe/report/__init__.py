"""The HTML post-mortem: one self-contained file per run that opens offline.

``render_report(run, out_path)`` reads a run (live, crashed, closed, or a source to import such
as a trainer_state.json), diagnoses it, and writes one HTML file holding the manifest and
config, charts of the key series with every finding overlaid, the ranked findings with links to
the samples they cite, a sample browser and the events. The chart library (uPlot, MIT) is
embedded from ``static/``; nothing is fetched when the file is opened. Model text is escaped
everywhere: a completion holding ``<script>`` renders as text.
"""

from __future__ import annotations

from rlprobe.report.render import ReportRefused, default_out_path, render_report

__all__ = ["ReportRefused", "default_out_path", "render_report"]
