"""How long `rlprobe import` takes on a 100k-step TensorBoard run, against the same run as JSONL.

The run is written with tensorboard's own writer: 100k steps x 30 scalar tags in one event per
step (what a TRL GRPO run logs under train/, here with all of a step's scalars in one summary).
Then, in this process, --repeat times in turn (medians printed; each run's figures in the JSON):

- baseline: the same 100k rows as a JSONL file (one dict per step), imported;
- tensorboard: the event file imported, with google-crc32c computing the record checksums (what
  the `tensorboard` extra installs), split into read (records -> rows) and the whole import;
- `rlprobe import` of the event file in a fresh process (start-up and exit included);

and once each:

- one event per scalar: what HF's TensorBoardCallback and torch's SummaryWriter.add_scalar
  write (30 records per step), imported, on a tenth of the steps, scaled; and the same file's
  records through tensorboard's record reader alone (not parsed), the floor of any import;
- tensorboard, pure-Python checksums: the read alone, with tensorboard's own checksum
  function (what happens without google-crc32c), on a tenth of the steps (it is slow), scaled.

    python benchmarks/import_trackers.py            # 100k steps
    python benchmarks/import_trackers.py --quick    # 10k steps

Target (issue 14): a 100k-step TensorBoard run imports in under 10 s (the median in-process
import of the one-event-per-step run; the other rows are there to be read next to it).
"""

from __future__ import annotations

import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import base_parser, header, machine_info, print_table, target, timed, write_json  # noqa: E402

TAGS = ["reward", "reward_std", "kl", "entropy", "loss", "grad_norm", "learning_rate", "frac_reward_zero_std",
        "completions/mean_length", "completions/min_length", "completions/max_length", "completions/clipped_ratio",
        "completions/mean_terminated_length", "completions/min_terminated_length", "completions/max_terminated_length",
        "clip_ratio/low_mean", "clip_ratio/low_min", "clip_ratio/high_mean", "clip_ratio/high_max",
        "clip_ratio/region_mean", "rewards/accuracy_reward/mean", "rewards/accuracy_reward/std",
        "rewards/format_reward/mean", "rewards/format_reward/std", "num_tokens", "epoch", "step_time",
        "sampling/sampling_logp_difference/mean", "sampling/sampling_logp_difference/max", "sampling/importance_sampling_ratio/mean"]


def write_tb(folder: Path, steps: int) -> Path:
    from tensorboard.compat.proto import event_pb2, summary_pb2
    from tensorboard.summary.writer.event_file_writer import EventFileWriter

    writer = EventFileWriter(str(folder), max_queue_size=10000)
    for step in range(1, steps + 1):
        values = [summary_pb2.Summary.Value(tag=f"train/{t}", simple_value=(step % 997) * 0.001 + i) for i, t in enumerate(TAGS)]
        writer.add_event(event_pb2.Event(wall_time=1.7e9 + step, step=step, summary=summary_pb2.Summary(value=values)))
    writer.close()
    return folder


def write_tb_per_scalar(folder: Path, steps: int) -> Path:
    """The same values, one event per scalar (HF's TensorBoardCallback calls add_scalar per key)."""
    from tensorboard.compat.proto import event_pb2, summary_pb2
    from tensorboard.summary.writer.event_file_writer import EventFileWriter

    writer = EventFileWriter(str(folder), max_queue_size=10000)
    for step in range(1, steps + 1):
        for i, t in enumerate(TAGS):
            value = summary_pb2.Summary.Value(tag=f"train/{t}", simple_value=(step % 997) * 0.001 + i)
            writer.add_event(event_pb2.Event(wall_time=1.7e9 + step, step=step, summary=summary_pb2.Summary(value=[value])))
    writer.close()
    return folder


def write_jsonl(path: Path, steps: int) -> Path:
    with open(path, "w") as fh:
        for step in range(1, steps + 1):
            fh.write(json.dumps({"step": step, **{t: (step % 997) * 0.001 + i for i, t in enumerate(TAGS)}}) + "\n")
    return path


