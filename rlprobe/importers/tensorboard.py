"""TensorBoard event files (`events.out.tfevents.*`), read with the `tensorboard` package.

A run is a folder holding event files (several files = a run resumed, read in name order, a
later value winning per step and tag); a logdir with runs in subfolders is a root of runs.
Scalars become step metrics through the keymap, whichever way they were written: TF1-style
`simple_value` (torch's and tensorboardX's SummaryWriter, HF's TensorBoardCallback) or TF2
scalar tensors. Text summaries (OpenRLHF's `train/generated_samples`, a loop's completions)
become samples with the text as completion_text. A tag's namespace (HF and OpenRLHF write
`train/<key>`) is read through by the keymap. The step is the event's step.

Reading uses tensorboard's own record reader and Event protobuf. Without TensorFlow that reader
checks each record's CRC32C in pure Python, which dominates on large runs; with the
`google-crc32c` package installed the same checksum is computed by its C implementation.
"""

from __future__ import annotations

import operator
import os
from pathlib import Path
from typing import Any, Callable, Iterable, Iterator

from rlprobe.errors import SourceUnreadable
from rlprobe.importers._common import Entry, Parsed, classify

EVENT_FILE_MARK = "tfevents"
Progress = Callable[[int, int], None]


def _need_tensorboard() -> None:
    try:
        import tensorboard  # noqa: F401
    except ImportError:
        raise SourceUnreadable("reading TensorBoard event files needs the tensorboard package: "
                               "pip install 'rlprobe[tensorboard]'") from None


def is_event_file(path: Path) -> bool:
    """True for a TensorBoard event file name (events.out.tfevents.<time>.<host>...)."""
    return path.name.startswith("events.out.") and EVENT_FILE_MARK in path.name


def event_files(folder: Path) -> list[Path]:
    """The event files directly in folder, in the order TensorBoard reads them (by name)."""
    try:
        return sorted(p for p in folder.iterdir() if p.is_file() and is_event_file(p))
    except OSError:
        return []


def find_runs(root: Path) -> list[Path]:
    """Every folder at or below root that directly holds event files (a run), sorted."""
    if root.is_file():
        return [root] if is_event_file(root) else []
    found = []
    for folder, dirs, files in os.walk(root):
        dirs.sort()
        if any(name.startswith("events.out.") and EVENT_FILE_MARK in name for name in files):
            found.append(Path(folder))
    return found


def _speed_up_checksums() -> None:
    """Let tensorboard's pure-Python record reader compute CRC32C in C when google-crc32c is installed.

    The reader (tensorboard.compat.tensorflow_stub, used when TensorFlow is absent) looks its
    checksum functions up at call time: google_crc32c.value computes the same CRC32C, and the
    masking is tensorboard's own formula in one expression (it runs twice per record; its
    helper calls were a tenth of the read of a run of one event per scalar).
    """
    try:
        import google_crc32c
        from tensorboard.compat.tensorflow_stub import pywrap_tensorflow
    except ImportError:
        return
    if getattr(google_crc32c, "implementation", "c") != "c":
        return
    crc32c = google_crc32c.value

    def masked_crc32c(data: bytes) -> int:  # pywrap_tensorflow.masked_crc32c, modulo 2**32 at the end
        x = crc32c(data)
        return (((x >> 15) | (x << 17)) + 0xA282EAD8) & 0xFFFFFFFF

    pywrap_tensorflow.crc32c = crc32c
    pywrap_tensorflow.masked_crc32c = masked_crc32c


