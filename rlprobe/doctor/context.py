"""What a detector sees of one run: SQL features per metric, raw series, samples."""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property
from typing import Any, Callable

import numpy as np
import pyarrow as pa

from rlprobe.schemas import STEP_FLOAT_FIELDS

# Scalar step fields that sql/v1/detectors/00_doctor_series.sql unpivots: their presence is
# known from the features alone, without loading the raw columns.
_FEATURED = frozenset(STEP_FLOAT_FIELDS) - {"wall_time", "lr", "weight_update_ratio", "optimization_time_s"}

FEATURE_COLUMNS = (
    "step", "step_hi", "value", "vmin", "vmax", "n_nonfinite", "smooth", "b_median", "scale",
    "ratio", "z", "z_raw", "cusum_up", "cusum_down", "sustained_up", "sustained_down",
)


@dataclass
class MetricFeatures:
    """doctor_features rows of one metric of one run, as numpy columns in step order."""

    metric: str
    step: np.ndarray
    step_hi: np.ndarray
    value: np.ndarray
    vmin: np.ndarray
    vmax: np.ndarray
    n_nonfinite: np.ndarray
    smooth: np.ndarray
    b_median: float
    scale: float
    ratio: np.ndarray
    z: np.ndarray
    z_raw: np.ndarray
    cusum_up: np.ndarray
    cusum_down: np.ndarray
    sustained_up: np.ndarray
    sustained_down: np.ndarray

    def __len__(self) -> int:
        return len(self.step)

    @classmethod
    def from_table(cls, metric: str, table: pa.Table) -> "MetricFeatures":
        """Build from a table holding one metric's rows, ordered by i."""
        cols: dict[str, Any] = {}
        for name in FEATURE_COLUMNS:
            arr = table.column(name).to_numpy(zero_copy_only=False)
            if name in ("step", "step_hi", "n_nonfinite", "sustained_up", "sustained_down"):
                cols[name] = np.nan_to_num(arr.astype(float), nan=0).astype(np.int64)
            else:
                cols[name] = arr.astype(np.float64)
        cols["b_median"] = float(cols["b_median"][0]) if len(cols["b_median"]) else float("nan")
        cols["scale"] = float(cols["scale"][0]) if len(cols["scale"]) else float("nan")
        return cls(metric=metric, **cols)

    def step_at(self, index: int) -> int:
        """The first step of the bin at index."""
        return int(self.step[index])


class DetectorContext:
    """One run as the detectors see it. Built by the doctor engine; cheap to query repeatedly."""

    def __init__(
        self,
        run_id: str,
        features: dict[str, MetricFeatures],
        query: Callable[[str, list[Any]], pa.Table],
        raw_columns: Callable[[], dict[str, np.ndarray]],
        n_steps: int,
        last_step: int | None,
    ) -> None:
        self.run_id = run_id
        self._features = features
        self._query = query
        self._raw_columns = raw_columns
        self.n_steps = n_steps
        self.last_step = last_step

    def has(self, metric: str) -> bool:
        """True when the run logged metric (at least one finite value)."""
        if metric in self._features:
            return True
        if metric in _FEATURED:
            return False  # doctor_series covers it: no feature rows means never logged
        column = self.raw.get(metric)
        if column is None:
            return False
        if column.dtype == object:  # list columns such as kl_positional
            return any(v is not None for v in column)
        return bool(np.isfinite(column).any())

    def features(self, metric: str) -> MetricFeatures | None:
        """Binned SQL features of metric, or None if the run did not log it."""
        return self._features.get(metric)

    @cached_property
    def raw(self) -> dict[str, np.ndarray]:
        """Per-step series as logged (float64), including reward_component.* and extra.*."""
        return self._raw_columns()

    def component_names(self) -> list[str]:
        """Reward components this run logged."""
        prefix = "reward_component."
        return [k[len(prefix):] for k in self.raw if k.startswith(prefix)]

    def query(self, sql: str, params: list[Any] | None = None) -> pa.Table:
        """Run SQL over this run's views; the first ? is bound to the run_id when params is None."""
        return self._query(sql, [self.run_id] if params is None else params)

    @cached_property
    def has_samples(self) -> bool:
        """True when the run captured samples."""
        return self.query("SELECT count(*) AS n FROM v1.samples WHERE run_id = ?").column("n")[0].as_py() > 0

    def sample_ids(self, step_lo: int, step_hi: int, order_by: str = "abs(advantage) DESC NULLS LAST", k: int = 5) -> list[str]:
        """Ids of up to k captured samples in [step_lo, step_hi], ordered by an SQL expression."""
        if not self.has_samples:
            return []
        table = self.query(
            f"SELECT sample_id FROM v1.samples WHERE run_id = ? AND step BETWEEN ? AND ? "
            f"AND sample_id IS NOT NULL ORDER BY {order_by}, step, sample_id LIMIT {int(k)}",  # ties: never scan order
            [self.run_id, int(step_lo), int(step_hi)],
        )
        return [str(v) for v in table.column("sample_id").to_pylist()]
