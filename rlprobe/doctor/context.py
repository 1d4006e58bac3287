"""What a detector sees of one run: SQL features per metric, raw series, samples."""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property
from typing import Any, Callable, Iterator, Mapping

import numpy as np
import pyarrow as pa

from rlprobe.arrow_numpy import to_numpy
from rlprobe.schemas import STEP_FLOAT_FIELDS

# Scalar step fields that sql/v1/detectors/00_doctor_series.sql unpivots: their presence is
# known from the features alone, without loading the raw columns.
_FEATURED = frozenset(STEP_FLOAT_FIELDS) - {"wall_time", "lr", "weight_update_ratio", "optimization_time_s"}

# Measurements of the policy that cannot sit at one exact value for a whole run while it trains:
# a trainer that writes one of them as the same number on every step (entropy 0.0, approx KL
# 0.0) writes a placeholder, and reading it as a level ("entropy collapsed to 0") would be wrong.
# Other metrics can be constant for real (a reward pinned at its floor, every completion at the
# cap, grad norms of 0): there the constant is the state the detectors look for.
PLACEHOLDER_PRONE = frozenset({
    "entropy_mean", "kl_mean", "kl_max", "logprob_mean", "ratio_mean", "ratio_p95", "clip_fraction",
    "value_loss", "value_explained_variance", "value_clip_fraction", "loss", "logprob_mismatch",
    "repetition_rate", "adv_mean",
})

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
            arr = to_numpy(table.column(name))
            if name in _INTEGER_FEATURES:
                cols[name] = np.nan_to_num(arr.astype(float), nan=0).astype(np.int64)
            else:
                cols[name] = arr.astype(np.float64)
        cols["b_median"] = float(cols["b_median"][0]) if len(cols["b_median"]) else float("nan")
        cols["scale"] = float(cols["scale"][0]) if len(cols["scale"]) else float("nan")
        return cls(metric=metric, **cols)

    def step_at(self, index: int) -> int:
        """The first step of the bin at index."""
        return int(self.step[index])


_INTEGER_FEATURES = ("step", "step_hi", "n_nonfinite", "sustained_up", "sustained_down")


def by_run(table: pa.Table) -> dict[str, pa.Table]:
    """doctor_features rows sorted by run_id, as {run_id: that run's rows} (slices, no copy).

    The runs are told apart by dictionary indices, not by a Python string per row: a chunk of a
    root holds millions of rows.
    """
    if table.num_rows == 0:
        return {}
    run_ids, codes = _codes(table.column("run_id"))
    starts, ends = _runs_of_equal(codes)
    return {str(run_ids[codes[a]]): table.slice(a, b - a) for a, b in zip(starts, ends)}


def metric_features(table: pa.Table | None) -> dict[str, MetricFeatures]:
    """doctor_features rows of one run sorted by metric and i, as {metric: MetricFeatures}.

    The same arrays MetricFeatures.from_table gives each metric's rows, but each column is
    turned into numpy once for the run and then sliced per metric: sixteen conversions per
    metric cost more than the feature pass that made them.
    """
    if table is None or table.num_rows == 0:
        return {}
    metrics, codes = _codes(table.column("metric"))
    cols: dict[str, np.ndarray] = {}
    for name in FEATURE_COLUMNS:
        arr = to_numpy(table.column(name))
        if name in _INTEGER_FEATURES:
            # as from_table makes them, without two more copies when no value is NULL
            cols[name] = arr if arr.dtype == np.int64 else np.nan_to_num(arr.astype(float), nan=0).astype(np.int64)
        else:
            cols[name] = arr.astype(np.float64, copy=False)
    out: dict[str, MetricFeatures] = {}
    for a, b in zip(*_runs_of_equal(codes)):
        metric = str(metrics[codes[a]])
        fields: dict[str, Any] = {name: cols[name][a:b] for name in FEATURE_COLUMNS}
        fields["b_median"] = float(cols["b_median"][a])
        fields["scale"] = float(cols["scale"][a])
        out[metric] = MetricFeatures(metric=metric, **fields)
    return out


def _codes(column: pa.ChunkedArray) -> tuple[list[Any], np.ndarray]:
    """A column's distinct values (None for NULL) and, per row, the index of its value there."""
    encoded = column.combine_chunks().dictionary_encode(null_encoding="encode")
    return encoded.dictionary.to_pylist(), to_numpy(encoded.indices)


def _runs_of_equal(codes: np.ndarray) -> tuple[list[int], list[int]]:
    """Start and end (exclusive) of each stretch of equal consecutive codes."""
    starts = np.flatnonzero(np.concatenate([[True], codes[1:] != codes[:-1]]))
    return starts.tolist(), np.append(starts[1:], len(codes)).tolist()


