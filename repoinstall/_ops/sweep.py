"""What every gc pass shares: the repo's own directories opened without following a symlink, ages by the repo's
clock, removal through trash/ (:meth:`Layout.discard`) or only a report with ``--dry-run``, and what a lock's
state says about who is still in it. :mod:`.gc` collects trees, staging dirs and lock debris with it;
:mod:`.gcstore` the store's distributions and their lock debris."""

from __future__ import annotations

import os
import stat
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import NamedTuple

from .._disk import fs as _fs
from .._disk import walk as _walk
from .._disk.layout import TRASH, Layout, read_only_filesystem
from .._disk.things import Thing, thing_at
from .._errors import RepoUnusable
from .._lock.state import last_sign_of_life, members
from .._options import LockSettings


class Removal(NamedTuple):
    #: What was removed: staging, trash, lock, note, temp, tree, dist, store (an empty store directory), stray (a
    #: non-directory where a stored distribution belongs), cache; or what was left alone: symlink, file, fifo,
    #: socket, device, dir.
    kind: str
    path: str
    reason: str
    done: bool

    def as_dict(self) -> dict[str, object]:
        return self._asdict()


#: What a removal says when its victim was set aside but not wholly deleted: a later gc finishes it.
NOT_ALL_DELETED = "in trash/, not all deleted"


