"""Reading the repo's install locks for people: who holds each, how long since its last heartbeat.

This reads filelock's on-disk protocol (see :mod:`repoinstall._lock.state`) without taking part in it: it
never writes, so looking cannot disturb a holder. Heartbeat ages come from file mtimes, which a network
filesystem stamps with the server's clock: they are exact on one host and skewed by the clock difference
across hosts.
"""

from __future__ import annotations

import os
import time
from typing import NamedTuple

from packaging.version import InvalidVersion, Version

from .._disk import fs as _fs
from .._disk.identity import TreeId
from .._disk.layout import Layout
from .._disk.manifest import as_recorded
from .._errors import InvalidRequirement
from .._lock.state import LockFiles, foreign_owner, lock_trees, members, record_of


class LockInfo(NamedTuple):
    tid: TreeId
    path: str
    held: bool
    host: str | None
    pid: int | None
    heartbeat_age: float | None
    stale: bool
    waiters: int
    problem: str | None = None
    #: The holder's own stale threshold, as its record declares it (``None`` if it declares none).
    lease: float | None = None

    def as_dict(self) -> dict[str, object]:
        return {
            "tree": self.tid.pin,
            "env": self.tid.env,
            "path": self.path,
            "held": self.held,
            "host": self.host,
            "pid": self.pid,
            "heartbeat_age": None if self.heartbeat_age is None else round(self.heartbeat_age, 1),
            "lease": self.lease,
            "stale": self.stale,
            "waiters": self.waiters,
            "problem": self.problem,
        }


def stale_after_for(stale_after: float, lease: float | None) -> float:
    """How long a holder's heartbeat may be still before a waiter takes the lock over: the longer of the waiter's
    threshold and the lease the holder declared (filelock's rule, so a tighter-configured pod never reads a slower
    holder's heartbeat as death)."""
    return max(stale_after, lease or 0.0)


def inspect(layout: Layout, tid: TreeId, stale_after: float, now: float | None = None) -> LockInfo:
    """What the lock's files say, read through directory descriptors: a symlink anywhere reads as no lock. The tree
    is named with its version as its holder spelled it (else as its record does), as ``ensure`` and ``list`` show it;
    the lock's own file name is the canonical version, which drops trailing zeros. "Stale" is judged as a waiter
    with ``stale_after`` would judge it: by the longer of that and the holder's declared lease.

    Never raises for what is in the lock's state: a state this UID may not read (filelock keeps it private to the
    UID that made it), a part of it that is not a directory, or a garbage log is the info's ``problem``."""
    rw_dir = os.path.join(layout.path(*layout.lock_dir(tid)), LockFiles(tid.leaf).state)
    now = time.time() if now is None else now
    root = layout.root_fd()
    directory = None if root is None else _fs.open_dir(root, layout.lock_dir(tid))
    note = _owner_note(directory, tid)
    tid = _spelled(layout, tid, note)
    rw = None
    try:
        try:
            rw = None if directory is None else _fs.open_dir(directory, (LockFiles(tid.leaf).state,))
        except PermissionError:
            assert directory is not None
            return LockInfo(tid, rw_dir, False, None, None, None, False, 0, _unreadable(directory, tid.leaf))
        if rw is None:
            problem = None
            if directory is not None and _exists(directory, LockFiles(tid.leaf).state):
                problem = "lock state is not a directory (a symlink or file is in the way)"
            return LockInfo(tid, rw_dir, False, None, None, None, False, 0, problem)
        try:
            writer, _, records, problem = members(rw, rw_dir)
            record = None if problem is not None or writer is None else record_of(rw, writer, now)
        except PermissionError:
            return LockInfo(tid, rw_dir, False, None, None, None, False, 0, _unreadable(directory, tid.leaf))
        waiters = len([t for t in records if not t.startswith(".") and t != writer])
        if writer is None:
            return LockInfo(tid, rw_dir, False, None, None, None, False, waiters, problem)
        if record is None:
            # Named in the log but its heartbeat record is gone: a crashed holder whose lease a peer will end.
            return LockInfo(tid, rw_dir, True, None, None, None, True, waiters, "holder record missing")
        host = record.host or (str(note["host"]) if "host" in note else None)
        age = record.age
        return LockInfo(
            tid,
            rw_dir,
            True,
            host,
            record.pid,
            age,
            age is not None and age > stale_after_for(stale_after, record.lease),
            waiters,
            problem,
            record.lease,
        )
    finally:
        for fd in (rw, directory):
            if fd is not None:
                os.close(fd)


def _unreadable(directory: int | None, leaf: str) -> str:
    """Why the lock state ``leaf`` in ``directory`` cannot be read: another UID's (filelock makes it 0700), or
    permissions as they are."""
    owner = None if directory is None else foreign_owner(directory, leaf)
    if owner is not None:
        return (
            f"belongs to uid {owner}; this is uid {os.geteuid()}: cannot read who holds it (run every pod with one "
            "runAsUser)"
        )
    return "lock state not readable by this user (permission denied)"


def _exists(dir_fd: int, name: str) -> bool:
    try:
        os.stat(name, dir_fd=dir_fd, follow_symlinks=False)
    except OSError:
        return False
    return True


def _owner_note(directory: int | None, tid: TreeId) -> dict[str, object]:
    """The holder's owner note (host, pid, since, the tree as it spelled it); empty if none or unreadable."""
    try:
        return (None if directory is None else _fs.read_json(directory, (LockFiles(tid.leaf).note,), 1 << 16)) or {}
    except PermissionError:
        return {}


def _spelled(layout: Layout, tid: TreeId, note: dict[str, object]) -> TreeId:
    """``tid`` with its version as the holder's note spells it (a lock exists before its tree's record), else as
    the tree's record does. A note is anyone's file on the volume: its version counts only if it is this tree's."""
    version = note.get("version")
    if isinstance(version, str):
        try:
            spelled = TreeId(tid.env, tid.name, Version(version), tid.extras)
        except (InvalidVersion, InvalidRequirement):
            spelled = tid
        if spelled.leaf == tid.leaf:
            return spelled
    return as_recorded(layout, tid)


def list_locks(layout: Layout, stale_after: float) -> list[LockInfo]:
    now = time.time()
    return [inspect(layout, tid, stale_after, now) for tid in lock_trees(layout)]
