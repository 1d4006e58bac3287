"""RunDiff and its parts: what differs between two runs, as pydantic models (JSON-ready)."""

from __future__ import annotations

from typing import Any, Literal, Optional

from pydantic import BaseModel, Field


class RunSide(BaseModel):
    """One of the two runs compared."""

    run_id: str
    run_dir: str  # the path given (a source's path when it was imported)
    algorithm: Optional[str] = None
    model_name: Optional[str] = None
    status: Optional[str] = None  # live, closed or crashed
    steps: int = 0
    first_step: Optional[int] = None
    last_step: Optional[int] = None
    imported: bool = False


class ConfigChange(BaseModel):
    """One flattened trainer_config key whose value differs (missing on a side: only_in says which has it)."""

    key: str
    a: Any = None
    b: Any = None
    only_in: Optional[Literal["a", "b"]] = None


class Divergence(BaseModel):
    """The first step where B's metric left A's by more than the difference's own noise, and stayed out.

    diff = b - a on the steps both runs logged; z = (diff - baseline_diff) / noise, where
    baseline_diff and noise are the median and robust spread of diff over the first
    baseline_steps overlapping steps. direction: "b_higher" when z > 0, that is when the gap
    B - A rose above its early level; B itself may still be below A (b_is says which is higher
    at first_step).
    """

    metric: str
    first_step: int
    direction: Literal["b_higher", "b_lower"]
    z: float  # at first_step
    peak_z: float  # largest |z| from first_step on, with its sign
    peak_step: int
    a_value: Optional[float] = None  # at first_step
    b_value: Optional[float] = None
    baseline_diff: float
    noise: float
    baseline_steps: tuple[int, int]  # first and last step of the baseline
    overlap: int  # steps both runs logged the metric at

    def b_is(self) -> str:
        """"higher", "lower" or "equal": B's value against A's at first_step (the values shown).

        Not the same as direction: a gap that was +200 early and fell to +100 moved down while
        B is still higher.
        """
        if self.a_value is None or self.b_value is None or self.a_value == self.b_value:
            return "equal"
        return "higher" if self.b_value > self.a_value else "lower"


class PromptGap(BaseModel):
    """A prompt captured in both runs and how differently it was rewarded (gap = b - a)."""

    prompt_text: str
    gap: float
    reward_mean_a: float
    reward_mean_b: float
    n_a: int
    n_b: int
    first_step_a: Optional[int] = None
    last_step_a: Optional[int] = None
    first_step_b: Optional[int] = None
    last_step_b: Optional[int] = None


class RunDiff(BaseModel):
    """Two runs compared: config delta, first sustained divergence per metric, per-prompt gaps.

    divergences are ordered by first step; metrics compared without a divergence are in
    `unchanged`, metrics only one run logged in only_in_a / only_in_b, and metrics both logged
    but on too few common steps to judge in too_short. apart_from_start lists the metrics whose
    gap was already beyond z_thresh spreads over the baseline steps (a different lr, another
    model): an offset there from the start is the baseline, not a divergence.
    """

    a: RunSide
    b: RunSide
    z_thresh: float
    sustain: int
    overlap_steps: int  # steps both runs recorded
    overlap_from: Optional[int] = None
    overlap_to: Optional[int] = None
    config_delta: list[ConfigChange] = Field(default_factory=list)
    divergences: list[Divergence] = Field(default_factory=list)
    unchanged: list[str] = Field(default_factory=list)
    only_in_a: list[str] = Field(default_factory=list)
    only_in_b: list[str] = Field(default_factory=list)
    too_short: list[str] = Field(default_factory=list)
    apart_from_start: list[str] = Field(default_factory=list)
    prompt_gaps: list[PromptGap] = Field(default_factory=list)
    shared_prompts: int = 0

    @property
    def first_divergence(self) -> Optional[Divergence]:
        """The earliest divergence of any metric, or None."""
        return self.divergences[0] if self.divergences else None

    def divergence(self, metric: str) -> Optional[Divergence]:
        """The divergence of one metric, or None when it did not diverge."""
        return next((d for d in self.divergences if d.metric == metric), None)
