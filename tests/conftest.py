"""Run directories in every state a user meets, built deterministically for the read-side tests.

The fixtures are named by the state (finished_run, live_run, crashed_run, ...) and built with
the synchronous RunWriter plus direct file writes, never the threaded Recorder, so every file
and every timestamp is known in advance. Values follow fixed formulas (see ``metric``) so a test
can say exactly what a view must return.

Only the read side is tested with these; the recorder's own tests use tests/recorder_helpers.py.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any, Callable, Iterable, Sequence

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from rlprobe.record.writer import RunWriter
from rlprobe.schemas import Event, RunManifest

T0 = 1_700_000_000.0
"""Unix time of step 0 in every fixture run; step s has wall_time T0 + s."""

DEFAULT_COLUMNS: tuple[str, ...] = ("reward_mean", "kl_mean", "entropy_mean", "loss")
DEFAULT_COMPONENTS: tuple[str, ...] = ("format", "correct")
DEFAULT_EXTRA: tuple[str, ...] = ("my_metric",)


def metric(name: str, step: int) -> float:
    """The value fixture runs log for a metric at a step (distinct per metric, exact in binary)."""
    offsets = {"reward_mean": 0.0, "kl_mean": 1000.0, "entropy_mean": 2000.0, "loss": 3000.0, "lr": 4000.0}
    base = offsets.get(name, 100.0 * (sum(map(ord, name)) % 97) + 5000.0)
    return base + step * 0.5


def component(name: str, step: int) -> float:
    """The value of reward component ``name`` at ``step``."""
    return {"format": 1.0, "correct": float(step % 2)}.get(name, 0.25 * step)


def extra_value(name: str, step: int) -> float:
    """The value of extra metric ``name`` at ``step``."""
    return 2.0 * step + len(name)


def step_row(step: int, columns: Iterable[str] = DEFAULT_COLUMNS, components: Iterable[str] = DEFAULT_COMPONENTS,
             extra: Iterable[str] = DEFAULT_EXTRA) -> dict[str, Any]:
    """One flattened steps row, as RunWriter.write_steps takes it."""
    row: dict[str, Any] = {"step": step, "wall_time": T0 + step}
    row.update({c: metric(c, step) for c in columns})
    row.update({f"reward_component.{c}": component(c, step) for c in components})
    row.update({f"extra.{e}": extra_value(e, step) for e in extra})
    return row


def sample_rows(step: int, n: int, rank: int = 0) -> list[dict[str, Any]]:
    """n sample rows for a step, ids '<step>-<rank>-<i>', rewards i / 10."""
    return [
        {
            "step": step,
            "sample_id": f"{step}-{rank}-{i}",
            "rank": rank,
            "prompt_text": f"prompt {step}.{i}",
            "completion_text": f"completion {step}.{i} from rank {rank}",
            "completion_token_ids": [step, i, rank],
            "reward_total": i / 10,
            "advantage": i / 10 - 0.05,
            "completion_len": 3,
            "truncated": i % 2 == 1,
            "group_id": str(step),
            "capture_reason": "all",
            "reward_component.format": 1.0,
        }
        for i in range(n)
    ]


def event(kind: str, t: float, step: int | None = None, rank: int = 0, message: str = "", **data: Any) -> Event:
    return Event(kind=kind, timestamp=t, step=step, rank=rank, message=message, data=data)


def make_run(
    run_dir: str | Path,
    steps: int | Sequence[int] = 10,
    *,
    columns: Iterable[str] = DEFAULT_COLUMNS,
    components: Iterable[str] = DEFAULT_COMPONENTS,
    extra: Iterable[str] = DEFAULT_EXTRA,
    run_id: str | None = None,
    algorithm: str | None = "grpo",
    model_name: str | None = "tiny/model",
    world_size: int = 1,
    trainer_config: dict[str, Any] | None = None,
    created_at: str | None = None,
    rank: int = 0,
    steps_per_part: int = 4,
    samples_per_step: int = 0,
    state: str = "closed",
    extra_events: Sequence[Event] = (),
) -> RunWriter:
    """Write a recording of ``steps`` (a count or explicit step numbers) and return its writer.

    state: "closed" (recorder_open .. recorder_close, parts compacted into steps.parquet),
    "live" (recorder_open only, part files only), "crashed" (recorder_open then crash, parts only),
    "import" (compacted, no events at all) or "none" (part files and no events).
    """
    step_list = list(range(steps)) if isinstance(steps, int) else list(steps)
    columns, components, extra = tuple(columns), tuple(components), tuple(extra)
    manifest = RunManifest(
        run_id=run_id or Path(run_dir).name,
        algorithm=algorithm,
        model_name=model_name,
        world_size=world_size,
        trainer_config=trainer_config if trainer_config is not None else {"lr": 1e-6, "beta": 0.04},
        created_at=created_at or "2024-01-01T00:00:00+00:00",
    )
    writer = RunWriter(run_dir, manifest, rank=rank)
    if state in ("closed", "live", "crashed"):
        writer.append_event(event("recorder_open", T0 - 1, rank=rank, pid=1234))
    for i in range(0, len(step_list), steps_per_part):
        chunk = step_list[i:i + steps_per_part]
        writer.write_steps([step_row(s, columns, components, extra) for s in chunk])
    if samples_per_step:
        writer.write_samples([r for s in step_list for r in sample_rows(s, samples_per_step, rank)])
    last_t = T0 + (step_list[-1] if step_list else 0)
    for e in extra_events:
        writer.append_event(e)
    if state == "crashed":
        writer.append_event(event("crash", last_t + 0.5, rank=rank, message="RuntimeError: boom",
                                  traceback="Traceback (most recent call last):\nRuntimeError: boom\n"))
    if state in ("closed", "import"):
        writer.compact()
    if state == "closed":
        writer.append_event(event("recorder_close", last_t + 1, rank=rank, dropped=0, write_failures=0))
    return writer


@pytest.fixture
def run_factory(tmp_path: Path) -> Callable[..., Path]:
    """make_run under tmp_path: ``run_factory("name", steps=..., columns=...) -> run dir``."""

    def build(name: str = "run", *args: Any, **kwargs: Any) -> Path:
        path = tmp_path / name
        make_run(path, *args, **kwargs)
        return path

    return build


# -- the states a user meets ------------------------------------------------------------------

@pytest.fixture
def finished_run(tmp_path: Path) -> Path:
    """A cleanly closed run: 10 steps compacted into steps.parquet, 3 samples a step, events."""
    run = tmp_path / "finished"
    make_run(run, 10, samples_per_step=3, state="closed",
             extra_events=[event("checkpoint", T0 + 5.25, step=5, path="/ckpt/5"),
                           event("nan_detected", T0 + 7.25, step=7, message="loss is nan")])
    return run


@pytest.fixture
def live_run(tmp_path: Path) -> Path:
    """A run still recording: 7 steps in part files (4 + 3), no steps.parquet, no recorder_close."""
    run = tmp_path / "live"
    make_run(run, 7, samples_per_step=2, state="live")
    return run


@pytest.fixture
def crashed_run(tmp_path: Path) -> Path:
    """A run that crashed: parts only, a crash event, and a leftover hidden temp part of garbage."""
    run = tmp_path / "crashed"
    make_run(run, 6, samples_per_step=1, state="crashed")
    (run / "steps" / ".part-000002.parquet.deadbeef.tmp").write_bytes(b"PAR1 this is not parquet \x00\xff" * 10)
    (run / "samples" / ".shard-00001.parquet.cafebabe.tmp").write_bytes(b"\x00garbage")
    return run


@pytest.fixture
def torn_events_run(tmp_path: Path) -> Path:
    """A live run whose events.jsonl ends in a line cut mid-JSON (a writer killed mid-append)."""
    run = tmp_path / "torn"
    make_run(run, 3, state="live", extra_events=[event("checkpoint", T0 + 1.5, step=1, path="/ckpt/1")])
    with open(run / "events.jsonl", "a", encoding="utf-8") as fh:
        fh.write('{"timestamp": 1700000002.5, "kind": "checkpoint", "step": 2, "rank": 0, "mess')
    return run


@pytest.fixture
def empty_dir(tmp_path: Path) -> Path:
    """A folder with nothing in it."""
    path = tmp_path / "empty"
    path.mkdir()
    return path


@pytest.fixture
def empty_run(tmp_path: Path) -> Path:
    """A recording that has just started: a manifest and recorder_open, no steps, no samples."""
    run = tmp_path / "just-started"
    make_run(run, 0, state="live")
    return run


@pytest.fixture
def nested_root(tmp_path: Path) -> Path:
    """Runs at different depths: root/a/run1 (closed, 5 steps), root/b/c/run2 (live, 3 steps),
    root/run0 (crashed, 4 steps); root/notes holds no recording."""
    root = tmp_path / "runs"
    make_run(root / "a" / "run1", 5, state="closed", created_at="2024-01-02T00:00:00+00:00", samples_per_step=2)
    make_run(root / "b" / "c" / "run2", 3, state="live", created_at="2024-01-03T00:00:00+00:00",
             columns=("reward_mean", "kl_mean"))
    make_run(root / "run0", 4, state="crashed", created_at="2024-01-01T00:00:00+00:00")
    (root / "notes").mkdir()
    (root / "notes" / "README.txt").write_text("not a run\n")
    return root


@pytest.fixture
def ranked_run(tmp_path: Path) -> Path:
    """A distributed run (world_size 2, record_all_ranks): rank 0 at the top, rank 1 in rank-001/
    with its own manifest, samples, events and steps (which must never reach the steps view)."""
    run = tmp_path / "ranked"
    make_run(run, 5, samples_per_step=2, state="closed", world_size=2, run_id="ranked-run")
    make_run(run / "rank-001", 5, samples_per_step=3, state="closed", world_size=2, run_id="ranked-run", rank=1,
             columns=("reward_mean", "kl_mean", "grad_norm"))
    return run


def set_schema_version(run: Path, version: Any) -> None:
    """Rewrite the manifest's schema_version (as a newer rlprobe would have written it)."""
    data = json.loads((run / "manifest.json").read_text())
    data["schema_version"] = version
    (run / "manifest.json").write_text(json.dumps(data, indent=2))


