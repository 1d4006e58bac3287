"""One writer per recording: an exclusive lock on a hidden file in the recording directory.

Two Recorders on one folder (a second one in the same process, or every process of a job that
forgot ``rank=``) would write the same part and shard names and overwrite each other without a
trace. fcntl.flock is held by the open file, not by a thread or a name, so the OS releases it
on any death of the process (SIGKILL included) and a later session can resume at once. Readers
ignore the file (its name starts with a dot).
"""

from __future__ import annotations

import errno
import os
import socket
from pathlib import Path

from rlprobe.errors import RecordingInUse

try:
    import fcntl
except ImportError:  # pragma: no cover - Windows: no flock; one writer is then the user's to ensure
    fcntl = None  # type: ignore[assignment]

LOCK_NAME = ".rlprobe-writer.lock"
_UNSUPPORTED = {errno.ENOLCK, errno.EOPNOTSUPP, errno.ENOTSUP, errno.EINVAL}


class WriterLock:
    """The exclusive right to write one recording directory, until release() or process death."""

    def __init__(self, rec_dir: Path) -> None:
        self.path = rec_dir / LOCK_NAME
        self._fd: int | None = None
        if fcntl is None:
            return
        rec_dir.mkdir(parents=True, exist_ok=True)
        fd = os.open(self.path, os.O_RDWR | os.O_CREAT | getattr(os, "O_CLOEXEC", 0), 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = _read_holder(fd)
            os.close(fd)
            rank = os.environ.get("RANK") or os.environ.get("LOCAL_RANK")
            hint = f" (this process has RANK={rank}: pass rank={rank})" if rank not in (None, "", "0") else ""
            raise RecordingInUse(
                f"{rec_dir} is already being recorded by another Recorder{holder}: two writers would "
                f"overwrite each other's files. Give each process its own rank (Recorder(..., rank=RANK)), "
                f"or its own run_dir{hint}"
            ) from None
        except OSError as exc:
            os.close(fd)
            if exc.errno in _UNSUPPORTED:
                return  # a filesystem without locks (some network mounts): record unlocked, as before
            raise
        self._fd = fd
        try:
            os.ftruncate(fd, 0)
            os.write(fd, f"pid {os.getpid()} on {socket.gethostname()}\n".encode())
        except OSError:
            pass  # the lock is what matters; who holds it is only for the message

    def release(self) -> None:
        """Give the directory up (the recorder closed)."""
        fd, self._fd = self._fd, None
        if fd is not None:
            try:
                fcntl.flock(fd, fcntl.LOCK_UN)  # type: ignore[union-attr]
            finally:
                os.close(fd)

    def forget(self) -> None:
        """In a forked child: close the inherited descriptor without unlocking the parent's lock.

        flock belongs to the open file both processes share; closing one descriptor of it keeps
        the lock, and lets the OS free it when the parent dies even if the child lives on.
        """
        fd, self._fd = self._fd, None
        if fd is not None:
            try:
                os.close(fd)
            except OSError:
                pass


def _read_holder(fd: int) -> str:
    try:
        text = os.pread(fd, 200, 0).decode("utf-8", "replace").strip()
    except OSError:
        return ""
    return f" ({text})" if text else ""
