"""rlprobe.keymap: one table turns every tool's metric names into StepRecord fields."""

from __future__ import annotations

import math

import pytest

from rlprobe import keymap
from rlprobe.keymap import map_metrics


def test_a_trl_log_splits_into_fields_components_and_extras() -> None:
    mapped = map_metrics(
        {
            "reward": 0.5,
            "kl": "0.01",
            "rewards/accuracy/mean": 0.75,  # TRL >= 0.17
            "rewards/format": 1.0,  # older TRL
            "rewards/accuracy/std": 0.1,  # not a mean: kept as an extra
            "global_step": 7.0,
            "note": "hello",
        }
    )
    assert mapped.step == 7
    assert mapped.fields == {"reward_mean": 0.5, "kl_mean": 0.01}
    assert mapped.components == {"accuracy": 0.75, "format": 1.0}
    assert mapped.extra == {"rewards/accuracy/std": 0.1}
    assert mapped.unmapped == ["rewards/accuracy/std"] and mapped.skipped == ["note"]


def test_every_step_maps_a_key_the_same_way_as_the_first() -> None:
    # The component names are remembered per key; the second step must not differ from the first.
    logs = {"rewards/a/mean": 1.0, "rewards/b": 2.0, "rewards/c/d/mean": 3.0, "loss": math.nan}
    first, second = map_metrics(logs), map_metrics(logs)
    assert first.components == second.components == {"a": 1.0, "b": 2.0}
    assert first.extra == second.extra == {"rewards/c/d/mean": 3.0}
    assert math.isnan(second.fields["loss"])


def test_more_distinct_keys_than_the_cache_holds_still_map(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(keymap, "_COMPONENT_CACHE_SIZE", 4)
    monkeypatch.setattr(keymap, "_COMPONENT_OF", {})
    for round_ in range(2):
        mapped = map_metrics({f"rewards/f{i}/mean": float(i) for i in range(10)} | {f"other/{i}": 1.0 for i in range(10)})
        assert mapped.components == {f"f{i}": float(i) for i in range(10)}, round_
        assert len(mapped.extra) == 10
    assert len(keymap._COMPONENT_OF) <= 4
