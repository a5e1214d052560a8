"""One installer run, one dir per distribution: split a ``--target`` dir by the distributions' RECORDs.

An installer installs a batch of distributions in one run (``--no-deps``, hash-checked) into one private dir;
each distribution's ``*.dist-info/RECORD`` lists every file it wrote (its bytecode too: both installers compile
and record it). Each file is moved (a rename within the staging dir's filesystem: no byte is copied) into the
dir of the one distribution that records it. A file two RECORDs list, or one no RECORD lists, is refused: the
split would otherwise store a file under the wrong distribution, and every tree composed from it would be wrong.

Everything here works below a private staging dir that nobody else writes; nothing is followed (a symlink the
installer made is moved as a link).
"""

from __future__ import annotations

import os
from collections.abc import Sequence

from .._disk import fs as _fs
from .._disk import walk as _walk
from .._disk.dists import Dist, is_bytecode, record_rows, scan, tree_relative
from .._errors import InstallError


def owners(combined: str, dists: Sequence[Dist]) -> dict[str, Dist]:
    """Each tree-relative path a RECORD lists, and the one distribution that lists it."""
    owned: dict[str, Dist] = {}
    for dist in dists:
        rows = record_rows(combined, dist)
        if rows is None:
            raise InstallError(f"{dist.name} {dist.version}: its RECORD is missing or unreadable")
        for row in rows:
            relative = tree_relative(row[0]) if row else None
            if relative is None:
                continue
            other = owned.setdefault(relative, dist)
            if other is not dist:
                raise InstallError(
                    f"{other.name} {other.version} and {dist.name} {dist.version} both write {relative}: one tree "
                    "cannot hold both"
                )
    return owned


def split(combined: str, destination: str) -> dict[str, str]:
    """Move every file of ``combined`` into ``destination/<dist-info name>/<its path>``; each distribution's dir,
    by its dist-info's name. :class:`InstallError` for a file two distributions or none claim."""
    dists = scan(combined)
    if not dists:
        raise InstallError(f"{combined}: holds no distribution (no *.dist-info)")
    owned = owners(combined, dists)
    sources = {os.path.splitext(path)[0]: dist for path, dist in owned.items() if path.endswith(".py")}
    moves: list[tuple[str, Dist]] = []
    fd = os.open(combined, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW)
    try:
        for entry in _walk.walk(fd):
            dist = owned.get(entry.path) or _bytecode_owner(entry.path, sources)
            if dist is None:
                raise InstallError(f"{entry.path}: listed in no distribution's RECORD")
            moves.append((entry.path, dist))
    finally:
        os.close(fd)
    made = {dist.dist_info: os.path.join(destination, dist.dist_info) for dist in dists}
    for path in made.values():
        os.makedirs(path)
    parents: set[str] = set(made.values())
    for relative, dist in _whole_dirs(moves):
        target = os.path.join(made[dist.dist_info], relative)
        _fs.make_parent(target, parents)
        os.rename(os.path.join(combined, relative), target)
    for dist in dists:
        _without_history(made[dist.dist_info], dist.dist_info)
    return made


def _whole_dirs(moves: list[tuple[str, Dist]]) -> list[tuple[str, Dist]]:
    """``moves`` (each file and its distribution) with every directory whose files all belong to one distribution
    moved as one (its topmost such directory: ``numpy/``, ``numpy-2.4.6.dist-info/``), and each other file alone (a
    namespace package's directory that two distributions share, a top-level module): one rename per directory, not
    one per file and a ``mkdir`` per directory."""
    owner: dict[str, Dist | None] = {}  # each directory holding files: their one distribution, or None: several
    for relative, dist in moves:
        parts = relative.split("/")
        for depth in range(1, len(parts)):
            directory = "/".join(parts[:depth])
            if owner.setdefault(directory, dist) is not dist:
                owner[directory] = None
    whole: dict[str, Dist] = {}
    alone: list[tuple[str, Dist]] = []
    for relative, dist in moves:
        parts = relative.split("/")
        top = next((d for depth in range(1, len(parts)) if owner[d := "/".join(parts[:depth])] is dist), None)
        if top is None:
            alone.append((relative, dist))
        else:
            whole[top] = dist
    return [*whole.items(), *alone]


#: What an installer writes into a dist-info about how it was asked, not what the distribution is: a URL it was
#: named by (PEP 610) and whether the user asked for it by name (PEP 376). A stored distribution is linked into
#: every tree that holds it, so these would make a tree's dist-info depend on which install stored it first (a
#: tree ensured from an index would carry a lock's ``direct_url.json``): they are left out of the store.
HISTORY = ("direct_url.json", "REQUESTED")


def _without_history(directory: str, dist_info: str) -> None:
    """Remove :data:`HISTORY` from the distribution split into ``directory``, and their lines from its RECORD
    (every other line kept as the installer wrote it)."""
    import csv

    info = os.path.join(directory, dist_info)
    removed = set()
    for name in HISTORY:
        try:
            os.unlink(os.path.join(info, name))
        except FileNotFoundError:
            continue
        removed.add(f"{dist_info}/{name}")
    if not removed:
        return
    record = os.path.join(info, "RECORD")
    with open(record, encoding="utf-8", newline="") as handle:
        lines = handle.read().splitlines(keepends=True)
    kept = [line for line in lines if (next(csv.reader([line]), None) or [""])[0] not in removed]
    with open(record, "w", encoding="utf-8", newline="") as handle:
        handle.write("".join(kept))


def _bytecode_owner(path: str, sources: dict[str, Dist]) -> Dist | None:
    """The distribution whose module an unrecorded ``__pycache__/<module>.<tag>.pyc`` was compiled from."""
    if not is_bytecode(path):
        return None
    directory, name = os.path.split(os.path.dirname(path))[0], os.path.basename(path)
    module = name.split(".", 1)[0]
    return sources.get(os.path.join(directory, module) if directory else module)
