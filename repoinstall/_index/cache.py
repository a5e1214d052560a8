"""Index answers cached on the volume for a short time, so a fleet starting at once asks the index once.

    <repo>/cache/index/<key>.json   one answer (a project's files on one index), or a fact about one file

Entries are written atomically (temp file, rename), so a reader sees a whole answer or none. The first pod
to miss takes the entry's lock and fetches; the others poll the cache until its answer lands, and only
fetch themselves if it never does within the wait. The lock only saves requests: any pod may write an
entry at any time, and since every write is a whole answer for the same question, the last one simply wins.
"""

from __future__ import annotations

import hashlib
import json
import os
import time
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING

from .. import _log
from .._disk import fs as _fs
from .._disk.layout import CACHE
from .._errors import RepoinstallError
from .http import Pause, Plan

if TYPE_CHECKING:
    from .._disk.layout import Layout
    from .._lock.soft import FileTreeLock
    from .._options import LockSettings

CACHE_DIR = (CACHE, "index")
_POLL = 0.1
_FORMAT = 1


def garbage(directory: int, old: Callable[[str], bool]) -> Iterator[tuple[str, str, str]]:
    """(entry, kind, reason) for what in the open cache directory may go, given which names are ``old`` (by the
    mtime of the name, a path relative to ``directory``): answers past any use, temporaries of interrupted
    writes, idle locks and their notes, and symlinks (never followed). Facts about one file (its
    Requires-Python) never change, so they stay."""
    from .._disk import walk as _walk
    from .._lock.state import Part
    from .._lock.state import entry as lock_entry

    for entry, kind in _walk.entries(directory):
        if not old(entry):
            continue
        of_lock = lock_entry(entry)
        if kind == _walk.LINK:
            yield entry, "cache", "a symlink among cached answers"
        elif entry.startswith(".") and entry.endswith(".tmp"):
            yield entry, "temp", "temporary file of an interrupted write"
        elif entry.endswith(".json") and "found" in (_fs.read_json(directory, (entry,)) or {"found": 1}):
            yield entry, "cache", "expired index answer"
        elif of_lock is not None and of_lock.part is Part.STATE:
            if old(of_lock.files.activity):
                yield entry, "lock", "idle index cache lock"
        elif of_lock is not None and of_lock.part is Part.NOTE:
            yield entry, "note", "owner note of an idle index cache lock"


def key_for(*parts: str) -> str:
    return hashlib.sha256("\n".join(parts).encode()).hexdigest()[:40]


class IndexCache:
    """Answers by key, fresh for ``ttl`` seconds. ``layout=None`` (or an unwritable repo) caches nothing."""

    def __init__(self, layout: Layout | None, ttl: float, settings: LockSettings) -> None:
        self._layout = layout
        self.ttl = ttl
        self._settings = settings

    @property
    def layout(self) -> Layout | None:
        """The repo whose volume holds the cache (``None``: no cache)."""
        return self._layout

    def _writable_dir(self) -> int | None:
        if self._layout is None:
            return None
        layout = self._layout
        try:
            return layout.retrying(lambda: _fs.make_dirs(layout.writable_fd(), CACHE_DIR, layout.root))
        except (OSError, RepoinstallError):
            return None  # a read-only or full repo: resolve without the cache

    def read(
        self, key: str, *, forever: bool = False, valid: Callable[[dict[str, object]], bool] | None = None
    ) -> dict[str, object] | None:
        """The entry if it is there, readable, fresh (any age when ``forever``) and, if ``valid`` is given, of
        the shape it says. Anything else is a miss, never an answer. Reading creates nothing."""
        try:
            data = self._layout.retrying(self._read, self._layout, key) if self._layout is not None else None
        except (OSError, RepoinstallError):
            return None
        try:
            entry = json.loads(data or b"null")
        except ValueError:
            return None
        if not isinstance(entry, dict) or entry.get("format") != _FORMAT:
            return None
        written = entry.get("written", 0)
        if not isinstance(written, int | float) or isinstance(written, bool):
            return None  # garbled: a time nobody wrote
        age = time.time() - written
        # Clocks of pods differ a little: an entry "from the future" counts only within the same window.
        if not forever and not -self.ttl < age < self.ttl:
            return None
        if valid is not None and not valid(entry):
            _log.logger().debug("index cache entry %s is garbled: a miss", key)
            return None
        return entry

    @staticmethod
    def _read(layout: Layout, key: str) -> bytes | None:
        root = layout.root_fd()
        return _fs.read_file(root, (*CACHE_DIR, key + ".json")) if root is not None else None

    def write(self, key: str, entry: dict[str, object]) -> None:
        directory = self._writable_dir()
        if directory is None:
            return
        try:
            body = {"format": _FORMAT, "written": time.time(), **entry}
            _fs.write_atomic(directory, key + ".json", json.dumps(body).encode())
        except OSError as error:
            _log.logger().debug("index cache not written (%s)", error.strerror)
        finally:
            os.close(directory)

    def shared(
        self,
        key: str,
        what: str,
        fetch: Callable[[], Plan[dict[str, object]]],
        valid: Callable[[dict[str, object]], bool] | None = None,
        *,
        forever: bool = False,
    ) -> Plan[dict[str, object]]:
        """The cached answer, or ``fetch``'s, fetched by one pod at a time while the others wait for it. A cached
        entry that is not ``valid`` is a miss: asked again, and replaced. ``forever``: a fact about one file, which
        never changes (read at any age, whatever the cache's ttl)."""

        def cached() -> dict[str, object] | None:
            return self.read(key, forever=forever, valid=valid) if forever or self.ttl > 0 else None

        if (hit := cached()) is not None:
            return hit
        lock = self._lock(key, what)
        held = False
        try:
            deadline = time.monotonic() + min(self._settings.stale_after, 60.0)
            while lock is not None:
                taken = lock.try_take()
                if taken.held:
                    held = True
                    # Check again inside the lock: the previous holder may have just written the answer.
                    if (hit := cached()) is not None:
                        return hit
                    break
                if taken.without is not None or time.monotonic() >= deadline:
                    break  # no lock to be had, or a fetch that never lands: ask ourselves
                yield Pause(_POLL)  # a peer is asking: its answer will land in the cache
                if (hit := cached()) is not None:
                    return hit
            answer = yield from fetch()
            self.write(key, answer)
            return answer
        finally:
            if lock is not None:
                if held:
                    lock.release()
                else:
                    lock.close()

    def _lock(self, key: str, what: str) -> FileTreeLock | None:
        if self._layout is None or not self._settings.enabled:
            return None
        from .._lock.key import LockKey
        from .._lock.locks import open_lock
        from .._lock.taken import Unusable

        try:
            lock = open_lock(self._layout, LockKey(CACHE_DIR, key, what), self._settings)
        except (OSError, RepoinstallError):
            return None
        return None if isinstance(lock, Unusable) else lock
