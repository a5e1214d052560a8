"""Stopping installs at once: on SIGTERM, Ctrl-C or an interrupted caller, every installer is killed, none starts
after, and every wait of an install (a peer's lock, a shared install) ends.

A :class:`Scope` is what stops as one: the whole process (:data:`PROCESS`, stopped by the command line's signal
handlers) or one batch of ensures (stopped by the thread that waits for it when that thread is interrupted). A
worker thread works for one batch (:func:`enter`); every other thread belongs to the process only. Installers (and the
interpreters compiling their bytecode) register here while they run, with the scope of the thread that started them.

Loaded only once something is installed: the warm path never imports it.
"""

from __future__ import annotations

import contextlib
import threading
import time
from typing import TYPE_CHECKING

from ._errors import Interrupted

if TYPE_CHECKING:
    import subprocess

#: How often a wait looks whether it should end: an install's wait (a peer's lock, a shared install) sees a stop,
#: and a thread waiting for a batch runs a signal handler that is due, within this.
SLICE = 0.05


class Scope:
    """Something that stops as one. ``stopped`` only ever goes from false to true."""

    __slots__ = ("stopped",)

    def __init__(self) -> None:
        self.stopped = False

    def stop(self) -> None:
        """Stop: no installer of this scope starts from now on and every running one is killed.

        Safe in a signal handler and re-entrant: it takes no lock and waits for nothing, so a handler that runs on
        the main thread in the middle of any code (this very function included) cannot deadlock against it.
        """
        # Invariant (with started()): the flag is set BEFORE the registry is read, and an installer is registered
        # BEFORE its thread reads the flag. So of a stop and an installer starting at the same moment, whichever
        # comes second sees the other: the installer is killed here, or by its own thread in started(). Each step
        # is one atomic operation under the GIL (an attribute store, a dict copy), so no lock is needed.
        self.stopped = True
        for proc, owner in _running.copy().items():
            if self is PROCESS or owner is self:
                _kill(proc)


#: The process: stopped by the command line's SIGTERM and SIGINT handlers, and then everything stops.
PROCESS = Scope()
#: Installers running now, each with the scope of the thread that started it.
_running: dict[subprocess.Popen[bytes], Scope] = {}
_local = threading.local()


def enter(scope: Scope) -> None:
    """Make this (worker) thread part of ``scope`` for the rest of its life."""
    _local.scope = scope


def _current() -> Scope:
    scope: Scope = getattr(_local, "scope", PROCESS)
    return scope


def stopped() -> bool:
    """Whether this thread's work should stop: the process or its batch is stopping."""
    return PROCESS.stopped or _current().stopped


def check() -> None:
    """:class:`Interrupted` if this thread's work should stop: call before anything that takes time."""
    if stopped():
        raise Interrupted("interrupted: stopping (SIGTERM or Ctrl-C)")


def sleep(seconds: float) -> None:
    """Sleep ``seconds``, in slices; :class:`Interrupted` as soon as this thread's work should stop."""
    deadline = time.monotonic() + seconds
    while True:
        check()
        left = deadline - time.monotonic()
        if left <= 0:
            return
        time.sleep(min(left, SLICE))


def started(proc: subprocess.Popen[bytes]) -> None:
    """Register an installer this thread has just started; killed at once if its scope stopped meanwhile."""
    _running[proc] = _current()
    # Registered first, then the flag read: see Scope.stop for why no installer escapes a stop.
    if stopped():
        _kill(proc)


def ended(proc: subprocess.Popen[bytes]) -> None:
    """The installer was waited for: nothing to kill any more."""
    _running.pop(proc, None)


def _kill(proc: subprocess.Popen[bytes]) -> None:
    # Popen.kill polls without blocking first, so a reaped installer's pid (maybe reused) is never signalled.
    with contextlib.suppress(OSError):
        proc.kill()
