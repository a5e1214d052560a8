"""Per-tree install locks on the shared volume.

The lock is filelock's ``SoftReadWriteLock`` write lock. Its state is a log of immutable snapshots committed
with no-replace hard links, and a holder record whose nonce a heartbeat thread rewrites; a waiter evicts a
holder whose record has not changed for the stale threshold on the waiter's own monotonic clock, so clock
skew between pods cannot matter. It takes over with link and rename alone, which is why it works on NFS and
CephFS, whose kernel clients refuse the ``renameat2`` flags ``SoftFileLease`` takes over with.

The lock only saves duplicate work: the rename that publishes a tree is the commit point, so a holder that
lost its lease (paused past the threshold) can at worst install a tree nobody uses.
"""

from __future__ import annotations

import contextlib
import json
import math
import os
import random
import stat
import threading
import time
from typing import TYPE_CHECKING, Any, NamedTuple, Protocol

from .. import _log, _stop
from .._errors import InstallError, LockTimeout, RepoinstallError
from .._options import LockSettings
from . import fs as _fs
from .layout import OWNER_SUFFIX
from .lockformat import lock_name, state_name

if TYPE_CHECKING:
    from collections.abc import Callable, Iterator

    from filelock import SoftReadWriteLock

    from .identity import TreeId
    from .layout import Layout

#: A waiter looks (is the holder's note still there?) first after _LOOK_FIRST seconds, then at intervals that grow
#: by _LOOK_GROWTH up to _LOOK_MAX, each shortened by up to a quarter at random so a fleet that started together
#: spreads out. A look is one or two metadata operations on NFS: a fleet of waiters costs the server about one op
#: per pod per second, and each notices a publish (or a release) within _LOOK_MAX.
_LOOK_FIRST, _LOOK_GROWTH, _LOOK_MAX = 0.1, 1.5, 2.5
#: Every this many looks, a waiter also looks at the tree itself (a pod without the lock may have published it).
_TREE_EVERY = 8
#: A holder touches its owner note this many times a heartbeat, and a waiter reads the touch as often: while the
#: note's mtime moves the holder is alive, and the waiter leaves filelock's lock alone (an attempt reads the
#: lock's log: dozens of metadata operations on NFS). Once the mtime has not moved for two touches, the waiter
#: tries the lock once a quarter heartbeat, so filelock sees a dead holder's record from then on.
_BEATS = 4
#: The shortest gap between two attempts on the lock while no holder's note is seen.
_RETRY = 0.25
#: A waiter says it still waits this often (what ``kubectl logs`` shows of a pod waiting on a peer's install).
_SAY_EVERY = 30.0


class Clock(Protocol):
    """Monotonic time and sleeping, injectable so the wait strategy can be tested without waiting."""

    def now(self) -> float: ...

    def sleep(self, seconds: float) -> None: ...


class _SystemClock:
    def now(self) -> float:
        return time.monotonic()

    def sleep(self, seconds: float) -> None:
        _stop.sleep(seconds)  # a wait ends (Interrupted) as soon as this thread's batch or the process stops


SYSTEM_CLOCK: Clock = _SystemClock()


class Contender(Protocol):
    """One lock as a waiter sees it: one attempt that never waits, the holder's note, who holds it."""

    path: str

    def attempt(self) -> bool: ...

    def note_seen(self) -> bool: ...

    def note_beat(self) -> int | None: ...

    def holder(self) -> str: ...