def cpu_timed(fn):  # type: ignore[no-untyped-def]
    """(wall seconds, CPU seconds of this process, result): CPU time is what a loaded 2-core box inflates least."""
    c0, w0 = time.process_time(), time.perf_counter()
    result = fn()
    return time.perf_counter() - w0, time.process_time() - c0, result


def read_only(run: Path) -> int:
    from rlprobe.importers.tensorboard import EventReader

    return sum(1 for _ in EventReader(run).read())


def records_only(run: Path) -> int:
    """The records of a run's event files through tensorboard's record reader, not parsed: what no import can go under."""
    from rlprobe.importers.tensorboard import EventReader, _loader, _speed_up_checksums, event_files

    _speed_up_checksums()
    reader = EventReader(run)
    try:
        return sum(sum(1 for _ in _loader(path, reader._opened).Load()) for path in event_files(run))
    finally:
        reader.close()


def cli_import(run: Path, dest: Path) -> float:
    """Wall seconds of `rlprobe import RUN DEST` in a fresh process (what a user waits for)."""
    code = "import sys; from rlprobe.cli import main; sys.argv[0] = 'rlprobe'; main()"
    t0 = time.perf_counter()
    subprocess.run([sys.executable, "-c", code, "import", str(run), str(dest)], check=True, stdout=subprocess.DEVNULL)
    return time.perf_counter() - t0


