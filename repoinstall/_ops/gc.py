"""Garbage collection: crashed installers' staging dirs, lock debris, trash, stored distributions no tree holds,
and (on request) unused trees.

Every listing and removal goes through directory descriptors opened without following symlinks (see
:mod:`repoinstall._disk.walk`), and every removal first renames its victim into ``trash/`` and deletes it there
(:meth:`Layout.discard`). So gc never leaves the repo: a symlink where one of the repo's own directories
belongs is reported and left alone, and one among debris is removed as a link. And it never empties anything
published: a path a peer renames into ``trees/`` is not in ``trash/``, and deleting only ever runs in ``trash/``.

Every removal is safe against a concurrent ``ensure``, locked or not:

* a staging dir is removed only once its owner is proven gone: its process no longer runs (same boot and pid
  namespace), or its heartbeat stopped for the stale threshold (any other pod or node). A live ``--no-lock``
  install is protected like a locked one. An install whose staging dir was taken anyway (paused past the
  threshold) fails cleanly: it publishes by path, and the path is gone;
* a tree is unpublished by removing its record first, then renaming the tree into ``trash/``, so a concurrent
  ``ensure`` sees it missing (and reinstalls), never half-deleted; a symlink on a tree's path is reported and
  left alone, its record with it; a tree whose lock is held, or that a process on this host uses (its working
  directory, an open or mapped file, its PYTHONPATH or command line: :mod:`repoinstall._ops.inuse`, /proc read
  once per run), is left whole;
* lock state is removed only for a tree that is installed, whose lock nobody holds or waits for, or for a tree
  that is installed or does not exist at all, once everyone who was in its lock is proven gone (nothing in the
  lock's state, its holder records included, renewed for the stale threshold); lock state filelock cannot use
  (a file where ``gen/`` or ``holders/`` belongs, a garbage log), whatever its tree, once proven gone the same way;
  an empty lock directory by rmdir. Lock state another UID made that this one cannot read is left alone, with
  one warning: nobody can be proven gone from what cannot be read;
* a stored distribution (``store/``) is removed only when no tree holds it: no record names it, no file of it
  has another link, it is older than the stale threshold, and its own lock is free (:mod:`.gcstore`); its lock
  debris in ``store-locks/`` once everyone who was in it is proven gone;
* index answers cached in ``cache/index/`` are removed once expired and idle; a reader racing the removal
  just misses and asks the index. Facts about files (their ``Requires-Python``) never expire and are kept.
  An idle cache lock's state may go too: that lock only saves requests, so at worst one is repeated.
"""

from __future__ import annotations

import os
from collections.abc import Callable

from .. import _log
from .._disk import fs as _fs
from .._disk import manifest as _manifest
from .._disk import walk as _walk
from .._disk.check import State, check, missing
from .._disk.identity import TreeId
from .._disk.layout import (
    LOCKS,
    OWNER_NOTE,
    RECORDS,
    STAGING,
    TRASH,
    TREES,
    Layout,
)
from .._lock.state import LockFiles, foreign_owner, lock_trees
from .._options import LockSettings
from .gcstore import StoreCollection
from .inuse import User, Users, scan
from .lockinfo import inspect
from .sweep import NOT_ALL_DELETED, Removal, is_empty, kind_at

__all__ = ["NOT_ALL_DELETED", "Collector", "Removal"]


