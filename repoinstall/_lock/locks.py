"""The locks of one repo as one process takes them: open a thing's lock on the shared volume (or say why none can
be had here), and hold it for a block (:meth:`TreeLocks.hold`), going on without a lock wherever none can be had
and reporting each kind of obstacle once, whichever thread meets it.

The lock only saves duplicate work: the rename that publishes a tree is the commit point, so going on without a
lock stays correct, and a holder that lost its lease (paused past the threshold) can at worst install a tree
nobody uses.
"""

from __future__ import annotations

import contextlib
import os
import threading
from typing import TYPE_CHECKING

from .. import _log
from .._errors import RepoinstallError
from .._options import LockSettings
from .._store import fs as _fs
from .obstacles import Unusable, obstacle
from .soft import FileTreeLock
from .wait import SYSTEM_CLOCK, Clock

if TYPE_CHECKING:
    from collections.abc import Callable, Iterator

    from .._store.layout import Layout
    from .key import LockKey


def open_lock(layout: Layout, key: LockKey, settings: LockSettings) -> FileTreeLock | Unusable:
    """The lock of ``key`` (named ``key.leaf`` in the repo directory ``key.parts``), or why none can be had here:
    waiting for it would then fail or hang forever.

    Going on without a lock stays correct, because the rename is the commit point; it only risks duplicate work.
    """
    directory = _fs.make_dirs(layout.writable_fd(), key.parts, layout.root)
    if (unusable := obstacle(layout, key, directory)) is not None:
        os.close(directory)
        return unusable
    return FileTreeLock(layout, key, directory, settings)


class Held:
    """What taking a tree's lock came to, read by the protocol (nothing calls back into it).

    ``peer_finished``: the tree appeared while we waited, so the lock was not taken. ``waited``: seconds spent
    getting here. ``without``: why we go on with no lock although locking is on (``None`` otherwise).
    ``lease_lost``: the heartbeat saw a peer evict us; from then on never publish over anything.
    """

    __slots__ = ("_lost", "peer_finished", "waited", "without")

    def __init__(self, waited: float, *, peer_finished: bool = False, without: Unusable | None = None) -> None:
        self.waited = waited
        self.peer_finished = peer_finished
        self.without = without
        self._lost: threading.Event | None = None

    @property
    def lease_lost(self) -> bool:
        return self._lost is not None and self._lost.is_set()


def _asks(question: Callable[[], bool]) -> bool:
    """``question()``, or ``False`` if the repo cannot answer (the block's own error is what gets reported)."""
    try:
        return question()
    except (OSError, RepoinstallError):
        return False


class TreeLocks:
    """The tree locks (or any :class:`LockKey`'s) of one repo as one process takes them: with its settings and
    clock, and going on without a lock wherever none can be had (``--no-lock``, a lock of another UID, links that
    lose identity, a lock state replaced by a file) - the one "no lock possible" path, reported once per kind of
    obstacle."""

    def __init__(self, layout: Layout, settings: LockSettings, clock: Clock = SYSTEM_CLOCK) -> None:
        self.layout = layout
        self.settings = settings
        self.clock = clock
        self._warned: set[str] = set()
        self._guard = threading.Lock()

    @contextlib.contextmanager
    def hold(
        self, key: LockKey, *, ready: Callable[[], bool] | None = None, gone: Callable[[], bool] | None = None
    ) -> Iterator[Held]:
        """Hold the lock of ``key`` (a tree's: :func:`~repoinstall._lock.key.tree_key`) for the block (or go on
        without one); with ``ready``, a wait ends as soon as ``ready()`` is true, and the block runs with
        ``peer_finished`` set and no lock. With ``gone``, asked as the block ends: if the tree does not exist then
        (nothing was published), the lock's state goes with the release unless someone else is in it (see
        :meth:`FileTreeLock.release`)."""
        started = self.clock.now()
        lock = open_lock(self.layout, key, self.settings) if self.settings.enabled else None
        taken: bool | Unusable = False
        if isinstance(lock, FileTreeLock):
            taken = lock.take(ready=ready, clock=self.clock)
        without = lock if isinstance(lock, Unusable) else taken if isinstance(taken, Unusable) else None
        held = Held(
            self.clock.now() - started, peer_finished=isinstance(lock, FileTreeLock) and taken is False, without=without
        )
        if without is not None:
            self._warn_once(without)
        if taken is not True or not isinstance(lock, FileTreeLock):
            yield held  # no lock held: --no-lock, none possible here, or a peer finished while we waited
            return
        held._lost = lock.lost
        try:
            yield held
        finally:
            lock.release(forget=gone is not None and _asks(gone))

    def _warn_once(self, unusable: Unusable) -> None:
        # Once per kind: a repo of a thousand trees on sshfs should say it once, not a thousand times.
        with self._guard:
            if unusable.kind in self._warned:
                return
            self._warned.add(unusable.kind)
        _log.logger().warning("%s", unusable.message)