class EventReader:
    """Reads a run folder's event files from where it stopped: each `read()` returns only new events.

    tensorboard's RawEventFileLoader keeps its offset and stops before a record still being
    written, so a growing run is read once, incrementally (what `rlprobe watch` needs).
    """

    def __init__(self, run: Path) -> None:
        _need_tensorboard()
        _speed_up_checksums()
        self.run = run
        self._loaders: dict[Path, Any] = {}
        self.read_bytes: dict[Path, int] = {}  # per file: the bytes of the whole records read so far
        self.records: dict[Path, int] = {}  # per file: the records read so far
        self._opened: list[Any] = []  # the files _loader opened for tensorboard's reader

    def close(self) -> None:
        """Close the files opened for reading (a reader left to the garbage collector closes them too)."""
        for fh in self._opened:
            fh.close()
        self._opened.clear()
        self._loaders.clear()

    def torn(self) -> list[dict[str, Any]]:
        """The files whose bytes past the records read are not a whole record, as of the last read
        (_common.torn_note says it in words).

        tensorboard's loader stops, without a word, at a record cut mid-write (the last one of a
        live writer, or of a truncated copy) or one that fails its checksum; what follows it is
        not read. Each: file, tail_bytes (what was not read), records (read before it), and
        cut (True: the tail is shorter than the record its header announces, i.e. cut mid-write).
        """
        out = []
        for path in self.files():
            size, done = _size(path), self.read_bytes.get(path, 0)
            if size <= done:
                continue
            out.append({"file": str(path), "tail_bytes": size - done, "records": self.records.get(path, 0),
                        "cut": _cut_mid_record(path, done, size)})
        return out

    def files(self) -> list[Path]:
        """The run's event files as of now."""
        return [self.run] if self.run.is_file() else event_files(self.run)

    def read(self, progress: Progress | None = None) -> Iterator[tuple[int, float, dict[str, float], dict[str, str]]]:
        """(step, wall_time, scalars, texts) per event with a summary, new since the last read."""
        from tensorboard.compat.proto import event_pb2

        files = self.files()
        total = sum(_size(f) for f in files)
        done = 0
        parse = event_pb2.Event.FromString
        for path in files:
            loader = self._loaders.get(path)
            if loader is None:
                loader = self._loaders[path] = _loader(path, self._opened)
            read_bytes, records = self.read_bytes.get(path, 0), self.records.get(path, 0)
            try:
                for raw in loader.Load():
                    size = len(raw) + 16  # a record's framing: length, its CRC, the data's CRC
                    done += size
                    read_bytes += size
                    records += 1
                    if progress is not None and not records & 4095:
                        progress(min(done, total), total)
                    try:
                        event = parse(raw)
                    except Exception:  # a record whose bytes pass the CRC but are not an Event
                        continue
                    values = event.summary.value  # empty when the event has no summary
                    if len(values) == 1:  # one scalar per event (torch's add_scalar, HF's callback)
                        value = values[0]
                        number = value.simple_value
                        if number != 0.0 or _KIND(value) == "simple_value":
                            yield event.step, event.wall_time, {value.tag: number}, {}
                            continue
                    elif not values:
                        continue
                    scalars, texts = _values(values)
                    if scalars or texts:
                        yield event.step, event.wall_time, scalars, texts
            finally:  # what was read, also when the caller stops early
                self.read_bytes[path], self.records[path] = read_bytes, records
        if progress is not None:
            progress(total, total)


def _loader(path: Path, opened: list[Any]) -> Any:
    """tensorboard's RawEventFileLoader for path, reading through a plain file object where it can.

    Without TensorFlow the loader's record reader (tensorflow_stub's PyRecordReader_New) reads
    through tensorboard's GFile, which re-opens the file and slices its own buffer in Python on
    every read: on a run of one event per scalar (3M records for 100k steps x 30 tags) that was
    half the import. The reader only calls file_handle.read(n), and a local file opened "rb"
    answers that the same way, including for a file still growing (a read at its end returns
    b"" and a later one what was appended), so the records, checksums and stops are tensorboard's.
    """
    from tensorboard.backend.event_processing.event_file_loader import RawEventFileLoader

    loader = RawEventFileLoader(str(path))
    reader = getattr(getattr(loader, "_iterator", None), "_reader", None)
    try:
        from tensorboard.compat.tensorflow_stub.io.gfile import GFile
        from tensorboard.compat.tensorflow_stub.pywrap_tensorflow import PyRecordReader_New
    except ImportError:
        return loader
    if (isinstance(reader, PyRecordReader_New) and isinstance(getattr(reader, "file_handle", None), GFile)
            and os.fsdecode(getattr(reader, "filename", b"")) == str(path)):
        reader.file_handle = open(path, "rb")  # noqa: SIM115 (EventReader.close closes it)
        opened.append(reader.file_handle)
    return loader


def _cut_mid_record(path: Path, offset: int, size: int) -> bool:
    """True when the bytes from offset on are the start of a record, shorter than its header says.

    A record is: length (8 bytes, little-endian), the length's masked CRC32C (4), the data
    (length bytes), the data's masked CRC32C (4). A header that fails its own CRC is corruption,
    not a cut.
    """
    try:
        with open(path, "rb") as fh:
            fh.seek(offset)
            header = fh.read(12)
    except OSError:
        return False
    if len(header) < 12:
        return True
    from tensorboard.compat.tensorflow_stub.pywrap_tensorflow import masked_crc32c

    if masked_crc32c(header[:8]) != int.from_bytes(header[8:], "little"):
        return False
    return 16 + int.from_bytes(header[:8], "little") > size - offset


