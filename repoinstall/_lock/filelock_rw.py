"""filelock's soft read-write lock as repoinstall takes it: the one module that imports filelock or knows its
on-disk layout.

:class:`RwLock` is filelock's ``SoftReadWriteLock`` write lock, tried without waiting, its errors read into ours.

For a lock at ``<dir>/<leaf>.lock`` filelock keeps its whole state in one directory beside it::

    <leaf>.lock.rw/                the lock's state (STATE_SUFFIX)
        gen/<20 digits>            immutable snapshots of the lock's log, "filelock-rw/..." with "writer=<token>";
                                   every change adds one, so this directory's mtime is the lock's last activity
        holders/<token>            one record per participant ("host=", "pid=", "lease="); a heartbeat rewrites
                                   it, so its mtime is that participant's last heartbeat

The lock itself (``soft``), the read-only view for people (``lockinfo``), gc and doctor all name these parts
through here, so a change in filelock's format or API is a change in this file.
"""

from __future__ import annotations

import math
import os
import stat
from typing import TYPE_CHECKING, Any, NamedTuple

from .. import _log
from .._disk import fs as _fs
from .._disk.layout import LOCKS
from .._options import LockSettings

if TYPE_CHECKING:
    from collections.abc import Callable

    from filelock import SoftReadWriteLock

    from .._disk.identity import TreeId
    from .._disk.layout import Layout

#: Our name for a lock: ``<leaf>.lock``; filelock keeps its state in ``<leaf>.lock.rw/``.
LOCK_SUFFIX = ".lock"
STATE_SUFFIX = LOCK_SUFFIX + ".rw"
GENERATIONS = "gen"
HOLDERS = "holders"
_GENERATION_DIGITS = 20


class Unreadable(Exception):
    """filelock could not read the lock's state, or let it go cleanly (its error is the cause)."""


class RwLock:
    """filelock's write lock at ``path``, made at the first attempt: a waiter whose peer finishes first never loads
    filelock. ``on_lost(reason)`` runs on filelock's heartbeat thread once a peer may hold the lock."""

    def __init__(self, path: str, settings: LockSettings, on_lost: Callable[[str], None]) -> None:
        self.path = path
        self._settings = settings
        self._on_lost = on_lost
        self._soft: SoftReadWriteLock | None = None

    @property
    def _lock(self) -> SoftReadWriteLock:
        if self._soft is None:
            from filelock import SoftReadWriteLock

            self._soft = SoftReadWriteLock(
                self.path,
                heartbeat_interval=self._settings.heartbeat,
                stale_threshold=self._settings.stale_after,
                poll_interval=min(0.25, self._settings.heartbeat / 2),
                is_singleton=False,
                on_compromise=self._compromised,
            )
        return self._soft

    def _compromised(self, compromise: Any) -> None:
        self._on_lost(str(compromise.reason))

    def attempt(self) -> bool:
        """One acquire that never waits: whether we hold the lock now. :class:`Unreadable` if filelock cannot use
        its state; :class:`PermissionError` if this UID may not."""
        from filelock import SoftFileLockProtocolError, Timeout

        try:
            self._lock.acquire_write(blocking=False)
        except Timeout:
            return False
        except SoftFileLockProtocolError as error:
            raise Unreadable from error
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
            raise Unreadable from error
        return True

    def release(self) -> None:
        """Let the write lock go (forced: whatever of our membership is left). :class:`OSError` or
        :class:`Unreadable` if filelock could not do it cleanly."""
        from filelock import SoftFileLockProtocolError

        try:
            self._lock.release(force=True)
        except SoftFileLockProtocolError as error:
            raise Unreadable(str(error)) from error

    def close(self) -> None:
        """Give up filelock's lock object (its heartbeat thread) without releasing."""
        if self._soft is not None:
            self._soft.close()
            self._soft = None


def lock_name(leaf: str) -> str:
    return leaf + LOCK_SUFFIX


def state_name(leaf: str) -> str:
    return leaf + STATE_SUFFIX