@pytest.fixture
def newer_schema_run(tmp_path: Path) -> Path:
    """A closed run whose manifest says schema_version 2: written by an rlprobe newer than this."""
    run = tmp_path / "from-the-future"
    make_run(run, 3, state="closed")
    set_schema_version(run, 2)
    return run


@pytest.fixture
def corrupt_manifest_run(tmp_path: Path) -> Path:
    """A closed run whose manifest.json is not JSON (truncated); its data files are intact."""
    run = tmp_path / "corrupt-manifest"
    make_run(run, 4, samples_per_step=1, state="closed")
    (run / "manifest.json").write_text('{"schema_version": 1, "run_id": "corr')
    return run


ROOT_OF_MANY = 300
"""How many runs root_of_many holds."""


def _write_tiny_run(run: Path, i: int) -> None:
    """A tiny closed run written with pyarrow and plain writes (no fsync: speed)."""
    run.mkdir(parents=True)
    manifest = RunManifest(run_id=f"many-{i:03d}", algorithm="grpo", created_at=f"2024-02-01T00:00:{i % 60:02d}+00:00")
    (run / "manifest.json").write_text(manifest.model_dump_json())
    n = i % 5 + 1
    table = pa.table({
        "step": pa.array(range(n), pa.int64()),
        "reward_mean": pa.array([float(i)] * n, pa.float64()),
        "wall_time": pa.array([T0 + s for s in range(n)], pa.float64()),
    })
    pq.write_table(table, run / "steps.parquet")
    lines = [event("recorder_open", T0 - 1, pid=i), event("recorder_close", T0 + n)]
    (run / "events.jsonl").write_text("".join(json.dumps(e.model_dump()) + "\n" for e in lines))


@pytest.fixture(scope="session")
def root_of_many(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A root of 300 tiny closed runs, nested in groups of 30 (group-NN/run-NNN). Run i has
    i % 5 + 1 steps, all with reward_mean == i. Shared by the session: do not modify it."""
    root = tmp_path_factory.mktemp("many") / "runs"
    for i in range(ROOT_OF_MANY):
        _write_tiny_run(root / f"group-{i // 30:02d}" / f"run-{i:03d}", i)
    return root


def copy_run(src: Path, dst: Path) -> Path:
    """Copy a run directory (to combine fixtures into a root)."""
    shutil.copytree(src, dst)
    return dst
