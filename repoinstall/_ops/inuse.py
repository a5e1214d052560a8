"""Which processes on this host use a tree: gc's and remove's in-use check, read from ``/proc``.

A process uses a directory if any of these is inside it (the directory itself or a path below it, compared by
real path): its working directory; a file it has open (``/proc/<pid>/fd/*``); a file it has mapped
(``/proc/<pid>/maps``: a C extension or shared library loaded from it); an entry of its ``PYTHONPATH``
(``/proc/<pid>/environ``: a Python process that imported pure-Python modules from a tree keeps no file open, but
it was started with the tree on its path, as ``repoinstall run`` starts its command); a path its command line
names (``/proc/<pid>/cmdline``: a tree's ``bin/`` script, run by its interpreter). Relative ``PYTHONPATH``
entries and command-line paths are resolved against the process's own working directory.

Best effort, and advisory:

* ``/proc`` is scanned once per run (:func:`scan`), whatever the number of trees looked up in it; what changes
  after the scan is not seen. A process that starts using a tree right after it is not protected by this check
  (see :meth:`repoinstall._ops.gc.Collector.unpublish` for what protects it then);
* what this UID may not read of another process (another user's ``environ``, ``fd`` and ``maps``; everything
  of a process ``hidepid`` hides) is skipped silently. As root every process on the host is seen;
* a Python process whose ``sys.path`` was extended at run time (``Repo.activate`` inserts its trees into
  ``sys.path``; a ``sys.path.insert`` of a tree's path) leaves no trace in ``/proc`` once its pure-Python modules
  are imported: it is seen only while a file of the tree is open or mapped, or its working directory is in it;
* only this host's processes, in this PID namespace, are seen (a pod sees its own unless it shares the host's
  PID namespace), with paths as their own root names them. A process on another node of a shared volume is
  invisible: for gc, ``--unused-for`` (a tree nobody has ensured for that long) is what covers those.
"""

from __future__ import annotations

import bisect
import os
from typing import NamedTuple

PROC = "/proc"

#: The ways a process uses a tree, in the order one is named when it uses it in several.
WAYS = ("cwd", "command line", "open file", "mapped file", "PYTHONPATH")


class User(NamedTuple):
    """One process that uses a tree, and the first way it does (one of :data:`WAYS`)."""

    pid: int
    comm: str
    how: str

    def __str__(self) -> str:
        return f"pid {self.pid} ({self.comm}): {self.how}"


class Users:
    """What a scan of ``/proc`` found inside one directory (``top``, a real path): every path a process uses
    there, and how. :meth:`of` says which processes use a directory below ``top``."""

    def __init__(self, top: str, uses: list[tuple[str, User]]) -> None:
        self.top = top
        self._uses = sorted(uses)

    def of(self, path: str) -> list[User]:
        """The processes that use ``path`` (a real path below :attr:`top`) or anything inside it, one each (its
        first way, in :data:`WAYS` order), lowest pid first."""
        below = path.rstrip("/") + "/"
        found: dict[int, User] = {}
        # Sorted by path, the directory's own uses are one run and what is below it another (siblings whose names
        # go on past it, "1.0-x", sort between them: "-" < "/").
        for start, exact in ((path, True), (below, False)):
            for index in range(bisect.bisect_left(self._uses, (start,)), len(self._uses)):
                used, user = self._uses[index]
                if not (used == path if exact else used.startswith(below)):
                    break
                known = found.get(user.pid)
                if known is None or WAYS.index(user.how) < WAYS.index(known.how):
                    found[user.pid] = user
        return [found[pid] for pid in sorted(found)]


def scan(within: str, *, proc: str = PROC) -> Users:
    """Every use by a process of this host (but this one) of a path inside ``within`` (the directory itself
    included), read from ``proc`` once. What cannot be read is skipped: a process that exited meanwhile, another
    UID's files, a ``hidepid`` mount."""
    top = os.path.realpath(within)
    me = os.getpid()
    try:
        pids = sorted(int(name) for name in os.listdir(proc) if name.isdigit())
    except OSError:
        pids = []
    resolved: dict[str, str] = {}  # a PYTHONPATH is often shared by many workers: each string resolved once
    uses: list[tuple[str, User]] = []
    for pid in pids:
        if pid != me:
            uses.extend(_uses_of(f"{proc}/{pid}", pid, top, resolved))
    return Users(top, uses)


def _uses_of(base: str, pid: int, top: str, resolved: dict[str, str]) -> list[tuple[str, User]]:
    """What the process ``pid`` (its ``/proc`` directory ``base``) uses inside ``top``."""
    comm = _read(f"{base}/comm")
    if comm is None:
        return []  # gone, or hidden from this UID
    name = "".join(c if c.isprintable() else "?" for c in os.fsdecode(comm.rstrip(b"\n"))) or "?"
    inside = top.rstrip("/") + "/"
    found: list[tuple[str, User]] = []

    def note(path: str | None, how: str) -> None:
        if path is not None and (path == top or path.startswith(inside)):
            found.append((path, User(pid, name, how)))

    cwd = _readlink(f"{base}/cwd")
    note(cwd, "cwd")

    def real(entry: str) -> str | None:
        if not os.path.isabs(entry):
            if cwd is None or not cwd.startswith("/"):
                return None  # relative to a directory this UID cannot see
            entry = os.path.join(cwd, entry)
        if entry not in resolved:
            try:
                resolved[entry] = os.path.realpath(entry)
            except (OSError, ValueError):
                resolved[entry] = entry
        return resolved[entry]

    for argument in _strings(_read(f"{base}/cmdline")):
        if "/" in argument and not argument.startswith("-") and "\n" not in argument and len(argument) < 4096:
            note(real(argument), "command line")
    try:
        descriptors = os.listdir(f"{base}/fd")
    except OSError:
        descriptors = []
    for fd in descriptors:
        note(_kernel_path(_readlink(f"{base}/fd/{fd}")), "open file")
    maps = _read(f"{base}/maps")
    if maps is not None and os.fsencode(top) in maps:  # the kernel names real paths: a cheap look first
        for line in {os.fsdecode(line) for line in maps.splitlines()}:
            fields = line.split(None, 5)
            if len(fields) == 6:
                note(_kernel_path(fields[5]), "mapped file")
    for variable in _strings(_read(f"{base}/environ")):
        if variable.startswith("PYTHONPATH="):
            for entry in variable.removeprefix("PYTHONPATH=").split(os.pathsep):
                if entry:  # an empty entry is the working directory, looked at above
                    note(real(entry), "PYTHONPATH")
    return found


def _read(path: str) -> bytes | None:
    try:
        with open(path, "rb") as file:
            return file.read()
    except OSError:
        return None


def _readlink(path: str) -> str | None:
    try:
        return os.readlink(path)
    except OSError:
        return None


def _strings(data: bytes | None) -> list[str]:
    """A NUL-separated list (``cmdline``, ``environ``), decoded as file names are."""
    return [] if data is None else [os.fsdecode(item) for item in data.split(b"\0") if item]


def _kernel_path(path: str | None) -> str | None:
    """A path as the kernel names an open or mapped file: real already, with `` (deleted)`` after one that is
    gone (still inside the tree it was in, if the tree is there); ``socket:[...]`` and the like are no path."""
    if path is None or not path.startswith("/"):
        return None
    return path.removesuffix(" (deleted)")
