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
import stat
import threading
import time
from typing import TYPE_CHECKING, Any, NamedTuple, Protocol

from . import _fs, _log
from ._errors import ForeignLock, InstallError, LockTimeout
from ._layout import OWNER_SUFFIX
from ._lockformat import lock_name, state_name
from ._options import LockSettings

if TYPE_CHECKING:
    from collections.abc import Callable

    from filelock import SoftReadWriteLock

    from ._identity import TreeId
    from ._layout import Layout

#: A waiter looks at the holder's note (and, with a ``ready`` check, at the tree: a few opens) every _LOOK
#: seconds, and tries the lock, a few writes on the volume, only now and then: see FileTreeLock._wait_and_take.
_LOOK = 0.1
#: The shortest gap between two attempts on the lock while no holder's note is seen.
_RETRY = 0.25


class PeerFinished(Exception):
    """Raised by ``__enter__`` when the ``ready`` check came true while we waited: a peer did the work."""


class _Unreadable(Exception):
    """filelock could not read the lock's state (its error is the cause)."""


class TreeLock(Protocol):
    waited: bool
    lost: threading.Event

    def __enter__(self) -> TreeLock: ...

    def __exit__(self, *exc: object) -> None: ...


class NoLock:
    """``--no-lock``: no lock files at all. Staging and the atomic rename still keep every tree whole."""

    def __init__(self) -> None:
        self.waited = False
        self.lost = threading.Event()

    def __enter__(self) -> NoLock:
        return self

    def __exit__(self, *exc: object) -> None:
        return None


