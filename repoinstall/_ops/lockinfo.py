"""Reading the repo's install locks for people: who holds each, how long since its last heartbeat.

This reads filelock's on-disk protocol (see :mod:`repoinstall._store.lockformat`) without taking part in it: it
never writes, so looking cannot disturb a holder. Heartbeat ages come from file mtimes, which a network
filesystem stamps with the server's clock: they are exact on one host and skewed by the clock difference
across hosts.
"""

from __future__ import annotations

import json
import os
import time
from typing import NamedTuple

from .._store import fs as _fs
from .._store.identity import TreeId
from .._store.layout import LOCKS, OWNER_SUFFIX, Layout
from .._store.lockformat import HOLDERS, fields, host_of, latest_writer, state_name


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

    def as_dict(self) -> dict[str, object]:
        return {
            "tree": self.tid.pin,
            "env": self.tid.env,
            "path": self.path,
            "held": self.held,
            "host": self.host,
            "pid": self.pid,
            "heartbeat_age": None if self.heartbeat_age is None else round(self.heartbeat_age, 1),
            "stale": self.stale,
            "waiters": self.waiters,
            "problem": self.problem,
        }


def _read(dir_fd: int | None, name: str) -> bytes | None:
    return None if dir_fd is None else _fs.read_file(dir_fd, (name,), 1 << 16)


def _names(dir_fd: int | None) -> list[str]:
    try:
        return [] if dir_fd is None else os.listdir(dir_fd)
    except OSError:
        return []


def inspect(layout: Layout, tid: TreeId, stale_after: float, now: float | None = None) -> LockInfo:
    """What the lock's files say, read through directory descriptors: a symlink anywhere reads as no lock."""
    rw_dir = os.path.join(layout.path(*layout.lock_dir(tid)), state_name(tid.leaf))
    now = time.time() if now is None else now
    root = layout.root_fd()
    directory = None if root is None else _fs.open_dir(root, layout.lock_dir(tid))
    rw = None if directory is None else _fs.open_dir(directory, (state_name(tid.leaf),))
    holders = None if rw is None else _fs.open_dir(rw, (HOLDERS,))
    try:
        if rw is None:
            problem = None
            if directory is not None and _exists(directory, state_name(tid.leaf)):
                problem = "lock state is not a directory (a symlink or file is in the way)"
            return LockInfo(tid, rw_dir, False, None, None, None, False, 0, problem)
        writer, problem = latest_writer(rw, rw_dir)
        tokens = [t for t in _names(holders) if not t.startswith(".")]
        waiters = len([t for t in tokens if t != writer])
        if writer is None:
            return LockInfo(tid, rw_dir, False, None, None, None, False, waiters, problem)
        record = _read(holders, writer)
        if record is None or holders is None:
            # Named in the log but its heartbeat record is gone: a crashed holder whose lease a peer will end.
            return LockInfo(tid, rw_dir, True, None, None, None, True, waiters, "holder record missing")
        record_fields = fields(record)
        try:
            age: float | None = max(0.0, now - os.stat(writer, dir_fd=holders, follow_symlinks=False).st_mtime)
        except OSError:
            age = None
        try:
            lease = max(stale_after, float(record_fields.get("lease", "0")))
        except ValueError:
            lease = stale_after
        pid_text = record_fields.get("pid", "")
        host = host_of(record_fields) or _owner_host(directory, tid)
        return LockInfo(
            tid,
            rw_dir,
            True,
            host,
            int(pid_text) if pid_text.isdigit() else None,
            age,
            age is not None and age > lease,
            waiters,
            problem,
        )
    finally:
        for fd in (holders, rw, directory):
            if fd is not None:
                os.close(fd)


def _exists(dir_fd: int, name: str) -> bool:
    try:
        os.stat(name, dir_fd=dir_fd, follow_symlinks=False)
    except OSError:
        return False
    return True


def _owner_host(directory: int | None, tid: TreeId) -> str | None:
    note = _read(directory, tid.leaf + OWNER_SUFFIX)
    try:
        return str(json.loads(note or b"")["host"])
    except (ValueError, KeyError, TypeError):
        return None


def list_locks(layout: Layout, stale_after: float) -> list[LockInfo]:
    now = time.time()
    return [inspect(layout, tid, stale_after, now) for tid in layout.discover(LOCKS)]
