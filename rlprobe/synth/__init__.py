"""Synthetic runs: healthy and pathological RL fine-tuning recordings with known ground truth.

``make_run(kind, n_steps, seed)`` builds a run in memory (fast, no disk): realistic per-step
series with the noise, drift and traps of real runs, per-sample text on demand, and a
:class:`Truth` (kind, onset, magnitude, variant, ...). ``write_run`` records it through
``rlprobe.Recorder`` and keeps the truth beside the recording in ``synth_truth.json`` (never in
the manifest, so the doctor cannot see it). ``kind`` is a signature ID (see ``SIGNATURES`` and
``PATHOLOGIES``), ``"healthy"`` (a family drawn from the seed) or ``"healthy:<family>"`` (see
``HEALTHY_FAMILIES``). ``variant=`` asks for one of ``EXTRA_VARIANTS`` (dead from the first
step, an episode that ends, a diverging loss, ...) and ``options=`` for the shapes real logs
take (sparse logging, binary rewards with small groups, placeholders, ...; see ``Options`` and
``OPTION_DOCS``); ``draw_setup(kind, seed)`` draws both the way the benchmark does.

    from rlprobe.synth import make_run, write_run
    run = make_run("ENTROPY_COLLAPSE", n_steps=800, seed=3)
    run.series["entropy_mean"], run.truth.onset_step
    write_run("runs/synth-ec", "ENTROPY_COLLAPSE", n_steps=800, seed=3)
    make_run("TRUNCATION_STARVE", seed=3, variant="dead_start", options={"logging": "sparse"})

numpy only: no torch, no duckdb, nothing from the read side.
"""

from rlprobe.synth.catalog import EXTRA_VARIANTS, HEALTHY_FAMILIES, MAGNITUDES, PATHOLOGIES, SIGNATURES
from rlprobe.synth.options import OPTION_DOCS, Options, draw_setup, parse_options
from rlprobe.synth.run import SynthRun, Truth, make_run
from rlprobe.synth.writer import TRUTH_FILE, read_truth, write_run

__all__ = [
    "EXTRA_VARIANTS",
    "HEALTHY_FAMILIES",
    "MAGNITUDES",
    "OPTION_DOCS",
    "PATHOLOGIES",
    "SIGNATURES",
    "TRUTH_FILE",
    "Options",
    "SynthRun",
    "Truth",
    "draw_setup",
    "make_run",
    "parse_options",
    "read_truth",
    "write_run",
]
