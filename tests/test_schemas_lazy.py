"""rlprobe.schemas without pydantic: the names and types the read side needs are plain data, and
the pydantic models (rlprobe/models.py) load on first use. The two must say the same thing."""

from __future__ import annotations

import subprocess
import sys
from typing import Any, Optional, get_args, get_origin

import pytest

from rlprobe import schemas
from rlprobe.models import Event, RunManifest, SampleRecord, StepRecord


def test_the_field_names_are_the_models_fields_in_order() -> None:
    assert schemas.STEP_FIELDS == tuple(StepRecord.model_fields)
    assert schemas.SAMPLE_FIELDS == tuple(SampleRecord.model_fields)


def test_the_float_fields_are_steprecords_optional_floats() -> None:
    floats = tuple(name for name, f in StepRecord.model_fields.items() if f.annotation == Optional[float])
    assert schemas.STEP_FLOAT_FIELDS == floats
    assert list(schemas.STEP_COLUMN_TYPES) == ["step", *floats, "kl_positional"]


@pytest.mark.parametrize("model, types", [(SampleRecord, schemas.SAMPLE_COLUMN_TYPES), (Event, schemas.EVENT_COLUMN_TYPES)])
def test_every_typed_column_is_a_field_of_its_model(model: Any, types: dict[str, str]) -> None:
    fields = {name: f.annotation for name, f in model.model_fields.items()}
    assert set(types) <= set(fields)
    base = {int: "BIGINT", float: "DOUBLE", str: "VARCHAR", bool: "BOOLEAN"}
    for name, sql_type in types.items():
        annotation = fields[name]
        if get_origin(annotation) is dict:
            assert sql_type == "JSON", name
            continue
        inner = [a for a in get_args(annotation) if a is not type(None)] if get_args(annotation) else [annotation]
        if get_origin(inner[0]) is list:
            assert sql_type == base[get_args(inner[0])[0]] + "[]", name
        elif inner[0] in base:
            assert sql_type == base[inner[0]], name


def test_the_models_are_schemas_attributes() -> None:
    assert (schemas.RunManifest, schemas.StepRecord, schemas.SampleRecord, schemas.Event) == (
        RunManifest, StepRecord, SampleRecord, Event)
    import rlprobe

    assert rlprobe.StepRecord is StepRecord
    with pytest.raises(AttributeError):
        schemas.NoSuchModel  # noqa: B018


def test_importing_schemas_and_the_store_does_not_import_pydantic() -> None:
    code = ("import sys, rlprobe.schemas, rlprobe.store, rlprobe.store.engine, rlprobe.store.reader; "
            "print(sorted(m for m in ('pydantic', 'rlprobe.models') if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=120)
    assert out.stdout.strip() == "[]", out.stderr
