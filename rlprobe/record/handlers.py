"""Exit paths: atexit, sys.excepthook and SIGTERM, each flushing the recorder then chaining.

Every hook belongs to the process that installed it. A forked child (multiprocessing's fork
start method, the Linux default) inherits all three, and a child that runs the parent's close()
writes events and compacts files under the parent's feet: Pool.__exit__ SIGTERMs its workers,
so every pool would do exactly that. An os.register_at_fork hook disarms them in the child,
and each hook also checks the pid before it acts.

SIGTERM is blocked across fork() while a handler of ours is installed. CPython drops a signal
that reaches the child before its after-fork bookkeeping, so a worker SIGTERMed that early would
never die (and Pool.__exit__ would wait for it forever); blocked, the signal stays pending in the
kernel and is delivered once the child's handler is the default one again.
"""

from __future__ import annotations

import atexit
import os
import signal
import sys
import threading
import weakref
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from rlprobe.record.recorder import Recorder


# Every installed set of hooks in this process, for the fork hooks below.
_INSTALLED: "weakref.WeakSet[InstalledHandlers]" = weakref.WeakSet()
_fork_state = threading.local()


def _before_fork() -> None:
    if any(h._sigterm_installed and h._installed for h in list(_INSTALLED)):
        try:
            _fork_state.mask = signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGTERM})
        except (OSError, ValueError):
            pass


def _restore_mask() -> None:
    mask = getattr(_fork_state, "mask", None)
    if mask is not None:
        _fork_state.mask = None
        try:
            signal.pthread_sigmask(signal.SIG_SETMASK, mask)
        except (OSError, ValueError):
            pass


def _after_fork_in_child() -> None:
    for hooks in list(_INSTALLED):
        hooks.disarm()
    _restore_mask()  # a SIGTERM that came in the meantime is delivered now, to the child's own handler


if hasattr(os, "register_at_fork"):
    os.register_at_fork(before=_before_fork, after_in_parent=_restore_mask, after_in_child=_after_fork_in_child)


class InstalledHandlers:
    """What install() put in place, so close() can take it out again."""

    def __init__(self, recorder: "Recorder") -> None:
        self._recorder = weakref.ref(recorder)
        self._pid = os.getpid()
        self._previous_hook = sys.excepthook
        self._previous_sigterm: Any = None
        self._sigterm_installed = False
        self._installed = True
        atexit.register(self._at_exit)
        sys.excepthook = self._excepthook
        if threading.current_thread() is threading.main_thread():
            try:
                self._previous_sigterm = signal.getsignal(signal.SIGTERM)
                signal.signal(signal.SIGTERM, self._on_sigterm)
                self._sigterm_installed = True
            except (ValueError, OSError):
                pass  # embedded interpreters may refuse; the other paths still cover us
        _INSTALLED.add(self)

    def _owner(self) -> "Recorder | None":
        """The recorder, when these hooks are installed and this is the process that made them."""
        if not self._installed or os.getpid() != self._pid:
            return None
        return self._recorder()

    def _at_exit(self) -> None:
        recorder = self._owner()
        if recorder is not None:
            recorder.close()

    def _excepthook(self, exc_type: Any, exc: BaseException, tb: Any) -> None:
        recorder = self._owner()
        if recorder is not None and not issubclass(exc_type, KeyboardInterrupt):
            try:
                recorder.record_crash(exc_type, exc, tb)
                recorder.close()
            except Exception:
                pass
        self._previous_hook(exc_type, exc, tb)

    def _on_sigterm(self, signum: int, frame: Any) -> None:
        recorder = self._owner()
        if recorder is not None:
            try:
                recorder.log_event("sigterm", message="SIGTERM received; flushing")
                recorder.close()
            except Exception:
                pass
        previous = self._previous_sigterm
        if callable(previous):
            previous(signum, frame)
        elif previous == signal.SIG_DFL or previous is None:
            # Die the way SIGTERM would have killed us, so the parent sees the same status.
            signal.signal(signal.SIGTERM, signal.SIG_DFL)
            os.kill(os.getpid(), signal.SIGTERM)
        # SIG_IGN: the process chose to ignore SIGTERM; keep ignoring it.

    def disarm(self) -> None:
        """In a forked child: put back what was there before, without touching the recorder.

        Runs right after fork, in the child's only thread. The hooks stay inert even where they
        cannot be taken out (another library chained onto them), since _owner() checks the pid.
        """
        if not self._installed:
            return
        self._installed = False
        try:
            atexit.unregister(self._at_exit)
        except Exception:
            pass
        if sys.excepthook == self._excepthook:
            sys.excepthook = self._previous_hook
        if self._sigterm_installed:
            try:
                if signal.getsignal(signal.SIGTERM) == self._on_sigterm:
                    previous = self._previous_sigterm
                    signal.signal(signal.SIGTERM, previous if previous is not None else signal.SIG_DFL)
            except (ValueError, OSError, TypeError):
                pass

    def uninstall(self) -> None:
        """Take our hooks out: restored where ours is on top, a pass-through where it is not.

        Another recorder (or library) may have chained onto our hook since; unhooking it would
        break their chain, so an uninstalled hook stays in place and only calls the previous one.
        """
        if not self._installed:
            return
        self._installed = False
        atexit.unregister(self._at_exit)
        if sys.excepthook == self._excepthook:
            sys.excepthook = _skip_uninstalled(self._previous_hook, "_excepthook", "_previous_hook")
        if self._sigterm_installed and threading.current_thread() is threading.main_thread():
            try:
                if signal.getsignal(signal.SIGTERM) == self._on_sigterm:
                    previous = _skip_uninstalled(self._previous_sigterm, "_on_sigterm", "_previous_sigterm")
                    signal.signal(signal.SIGTERM, previous if previous is not None else signal.SIG_DFL)
            except (ValueError, OSError, TypeError):
                pass


def _skip_uninstalled(hook: Any, method: str, previous_attr: str) -> Any:
    """Follow the chain past hooks of recorders that were closed while not on top."""
    while True:
        owner = getattr(hook, "__self__", None)
        if not isinstance(owner, InstalledHandlers) or owner._installed or getattr(hook, "__func__", None) is not getattr(InstalledHandlers, method):
            return hook
        hook = getattr(owner, previous_attr)


def install(recorder: "Recorder") -> InstalledHandlers:
    """Install atexit, excepthook and SIGTERM handlers for recorder."""
    return InstalledHandlers(recorder)