class Collector(StoreCollection):
    def __init__(
        self,
        layout: Layout,
        env: str,
        settings: LockSettings,
        *,
        older_than: float,
        unused_for: float | None,
        dry_run: bool,
    ) -> None:
        super().__init__(layout, settings, older_than=older_than, dry_run=dry_run)
        self.env = env
        self.unused_for = unused_for
        #: What this host's processes use in trees/: /proc scanned once, when the first tree is to go.
        self._users: Users | None = None

    def run(self) -> list[Removal]:
        self.prepare("gc can remove nothing")
        self.trash()
        self.staging()
        self.lock_debris()
        self.temporaries()
        self.empty_lock_dirs()
        self.in_locks_way()
        self.index_cache()
        self.wheel_cache()
        self.planted_links()
        if self.unused_for is not None:
            self.unused_trees(self.unused_for)
        # After the trees: a tree that went just now holds no stored distribution any more.
        self.store()
        self.store_lock_debris()
        return self.found

    # ---- what is collected --------------------------------------------------------------------------------

    def trash(self) -> None:
        # Everything in trash/ was set aside whole by one rename; a crash may have left it undeleted. It is no
        # longer reachable by any other path, so it is deleted in place.
        with self._dir((TRASH,)) as trash:
            if trash is None:
                return
            for name, _ in _walk.entries(trash):
                if self._age(trash, name) < self.older_than:
                    continue
                path = self.layout.path(TRASH, name)
                if self.dry_run:
                    self.found.append(Removal("trash", path, "set aside earlier", False))
                    continue
                done = _walk.remove(trash, name)
                reason = "set aside earlier" if done else "could not delete all"
                if done and (busy := _walk.still_open(trash, name)):
                    reason += f"; {busy} file(s) still open on this NFS client stay as .nfs* until closed"
                self.found.append(Removal("trash", path, reason, done))

    def staging(self) -> None:
        with self._dir((STAGING,)) as staging:
            if staging is None:
                return
            for env, kind in _walk.entries(staging):
                if kind != _walk.DIR:
                    if self._age(staging, env) >= self.older_than:
                        self._discard("staging", (STAGING,), env, "not a staging directory")
                    continue
                with self._dir((STAGING, env)) as env_fd:
                    if env_fd is None:
                        continue
                    for name, what in _walk.entries(env_fd):
                        if what != _walk.DIR:
                            if self._age(env_fd, name) >= self.older_than:
                                self._discard("staging", (STAGING, env), name, "not a staging directory")
                        else:
                            self._staging_dir(env_fd, env, name)

    def _staging_dir(self, env_fd: int, env: str, name: str) -> None:
        from .._disk.owner import owner_alive

        note = _fs.read_json(env_fd, (name, OWNER_NOTE), 1 << 16)
        # The note's mtime is the owner's heartbeat (the dir's own, if it died before writing one).
        beat = min(self._age(env_fd, f"{name}/{OWNER_NOTE}") if note is not None else 1e18, self._age(env_fd, name))
        if beat < self.older_than:
            return
        host, pid = (note or {}).get("host", "?"), (note or {}).get("pid", "?")
        alive = None if note is None else owner_alive(note)
        if alive:
            _log.logger().info("kept %s: its installer (pid %s) is running", self.layout.path(STAGING, env, name), pid)
            return
        if alive is None:
            # Another pod or node (or an older release's note): only a stopped heartbeat proves it dead.
            if beat < self.settings.stale_after:
                _log.logger().info("kept %s: heartbeat %.0fs ago", self.layout.path(STAGING, env, name), beat)
                return
            reason = f"left by {host} pid {pid} (no heartbeat for {beat:.0f}s)"
        else:
            reason = f"left by {host} pid {pid} (no longer running)"
        # Renamed into trash/ first: if its owner renames its tree out at the same moment, the tree stays whole.
        self._discard("staging", (STAGING, env), name, reason)

    def lock_debris(self) -> None:
        with self._dir((LOCKS,)) as top:
            if top is None:
                return
        self._unreadable.clear()  # counted afresh if a stale handle makes the whole run go again
        for tid in lock_trees(self.layout):
            self._lock_state(tid)
        for owner, count in sorted(self._unreadable.items(), key=lambda item: -1 if item[0] is None else item[0]):
            whose = "of another user" if owner is None else f"of uid {owner}"
            _log.logger().warning(
                "left %d lock state(s) %s alone: this is uid %d, which cannot read them (filelock keeps them "
                "private), so it cannot tell whether anyone is in them. Run gc as that uid; better, run every pod "
                "with one runAsUser (and one fsGroup)",
                count,
                whose,
                os.geteuid(),
            )

    def _lock_state(self, tid: TreeId) -> None:
        parts = self.layout.lock_dir(tid)
        info = inspect(self.layout, tid, self.settings.stale_after, self.now)
        files = LockFiles(tid.leaf)
        state, note = files.state, files.note
        with self._dir(parts) as directory:
            if directory is None:
                return
            if kind_at(directory, state) not in (None, _walk.DIR):
                if self._age(directory, state) >= self.older_than:
                    self._discard("lock", parts, state, "not a lock's state directory")
                return
            try:
                gone_for, damaged = self._participants(directory, state, note)
            except PermissionError:
                # Another UID's (filelock makes its state 0700): what cannot be read proves nobody gone, so it stays,
                # its owner note with it. One warning for all of them, once gc has looked at every lock.
                owner = foreign_owner(directory, tid.leaf)
                self._unreadable[owner] = self._unreadable.get(owner, 0) + 1
                return
            noted = kind_at(directory, note) is not None
            if not info.held and noted and self._age(directory, note) >= self.older_than:
                self._discard("note", parts, note, "owner note of a lock nobody holds")
                noted = False
            idle = self._age(directory, files.activity) >= self.older_than
        tree = check(self.layout, tid).state
        if damaged is not None:
            if gone_for is None:
                _log.logger().info(
                    "kept %s (%s): not proven unused yet (something in it changed within --stale-after, a lease "
                    "declared in it or --older-than)",
                    info.path,
                    damaged,
                )
                return
            # filelock refuses a damaged state at every attempt (ensure fails, naming it), so nobody can hold it or
            # wait in it, and it would stay so forever; and nothing in it renewed for the stale threshold (and every
            # lease declared in it) proves nobody is between two steps in it either, as for any other lock: say a
            # release of filelock whose format this one misreads. Whatever its tree's state, set it aside: the next
            # ensure starts a fresh log.
            reason = f"{damaged}; nobody in it for {gone_for:.0f}s"
        elif tree is State.PRESENT and not info.held and not info.waiters and idle:
            # Installed, unheld, unwaited and idle: nobody needs this lock's state any more. One rename takes
            # the whole protocol dir away; a participant arriving later starts a fresh log (filelock allows it).
            reason = "lock state of an installed tree, idle"
        elif tree in (State.PRESENT, State.MISSING) and gone_for is not None:
            # Everyone who was in it is proven gone, as a staging dir's owner is by its heartbeat: a SIGKILLed
            # holder of a tree that never appeared, say. A participant that comes after the rename starts a fresh
            # log; one that committed in the instant between our look and the rename finds its record gone at its
            # next heartbeat (a lost lease: it publishes over nothing), so at worst a tree is installed twice,
            # never half: the rename that publishes it is the commit point.
            what = "an installed tree" if tree is State.PRESENT else "a tree never installed"
            reason = f"lock state of {what}: nobody in it for {gone_for:.0f}s"
        else:
            return
        self._discard("lock", parts, state, reason)
        if noted and gone_for is not None:  # its age counted in gone_for: no live holder touches it
            self._discard("note", parts, note, "owner note of a holder proven gone")

    def lock_debris_of(self, tid: TreeId) -> None:
        """:meth:`lock_debris` for one tree's lock: its state is set aside if nobody uses it (the tree installed,
        nobody holding or waiting, idle for ``older_than``) or everyone who was in it is proven gone (a SIGKILLed
        holder's, once nothing in it renewed for the stale threshold); never while anyone may be in it."""
        self._lock_state(tid)

    def empty_lock_dirs(self) -> None:
        """Per-name lock directories left empty (by the removals above, or by failed installs of an older release).
        rmdir refuses a directory a peer has just made a lock in, and a waiter that opened one before it went makes
        it again by its path before it takes the lock (``FileTreeLock.attempt``): safe at any age."""
        with self._dir((LOCKS,)) as top:
            envs = [] if top is None else [env for env, kind in _walk.entries(top) if kind == _walk.DIR]
        for env in envs:
            with self._dir((LOCKS, env)) as env_fd:
                names = [] if env_fd is None else [n for n, kind in _walk.entries(env_fd) if kind == _walk.DIR]
                empty = [n for n in names if env_fd is not None and is_empty(env_fd, n)]
            for name in empty:
                path = self.layout.path(LOCKS, env, name)
                if self.dry_run:
                    self.found.append(Removal("lock", path, "empty lock directory", False))
                elif self.layout.prune((LOCKS, env, name)):
                    self.found.append(Removal("lock", path, "empty lock directory", True))

    def in_locks_way(self) -> None:
        """Anything but a directory where one of ``locks/``'s own directories belongs (``locks/<env>``,
        ``locks/<env>/<name>``): named with its kind and left alone (every install that needs it refuses it, and a
        person should look at it). The store's and its locks' are named as gc walks them (:mod:`.gcstore`)."""
        from .._disk.inway import below

        for obstacle in below(self.layout, LOCKS):
            self._leave_alone(obstacle.path, obstacle.describe(), obstacle.thing)

    def temporaries(self) -> None:
        # write_atomic's temporaries (".<name>.<random>.tmp") that a crash left behind.
        for kind in (RECORDS, LOCKS):
            with self._dir((kind,)) as top:
                if top is None:
                    continue
                envs = [env for env, k in _walk.entries(top) if k == _walk.DIR]
            for env in envs:
                with self._dir((kind, env)) as env_fd:
                    projects = [] if env_fd is None else [p for p, k in _walk.entries(env_fd) if k == _walk.DIR]
                for project in projects:
                    with self._dir((kind, env, project)) as directory:
                        if directory is None:
                            continue
                        for entry, _ in _walk.entries(directory):
                            temporary = entry.startswith(".") and entry.endswith(".tmp")
                            if temporary and self._age(directory, entry) >= self.older_than:
                                self._discard(
                                    "temp", (kind, env, project), entry, "temporary file of an interrupted write"
                                )

    def index_cache(self) -> None:
        from .._index.cache import CACHE_DIR, garbage

        # The cache says what of its own is garbage; gc only removes it, the way it removes everything.
        with self._dir(CACHE_DIR) as directory:
            if directory is None:
                return
            for entry, kind, reason in garbage(directory, lambda name: self._age(directory, name) >= self.older_than):
                self._discard(kind, CACHE_DIR, entry, reason)

    def wheel_cache(self) -> None:
        from .._disk.wheelcache import CACHE_DIR, garbage

        with self._dir(CACHE_DIR) as directory:
            if directory is None:
                return
            for entry, kind, reason in garbage(directory, lambda name: self._age(directory, name) >= self.older_than):
                self._discard(kind, CACHE_DIR, entry, reason)

    def planted_links(self) -> None:
        """Symlinks in trees/ and records/ down to a tree or record (``<env>/<name>/<leaf>``): reported and left
        alone. No walk follows them, so they hide what they stand for; a person should look at them."""
        for kind in (TREES, RECORDS):
            with self._dir((kind,)) as top:
                if top is not None:
                    self._links_below(top, (kind,), levels=3)

    def _links_below(self, fd: int, parts: tuple[str, ...], levels: int) -> None:
        for name, kind in _walk.entries(fd):
            if kind == _walk.LINK:
                self._leave_alone(self.layout.path(*parts, name), f"a symlink in {parts[0]}/")
            elif kind == _walk.DIR and levels > 1:
                below = _fs.open_dir(fd, (name,))  # at most three levels: bounded, never through a link
                if below is not None:
                    try:
                        self._links_below(below, (*parts, name), levels - 1)
                    finally:
                        os.close(below)

    def _link_on_tree_path(self, tid: TreeId) -> tuple[str, ...] | None:
        """The repo path (parts) of a symlink on the way to the tree's path, the tree's own path included, if
        there is one (lstat only: nothing is followed)."""
        root = self.layout.root_fd()
        parts = (*self.layout.tree_dir(tid), tid.leaf)
        for depth in range(1, len(parts) + 1):
            kind = None if root is None else kind_at(root, "/".join(parts[:depth]))
            if kind == _walk.LINK:
                return parts[:depth]
            if kind != _walk.DIR:
                return None  # nothing (or no directory) there: nothing below it can be a link
        return None

    def unused_trees(self, unused_for: float) -> None:
        for tid in self.layout.discover(RECORDS):
            used = _manifest.last_used(self.layout, tid)
            if used is None or self.now - used < unused_for:
                continue
            kept = self.unpublish(tid, f"not ensured for {(self.now - used) / 86400:.1f} days")
            if kept is not None:
                _log.logger().info("kept %s: %s", tid, kept)

    def unpublish(self, tid: TreeId, reason: str) -> str | None:
        """Take the tree ``tid`` out of the repo (gc ``--unused-for`` and ``remove``): under its lock, its record
        first, then the tree renamed into trash/ and deleted there; or, with ``--dry-run``, only say so. ``None``
        once done (its :class:`Removal` is in :attr:`found`, unless the tree was gone already), else why the tree
        was left as it is: a peer is in its lock, no lock can be had here, or a symlink stands on its path.

        Invariant: the tree's lock, taken without waiting, keeps out every process that works on the tree (an
        install, a repair, another gc or remove), so none of them is between two of its steps while the tree goes;
        a held lock means a process is using the tree, and then the tree is left whole. Lock-free readers need no
        lock: the record goes first, so from then on a concurrent ``ensure`` sees the tree missing (and
        reinstalls it), never half-deleted, and the deletion runs only in trash/, where no path of the repo
        leads.

        A tree a process on this host uses (its working directory, an open or mapped file, its PYTHONPATH or a
        path on its command line is in it: :mod:`repoinstall._ops.inuse`) is left whole too, ``--dry-run`` or not.
        That check is advisory: it reads /proc once per run, so a process that starts using the tree after the
        scan is not seen. Then nothing but the lock protects it, and only an installer, repair, gc or remove
        takes the lock; a lock-free ``ensure``, ``run`` or ``path`` that looks after the record went sees the tree
        missing (and reinstalls it), one that looked before keeps a path that goes. Processes on other nodes of a
        shared volume are never seen: for gc, only ``--unused-for`` (nobody ensured the tree for that long) covers
        running workers there; ``remove`` is the operator's word that nobody needs the tree."""
        if self._planted(tid):
            return "a symlink on its path: left alone"
        # Advisory, before the lock (a tree in use gets no lock state of ours): /proc as it was at this run's one
        # scan. Whoever starts using the tree after it is protected by the lock alone if it is an installer or a
        # repair, by the record going first if it is a lock-free reader, and on another node by --unused-for only.
        users = self.users_of(tid)
        if users:
            more = len(users) - 1
            return f"in use: {users[0]}" + (f" (and {more} other process{'es' if more > 1 else ''})" if more else "")
        if self.dry_run:
            self.found.append(Removal("tree", self.layout.tree_path(tid), reason, False))
            return None
        planted: list[bool] = []

        def step() -> None:
            if self._planted(tid):  # looked at again under the lock: a link planted since is left alone too
                planted.append(True)
                return
            # Record first: from here a concurrent ensure sees the tree missing, never half-deleted.
            _manifest.remove(self.layout, tid)
            with self._dir(self.layout.tree_dir(tid)):
                pass  # reports a file in the way, if there is one
            self._discard("tree", self.layout.tree_dir(tid), tid.leaf, reason)

        kept = self._with_lock(tid, step)
        return "a symlink on its path: left alone" if kept is None and planted else kept

    def users_of(self, tid: TreeId) -> list[User]:
        """The processes on this host that use the tree ``tid``, lowest pid first (:func:`scan`, once per run)."""
        if self._users is None:
            self._users = scan(self.layout.path(TREES))
        return self._users.of(os.path.join(self._users.top, *self.layout.tree_dir(tid)[1:], tid.leaf))

    def _planted(self, tid: TreeId) -> bool:
        """Whether a symlink stands on the tree's path: then the tree and its record are left alone and the link
        reported (once), as ``planted_links`` does. Unpublishing would rename the link into trash/ (never
        following it), which README promises not to do: a person should look at it."""
        link = self._link_on_tree_path(tid)
        if link is None:
            return False
        where = f"in {TREES}/" if len(link) > 1 else "where a repo directory belongs"
        self._leave_alone(self.layout.path(*link), f"a symlink {where}")
        return True

    def _with_lock(self, tid: TreeId, step: Callable[[], None]) -> str | None:
        """Run ``step`` holding the tree's lock without waiting: ``None`` once it ran, else why the lock cannot be
        had now (a peer holds it: its owner note names it) or here at all. ``step`` runs without a lock only with
        locking off (``--no-lock``)."""
        from .._lock.key import tree_key
        from .._lock.locks import take_and_run

        # The tree just unpublished leaves no lock behind.
        taken = take_and_run(self.layout, tree_key(tid), self.settings, step, lambda: missing(self.layout, tid))
        if taken.held:
            return None
        if taken.without is None:
            return f"in use: its lock is {taken.holder}"
        return _LOCK_UNUSABLE.get(taken.without.kind, "no lock can be had for it here")


#: Said of a tree whose lock (a :class:`repoinstall._lock.taken.Unusable` of this kind) cannot be had here.
_LOCK_UNUSABLE = {
    "directory": "a symlink or file is where its lock directory belongs",  # reported by lock_debris too
    "foreign": "its lock belongs to another uid, or cannot be read: nobody can be proven out of it",
    "unreadable": "its lock belongs to another uid, or cannot be read: nobody can be proven out of it",
    "replaced": "a symlink or file is where its lock's state belongs (gc sets it aside)",
    "links": "no lock can be had on this filesystem (hard links do not keep identity); --no-lock goes without",
}
