"""A batch of ensures on worker threads that stops as one.

The thread that asks only waits: installers start, and installs clean up, on the batch's own threads, so an
interrupt of the caller (Ctrl-C, a SIGTERM handler's SystemExit, a cancelled task) lands in that wait and never
in the middle of starting an installer or removing a staging dir. It then stops the batch (specs not started are
dropped, its installers killed, its waits ended: see :mod:`repoinstall._stop`), waits for the workers to clean up
for at most ``STOP_GRACE``, and propagates. A second interrupt ends that wait at once: the workers are daemon
threads, so nothing holds the process after that.
"""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Generic, TypeVar, cast

from . import _log, _stop
from ._errors import Interrupted
from ._options import STOP_GRACE

if TYPE_CHECKING:
    import asyncio

R = TypeVar("R")


class Batch(Generic[R]):
    """Run ``tasks`` on up to ``workers`` threads, in order of the list; results in that order."""

    def __init__(self, tasks: Sequence[Callable[[], R]], workers: int) -> None:
        self.scope = _stop.Scope()
        self._tasks = tasks
        self._results: list[R | None] = [None] * len(tasks)
        #: Guards _next, _live and _error. Workers take it; the waiting thread only to read _live (never in a
        #: signal handler, which could then find it held by the very code it interrupted).
        self._guard = threading.Lock()
        self._next = 0
        self._error: BaseException | None = None
        #: Workers inside _work that have not left it. Invariant: a worker enters (0 -> counted) only under the
        #: guard and only while the batch is not halted; it leaves only once the batch is halted or every task
        #: is taken, after finishing the task it took. So "none left inside, after one left" means every task
        #: taken is done, and after a stop, "none inside" means no worker will touch anything again.
        self._live = 0
        #: Set (under the guard) exactly while _live is zero after a worker left.
        self._quiet = threading.Event()
        self._workers = min(workers, len(tasks))

    def run(self) -> list[R]:
        """Run the batch and wait for it on this thread. A task's exception other than the batch's own stop is
        raised here once the workers are done (they take no new task after it). If this thread is interrupted
        meanwhile, the batch stops and the interrupt propagates once its workers cleaned up, or after
        ``STOP_GRACE``.

        Waits by the workers' own count, never ``Thread.join``: on Python 3.11 a join interrupted by a signal
        handler's exception marks a thread that still runs as stopped (bpo-45274)."""
        if not self._tasks:
            return []
        try:
            for number in range(self._workers):
                threading.Thread(target=self._work, name=f"repoinstall-{number + 1}", daemon=True).start()
            # In slices: a signal for the process may be delivered to any of its threads, and then nothing wakes
            # this one from a wait with no end, so its Python handler would run only after the whole batch.
            while not self._quiet.wait(_stop.SLICE):
                if self._halted() and not self.alive():
                    break  # stopped before any worker came in: none will
        except BaseException:
            self.stop()
            if not self.finish(STOP_GRACE):
                _log.logger().warning(
                    "stopping: installs still cleaning up after %gs; going on (gc removes what they leave)", STOP_GRACE
                )
            raise
        if self._error is None and self._halted():
            raise Interrupted("interrupted: stopping (SIGTERM or Ctrl-C)")
        if self._error is not None:
            raise self._error
        return cast("list[R]", self._results)

    async def arun(self) -> list[R]:
        """:meth:`run` for asyncio: the loop waits without blocking; cancelling the task that awaits this stops
        the batch, as an interrupt of :meth:`run` does (and a second cancel ends the wait for its clean-up)."""
        import asyncio

        loop = asyncio.get_running_loop()
        finished: asyncio.Future[list[R]] = loop.create_future()

        def coordinate() -> None:
            try:
                outcome: list[R] | BaseException = self.run()
            except BaseException as error:  # handed to the loop, which raises it in the awaiting task
                outcome = error
            with contextlib.suppress(RuntimeError):  # the loop is closed: nobody waits for this batch any more
                loop.call_soon_threadsafe(_settle, finished, outcome)

        # Its outcome is retrieved even when nobody awaits it any more (asyncio would warn of it otherwise).
        finished.add_done_callback(lambda done: done.cancelled() or done.exception())
        try:
            threading.Thread(target=coordinate, name="repoinstall-batch", daemon=True).start()
            await _waited(finished)
            return finished.result()
        except BaseException:
            self.stop()
            deadline = time.monotonic() + STOP_GRACE
            while self.alive() and (left := deadline - time.monotonic()) > 0:
                await asyncio.sleep(min(left, _stop.SLICE))
            raise

    def stop(self) -> None:
        """Take no more tasks and kill the batch's installers; its workers clean up and end."""
        self.scope.stop()

    def finish(self, grace: float) -> bool:
        """After :meth:`stop`: wait up to ``grace`` seconds (waking every slice) for the workers to leave; whether
        they all did."""
        deadline = time.monotonic() + grace
        while self.alive() and (left := deadline - time.monotonic()) > 0:
            self._quiet.wait(min(left, _stop.SLICE))
        return not self.alive()

    def alive(self) -> bool:
        """Whether a worker is still at work (it may still use the repo's descriptors)."""
        with self._guard:
            return self._live > 0

    def _halted(self) -> bool:
        return self._error is not None or self.scope.stopped or _stop.PROCESS.stopped

    def _work(self) -> None:
        _stop.enter(self.scope)
        with self._guard:
            if self._halted():
                return  # started late (the stop interrupted the starting of threads): nothing to do or wait for
            self._live += 1
            self._quiet.clear()
        try:
            while True:
                with self._guard:
                    if self._halted() or self._next == len(self._tasks):
                        return
                    index = self._next
                    self._next += 1
                try:
                    self._results[index] = self._tasks[index]()
                except BaseException as error:  # raised by run() in the waiting thread
                    with self._guard:
                        if self._error is None:
                            self._error = error
                    return
        finally:
            with self._guard:
                self._live -= 1
                if self._live == 0:
                    self._quiet.set()


async def _waited(future: asyncio.Future[list[R]]) -> None:
    """Wait for ``future``, waking the loop every slice: as in :meth:`Batch.run`, a signal delivered to another
    thread wakes nothing, and a loop asleep in its selector would not run the handler (``asyncio.run``'s for
    Ctrl-C, say) until the batch ends. Never cancels ``future``."""
    import asyncio

    while not future.done():
        await asyncio.wait([future], timeout=_stop.SLICE)


def _settle(future: asyncio.Future[list[R]], outcome: list[R] | BaseException) -> None:
    if future.done():
        return
    if isinstance(outcome, BaseException):
        future.set_exception(outcome)
    else:
        future.set_result(outcome)