class Sweep:
    """A gc run's shared state: the repo, the lock timings, the age below which nothing is touched, whether it
    only lists (``dry_run``), "now" by the repo's clock, and what was found (removed, or left alone)."""

    def __init__(self, layout: Layout, settings: LockSettings, *, older_than: float, dry_run: bool) -> None:
        self.layout = layout
        self.settings = settings
        self.older_than = older_than
        self.dry_run = dry_run
        self.now = time.time()
        self.found: list[Removal] = []
        #: What was reported as left alone: each is said once, however many passes come across it.
        self._left_alone: set[str] = set()
        #: Lock states left alone because this UID cannot read them: owner UID (None: unknown) -> how many.
        self._unreadable: dict[int | None, int] = {}

    def prepare(self, refusal: str) -> None:
        """Before removing anything: the repo exists, and (unless only listing) can be written (else ``refusal``
        says what the read-only repo means); ages from now on are measured by the repo's own clock."""
        root = self.layout.root_fd()
        if root is None:
            raise RepoUnusable(f"repo {self.layout.root} does not exist")
        if not self.dry_run:
            if read_only_filesystem(self.layout.root):
                raise RepoUnusable(f"repo {self.layout.root} is read-only: {refusal} (--dry-run lists)")
            self.now = self._volume_now()

    def _volume_now(self) -> float:
        """The time by the repo's filesystem: ages compare its own mtimes, so a server's clock skew cannot matter."""
        trash = _fs.make_dirs(self.layout.writable_fd(), (TRASH,), self.layout.root)
        try:
            os.utime(trash)  # "now", stamped by the server on a network filesystem
            return os.fstat(trash).st_mtime
        except OSError:
            return time.time()
        finally:
            os.close(trash)

    # ---- walking ------------------------------------------------------------------------------------------

    @contextmanager
    def _dir(self, parts: tuple[str, ...]) -> Iterator[int | None]:
        """One of the repo's own directories, opened without following a symlink. A symlink or file in its place
        is reported and left alone (it may be an operator's doing; it is never followed), and so is one this UID
        may not read (mode 000, another UID's): nothing in it can be proven unused."""
        root = self.layout.root_fd()
        try:
            fd = None if root is None else _fs.open_dir(root, parts)
        except PermissionError:
            self.cannot_read(parts)
            yield None
            return
        if fd is None:
            thing = None if root is None else thing_at(root, "/".join(parts))
            if thing is not None and thing is not Thing.DIRECTORY:
                self._leave_alone(self.layout.path(*parts), f"{thing.named} where a repo directory belongs", thing)
            yield None
            return
        try:
            yield fd
        finally:
            os.close(fd)

    def cannot_read(self, parts: tuple[str, ...]) -> None:
        """Report the first directory on the way to ``parts`` that this UID may not list or search (mode 000,
        another UID's private one) as left alone, with its owner and mode: nothing in it can be proven unused."""
        for depth in range(1, len(parts) + 1):
            path = self.layout.path(*parts[:depth])
            try:
                info = os.stat(path, follow_symlinks=False)
            except OSError:
                return  # gone since: nothing to say
            if not stat.S_ISDIR(info.st_mode):
                return  # a symlink or file: said where it stands
            if not os.access(path, os.R_OK | os.X_OK, effective_ids=True) or depth == len(parts):
                why = f"uid {os.geteuid()} may not read it ({_fs.ownership(info, group=False)})"
                self._leave_alone(path, why, Thing.DIRECTORY)
                return

    def _leave_alone(self, path: str, why: str, thing: Thing = Thing.SYMLINK) -> None:
        """Report ``path`` (a symlink, or something else where a directory belongs) as left alone, once: several
        passes walk the same directories (lock debris, temporaries and empty lock directories all walk locks/).
        Its kind is what it is (``symlink``, ``fifo``, ``file``...); ``why`` says where it stands."""
        if path not in self._left_alone:
            self._left_alone.add(path)
            self.found.append(Removal(thing.key, path, f"{why}: left alone", False))

    def _age(self, dir_fd: int, name: str) -> float:
        try:
            return self.now - os.stat(name, dir_fd=dir_fd, follow_symlinks=False).st_mtime
        except OSError:
            return 0.0

    def _discard(self, kind: str, parts: tuple[str, ...], name: str, reason: str) -> Removal | None:
        """Remove ``parts/name`` (rename into trash/, delete there) and say so; or, with ``--dry-run``, only say.
        What was said, or ``None`` if it was gone already."""
        path = self.layout.path(*parts, name)
        if self.dry_run:
            self.found.append(Removal(kind, path, reason, False))
            return self.found[-1]
        try:
            outcome = self.layout.discard(parts, name, f"{kind}.{name}"[:120])
        except OSError as error:
            self.found.append(Removal(kind, path, f"{reason}; not removed: {error.strerror or error}", False))
            return self.found[-1]
        if outcome is None:
            return None  # gone already: someone else removed it
        self.found.append(Removal(kind, path, reason if outcome else f"{reason}; {NOT_ALL_DELETED}", outcome))
        return self.found[-1]

    def _participants(self, directory: int, state: str, note: str) -> tuple[float | None, str | None]:
        """(seconds since anyone was last seen in the lock ``state``, once that proves them all gone, else ``None``;
        why filelock cannot use the state, or ``None``), read from the lock's directory open. Each participant's
        every step renews an mtime in the lock's state (its log, its holder record: see
        ``_lock.state.last_sign_of_life``) and a holder touches its owner note several times a heartbeat, so when
        the newest of them is older than the stale threshold, every lease a holder declared and ``--older-than``,
        nobody is in the lock: filelock would evict them all. :class:`PermissionError` if this UID cannot read the
        state (another UID's)."""
        state_fd = _fs.open_dir(directory, (state,))
        if state_fd is None:
            return None, None
        try:
            damaged = members(state_fd, "").problem  # named relative to the state, which the report names
            newest, lease = last_sign_of_life(state_fd)
        finally:
            os.close(state_fd)
        age = self.now - newest
        if kind_at(directory, note) is not None:
            age = min(age, self._age(directory, note))
        return (age if age >= max(self.settings.stale_after, lease, self.older_than) else None), damaged


def is_empty(dir_fd: int, name: str) -> bool:
    """Whether the directory ``name`` (not followed if a symlink) has no entries."""
    fd = _fs.open_dir(dir_fd, (name,))
    if fd is None:
        return False
    try:
        return not os.listdir(fd)
    except OSError:
        return False
    finally:
        os.close(fd)


def kind_at(dir_fd: int, name: str) -> str | None:
    """What ``name`` is (lstat: a symlink is a LINK), or ``None`` if nothing is there."""
    try:
        return _walk.kind_of(os.stat(name, dir_fd=dir_fd, follow_symlinks=False).st_mode)
    except OSError:
        return None