class FileTreeLock:
    """The write lock of one tree, plus an owner note (host, pid, since) so waiters can say who they wait for.

    Takes ownership of ``directory_fd`` (the lock directory) and closes it when the lock is done with.
    """

    def __init__(
        self,
        directory_fd: int,
        directory: str,
        leaf: str,
        settings: LockSettings,
        *,
        announce: bool = True,
        ready: Callable[[], bool] | None = None,
    ) -> None:
        self.waited = False
        self._ready = ready
        self.lost = threading.Event()
        self._dir_fd = directory_fd
        self._leaf = leaf
        self._owner_name = leaf + OWNER_SUFFIX
        self._settings = settings
        self._announce = announce
        self.path = os.path.join(directory, lock_name(leaf))
        self._soft: SoftReadWriteLock | None = None

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
        _log.logger().warning(
            "lost the lock %s (%s); will not publish over a peer's tree", self.path, compromise.reason
        )

    def __enter__(self) -> FileTreeLock:
        try:
            self._acquire()
        except BaseException:
            self._close()
            raise
        return self

    def _acquire(self) -> None:
        try:
            self._wait_and_take()
        except PermissionError:
            if (owner := foreign_owner(self._dir_fd, self._leaf)) is not None:
                raise ForeignLock(owner) from None
            raise
        except _Unreadable as error:
            if (owner := foreign_owner(self._dir_fd, self._leaf)) is not None:
                raise ForeignLock(owner) from None
            raise InstallError(
                f"lock {self.path} is unreadable ({error.__cause__}); if no installer is running, remove "
                f"{os.path.join(os.path.dirname(self.path), state_name(self._leaf))}"
            ) from None

    def _attempt(self) -> bool:
        """One acquire that never waits: whether we hold the lock now."""
        from filelock import SoftFileLockProtocolError, Timeout

        try:
            self._lock.acquire_write(blocking=False)
        except Timeout:
            return False
        except SoftFileLockProtocolError as error:
            raise _Unreadable from error
        except RuntimeError as error:
            # filelock's TreeReplacedError (private): a file or symlink took the place of the lock's state dir
            # since open_lock looked. One spec fails with a clear line; the others go on.
            if type(error).__name__ != "TreeReplacedError":
                raise
            raise _Unreadable from error
        return True

    def _wait_and_take(self) -> None:
        """Take the lock, waiting up to the wait timeout; with ``ready``, end early when the tree is there.

        The lock is tried at once unless a holder's note is there. While it is, the waiter only looks at the note
        (and the tree), and tries the lock after half a heartbeat and then every quarter heartbeat (to see a dead
        holder's record go stale), or at once when the note goes (the holder released). So a dead holder is taken
        over within the stale threshold plus one heartbeat of its death, a finished peer's tree ends the wait
        within _LOOK, and waiters neither read the lock's log every poll nor queue for the lock after the
        publish. The lock only saves duplicate work: the rename is the commit point.
        """
        started = time.monotonic()
        deadline = started + self._settings.wait_timeout
        quarter = self._settings.heartbeat / 4
        # A note means a live holder (or a dead one, which takes the stale threshold anyway): no attempt yet.
        defer = self._settings.wait_timeout > 2 * quarter and self._note_seen()
        next_try = started + 2 * quarter if defer else started
        last_try = -math.inf
        logged = False
        while True:
            now = time.monotonic()
            if now >= next_try or (now - last_try >= _RETRY and not self._note_seen()):
                if self._attempt():
                    break
                last_try = time.monotonic()
                next_try = last_try + quarter
            self.waited = True
            if not logged and self._announce:
                _log.logger().info("waiting for %s: %s", self.path, self.holder())
                logged = True
            if time.monotonic() >= deadline:
                raise LockTimeout(
                    f"gave up after {self._settings.wait_timeout:g}s waiting for {self.path}: {self.holder()}"
                ) from None
            time.sleep(max(0.0, min(_LOOK, deadline - time.monotonic())))
            if self._ready is not None and self._ready():
                raise PeerFinished
        try:
            note = {"host": os.uname().nodename, "pid": os.getpid(), "since": time.time()}
            _fs.write_atomic(self._dir_fd, self._owner_name, json.dumps(note).encode())
        except OSError:
            pass  # the note tells humans who holds it and waiters when it goes; the lock itself is held

    def _note_seen(self) -> bool:
        """Whether a holder's owner note is there (a holder writes it once it has the lock, removes it on release)."""
        try:
            os.stat(self._owner_name, dir_fd=self._dir_fd, follow_symlinks=False)
        except OSError:
            return False
        return True

    def try_take(self) -> bool | None:
        """One attempt that never waits: ``True`` if taken, ``False`` if a peer holds it, ``None`` if this
        lock cannot be used at all (state of another UID, unreadable state). Release with ``__exit__``."""
        try:
            return self._attempt()
        except (PermissionError, _Unreadable):
            return None

    def __exit__(self, *exc: object) -> None:
        import logging

        from filelock import SoftFileLockProtocolError

        if not self.lost.is_set():  # after a loss the note may already be the new holder's
            with contextlib.suppress(OSError):
                _fs.unlink(self._dir_fd, self._owner_name)
        try:
            self._lock.release(force=True)
        except (OSError, SoftFileLockProtocolError) as error:
            # Releasing only lets peers in sooner. If it fails (typically a holder resumed after a peer evicted it
            # and moved the lock's log on), what is left of our membership ages out after the stale threshold,
            # like a crashed holder's. The tree, published by rename or not at all, is unaffected.
            level = logging.DEBUG if self.lost.is_set() else logging.WARNING
            _log.logger().log(level, "could not release %s cleanly (%s); it expires on its own", self.path, error)
        finally:
            self._close()

    def close(self) -> None:
        """Give up the lock object without releasing (after a ``try_take`` that did not take it)."""
        self._close()

    def _close(self) -> None:
        if self._soft is not None:
            self._soft.close()
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


def open_tree_lock(
    layout: Layout,
    tid: TreeId,
    settings: LockSettings,
    *,
    announce: bool = True,
    ready: Callable[[], bool] | None = None,
) -> FileTreeLock | Unusable:
    """The tree's lock, or why none can be had here: waiting for it would then fail or hang forever.

    With ``ready``, a wait ends with :class:`PeerFinished` as soon as ``ready()`` is true (the tree is there).
    Going on without a lock stays correct, because the rename is the commit point; it only risks duplicate work.
    """
    return open_lock(layout, layout.lock_dir(tid), tid.leaf, settings, str(tid), announce=announce, ready=ready)


def open_lock(
    layout: Layout,
    parts: tuple[str, ...],
    leaf: str,
    settings: LockSettings,
    what: str,
    *,
    announce: bool = True,
    ready: Callable[[], bool] | None = None,
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
    return FileTreeLock(directory, layout.path(*parts), leaf, settings, announce=announce, ready=ready)
