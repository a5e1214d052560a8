"""Owner notes of the process-owned dirs on the volume (a staging dir's ``owner.json``): who made one (host, pid,
and what tells that process apart from any other: boot id, pid namespace, process start time), and whether that
process still runs, which only a process on the same boot and in the same pid namespace can tell. gc reads them to
prove a staging dir dead without any lock; elsewhere only the note's heartbeat (its mtime) can tell.
"""

from __future__ import annotations

import os
import time
from typing import Any


def _read(path: str) -> str | None:
    try:
        with open(path, encoding="ascii", errors="replace") as handle:
            return handle.read(4096).strip()
    except OSError:
        return None


def _start_ticks(pid: int) -> str | None:
    """When process ``pid`` started (clock ticks since boot, /proc/<pid>/stat field 22); ``None`` if it is gone."""
    text = _read(f"/proc/{pid}/stat")
    if text is None:
        return None
    fields = text[text.rfind(")") + 2 :].split()  # after "pid (comm) ": the comm may hold spaces and parens
    return fields[19] if len(fields) > 19 else None


def _machine() -> dict[str, str | None]:
    """What makes a pid meaningful: this boot of this kernel, and this pid namespace."""
    try:
        namespace: str | None = os.readlink("/proc/self/ns/pid")
    except OSError:
        namespace = None
    return {"boot": _read("/proc/sys/kernel/random/boot_id"), "pidns": namespace}


def owner_note() -> dict[str, Any]:
    pid = os.getpid()
    return {"host": os.uname().nodename, "pid": pid, "started": time.time(), "ticks": _start_ticks(pid), **_machine()}


def owner_alive(note: dict[str, Any]) -> bool | None:
    """Whether the process that wrote ``note`` still runs: ``True``/``False`` when it ran on this boot and in this
    pid namespace (a pid and its start time prove it), ``None`` when this process cannot see it (another pod or
    node: only its heartbeat can tell)."""
    here = _machine()
    if None in here.values() or note.get("boot") != here["boot"] or note.get("pidns") != here["pidns"]:
        return None
    pid = note.get("pid")
    if not isinstance(pid, int) or pid <= 0:
        return None
    # A reused pid has another start time: the owner is gone all the same.
    ticks = _start_ticks(pid)
    return ticks is not None and ticks == note.get("ticks")