def wait_and_take(
    lock: Contender,
    settings: LockSettings,
    *,
    ready: Callable[[], bool] | None = None,
    clock: Clock = SYSTEM_CLOCK,
    announce: bool = True,
    jitter: Callable[[], float] = random.random,
) -> bool:
    """Take the lock, waiting up to the wait timeout: ``True`` once taken, ``False`` if ``ready()`` came true while
    waiting (a peer finished: the lock is not taken); :class:`LockTimeout` after the wait timeout.

    The lock is tried at once unless a holder's note is there. While it is, the waiter looks at the note, backing
    off to one look every _LOOK_MAX seconds (one metadata operation on NFS), and reads the note's mtime _BEATS
    times a heartbeat: while the holder keeps touching it, the waiter does not try the lock; once the touches stop
    for two beats (a dead or paused holder, or one of a version that does not touch), it tries the lock every
    _BEATS-th of a heartbeat until filelock has seen the holder's record unchanged for the stale threshold. It
    tries at once when the note goes (the holder released: published, or failed), and looks at the tree
    (``ready``) then and every _TREE_EVERY looks. So a dead holder is taken over within the stale threshold plus
    about one heartbeat of its death, a finished peer's tree ends the wait within about _LOOK_MAX, and a fleet of
    waiters costs the server under one metadata operation per pod per second. The lock only saves duplicate
    work: the rename is the commit point.
    """
    started = clock.now()
    deadline = started + settings.wait_timeout
    beat_every = settings.heartbeat / _BEATS
    # A note means a live holder (or a dead one, which takes the stale threshold anyway): no attempt yet.
    defer = settings.wait_timeout > beat_every and lock.note_seen()
    next_try = math.inf if defer else started
    beat, beat_moved, next_beat = lock.note_beat() if defer else None, started, started + beat_every
    interval = _LOOK_FIRST
    looks = 0
    last_try = -_RETRY
    logged, said = False, started
    while True:
        if clock.now() >= next_try:
            if lock.attempt():
                return True
            last_try = clock.now()
            suspect = lock.note_seen() and clock.now() - beat_moved > 2 * beat_every
            next_try = last_try + (beat_every if suspect else math.inf if lock.note_seen() else max(_RETRY, interval))
        if announce and not logged:
            _log.logger().info("waiting for %s: %s", lock.path, lock.holder())
            logged, said = True, clock.now()
        elif announce and clock.now() - said >= _SAY_EVERY:
            waited = clock.now() - started
            _log.logger().info("still waiting for %s after %.0fs: %s", lock.path, waited, lock.holder())
            said = clock.now()
        if clock.now() >= deadline:
            raise LockTimeout(f"gave up after {settings.wait_timeout:g}s waiting for {lock.path}: {lock.holder()}")
        clock.sleep(max(0.0, min(interval * (1 - jitter() / 4), next_beat - clock.now(), deadline - clock.now())))
        interval = min(_LOOK_MAX, interval * _LOOK_GROWTH)
        looks += 1
        released = not lock.note_seen()
        if ready is not None and (released or looks % _TREE_EVERY == 0) and ready():
            return False
        if released:
            next_try = min(next_try, max(clock.now(), last_try + _RETRY))
        if clock.now() >= next_beat:
            next_beat = clock.now() + beat_every
            if not released and (seen := lock.note_beat()) != beat:
                beat, beat_moved = seen, clock.now()
            elif not released and clock.now() - beat_moved > 2 * beat_every:
                next_try = min(next_try, clock.now())  # the touches stopped: let filelock judge the holder


class _Unreadable(Exception):
    """filelock could not read the lock's state (its error is the cause)."""


