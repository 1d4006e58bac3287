"""Forensics: look into a run at a step, rank its captured samples, find what drove an update.

    from rlprobe.forensics import query_samples, show_step, spike_drivers
    query_samples("runs/my-run", sort="advantage", step_from=100, step_to=120, k=5)
    spike_drivers("runs/my-run", step=117, window=5, k=8)
    show_step("runs/my-run", 117).metrics

Everything reads through the SQL views (queries in sql/v1/queries/samples_*.sql and show_*.sql)
and works on a live, crashed or imported run alike.
"""

from rlprobe.forensics.errors import BadForensicsArgument, StepNotRecorded
from rlprobe.forensics.samples import SORT_KEYS, query_samples, spike_drivers, step_range
from rlprobe.forensics.show import StepDetail, show_step

__all__ = ["SORT_KEYS", "BadForensicsArgument", "StepDetail", "StepNotRecorded", "query_samples", "show_step",
           "spike_drivers", "step_range"]
