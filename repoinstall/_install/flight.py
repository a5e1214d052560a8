"""Single-flight: threads of one process asking for the same tree share one install."""

from __future__ import annotations

import threading
from collections.abc import Callable, Hashable
from concurrent.futures import Future
from typing import Generic, TypeVar

from .. import _stop

T = TypeVar("T")


class SingleFlight(Generic[T]):
    """Run ``fn`` once per key at a time; callers that arrive while it runs get its outcome instead."""

    def __init__(self) -> None:
        self._guard = threading.Lock()
        self._running: dict[Hashable, Future[T]] = {}

    def run(self, key: Hashable, fn: Callable[[], T]) -> tuple[T, bool]:
        """``(result, shared)``: ``shared`` is true when another thread did the work. Exceptions are shared too."""
        with self._guard:
            future = self._running.get(key)
            leader = future is None
            if future is None:
                future = self._running[key] = Future()
        if not leader:
            return _outcome(future), True
        try:
            result = fn()
        except BaseException as error:
            future.set_exception(error)
            raise
        else:
            future.set_result(result)
            return result, False
        finally:
            # Removed only after the outcome is set, so a late caller either joins this flight or starts anew
            # and re-checks the disk itself.
            with self._guard:
                del self._running[key]


def _outcome(future: Future[T]) -> T:
    """The leader's outcome; :class:`Interrupted` first if this thread's batch or the process stops meanwhile."""
    while True:
        try:
            future.exception(timeout=_stop.SLICE)  # returns what the leader raised; raises only on timeout
        except TimeoutError:
            _stop.check()
            continue
        return future.result()