class FileTreeLock:
    """The write lock of one tree, plus an owner note (host, pid, since, and ``note``: the tree as its holder spells
    it) so waiters can say who they wait for.

    Takes ownership of ``directory_fd`` (the lock directory ``parts`` of ``layout``): :meth:`release` or
    :meth:`close` closes it.
    """

    def __init__(
        self,
        layout: Layout,
        parts: tuple[str, ...],
        directory_fd: int,
        leaf: str,
        settings: LockSettings,
        what: str = "",
        note: dict[str, str] | None = None,
    ) -> None:
        self.what = what or leaf
        self.lost = threading.Event()
        self._layout = layout
        self._parts = parts
        self._dir_fd = directory_fd
        self._leaf = leaf
        self._owner_name = leaf + OWNER_SUFFIX
        self._settings = settings
        self._extra_note = note or {}
        self.path = os.path.join(layout.path(*parts), lock_name(leaf))
        #: Set while a holder takes its lock's state away (see :meth:`release`): a loss seen then is its own doing.
        self._retiring = False
        self._soft: SoftReadWriteLock | None = None
        self._watch = _fs.DirWatch()
        self._note: bool | None = None
        self._stop_touching = threading.Event()
        self._toucher: threading.Thread | None = None

    @property
    def _lock(self) -> SoftReadWriteLock:
        """filelock's lock, made at the first attempt: a waiter whose peer finishes first never loads filelock."""
        if self._soft is None:
            from filelock import SoftReadWriteLock

            self._soft = SoftReadWriteLock(
                self.path,
                heartbeat_interval=self._settings.heartbeat,
                stale_threshold=self._settings.stale_after,
                poll_interval=min(0.25, self._settings.heartbeat / 2),
                is_singleton=False,
                on_compromise=self._on_compromise,
            )
        return self._soft

    def _on_compromise(self, compromise: Any) -> None:
        # Runs on the heartbeat thread. From here on a peer may hold the lock: never publish over anything.
        self.lost.set()
        if self._retiring:
            _log.logger().debug("%s: its state was set aside by its holder (%s)", self.path, compromise.reason)
            return
        _log.logger().warning(
            "lost the lock %s (%s); will not publish over a peer's tree", self.path, compromise.reason
        )

    def take(
        self, *, ready: Callable[[], bool] | None = None, clock: Clock = SYSTEM_CLOCK, announce: bool = True
    ) -> bool | Unusable:
        """Wait for the lock and take it: ``True`` if taken (release it), ``False`` if ``ready()`` came true first,
        or why this lock cannot be used (its state belongs to another UID); :class:`LockTimeout` if the wait
        timed out. Unless taken, the lock is closed."""
        try:
            taken = wait_and_take(self, self._settings, ready=ready, clock=clock, announce=announce)
        except (PermissionError, _Unreadable) as error:
            owner = foreign_owner(self._dir_fd, self._leaf)  # another UID made it between our look and our acquire
            self.close()
            if owner is not None:
                return foreign_lock(self.what, owner)
            if isinstance(error, PermissionError):
                raise
            raise InstallError(
                f"lock {self.path} is unreadable ({error.__cause__}); if no installer is running, remove "
                f"{os.path.join(os.path.dirname(self.path), state_name(self._leaf))}"
            ) from None
        except BaseException:
            self.close()
            raise
        if not taken:
            self.close()
            return False
        try:
            note = {"host": os.uname().nodename, "pid": os.getpid(), "since": time.time(), **self._extra_note}
            _fs.write_atomic(self._dir_fd, self._owner_name, json.dumps(note).encode())
        except OSError:
            pass  # the note tells humans who holds it and waiters when it goes; the lock itself is held
        self._toucher = threading.Thread(target=self._touching, name=f"touch {self.path}", daemon=True)
        self._toucher.start()
        return True

    def _touching(self) -> None:
        # The note's mtime says "alive" to waiters for the price of one small read a beat (see wait_and_take);
        # filelock's own heartbeat stays what decides a takeover.
        while not self._stop_touching.wait(self._settings.heartbeat / _BEATS) and not self.lost.is_set():
            with contextlib.suppress(OSError):
                os.utime(self._owner_name, dir_fd=self._dir_fd, follow_symlinks=False)

    def note_beat(self) -> int | None:
        """The note's mtime as the server has it now (one GETATTR on NFS), ``None`` if there is no note."""
        return _fs.fresh_mtime_ns(self._dir_fd, self._owner_name)

    def attempt(self) -> bool:
        """One acquire that never waits: whether we hold the lock now."""
        from filelock import SoftFileLockProtocolError, Timeout

        if _fs.removed(self._dir_fd):
            # The directory was pruned since we opened it (a failing holder alone in the lock prunes it, and gc an
            # empty one). filelock works by path and would make it again; make it ourselves first (with the repo's
            # group mode) and use it, so the owner note we write once we hold the lock is where waiters look.
            self._reopen(create=True)
        try:
            self._lock.acquire_write(blocking=False)
        except Timeout:
            return False
        except SoftFileLockProtocolError as error:
            raise _Unreadable from error
        except OSError as error:
            # filelock reads a peer's records by opening them and then reading the descriptor. A peer on another
            # client that removes one in between (it released, or moved the log on) makes that read fail: ENOENT
            # on a FUSE filesystem that serves descriptors by path, ESTALE on NFS. That is a view of the lock in
            # motion, not an answer: not taken this time, and the next attempt looks again. The wait stays bounded
            # by its timeout, and the lock only saves duplicate work: the rename is the commit point.
            if not _fs.vanished(error):
                raise
            _log.logger().debug("%s: a record went away while read (%s); trying again", self.path, error)
            return False
        except RuntimeError as error:
            # filelock's TreeReplacedError (private): a file or symlink took the place of the lock's state dir
            # since open_lock looked. One spec fails with a clear line; the others go on.
            if type(error).__name__ != "TreeReplacedError":
                raise
            raise _Unreadable from error
        return True

    def note_seen(self) -> bool:
        """Whether a holder's owner note is there (a holder writes it once it has the lock, removes it on release),
        as the server says now: on NFS one GETATTR of the lock directory, and a LOOKUP only once it changed."""
        if self._watch.changed(self._dir_fd) or self._note is None:
            if self._watch.removed:
                self._reopen(create=False)  # pruned (see attempt): look where a new holder's note would be
            try:
                os.stat(self._owner_name, dir_fd=self._dir_fd, follow_symlinks=False)
                self._note = True
            except OSError:
                self._note = False
        return self._note

    def _reopen(self, *, create: bool) -> None:
        """Use the lock directory now at our path, made if ``create``; keep the removed one's descriptor if none is
        there (nothing can appear in it, so it reads as "no note")."""
        _log.logger().debug("%s: its directory was removed (or its handle went stale); looking it up again", self.path)
        root = self._layout.writable_fd() if create else self._layout.root_fd()
        if root is None:
            return
        if create:
            fd: int | None = _fs.make_dirs(root, self._parts, self._layout.root)
        else:
            fd = _fs.open_dir(root, self._parts)
        if fd is None:
            return
        os.close(self._dir_fd)
        self._dir_fd = fd
        self._watch = _fs.DirWatch()
        self._note = None

    def try_take(self) -> bool | None:
        """One attempt that never waits: ``True`` if taken, ``False`` if a peer holds it, ``None`` if this
        lock cannot be used at all (state of another UID, unreadable state). Release with :meth:`release`."""
        try:
            return self.attempt()
        except (PermissionError, _Unreadable):
            return None

    def release(self, *, forget: bool = False) -> None:
        """Let the lock go. ``forget``: what it guards does not exist (the install failed, nothing was published),
        so the lock's state is debris once we leave: take it away too if nobody else is in it, and the lock's
        directory once empty. A spec that can never be installed then leaves nothing behind, however often tried."""
        import logging

        from filelock import SoftFileLockProtocolError

        self._stop_touching.set()
        if self._toucher is not None:
            self._toucher.join()
        lost = self.lost.is_set()  # after a loss the note and the state may already be the new holder's
        forgotten = forget and not lost and self._set_aside_state()
        if not lost:
            with contextlib.suppress(OSError):
                _fs.unlink(self._dir_fd, self._owner_name)
        try:
            # With our state set aside, filelock finds nothing of ours at its path and leaves nothing to undo.
            self._lock.release(force=True)
        except (OSError, SoftFileLockProtocolError) as error:
            # Releasing only lets peers in sooner. If it fails (typically a holder resumed after a peer evicted it
            # and moved the lock's log on), what is left of our membership ages out after the stale threshold,
            # like a crashed holder's. The tree, published by rename or not at all, is unaffected.
            level = logging.DEBUG if lost or forgotten else logging.WARNING
            _log.logger().log(level, "could not release %s cleanly (%s); it expires on its own", self.path, error)
        finally:
            self.close()
            if forgotten:
                self._layout.prune(self._parts)

    def _set_aside_state(self) -> bool:
        """Take the lock's whole state into trash/ and delete it there, if we (its writer) are the only one in it.

        Invariant: we hold the write lock and the log names nobody else, and ``holders/`` holds no record but ours:
        nobody else holds it, waits in it or is joining it. While we are the log's live writer, no peer can be
        granted the lock in that log, so taking the log away (one rename) takes no peer's grant with it: a peer
        that publishes its claim after we looked finds its record gone, and filelock starts a fresh log for it,
        where it takes the lock at once, as do waiters that never joined the log (they watch our owner note). That
        is right: we published nothing, so nothing stands to be waited for. And were two holders ever to overlap,
        the tree would still be whole: the rename that publishes it is the commit point, never replaces a tree,
        and a holder that saw its lease lost publishes over nothing (see the protocol)."""
        from .lockformat import alone

        state = state_name(self._leaf)
        state_fd = _fs.open_dir(self._dir_fd, (state,))
        if state_fd is None:
            return False
        try:
            if not alone(state_fd) or self.lost.is_set():
                return False  # someone else is in it: it is theirs to use, and gc's once they are gone
        finally:
            os.close(state_fd)
        self._retiring = True  # our own heartbeat may now find its record gone: not a loss to warn about
        try:
            # Renamed into trash/ first, deleted there: the lock's path never shows a half-deleted log.
            return self._layout.discard(self._parts, state, f"lock.{self._parts[-1]}.{self._leaf}"[:120]) is not None
        except (OSError, RepoinstallError) as error:
            _log.logger().debug("could not set aside %s: %s", self.path, error)
            return False

    def close(self) -> None:
        """Give up the lock object without releasing (after an attempt that did not take it)."""
        self._stop_touching.set()
        if self._toucher is not None:
            self._toucher.join()
        if self._soft is not None:
            self._soft.close()
            self._soft = None
        if self._dir_fd >= 0:
            os.close(self._dir_fd)
            self._dir_fd = -1

    def holder(self) -> str:
        """Who holds the lock and for how long, as its owner note tells (best effort)."""
        data = _fs.read_file(self._dir_fd, (self._owner_name,))
        try:
            note = json.loads(data or b"")
            age = max(0.0, time.time() - float(note["since"]))
            return f"held by {note['host']} pid {note['pid']} for {age:.0f}s"
        except (ValueError, KeyError, TypeError):
            return "held by a peer that has not said who it is"