def _size(path: Path) -> int:
    try:
        return path.stat().st_size
    except OSError:
        return 0


_TAG_AND_SIMPLE_VALUE = operator.attrgetter("tag", "simple_value")
_KIND = operator.methodcaller("WhichOneof", "value")


def _values(values: Any) -> tuple[dict[str, float], dict[str, str]]:
    """The scalars and texts of a summary's values; images, histograms and audio are left out.

    Nearly every value of a large run is a TF1-style simple_value, so all of them are read at
    once. A value of another kind reads as simple_value 0.0 (a oneof's unset member), so only
    values that read 0.0 need their kind asked; any that is not simple_value, or a tag repeated
    in one summary, sends the summary through the value-by-value reading (_each_value).
    """
    pairs = list(map(_TAG_AND_SIMPLE_VALUE, values))
    scalars = dict(pairs)
    if len(scalars) != len(pairs):
        return _each_value(values)
    if 0.0 in scalars.values():
        for i, (_, number) in enumerate(pairs):
            if number == 0.0 and _KIND(values[i]) != "simple_value":
                return _each_value(values)
    return scalars, {}


def _each_value(values: Iterable[Any]) -> tuple[dict[str, float], dict[str, str]]:
    scalars: dict[str, float] = {}
    texts: dict[str, str] = {}
    for value in values:
        kind = value.WhichOneof("value")
        if kind == "simple_value":
            scalars[value.tag] = value.simple_value  # a Python float already
            continue
        if kind != "tensor":
            continue  # images, histograms, audio: not step metrics
        plugin = value.metadata.plugin_data.plugin_name
        from tensorboard.util import tensor_util

        try:
            array = tensor_util.make_ndarray(value.tensor)
        except Exception:
            continue
        if plugin == "text":
            flat = [x.decode("utf-8", "replace") if isinstance(x, bytes) else str(x) for x in array.reshape(-1)]
            texts[value.tag] = "\n".join(flat)
        elif array.size == 1 and array.dtype.kind in "fiub":
            scalars[value.tag] = float(array.reshape(-1)[0])
    return scalars, texts


def rows_to_parsed(parsed: Parsed, rows: dict[int, dict[str, Any]], texts: list[tuple[int, str, str]]) -> None:
    """Steps (in step order) and text samples into parsed; rows is emptied on the way.

    Each step's dict goes once it is mapped: on a 100k-step run the dicts and the mapped
    steps together were most of the import's memory.
    """
    for step in sorted(rows):
        mapped = classify(rows.pop(step), parsed)
        if mapped is not None:
            parsed.entries.append(Entry(step=step, mapped=mapped))
    for serial, (step, tag, text) in enumerate(texts):
        parsed.samples.append({"step": step, "sample_id": f"{step}-0-tb{serial}", "completion_text": text,
                               "capture_reason": f"tensorboard_text:{tag}"})


def parse(run: Path, step_every: int | None = None, progress: Progress | None = None) -> Parsed:
    """Read one TensorBoard run (a folder of event files, or one event file) into mapped steps."""
    files = [run] if run.is_file() else event_files(run)
    if not files:
        raise SourceUnreadable(f"{run}: no TensorBoard event file (events.out.tfevents.*) here")
    parsed = Parsed(kind="tensorboard", files=[str(f) for f in files])
    if step_every is not None:
        parsed.notes.append("--step-every is ignored: every TensorBoard event carries its step")
    rows: dict[int, dict[str, Any]] = {}
    texts: list[tuple[int, str, str]] = []
    reader = EventReader(run)
    try:
        for step, wall, scalars, text in reader.read(progress):
            row = rows.get(step)
            if row is None:
                row = rows[step] = scalars  # the reader's own dict, made for this event
            else:
                row.update(scalars)  # a later event or file (a resumed run) wins per step and tag
            if wall > 0:  # 0 is an unset wall_time
                row["wall_time"] = wall
            if text:
                texts += [(step, tag, t) for tag, t in text.items()]
    finally:
        reader.close()
    if not rows and not texts:
        raise SourceUnreadable(f"{run}: no readable TensorBoard record (not an event file, or every record is torn)")
    parsed.torn = reader.torn()
    rows_to_parsed(parsed, rows, texts)
    parsed.step_rule = "the step of each TensorBoard event"
    return parsed