def lock_trees(layout: Layout) -> list[TreeId]:
    """The trees that have a lock's state in ``locks/`` (listed by descriptor: a symlink is neither followed nor
    listed)."""
    return layout.discover(LOCKS, suffix=STATE_SUFFIX)


def foreign_owner(directory_fd: int, leaf: str) -> int | None:
    """The UID owning the lock state of ``leaf`` (in the lock's directory, open) if it is not ours, else ``None``:
    filelock keeps its state private to the UID that made it (0600 files, 0700 dirs), so no other can share it."""
    try:
        owner = os.stat(state_name(leaf), dir_fd=directory_fd, follow_symlinks=False).st_uid
    except OSError:
        return None
    return owner if owner != os.geteuid() else None


def activity(state: str) -> str:
    """The path (relative to the lock's directory) whose mtime is the lock's last activity."""
    return f"{state}/{GENERATIONS}"


def fields(data: bytes) -> dict[str, str]:
    """``key=value`` lines of a snapshot or holder record; the first of a repeated key wins."""
    found: dict[str, str] = {}
    for line in data.decode("ascii", "replace").splitlines():
        key, sep, value = line.partition("=")
        if sep:
            found.setdefault(key, value)
    return found


class Members(NamedTuple):
    """Who a lock's state names: the writer and readers of its newest snapshot, and every name in ``holders/`` (a
    member's heartbeat record, a contender's claim, or what a crashed one left). ``problem``: why filelock cannot
    use this state (see :func:`damage`); no participant can then be in it."""

    writer: str | None
    readers: frozenset[str]
    records: frozenset[str]
    problem: str | None = None


def members(state_fd: int, shown: str) -> Members:
    """Who the lock's state (its directory open) names; ``problem`` if filelock cannot use it: a part of it is not a
    directory, or its newest snapshot is unreadable."""
    if (problem := damage(state_fd, shown)) is not None:
        return Members(None, frozenset(), frozenset(), problem)
    writer, readers, problem = _latest(state_fd, shown)
    holders = _fs.open_dir(state_fd, (HOLDERS,))
    try:
        records = frozenset(_listing(holders)) if holders is not None else frozenset()
    finally:
        if holders is not None:
            os.close(holders)
    return Members(writer, readers, records, problem)


def alone(state_fd: int) -> bool:
    """Whether the lock's only participant is its writer: no reader, and no holder record but the writer's (nobody
    else holds it, waits in it or is joining it). Read by the writer itself, this says "only I am here"."""
    found = members(state_fd, "")
    return found.problem is None and found.writer is not None and not found.readers and found.records == {found.writer}


def damage(state_fd: int, shown: str) -> str | None:
    """Why filelock cannot use this lock state (its directory open), or ``None``: something that is not a directory
    (a file, a symlink, a FIFO) where ``gen/`` or ``holders/`` belongs. filelock refuses such a state at every
    attempt, so nobody can hold it or wait in it: it stays as it is until it is set aside. A missing part is no
    damage: filelock makes it (a state being created looks like that)."""
    for part in (GENERATIONS, HOLDERS):
        try:
            mode = os.stat(part, dir_fd=state_fd, follow_symlinks=False).st_mode
        except FileNotFoundError:
            continue
        except OSError as error:
            return f"unreadable lock state {os.path.join(shown, part)} ({error.strerror or error})"
        if not stat.S_ISDIR(mode):
            return f"unreadable lock state: {os.path.join(shown, part)} is not a directory"
    return None


def last_sign_of_life(state_fd: int) -> tuple[float, float]:
    """(the newest mtime in the lock's state, the longest lease a holder record declares). Every step of every
    participant renews one of these mtimes: a commit changes ``gen/``, a claim or a leave changes ``holders/``, and
    a heartbeat (a holder's, or a contender's at each poll) rewrites its own record. So once the newest is older
    than the stale threshold and every lease, everyone who was in the lock is proven gone."""
    newest, lease = _mtime(state_fd, "."), 0.0
    for part in (GENERATIONS, HOLDERS):
        newest = max(newest, _mtime(state_fd, part))
    holders = _fs.open_dir(state_fd, (HOLDERS,))
    if holders is None:
        return newest, lease
    try:
        for name in _listing(holders):
            newest = max(newest, _mtime(holders, name))
            lease = max(lease, holder_lease(_fs.read_file(holders, (name,), 1 << 12)) or 0.0)
    finally:
        os.close(holders)
    return newest, lease


