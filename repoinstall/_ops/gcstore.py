"""gc of the store: a stored distribution goes only when no tree holds it, and its lock's debris once proven idle.

A stored distribution (``store/<env>/<name>/<version>-<sha16>/``) is HELD, and kept, while any of these is true:

* a tree's record names it (:mod:`repoinstall._store.held`: its ``dists`` row's name, version and sha256);
* one of its files has more than one link: a tree is made of links of the store's files, so a tree holds them
  whether or not it has a record (one published a moment ago, one whose record was lost, one being composed in
  its staging dir, one in trash/ not yet deleted);
* its directory is younger than ``max(--older-than, --stale-after)`` (by its mtime): see
  :meth:`StoreCollection.stored_dist`;
* its lock (``store-locks/<env>/<name>/<leaf>.lock``) is held, or cannot be had here: gc takes it without
  waiting before it removes anything, as it takes a tree's.

What is not held is renamed into trash/ and deleted there (:meth:`Layout.discard`), every directory opened without
following a symlink: a symlink in store/ is reported and left alone, never followed. A stray at a stored
distribution's path (a file, a FIFO: :mod:`repoinstall._store.strays`) is set aside the same way. Empty
``store/<env>/<name>/`` directories go by rmdir: a publisher that renames into one as it goes makes it again (see
:meth:`StoreCollection._empty_name`).
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable

from .. import _log
from .._disk import walk as _walk
from .._disk.layout import STORE, STORE_LOCKS
from .._disk.things import Thing, thing_at
from .._lock.key import LockKey
from .._lock.state import Part
from .._lock.state import entry as lock_entry
from .._store import digests
from .._store.held import Held, held
from .._store.identity import split_leaf, stored_lock_key
from .._store.inventory import Stored
from .sweep import Removal, Sweep, kind_at


class StoreCollection(Sweep):
    """The store's part of a gc run (see the module's docstring)."""

    #: What the records named when last read, and when (monotonic).
    _recorded: tuple[float, Held]

    def store(self) -> None:
        """Every stored distribution no tree holds (and old enough, and whose lock is free) goes."""
        try:
            recorded = held(self.layout)
        except PermissionError as error:
            _log.logger().warning(
                "left the store alone: a record cannot be read by uid %d (%s), so no stored distribution can be "
                "proven unused; run gc as the repo's owner",
                os.geteuid(),
                error.filename or error,
            )
            return
        self._recorded = (time.monotonic(), recorded)
        for env in self._subdirs((STORE,)):
            for name in self._subdirs((STORE, env)):
                with self._dir((STORE, env, name)) as directory:
                    found = [] if directory is None else _walk.entries(directory)
                for leaf, kind in found:
                    if leaf.startswith("."):
                        continue  # not the store's: nothing it makes is hidden
                    if kind != _walk.DIR:
                        self._stray((STORE, env, name), leaf)
                    elif split_leaf(leaf) is None:
                        path = self.layout.path(STORE, env, name, leaf)
                        self._leave_alone(
                            path, f"a directory in {STORE}/ that is not a stored distribution", Thing.DIRECTORY
                        )
                    elif not recorded.holds(env, name, leaf):
                        self.stored_dist(env, name, leaf)
                self._empty_name((STORE, env, name))

    def _empty_name(self, parts: tuple[str, ...]) -> None:
        """Remove ``store/<env>/<name>/`` once nothing is stored under it (what failed installs of a lock's tree left,
        one per lock, and every name whose distributions went).

        Invariant: rmdir, which removes only an empty directory and never follows a link, so a distribution a peer
        renamed in first keeps it; and a peer that made or opened it before it went, and renames into it after,
        finds it gone, makes it again and renames again (:func:`repoinstall._store.store.publish`). No lock: a
        publisher takes none to rename into it."""
        path = self.layout.path(*parts)
        if self.dry_run:
            with self._dir(parts) as directory:
                if directory is not None and not os.listdir(directory):
                    self.found.append(Removal("store", path, "empty store directory", False))
        elif self.layout.prune(parts):
            self.found.append(Removal("store", path, "empty store directory", True))

    def _stray(self, parts: tuple[str, ...], leaf: str) -> None:
        """Something not a directory in ``store/<env>/<name>/``. At a stored distribution's path it is a stray, ours
        to set aside (:mod:`repoinstall._store.strays`), once older than ``--older-than``; a symlink there, or
        anything under another name, is named with its kind and left alone."""
        with self._dir(parts) as directory:
            thing = None if directory is None else thing_at(directory, leaf)
            old = directory is not None and self._age(directory, leaf) >= self.older_than
        if thing is None or thing is Thing.DIRECTORY:
            return  # gone, or replaced by a directory since it was listed: the next gc looks again
        path = self.layout.path(*parts, leaf)
        if split_leaf(leaf) is None:
            self._leave_alone(path, f"{thing.named} in {STORE}/ that is not a stored distribution", thing)
        elif thing is Thing.SYMLINK:
            self._leave_alone(path, "a symlink where a stored distribution belongs (never followed)", thing)
        elif old:
            self._discard("stray", parts, leaf, f"{thing.named} where a stored distribution belongs: not one")

    def _subdirs(self, parts: tuple[str, ...]) -> list[str]:
        """The directories in ``parts`` (anything else among them, but hidden names, reported with its kind and
        left alone: it stands where one of the repo's directories belongs)."""
        with self._dir(parts) as directory:
            found = [] if directory is None else _walk.entries(directory)
            things = {n: thing_at(directory, n) for n, k in found if k != _walk.DIR and directory is not None}
        for name, thing in things.items():
            path = self.layout.path(*parts, name)
            if thing is Thing.SYMLINK:
                self._leave_alone(path, f"a symlink in {parts[0]}/")
            elif thing is not None and not name.startswith("."):
                self._leave_alone(path, f"{thing.named} where a repo directory belongs", thing)
        return [name for name, kind in found if kind == _walk.DIR and not name.startswith(".")]

    def stored_dist(self, env: str, name: str, leaf: str) -> None:
        """Remove ``store/<env>/<name>/<leaf>``, which no record names, unless a tree links it, it is young, or
        its lock is held. Said as a :class:`Removal` when it goes; why it stays, in the log."""
        parts = (STORE, env, name, leaf)
        path = self.layout.path(*parts)
        # Invariant: a stored distribution goes only under its lock (taken without waiting), after looking again
        # under it that no file of it is linked and no record names it. A tree composed from it holds it by its
        # links from the first one on (and by its record once published), so gc never takes what a tree holds.
        # An ensure that looked it up before we took it, and composes from it lock-free, finds it gone (compose
        # checks each stored dir is still at its path after linking it: we rename before we delete), stores it
        # again and composes anew holding the lock of every distribution of its tree, which keeps us out
        # (repoinstall._install.fill.compose): gc never fails a live ensure, at worst makes it install one again.
        # The age rule only spares that work: a batch publishes a distribution (a rename), then composes the
        # trees that use it, and between the two nothing but its age says it is wanted.
        young = max(self.older_than, self.settings.stale_after)
        why = self._held_on_disk(parts, young)
        if why is not None:
            _log.logger().info("kept %s: %s", path, why)
            return
        reason = "no tree holds it: no record names it, no tree links it"
        if self.dry_run:
            self.found.append(Removal("dist", path, reason, False))
            return

        def step() -> None:
            # Looked at again under its lock: a tree composed since the first look links it now, and one whose
            # record was written since names it (the records read again at most once a second: gc of many
            # distributions in a repo of many trees stays linear; a tree links its files before it is recorded).
            again = self._held_on_disk(parts, young)
            if again is None and self._records_now().holds(env, name, leaf):
                again = "a tree's record names it now"
            if again is not None:
                _log.logger().info("kept %s: %s", path, again)
                return
            self._discard("dist", parts[:-1], leaf, reason)
            if not self.dry_run:
                digests.forget(self.layout, Stored(env, name, leaf))  # its digest goes with it

        kept = self._with_dist_lock(stored_lock_key(env, name, leaf), step)
        if kept is not None:
            _log.logger().info("kept %s: %s", path, kept)

    def _records_now(self) -> Held:
        """What the records name, read again if the last read is more than a second old."""
        now = time.monotonic()
        if now - self._recorded[0] > 1.0:
            self._recorded = (now, held(self.layout))
        return self._recorded[1]

    def _held_on_disk(self, parts: tuple[str, ...], young: float) -> str | None:
        """Why the stored distribution at ``parts`` is held by what is on disk (``None`` if it is not): it is
        younger than ``young`` seconds, or a file of it has another link (a tree's). Its age is its directory's
        mtime: its last entry was made as it was staged, moments before the rename that published it, and nothing
        is added to a stored distribution after (an operator may set it back, as ``touch -d`` does). An mtime set
        ahead of the ctime (a clock skewed, ``touch -d`` a year on) counts from the ctime, which nobody can set:
        else it would be kept until that date."""
        with self._dir(parts) as directory:
            if directory is None:  # gone, or not readable by this UID (said so, once, as left alone)
                return "gone already" if self.layout.path(*parts) not in self._left_alone else "not readable here"
            info = os.fstat(directory)
            age = self.now - min(info.st_mtime, info.st_ctime)
            if age < young:
                return f"stored {max(age, 0):.0f}s ago (younger than {young:g}s: a batch may be composing trees of it)"
            try:
                return _linked(directory)
            except PermissionError:  # a directory in it this UID may not read: nothing proven, nothing taken
                why = f"a directory in it cannot be read by uid {os.geteuid()}"
                self._leave_alone(self.layout.path(*parts), why, Thing.DIRECTORY)
                return why

    def _with_dist_lock(self, key: LockKey, step: Callable[[], None]) -> str | None:
        """Run ``step`` holding the stored distribution's lock, taken without waiting: ``None`` once it ran, else
        why not (a peer holds it, or no lock can be had here). Without locking (``--no-lock``), just run it."""
        from .._lock.locks import take_and_run

        # Nobody else in it: its state is debris once we leave.
        taken = take_and_run(self.layout, key, self.settings, step, lambda: True)
        if taken.held:
            return None
        if taken.without is None:
            return f"in use: its lock is {taken.holder}"
        return _DIST_LOCK_UNUSABLE.get(taken.without.kind, f"no lock can be had for it here ({taken.without.kind})")

    def store_lock_debris(self) -> None:
        """What is left in ``store-locks/``: a lock's state once everyone who was in it is proven gone (as for a
        tree's lock: nothing in it renewed for the stale threshold, every declared lease and ``--older-than``), an
        owner note whose lock state is gone, a crashed write's temporary file, and empty lock directories."""
        unreadable = 0
        for env in self._subdirs((STORE_LOCKS,)):
            for name in self._subdirs((STORE_LOCKS, env)):
                parts = (STORE_LOCKS, env, name)
                with self._dir(parts) as directory:
                    if directory is not None:
                        unreadable += self._lock_dir(parts, directory)
                path = self.layout.path(*parts)
                if self.dry_run:
                    with self._dir(parts) as directory:
                        if directory is not None and not os.listdir(directory):
                            self.found.append(Removal("lock", path, "empty lock directory", False))
                elif self.layout.prune(parts):
                    self.found.append(Removal("lock", path, "empty lock directory", True))
        if unreadable:
            _log.logger().warning(
                "left %d stored distribution lock state(s) alone: this is uid %d, which cannot read them",
                unreadable,
                os.geteuid(),
            )

    def _lock_dir(self, parts: tuple[str, ...], directory: int) -> int:
        """The debris in one ``store-locks/<env>/<name>/``; how many lock states could not be read."""
        unreadable = 0
        names = {entry for entry, _ in _walk.entries(directory)}
        for entry in sorted(names):
            old = self._age(directory, entry) >= self.older_than
            of_lock = lock_entry(entry)
            if of_lock is not None and of_lock.part is Part.STATE:
                note = of_lock.files.note
                if kind_at(directory, entry) != _walk.DIR:
                    if old:
                        self._discard("lock", parts, entry, "not a lock's state directory")
                    continue
                try:
                    gone_for, _ = self._participants(directory, entry, note)
                except PermissionError:
                    unreadable += 1
                    continue
                if gone_for is None:
                    continue
                reason = f"lock state of a stored distribution: nobody in it for {gone_for:.0f}s"
                self._discard("lock", parts, entry, reason)
                if note in names:
                    self._discard("note", parts, note, "owner note of a holder proven gone")
            elif of_lock is not None and of_lock.part is Part.NOTE:
                stale = self._age(directory, entry) >= max(self.older_than, self.settings.stale_after)
                if of_lock.files.state not in names and stale:
                    self._discard("note", parts, entry, "owner note of a lock with no state")
            elif of_lock is not None and of_lock.part is Part.STRAY and old:
                # Nothing of a lock lives at <leaf>.lock (filelock keeps its state beside it): whatever is there
                # (a directory, a file, a link) is nobody's, and would keep the lock directory for good.
                thing = thing_at(directory, entry)
                what = thing.named if thing is not None else "something"
                where = of_lock.files.state
                self._discard("lock", parts, entry, f"{what} where no lock keeps anything (its state is in {where}/)")
            elif entry.startswith(".") and entry.endswith(".tmp") and old:
                self._discard("temp", parts, entry, "temporary file of an interrupted write")
        return unreadable


#: Said of a stored distribution whose lock (a :class:`repoinstall._lock.taken.Unusable` of this kind) cannot be had.
_DIST_LOCK_UNUSABLE = {
    "directory": "a symlink or file is where its lock directory belongs",
    "unreadable": "its lock cannot be read by this uid",
}


def _linked(directory: int) -> str | None:
    """Why a tree holds the stored distribution open at ``directory``: a file of it with more than one link (the
    store's own and a tree's), else ``None``. Nothing is followed; only regular files are looked at."""
    for entry in _walk.walk(directory):
        if entry.kind != _walk.FILE:
            continue
        try:
            links = os.stat(entry.name, dir_fd=entry.dir_fd, follow_symlinks=False).st_nlink
        except FileNotFoundError:
            continue
        if links > 1:
            return f"linked elsewhere ({entry.path} has {links} links: a tree's, or one made outside the repo)"
    return None