def main() -> None:
    parser = base_parser(__doc__ or "")
    parser.add_argument("--repeat", type=int, default=3, help="times the JSONL and TensorBoard imports run, in turn (default 3)")
    args = parser.parse_args()
    steps = 10_000 if args.quick else 100_000
    repeat = max(1, args.repeat)
    from tensorboard.compat.tensorflow_stub import pywrap_tensorflow

    # tensorboard's own checksum functions, before rlprobe's reader swaps in google-crc32c's
    own_crc32c, own_masked_crc32c = pywrap_tensorflow.crc32c, pywrap_tensorflow.masked_crc32c
    info = machine_info()
    header("import_trackers", info, {"steps": steps, "tags": len(TAGS), "repeat": repeat})
    from rlprobe.importers import import_source

    runs: dict[str, list[float]] = {k: [] for k in ("base_s", "base_cpu", "read_s", "read_cpu", "tb_s", "tb_cpu", "cli_s")}
    loads: list[float] = []
    with tempfile.TemporaryDirectory() as tmp:
        t = Path(tmp)
        write_s, run = timed(lambda: write_tb(t / "tb" / "run", steps))
        write_jsonl(t / "m.jsonl", steps)
        size_mb = sum(f.stat().st_size for f in run.iterdir()) / 1e6
        for i in range(repeat):
            for name in ("from-jsonl", "from-tb", "from-cli"):
                shutil.rmtree(t / name, ignore_errors=True)
            base_s, base_cpu, _ = cpu_timed(lambda: import_source(t / "m.jsonl", t / "from-jsonl"))
            read_s, read_cpu, n = cpu_timed(lambda: read_only(run))
            tb_s, tb_cpu, report = cpu_timed(lambda: import_source(run, t / "from-tb"))
            assert report.steps == steps and n == steps
            cli_s = cli_import(run, t / "from-cli")
            for key, value in zip(runs, (base_s, base_cpu, read_s, read_cpu, tb_s, tb_cpu, cli_s)):
                runs[key].append(value)
            loads.append(os.getloadavg()[0])
            print(f"  run {i + 1}/{repeat}: JSONL {base_s:.2f} s, TensorBoard {tb_s:.2f} s (CPU {tb_cpu:.2f} s), "
                  f"CLI {cli_s:.2f} s, load {loads[-1]:.2f}", flush=True)

        # One event per scalar (HF's callback): 30 records per step, on a tenth of the steps.
        per_scalar = write_tb_per_scalar(t / "tb" / "per_scalar", steps // 10)
        per_scalar_s, per_scalar_cpu, per_report = cpu_timed(lambda: import_source(per_scalar, t / "from-per-scalar"))
        framing_s, framing_cpu, _ = cpu_timed(lambda: records_only(per_scalar))  # the floor: tensorboard's reader alone
        assert per_report.steps == steps // 10

        # Without google-crc32c: tensorboard's own pure-Python checksum, on a tenth of the run.
        import rlprobe.importers.tensorboard as tb_reader

        small = write_tb(t / "tb" / "small", steps // 10)
        fast_small_s, _ = timed(lambda: read_only(small))
        saved = pywrap_tensorflow.crc32c, pywrap_tensorflow.masked_crc32c, tb_reader._speed_up_checksums
        pywrap_tensorflow.crc32c, pywrap_tensorflow.masked_crc32c = own_crc32c, own_masked_crc32c
        tb_reader._speed_up_checksums = lambda: None
        try:
            slow_small_s, _ = timed(lambda: read_only(small))
        finally:
            pywrap_tensorflow.crc32c, pywrap_tensorflow.masked_crc32c, tb_reader._speed_up_checksums = saved

    med = {k: statistics.median(v) for k, v in runs.items()}
    base_s, tb_s, tb_cpu = med["base_s"], med["tb_s"], med["tb_cpu"]
    load = max(loads)
    rows = [
        ["JSONL import (baseline)", base_s, med["base_cpu"], 1.0],
        ["TensorBoard read (records -> rows)", med["read_s"], med["read_cpu"], med["read_s"] / base_s],
        ["TensorBoard import", tb_s, tb_cpu, tb_s / base_s],
        ["rlprobe import, fresh process (CLI)", med["cli_s"], None, med["cli_s"] / base_s],
        [f"one event per scalar (x10 of {steps // 10} steps)", per_scalar_s * 10, per_scalar_cpu * 10, per_scalar_s * 10 / base_s],
        [f"  of which tensorboard's record reader alone (x10)", framing_s * 10, framing_cpu * 10, framing_s * 10 / base_s],
        [f"read, pure-Python CRC (x10 of {steps // 10} steps)", slow_small_s * 10, None, slow_small_s * 10 / base_s],
        [f"read, google-crc32c (x10 of {steps // 10} steps)", fast_small_s * 10, None, fast_small_s * 10 / base_s],
    ]
    print_table(f"import of {steps} steps x {len(TAGS)} tags ({size_mb:.1f} MB of events, written in {write_s:.1f} s); "
                f"medians of {repeat} runs; load average {min(loads):.2f}..{load:.2f}",
                ["what", "wall s", "CPU s", "wall x baseline"], rows)
    loaded = load > (os.cpu_count() or 2)
    goal = target(tb_s, "<", 10.0, " s", unresolved=f"load average {load:.1f} on {os.cpu_count()} cpus; the CPU time is "
                  f"{tb_cpu:.1f} s" if loaded else None) if steps == 100_000 else None
    if goal:
        print(f"\ntarget: TensorBoard import of 100k steps {goal['target']}: {'met' if goal['met'] else 'NOT met'} "
              f"(median wall {tb_s:.1f} s, CPU {tb_cpu:.1f} s; fresh process {med['cli_s']:.1f} s)"
              + (f" (not resolved: {goal['unresolved']})" if loaded else ""))
        print(f"  one event per scalar (HF's TensorBoardCallback): about {per_scalar_s * 10:.0f} s for 100k steps, "
              f"{'under' if per_scalar_s * 10 < 10 else 'NOT under'} 10 s")
    write_json("import_trackers", args.out, {
        "machine": info, "params": {"steps": steps, "tags": len(TAGS), "repeat": repeat}, "load_average": load,
        "load_averages": loads, "event_mb": size_mb,
        "jsonl_import_s": base_s, "tb_read_s": med["read_s"], "tb_import_s": tb_s, "cli_import_s": med["cli_s"],
        "jsonl_import_cpu_s": med["base_cpu"], "tb_read_cpu_s": med["read_cpu"], "tb_import_cpu_s": tb_cpu,
        "runs": runs, "per_scalar_import_s_scaled": per_scalar_s * 10, "per_scalar_import_cpu_s_scaled": per_scalar_cpu * 10,
        "per_scalar_record_reader_s_scaled": framing_s * 10,
        "read_pure_python_crc_s_scaled": slow_small_s * 10, "read_fast_crc_s_scaled": fast_small_s * 10,
        "target": goal, "recorded_at": time.time(),
    })


if __name__ == "__main__":
    main()
