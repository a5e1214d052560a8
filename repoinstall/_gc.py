"""Garbage collection: crashed installers' staging dirs, lock debris, trash, and (on request) unused trees.

Every removal is safe against a concurrent ``ensure``:

* a staging dir is removed only when no live holder can own it: we take the tree's lock (an installer
  stages only under it), or the lock is held by someone other than the dir's owner;
* a tree is unpublished by removing its record first, then renaming the tree into ``trash/`` and deleting
  it there, so a concurrent ``ensure`` sees it missing (and reinstalls), never half-deleted;
* lock state is removed only for a tree that is installed, whose lock nobody holds or waits for;
* index answers cached in ``cache/index/`` are removed once expired and idle; a reader racing the removal
  just misses and asks the index. Facts about files (their ``Requires-Python``) never expire and are kept.
  An idle cache lock's state may go too: that lock only saves requests, so at worst one is repeated.
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Callable
from functools import partial
from typing import NamedTuple

from . import _fs, _log, _manifest
from ._check import State, check
from ._errors import ForeignLock, LockTimeout
from ._identity import TreeId
from ._layout import LOCK_SUFFIX, LOCKS, OWNER_NOTE, OWNER_SUFFIX, RECORDS, STAGING, TRASH, Layout
from ._locks import inspect
from ._options import LockSettings


class Removal(NamedTuple):
    kind: str  # staging, trash, lock, note, temp, tree, cache
    path: str
    reason: str
    done: bool

    def as_dict(self) -> dict[str, object]:
        return self._asdict()


def _age(path: str, now: float) -> float:
    try:
        return now - os.stat(path, follow_symlinks=False).st_mtime
    except OSError:
        return 0.0


class Collector:
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
        self.layout = layout
        self.env = env
        self.settings = settings
        self.older_than = older_than
        self.unused_for = unused_for
        self.dry_run = dry_run
        self.now = time.time()
        self.found: list[Removal] = []

    def run(self) -> list[Removal]:
        self.trash()
        self.staging()
        self.lock_debris()
        self.temporaries()
        self.index_cache()
        if self.unused_for is not None:
            self.unused_trees(self.unused_for)
        return self.found

    def _remove(self, kind: str, path: str, reason: str, action: Callable[[], object]) -> None:
        done = False
        if not self.dry_run:
            try:
                action()
                done = True
            except OSError as error:
                reason = f"{reason}; not removed: {error.strerror or error}"
        self.found.append(Removal(kind, path, reason, done))

    def _with_lock(self, tid: TreeId, step: Callable[[], None]) -> bool:
        """Run ``step`` holding the tree's lock without waiting; ``False`` if it cannot be had now, because a
        peer holds it or because no lock can be had here at all (then only an expired lock proves anything)."""
        if not self.settings.enabled:
            step()
            return True
        from ._lock import Unusable, open_tree_lock

        lock = open_tree_lock(self.layout, tid, self.settings._replace(wait_timeout=0.0), announce=False)
        if isinstance(lock, Unusable):
            return False
        try:
            with lock:
                step()
        except (LockTimeout, ForeignLock):
            return False
        return True

    def trash(self) -> None:
        # Everything in trash/ was set aside whole by one rename; a crash may have left it undeleted.
        directory = self.layout.path(TRASH)
        for name in _listdir(directory):
            path = os.path.join(directory, name)
            if _age(path, self.now) >= self.older_than:
                self._remove("trash", path, "set aside earlier", partial(_fs.remove_tree, path))

    def staging(self) -> None:
        for env in _listdir(self.layout.path(STAGING)):
            for name in _listdir(self.layout.path(STAGING, env)):
                path = self.layout.path(STAGING, env, name)
                if _age(path, self.now) < self.older_than:
                    continue
                self._staging_dir(env, path)

    def _staging_dir(self, env: str, path: str) -> None:
        note = _read_json(os.path.join(path, OWNER_NOTE))
        tid = None
        if note is not None:
            tid = TreeId.from_leaf(env, str(note.get("name", "")), str(note.get("leaf", "")))
        if tid is None:
            self._remove("staging", path, "staging dir of an unknown installer", partial(_fs.remove_tree, path))
            return
        owner = (note or {}).get("host"), (note or {}).get("pid")

        def remove_locked() -> None:
            # We hold the tree's lock: installers stage only under it, so this dir's owner is gone.
            self._remove("staging", path, f"left by {owner[0]} pid {owner[1]}", partial(_fs.remove_tree, path))

        if self.dry_run:
            self.found.append(Removal("staging", path, f"left by {owner[0]} pid {owner[1]}", False))
            return
        if self._with_lock(tid, remove_locked):
            return
        holder = inspect(self.layout, tid, self.settings.stale_after, self.now)
        left_by = f"left by {owner[0]} pid {owner[1]}"
        if holder.stale:
            # Proven expired: no heartbeat for the stale threshold, so a peer may take over at any moment.
            self._remove("staging", path, f"{left_by} (its lock expired)", partial(_fs.remove_tree, path))
        elif holder.host is not None and (holder.host, holder.pid) != owner:
            # The live holder is someone else: this dir's owner lost the lock or died.
            self._remove("staging", path, f"{left_by} (lock now held by {holder.host})", partial(_fs.remove_tree, path))

    def lock_debris(self) -> None:
        for tid in self.layout.discover(LOCKS):
            info = inspect(self.layout, tid, self.settings.stale_after, self.now)
            directory = self.layout.path(*self.layout.lock_dir(tid))
            note = os.path.join(directory, tid.leaf + OWNER_SUFFIX)
            if not info.held and os.path.lexists(note) and _age(note, self.now) >= self.older_than:
                self._remove("note", note, "owner note of a lock nobody holds", partial(os.unlink, note))
            idle = _age(os.path.join(info.path, "gen"), self.now) >= self.older_than
            if info.held or info.waiters or not idle or check(self.layout, tid).state is not State.PRESENT:
                continue
            # Installed, unheld, unwaited and idle: nobody needs this lock's state any more. One rename takes
            # the whole protocol dir away; a participant arriving later starts a fresh log (filelock allows it).
            self._remove(
                "lock",
                info.path,
                "lock state of an installed tree, idle",
                partial(self.layout.discard, info.path, f"lock.{tid.name}"),
            )

    def temporaries(self) -> None:
        # write_atomic's temporaries (".<name>.<random>.tmp") that a crash left behind.
        for kind in (RECORDS, LOCKS):
            for env in _listdir(self.layout.path(kind)):
                for name in _listdir(self.layout.path(kind, env)):
                    directory = self.layout.path(kind, env, name)
                    for entry in os.listdir(directory):
                        path = os.path.join(directory, entry)
                        if entry.startswith(".") and entry.endswith(".tmp") and _age(path, self.now) >= self.older_than:
                            self._remove(
                                "temp", path, "temporary file of an interrupted write", partial(os.unlink, path)
                            )

    def index_cache(self) -> None:
        from ._indexcache import CACHE_DIR

        directory = self.layout.path(*CACHE_DIR)
        for entry in _listdir(directory):
            path = os.path.join(directory, entry)
            if _age(path, self.now) < self.older_than:
                continue
            if entry.startswith(".") and entry.endswith(".tmp"):
                self._remove("temp", path, "temporary file of an interrupted write", partial(os.unlink, path))
            elif entry.endswith(".json") and "found" in (_read_json(path) or {"found": True}):
                self._remove("cache", path, "expired index answer", partial(os.unlink, path))
            elif entry.endswith(LOCK_SUFFIX) and _age(os.path.join(path, "gen"), self.now) >= self.older_than:
                self._remove("lock", path, "idle index cache lock", partial(self.layout.discard, path, "lock.index"))
            elif entry.endswith(OWNER_SUFFIX):
                self._remove("note", path, "owner note of an idle index cache lock", partial(os.unlink, path))

    def unused_trees(self, unused_for: float) -> None:
        for tid in self.layout.discover(RECORDS):
            used = _manifest.last_used(self.layout, tid)
            if used is None or self.now - used < unused_for:
                continue
            path = self.layout.tree_path(tid)
            reason = f"not ensured for {(self.now - used) / 86400:.1f} days"
            if self.dry_run:
                self.found.append(Removal("tree", path, reason, False))
                continue

            def unpublish(t: TreeId = tid, p: str = path, r: str = reason) -> None:
                # Record first: from here a concurrent ensure sees the tree missing, never half-deleted.
                _manifest.remove(self.layout, t)
                if os.path.lexists(p):
                    self._remove("tree", p, r, partial(self.layout.discard, p, f"tree.{t.name}"))

            if not self._with_lock(tid, unpublish):
                _log.logger().info("kept %s: its lock is held", tid)


def _listdir(path: str) -> list[str]:
    try:
        return sorted(os.listdir(path))
    except (FileNotFoundError, NotADirectoryError):
        return []


def _read_json(path: str) -> dict[str, object] | None:
    try:
        with open(path, "rb") as handle:
            value = json.loads(handle.read(1 << 16))
    except (OSError, ValueError):
        return None
    return value if isinstance(value, dict) else None
