"""The locks of one repo as one process takes them: open a thing's lock on the shared volume (or say why none can
be had here), and hold it for a block (:meth:`TreeLocks.hold`), going on without a lock wherever none can be had
and reporting each kind of obstacle once, whichever thread meets it; or, as gc does, take it without waiting and
run one step holding it (:func:`take_and_run`).

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
from .._disk import fs as _fs
from .._errors import RepoinstallError, RepoUnusable
from .._options import LockSettings
from .obstacles import obstacle
from .soft import FileTreeLock
from .taken import HELD, NOT_TAKEN, Taken, Unusable, busy, without
from .wait import SYSTEM_CLOCK, Clock

if TYPE_CHECKING:
    from collections.abc import Callable, Iterator

    from .._disk.layout import Layout
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
    """What holding a lock for a block came to, read by the protocol (nothing calls back into it).

    ``taken``: held, a peer finished (what the lock guards appeared while we waited, so it was not taken), or not
    taken (``--no-lock``, or ``taken.without`` says why no lock can be had here although locking is on).
    ``waited``: seconds spent getting here. ``lease_lost``: the heartbeat saw a peer evict us; from then on never
    publish over anything.
    """

    __slots__ = ("_lost", "taken", "waited")

    def __init__(self, waited: float, taken: Taken = NOT_TAKEN) -> None:
        self.waited = waited
        self.taken = taken
        self._lost: threading.Event | None = None

    @property
    def peer_finished(self) -> bool:
        return self.taken.peer_finished

    @property
    def without(self) -> Unusable | None:
        return self.taken.without

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
        if isinstance(lock, FileTreeLock):
            taken = lock.take(ready=ready, clock=self.clock)
        else:
            taken = NOT_TAKEN if lock is None else without(lock)
        held = Held(self.clock.now() - started, taken)
        if taken.without is not None:
            self._warn_once(taken.without)
        if not taken.held or not isinstance(lock, FileTreeLock):
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
        _log.emit("lock.unusable", "%s", unusable.message, level=30)


def take_and_run(
    layout: Layout, key: LockKey, settings: LockSettings, step: Callable[[], None], gone: Callable[[], bool]
) -> Taken:
    """gc's way with a lock: take the lock of ``key`` without waiting, run ``step`` holding it, and let it go; the
    lock's state goes with the release if ``gone()`` (asked as the step ends) says what it guards does not exist,
    unless someone else is in it (see :meth:`FileTreeLock.release`). Held once ``step`` ran; else not taken: a peer
    holds it (``holder`` says who), or why no lock can be had here. With locking off (``--no-lock``) ``step`` runs
    without one, as every command then does, and counts as held.

    Invariant: ``step`` looks again, under the lock, at what it removes before removing it. gc decided from a look
    taken without the lock; a peer (an installer, a repair, a compose from the store) that took the lock since
    may have made it wanted again, and holding the lock keeps every such peer out until the removal is done.
    Never waiting keeps gc from queueing behind an install: what is busy now is looked at again next run."""
    if not settings.enabled:
        step()
        return HELD
    try:
        lock = open_lock(layout, key, settings)
    except RepoUnusable:
        return without(Unusable("directory", "a symlink or file is where its lock directory belongs"))
    if isinstance(lock, Unusable):
        return without(lock)
    taken = lock.try_take()
    if not taken.held:
        if taken.without is None:
            taken = busy(lock.holder())
        lock.close()
        return taken
    try:
        step()
    finally:
        lock.release(forget=_asks(gone))
    return taken