def _replaced(directory_fd: int, name: str) -> bool:
    """Whether something that is not a directory (a file, a symlink) sits where the lock's state dir belongs."""
    try:
        return not stat.S_ISDIR(os.stat(name, dir_fd=directory_fd, follow_symlinks=False).st_mode)
    except OSError:
        return False


def foreign_owner(directory_fd: int, leaf: str) -> int | None:
    """The UID owning the tree's lock state if it is not ours (so we cannot share it), else ``None``."""
    try:
        owner = os.stat(state_name(leaf), dir_fd=directory_fd, follow_symlinks=False).st_uid
    except OSError:
        return None
    return owner if owner != os.geteuid() else None


def links_keep_identity(directory_fd: int) -> bool:
    """Whether a hard link here names the same file (same inode) as its source.

    filelock's lock commits by hard link and confirms the commit by that identity. sshfs, for one, shows a
    link as a separate file with its own inode, so there a lock could never be taken.
    """
    source = f".link-probe.{os.getpid()}.{os.urandom(4).hex()}"
    target = source + ".linked"
    try:
        os.close(os.open(source, os.O_CREAT | os.O_EXCL | os.O_WRONLY | os.O_CLOEXEC, 0o600, dir_fd=directory_fd))
        os.link(source, target, src_dir_fd=directory_fd, dst_dir_fd=directory_fd)
        first = os.stat(source, dir_fd=directory_fd, follow_symlinks=False)
        second = os.stat(target, dir_fd=directory_fd, follow_symlinks=False)
        return (first.st_dev, first.st_ino) == (second.st_dev, second.st_ino)
    except OSError:
        return False
    finally:
        for name in (source, target):
            _fs.unlink(directory_fd, name)