def holder_lease(record: bytes | None) -> float | None:
    """The lease a holder record declares (its holder's own stale threshold), by the rule filelock applies when
    it judges that holder (tests/unit/test_lock_info.py reads real holders' records): a peer evicts the holder only
    once its record has not changed for the longer of the peer's threshold and this. ``None`` if the record has
    none (an older release) or it is malformed: only a finite positive number spelled as ``repr(float)`` writes it
    counts, so a record's "inf" cannot keep a lock forever."""
    try:
        data = (record or b"").decode("ascii")
    except UnicodeDecodeError:
        return None
    text = next((line.removeprefix("lease=") for line in data.split("\n") if line.startswith("lease=")), None)
    if text is None:
        return None
    try:
        lease = float(text)
    except ValueError:
        return None
    return lease if math.isfinite(lease) and lease > 0 and repr(lease) == text else None


def _mtime(dir_fd: int, name: str) -> float:
    try:
        return os.stat(name, dir_fd=dir_fd, follow_symlinks=False).st_mtime
    except OSError:
        return 0.0


def _listing(dir_fd: int) -> list[str]:
    try:
        return os.listdir(dir_fd)
    except OSError:
        return []


def _latest(state_fd: int, shown: str) -> tuple[str | None, frozenset[str], str | None]:
    """(writer token, reader tokens, problem) from the newest readable generation of a lock's log."""
    generations = _fs.open_dir(state_fd, (GENERATIONS,))
    if generations is None:
        return None, frozenset(), None
    try:
        names = sorted((n for n in _listing(generations) if len(n) == _GENERATION_DIGITS and n.isdigit()), reverse=True)
        for name in names:
            data = _fs.read_file(generations, (name,), 1 << 16)
            if data is None:
                continue  # compacted between the listing and the read
            if not data.startswith(b"filelock-rw/"):
                return None, frozenset(), f"unreadable lock state in {os.path.join(shown, GENERATIONS, name)}"
            lines = data.decode("ascii", "replace").splitlines()
            readers = frozenset(line.partition("=")[2] for line in lines if line.startswith("reader="))
            return fields(data).get("writer"), readers, None
        return None, frozenset(), None
    finally:
        os.close(generations)


class Record(NamedTuple):
    """A participant's holder record: its host (as our owner notes name the pod), pid, the lease it declares, and
    seconds since its last heartbeat (the record's mtime; ``None`` if that cannot be read)."""

    host: str | None
    pid: int | None
    lease: float | None
    age: float | None


def record_of(state_fd: int, token: str, now: float) -> Record | None:
    """The holder record of ``token`` in the lock's state (its directory open), read at ``now`` (``time.time()``);
    ``None`` if it is gone or this UID may not read it."""
    holders = _fs.open_dir(state_fd, (HOLDERS,))
    if holders is None:
        return None
    try:
        try:
            data = _fs.read_file(holders, (token,), 1 << 16)
        except PermissionError:
            return None
        if data is None:
            return None
        try:
            age: float | None = max(0.0, now - os.stat(token, dir_fd=holders, follow_symlinks=False).st_mtime)
        except OSError:
            age = None
    finally:
        os.close(holders)
    found = fields(data)
    pid = found.get("pid", "")
    return Record(host_of(found), int(pid) if pid.isdigit() else None, holder_lease(data), age)


def host_of(record: dict[str, str]) -> str | None:
    """A holder's host. filelock appends "?pidns-..." for a process in a PID namespace (every container): dropped,
    so it reads as the pod's hostname our own notes carry."""
    return (record.get("host") or "").split("?pidns", 1)[0] or None
