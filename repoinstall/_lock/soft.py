"""One lock on the shared volume, as a holder and a waiter use it: filelock's soft read-write lock, plus the owner
note that says who holds it (touched while held, so waiters see the holder alive), the attempt that never waits,
and the release that takes a failed holder's state away with it.

The lock is filelock's ``SoftReadWriteLock`` write lock. Its state is a log of immutable snapshots committed
with no-replace hard links, and a holder record whose nonce a heartbeat thread rewrites; a waiter evicts a
holder whose record has not changed for the stale threshold on the waiter's own monotonic clock, so clock
skew between pods cannot matter. It takes over with link and rename alone, which is why it works on NFS and
CephFS, whose kernel clients refuse the ``renameat2`` flags ``SoftFileLease`` takes over with.

The lock only saves duplicate work: the rename that publishes a tree is the commit point, so a holder that
lost its lease (paused past the threshold) can at worst install a tree nobody uses.

What it locks is a :class:`~repoinstall._lock.key.LockKey` (a tree's, or anything else's): where the lock's
files go, how messages name the thing, the version its owner note carries.
"""

from __future__ import annotations

import contextlib
import json
import os
import threading
import time
from typing import TYPE_CHECKING

from .. import _log
from .._disk import fs as _fs
from .._disk.layout import OWNER_SUFFIX
from .._errors import InstallError, RepoinstallError
from .._options import LockSettings
from .filelock_rw import RwLock, Unreadable, alone, foreign_owner, lock_name, state_name
from .obstacles import foreign_lock
from .taken import HELD, NOT_TAKEN, Taken, Unusable, without
from .wait import _BEATS, SYSTEM_CLOCK, Clock, wait_and_take

if TYPE_CHECKING:
    from collections.abc import Callable

    from .._disk.layout import Layout
    from .key import LockKey


class FileTreeLock:
    """The write lock of one tree (or of any :class:`LockKey`), plus an owner note (host, pid, since, and
    ``version``: the tree's version as its holder spells it, when the key has one) so waiters can say who they wait
    for.

    Takes ownership of ``directory_fd`` (the lock directory ``key.parts`` of ``layout``): :meth:`release` or
    :meth:`close` closes it.
    """

    def __init__(self, layout: Layout, key: LockKey, directory_fd: int, settings: LockSettings) -> None:
        self.what = key.what or key.leaf
        self.lost = threading.Event()
        self._layout = layout
        self._parts = key.parts
        self._dir_fd = directory_fd
        self._leaf = key.leaf
        self._owner_name = key.leaf + OWNER_SUFFIX
        self._settings = settings
        self._extra_note = {"version": key.version_text} if key.version_text is not None else {}
        self.path = os.path.join(layout.path(*key.parts), lock_name(key.leaf))
        #: Set while a holder takes its lock's state away (see :meth:`release`): a loss seen then is its own doing.
        self._retiring = False
        self._rw = RwLock(self.path, settings, self._on_lost)
        self._watch = _fs.DirWatch()
        self._note: bool | None = None
        self._stop_touching = threading.Event()
        self._toucher: threading.Thread | None = None

    def _on_lost(self, reason: str) -> None:
        # Runs on the heartbeat thread. From here on a peer may hold the lock: never publish over anything.
        self.lost.set()
        if self._retiring:
            _log.logger().debug("%s: its state was set aside by its holder (%s)", self.path, reason)
            return
        _log.logger().warning("lost the lock %s (%s); will not publish over a peer's tree", self.path, reason)

    def take(
        self, *, ready: Callable[[], bool] | None = None, clock: Clock = SYSTEM_CLOCK, announce: bool = True
    ) -> Taken:
        """Wait for the lock and take it: held (release it), a peer finished if ``ready()`` came true first, or not
        taken because this lock cannot be used (its state belongs to another UID); :class:`LockTimeout` if the wait
        timed out. Unless held, the lock is closed."""
        try:
            taken = wait_and_take(self, self._settings, ready=ready, clock=clock, announce=announce)
        except (PermissionError, Unreadable) as error:
            owner = foreign_owner(self._dir_fd, self._leaf)  # another UID made it between our look and our acquire
            self.close()
            if owner is not None:
                return without(foreign_lock(self.what, owner))
            if isinstance(error, PermissionError):
                raise
            raise InstallError(
                f"lock {self.path} is unreadable ({error.__cause__}); if no installer is running, remove "
                f"{os.path.join(os.path.dirname(self.path), state_name(self._leaf))}"
            ) from None
        except BaseException:
            self.close()
            raise
        if not taken.held:
            self.close()
            return taken
        try:
            note = {"host": os.uname().nodename, "pid": os.getpid(), "since": time.time(), **self._extra_note}
            _fs.write_atomic(self._dir_fd, self._owner_name, json.dumps(note).encode())
        except OSError:
            pass  # the note tells humans who holds it and waiters when it goes; the lock itself is held
        self._toucher = threading.Thread(target=self._touching, name=f"touch {self.path}", daemon=True)
        self._toucher.start()
        return taken

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
        if _fs.removed(self._dir_fd):
            # The directory was pruned since we opened it (a failing holder alone in the lock prunes it, and gc an
            # empty one). filelock works by path and would make it again; make it ourselves first (with the repo's
            # group mode) and use it, so the owner note we write once we hold the lock is where waiters look.
            self._reopen(create=True)
        return self._rw.attempt()

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

    def try_take(self) -> Taken:
        """One attempt that never waits: held (release with :meth:`release`), or not taken: a peer holds it
        (:meth:`holder` says who), or this lock cannot be used at all (state of another UID, unreadable state).
        Unless held, :meth:`close` it."""
        try:
            return HELD if self.attempt() else NOT_TAKEN
        except (PermissionError, Unreadable):
            return without(Unusable("unreadable", f"the lock {self.path} cannot be read by uid {os.geteuid()}"))

    def release(self, *, forget: bool = False) -> None:
        """Let the lock go. ``forget``: what it guards does not exist (the install failed, nothing was published),
        so the lock's state is debris once we leave: take it away too if nobody else is in it, and the lock's
        directory once empty. A spec that can never be installed then leaves nothing behind, however often tried."""
        import logging

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
            self._rw.release()
        except (OSError, Unreadable) as error:
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
        self._rw.close()
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