class Unusable(NamedTuple):
    """Why no lock can be had for a tree here; ``kind`` tells warnings apart ("foreign" or "links")."""

    kind: str
    message: str


def foreign_lock(what: TreeId | str, owner: int) -> Unusable:
    # filelock keeps its lock state private to one UID (0600 files, 0700 dirs).
    return Unusable(
        "foreign",
        f"the lock for {what} belongs to uid {owner} and this is uid {os.geteuid()}: going on without it (safe, "
        "may duplicate work). Fix: run every pod with one runAsUser (and one fsGroup).",
    )


#: Repo root -> whether hard links there keep file identity; probed once per process.
_links_work: dict[str, bool] = {}


def open_tree_lock(layout: Layout, tid: TreeId, settings: LockSettings) -> FileTreeLock | Unusable:
    """The tree's lock, or why none can be had here: waiting for it would then fail or hang forever.

    Going on without a lock stays correct, because the rename is the commit point; it only risks duplicate work.
    The holder's note carries the version as the user spelled it: the lock's name is the canonical one.
    """
    return open_lock(layout, layout.lock_dir(tid), tid.leaf, settings, str(tid), {"version": tid.version_text})


def open_lock(
    layout: Layout,
    parts: tuple[str, ...],
    leaf: str,
    settings: LockSettings,
    what: str,
    note: dict[str, str] | None = None,
) -> FileTreeLock | Unusable:
    """The lock named ``leaf`` in the repo directory ``parts`` (for ``what``), or why none can be had here."""
    directory = _fs.make_dirs(layout.writable_fd(), parts, layout.root)
    if (owner := foreign_owner(directory, leaf)) is not None:
        os.close(directory)
        return foreign_lock(what, owner)
    if _replaced(directory, state_name(leaf)):
        os.close(directory)
        # Not ours to remove here (gc sets it aside); without the lock the install stays correct: the rename
        # is the commit point.
        return Unusable(
            "replaced",
            f"the lock state {os.path.join(layout.path(*parts), state_name(leaf))} is not a directory (a symlink "
            "or file is in the way): going on without the lock (safe, may duplicate work); `repoinstall gc` "
            "sets it aside",
        )
    if layout.root not in _links_work:
        _links_work[layout.root] = links_keep_identity(directory)
    if not _links_work[layout.root]:
        os.close(directory)
        return Unusable(
            "links",
            f"hard links on {layout.root} do not keep file identity (sshfs does this), so install locks cannot "
            "work here: going on without them (safe, may duplicate work). `repoinstall doctor` tells more.",
        )
    return FileTreeLock(layout, parts, directory, leaf, settings, what, note)


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
    """The tree locks of one repo as one process takes them: with its settings and clock, and going on without
    a lock wherever none can be had (``--no-lock``, a lock of another UID, links that lose identity, a lock
    state replaced by a file) - the one "no lock possible" path, reported once per kind of obstacle."""

    def __init__(self, layout: Layout, settings: LockSettings, clock: Clock = SYSTEM_CLOCK) -> None:
        self.layout = layout
        self.settings = settings
        self.clock = clock
        self._warned: set[str] = set()
        self._guard = threading.Lock()

    @contextlib.contextmanager
    def hold(
        self, tid: TreeId, *, ready: Callable[[], bool] | None = None, gone: Callable[[], bool] | None = None
    ) -> Iterator[Held]:
        """Hold the tree's lock for the block (or go on without one); with ``ready``, a wait ends as soon as
        ``ready()`` is true, and the block runs with ``peer_finished`` set and no lock. With ``gone``, asked as the
        block ends: if the tree does not exist then (nothing was published), the lock's state goes with the release
        unless someone else is in it (see :meth:`FileTreeLock.release`)."""
        started = self.clock.now()
        lock = open_tree_lock(self.layout, tid, self.settings) if self.settings.enabled else None
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
