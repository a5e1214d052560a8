"""filelock's on-disk layout for the soft read-write locks repoinstall takes: the one module that knows it.

For a lock at ``<dir>/<leaf>.lock`` filelock keeps its whole state in one directory beside it::

    <leaf>.lock.rw/                the lock's state (STATE_SUFFIX)
        gen/<20 digits>            immutable snapshots of the lock's log, "filelock-rw/..." with "writer=<token>";
                                   every change adds one, so this directory's mtime is the lock's last activity
        holders/<token>            one record per participant ("host=", "pid=", "lease="); a heartbeat rewrites
                                   it, so its mtime is that participant's last heartbeat

The lock itself (``_lock``), the read-only view for people (``_locks``), gc and doctor all name these parts
through here, so a change in filelock's format is a change in this file.
"""

from __future__ import annotations

import os

from . import fs as _fs

#: Our name for a lock: ``<leaf>.lock``; filelock keeps its state in ``<leaf>.lock.rw/``.
LOCK_SUFFIX = ".lock"
STATE_SUFFIX = LOCK_SUFFIX + ".rw"
GENERATIONS = "gen"
HOLDERS = "holders"
_GENERATION_DIGITS = 20


def lock_name(leaf: str) -> str:
    return leaf + LOCK_SUFFIX


def state_name(leaf: str) -> str:
    return leaf + STATE_SUFFIX


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


def latest_writer(state_fd: int, shown: str) -> tuple[str | None, str | None]:
    """(writer token, problem) from the newest readable generation of a lock's log (its state dir open)."""
    generations = _fs.open_dir(state_fd, (GENERATIONS,))
    if generations is None:
        return None, None
    try:
        try:
            listed = os.listdir(generations)
        except OSError:
            listed = []
        names = sorted((n for n in listed if len(n) == _GENERATION_DIGITS and n.isdigit()), reverse=True)
        for name in names:
            data = _fs.read_file(generations, (name,), 1 << 16)
            if data is None:
                continue  # compacted between the listing and the read
            if not data.startswith(b"filelock-rw/"):
                return None, f"unreadable lock state in {os.path.join(shown, GENERATIONS, name)}"
            return fields(data).get("writer"), None
        return None, None
    finally:
        os.close(generations)


def host_of(record: dict[str, str]) -> str | None:
    """A holder's host. filelock appends "?pidns-..." for a process in a PID namespace (every container): dropped,
    so it reads as the pod's hostname our own notes carry."""
    return (record.get("host") or "").split("?pidns", 1)[0] or None
