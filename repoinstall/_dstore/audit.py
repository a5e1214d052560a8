"""A stored distribution checked against its RECORD, and set aside when it is damaged.

Every tree composed from a stored distribution holds its files by hard links: one inode. A file changed in
place in the store is changed in every such tree, and a tree composed from it later would link the changed file
again. So a damaged stored distribution is never repaired in place: it is renamed into ``trash/`` whole (the
Layout's discard, as gc removes things), and the next install that needs it installs it afresh, with new inodes.

Two checks of different cost: :func:`check` hashes every file (verify's); :func:`sizes_differ` only stats them
against their RECORD sizes (the install path's, before it links a stored distribution into a new tree: a
truncated or rewritten file of another size is not linked again; one of the same size is caught by the staged
tree's hash check, which the protocol makes before every publish).
"""

from __future__ import annotations

import os
from typing import NamedTuple

from .. import _log
from .._store import fs as _fs
from .._store import walk as _walk
from .._store.dists import Dist, RecordProblems, check_tree, record_rows, scan, tree_relative
from .._store.layout import Layout
from .identity import DistId
from .inventory import Stored


class Audit(NamedTuple):
    """What checking one stored distribution found: its dist-info (if one names it), RECORD problems, and why
    it is not a stored distribution at all (``broken``)."""

    dist: Dist | None
    problems: RecordProblems
    broken: str | None = None


def check(layout: Layout, stored: Stored) -> Audit | None:
    """Hash every file of a stored distribution against its RECORD; ``None`` if it is not there (any more)."""
    root = layout.root_fd()
    fd = None if root is None else _fs.open_dir(root, stored.parts())
    if fd is None:
        return None
    try:
        found = scan(fd)
        own = [d for d in found if _names(d, stored)]
        if len(found) != 1 or not own:
            held = ", ".join(d.dist_info for d in found) or "no dist-info"
            return Audit(None, RecordProblems(), f"holds {held}, not one dist-info naming {stored.name}")
        return Audit(own[0], check_tree(fd, found))
    finally:
        os.close(fd)


def _names(dist: Dist, stored: Stored) -> bool:
    from packaging.version import InvalidVersion, Version

    from .._store.identity import canonical_name, canonical_version

    try:
        version = canonical_version(Version(dist.version))
    except InvalidVersion:
        return False
    return canonical_name(dist.name) == stored.name and stored.leaf.startswith(f"{version}-")


def sizes_differ(stored_dir: str) -> str | None:
    """The first file of a stored distribution whose size (or kind) is not its RECORD's, or that is missing;
    ``None`` if every one has its recorded size. Stats only, reads no file but the RECORD."""
    fd = os.open(stored_dir, _fs.DIR_FLAGS)
    try:
        expected: dict[str, str] = {}
        for dist in scan(fd):
            rows = record_rows(fd, dist)
            if rows is None:
                return f"{dist.dist_info}/RECORD"
            for row in rows:
                if len(row) > 2 and row[2] and (relative := tree_relative(row[0])) is not None:
                    expected[relative] = row[2]
        if not expected:
            return None  # no size recorded: nothing to compare (the staged tree's hash check still runs)
        for entry in _walk.walk(fd):
            size = expected.pop(entry.path, None)
            if size is None:
                continue
            if entry.kind != _walk.FILE:
                return entry.path
            try:
                found = os.stat(entry.name, dir_fd=entry.dir_fd, follow_symlinks=False).st_size
            except FileNotFoundError:
                return entry.path
            if str(found) != size:
                return entry.path
        return next(iter(sorted(expected)), None)  # recorded, never reached: missing
    finally:
        os.close(fd)


def set_aside(layout: Layout, stored: Stored, why: str) -> bool:
    """Rename a damaged stored distribution into trash/ (and delete it there): whether it was there. Trees that
    link its files keep them (they are verified, and repaired, on their own); no new tree links them."""
    label = f"store.{stored.env}.{stored.name}.{stored.leaf}"[:120]
    gone = layout.discard(stored.parts()[:-1], stored.leaf, label)
    if gone is not None:
        _log.logger().warning("moved a damaged stored distribution aside (%s): %s", why, layout.path(*stored.parts()))
    return gone is not None


def usable(layout: Layout, dist: DistId) -> bool:
    """Whether ``dist`` is stored and fit to link into a tree: present, and every file of its recorded size. One
    that is not is set aside here, so the caller installs it afresh rather than link a changed file again."""
    from .store import path, present

    if not present(layout, dist):
        return False
    try:
        first = sizes_differ(path(layout, dist))
    except FileNotFoundError:
        return False  # set aside by a peer since we looked
    if first is None:
        return True
    set_aside(layout, Stored.of(dist), f"{first} is not the size its RECORD says")
    return False


def fit(layout: Layout, dist: DistId) -> bool:
    """Whether ``dist`` is stored whole, every file hashed against its RECORD, so that linking it into a tree links
    nothing changed. Something at its path that is not (a file changed in place through a tree that links it, a
    dist-info edited) is set aside here, and the caller installs the distribution afresh, with new inodes."""
    stored = Stored.of(dist)
    try:
        audit = check(layout, stored)
    except FileNotFoundError:
        return False  # set aside by a peer since we looked
    if audit is None:
        return False
    if audit.broken is None and not audit.problems:
        return True
    set_aside(layout, stored, audit.broken or audit.problems.summary())
    return False