class RawColumns(Mapping[str, np.ndarray]):
    """A run's step columns as logged, by name: float64 for numbers, an object array of Python
    values for the rest (kl_positional lists). Columns with no value at all are left out. Each
    is turned into numpy the first time a detector reads it: the detectors read a few (lr, step,
    the reward components' names), and a 100k-step run's kl_positional alone is 800k Python
    floats."""

    def __init__(self, table: pa.Table) -> None:
        self._table = table
        self._names = [n for n in table.column_names if table.column(n).null_count != len(table.column(n))]
        self._present = set(self._names)
        self._converted: dict[str, np.ndarray] = {}

    def __getitem__(self, name: str) -> np.ndarray:
        if name not in self._converted:
            if name not in self._present:
                raise KeyError(name)
            col = self._table.column(name)
            if pa.types.is_floating(col.type) or pa.types.is_integer(col.type):
                self._converted[name] = to_numpy(col).astype(np.float64)
            else:
                self._converted[name] = np.array(col.to_pylist(), dtype=object)
        return self._converted[name]

    def __iter__(self) -> Iterator[str]:
        return iter(self._names)

    def __len__(self) -> int:
        return len(self._names)

    def __contains__(self, name: object) -> bool:
        return name in self._present

    def logged(self, name: str) -> bool:
        """True when the column holds a finite number (a list column: any value at all)."""
        if name not in self._present:
            return False
        col = self._table.column(name)
        if pa.types.is_floating(col.type) or pa.types.is_integer(col.type):
            return bool(np.isfinite(self[name]).any())
        return True  # left out when every value is NULL

    def never_finite(self, name: str) -> bool:
        """True when a numeric column holds values and every one of them is NaN or Inf."""
        if name not in self._present:
            return False
        col = self._table.column(name)
        if not (pa.types.is_floating(col.type) or pa.types.is_integer(col.type)):
            return False
        v = self[name]
        return bool(len(v)) and not bool(np.isfinite(v).any()) and bool((np.isnan(v) | np.isinf(v)).any()) and col.null_count < len(col)


class DetectorContext:
    """One run as the detectors see it. Built by the doctor engine; cheap to query repeatedly."""

    def __init__(
        self,
        run_id: str,
        features: dict[str, MetricFeatures],
        query: Callable[[str, list[Any]], pa.Table],
        raw_columns: Callable[[], RawColumns],
        n_steps: int,
        last_step: int | None,
    ) -> None:
        self.run_id = run_id
        self._features = features
        self._query = query
        self._raw_columns = raw_columns
        self.n_steps = n_steps
        self.last_step = last_step

    @cached_property
    def span_steps(self) -> int:
        """Steps from the first logged step to the last (what fractions of 'the run' are of)."""
        los = [int(f.step[0]) for f in self._features.values() if len(f)]
        his = [int(f.step_hi[-1]) for f in self._features.values() if len(f)]
        if not los:
            return max(1, self.n_steps)
        return max(1, max(his) - min(los) + 1)

    @cached_property
    def stride(self) -> int:
        """Steps between consecutive logged points (the median gap; 1 for a run logged every step)."""
        gaps = [np.diff(f.step) for f in self._features.values() if len(f) > 2]
        gaps = [g for g in gaps if len(g)]
        if not gaps:
            return 1
        return max(1, int(np.median(np.concatenate(gaps))))

    def lr_reached_step(self, share: float) -> int | None:
        """The first step at which the logged learning rate reached `share` of its peak, when the
        run logged a warm-up (lr at its first logged step at most half that peak); None when lr
        was not logged or started at its peak. While the rate ramps up the policy moves a little
        more each step, so the early shape of a series that measures how far it moved (KL) is
        the ramp's, not the run's. In a live prefix still inside its warm-up the peak is the
        rate reached so far."""
        lr, step = self.raw.get("lr"), self.raw.get("step")
        if lr is None or step is None or lr.dtype == object:
            return None
        ok = np.isfinite(lr) & np.isfinite(step) & (lr > 0)
        if ok.sum() < 3:
            return None
        lr, step = lr[ok], step[ok]
        peak = float(np.max(lr))
        if lr[0] > 0.5 * peak:
            return None
        return int(step[np.flatnonzero(lr >= share * peak)[0]])

    def constant(self, metric: str) -> float | None:
        """The one value a featured metric takes on every logged step, or None if it varies."""
        feat = self._features.get(metric)
        if feat is None or len(feat) < 3:
            return None
        lo, hi = np.nanmin(feat.vmin) if np.isfinite(feat.vmin).any() else np.nan, np.nanmax(feat.vmax) if np.isfinite(feat.vmax).any() else np.nan
        if np.isfinite(lo) and np.isfinite(hi) and lo == hi and not feat.n_nonfinite.any():
            return float(lo)
        return None

    def placeholder(self, metric: str) -> float | None:
        """The constant a placeholder-prone metric is logged as on every step, or None (see PLACEHOLDER_PRONE)."""
        return self.constant(metric) if metric in PLACEHOLDER_PRONE else None

    def absence(self, metrics: list[str], verb: str = "needs") -> str:
        """Why a detector that needs these metrics cannot use them: not logged, or placeholders."""
        fake = [(m, self.placeholder(m)) for m in metrics]
        fake = [f"{m} is logged as {v:g} on every step (a placeholder, not a measurement)" for m, v in fake if v is not None]
        absent = [m for m in metrics if self.placeholder(m) is None]
        if verb == "needs":
            text = f"needs {', '.join(metrics)}"
            if absent:
                text += f"; this run did not log {', '.join(absent)}" if fake else ", which this run did not log"
        else:
            text = f"needs one of {', '.join(metrics)}; this run logged none" + (" that measures anything" if fake else "")
        return text + "".join(f"; {f}" for f in fake)

    def has(self, metric: str) -> bool:
        """True when the run logged metric with information in it: at least one finite value, and
        not a placeholder (a policy measurement written as one constant on every step)."""
        if metric in self._features:
            return self.placeholder(metric) is None
        if metric in _FEATURED:
            return False  # doctor_series covers it: no feature rows means never logged
        return self.raw.logged(metric)

    def features(self, metric: str) -> MetricFeatures | None:
        """Binned SQL features of metric, or None if the run did not log it (or logged a placeholder)."""
        if self.placeholder(metric) is not None:
            return None
        return self._features.get(metric)

    @cached_property
    def raw(self) -> RawColumns:
        """Per-step series as logged (float64): the fixed columns and reward_component.*; extra.* only
        where a custom detector names them (the doctor copies no other columns of a run)."""
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
