"""A stored distribution checked against its RECORD, and set aside when it is damaged.

Every tree composed from a stored distribution holds its files by hard links: one inode. A file changed in
place in the store is changed in every such tree, and a tree composed from it later would link the changed file
again. So a damaged stored distribution is never repaired in place: it is renamed into ``trash/`` whole (the
Layout's discard, as gc removes things), and the next install that needs it installs it afresh, with new inodes.

Before a stored distribution is linked into a new tree, :func:`fit` hashes every file against its RECORD (as
verify's :func:`check` does) and sets a changed one aside, so the caller installs it afresh.
"""

from __future__ import annotations

import contextlib
import os
import stat
from typing import NamedTuple

from .. import _log
from .._disk import fs as _fs
from .._disk.dists import Dist, RecordProblems, check_tree, scan
from .._disk.identity import has_bytecode
from .._disk.layout import Layout
from . import digests
from .identity import DistId
from .inventory import Stored


class Audit(NamedTuple):
    """What checking one stored distribution found: its dist-info (if one names it), RECORD problems, and why
    it is not a stored distribution at all (``broken``); ``untrusted``: why it cannot be trusted though every
    file matches its RECORD (a RECORD that is not the one stored, a file any user may write, a setuid file)."""

    dist: Dist | None
    problems: RecordProblems
    broken: str | None = None
    untrusted: str | None = None

    @property
    def whole(self) -> bool:
        return self.broken is None and not self.problems and self.untrusted is None

    def why(self) -> str:
        return self.broken or (self.problems.summary() if self.problems else "") or self.untrusted or "ok"


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
        return Audit(
            own[0],
            check_tree(fd, found, bytecode=has_bytecode(stored.env)),
            None,
            _untrusted(layout, stored, fd, own[0]),
        )
    finally:
        os.close(fd)


#: Mode bits no stored file or directory has (all are read-only; directories only keep their setgid bit): a
#: file any user may write, or one that runs as its owner or group.
_UNSAFE_FILE = stat.S_IWGRP | stat.S_IWOTH | stat.S_ISUID | stat.S_ISGID
_UNSAFE_DIR = stat.S_IWGRP | stat.S_IWOTH | stat.S_ISUID


def _untrusted(layout: Layout, stored: Stored, fd: int, dist: Dist) -> str | None:
    """Why the stored distribution open at ``fd`` is not to be trusted though its files may match its RECORD: a
    RECORD that is not the one kept when it was stored (see :mod:`.digests`), or a file or directory of an unsafe
    mode; ``None`` if neither."""
    expected = digests.kept(layout, stored)
    if expected is not None and digests.of_record(fd, dist.dist_info) != expected:
        return (
            "its RECORD is not the one stored (a file changed together with its RECORD line, or another build's "
            "files under this artifact's name)"
        )
    for top, dirs, files, top_fd in os.fwalk(".", dir_fd=fd):
        for name in (*dirs, *files):
            with contextlib.suppress(OSError):
                mode = os.stat(name, dir_fd=top_fd, follow_symlinks=False).st_mode
                unsafe = mode & (_UNSAFE_DIR if stat.S_ISDIR(mode) else _UNSAFE_FILE) if not stat.S_ISLNK(mode) else 0
                if unsafe:
                    shown = os.path.normpath(os.path.join(top, name))
                    return f"{shown} has mode {stat.S_IMODE(mode):04o} (stored files are read-only, never setuid)"
    return None


def _names(dist: Dist, stored: Stored) -> bool:
    from packaging.version import InvalidVersion, Version

    from .._disk.identity import canonical_name, canonical_version

    try:
        version = canonical_version(Version(dist.version))
    except InvalidVersion:
        return False
    return canonical_name(dist.name) == stored.name and stored.leaf.startswith(f"{version}-")


def set_aside(layout: Layout, stored: Stored, why: str) -> bool:
    """Rename a damaged stored distribution into trash/ (and delete it there): whether it was there. Trees that
    link its files keep them (they are verified, and repaired, on their own); no new tree links them."""
    label = f"store.{stored.env}.{stored.name}.{stored.leaf}"[:120]
    gone = layout.discard(stored.parts()[:-1], stored.leaf, label)
    if gone is not None:
        digests.forget(layout, stored)  # the next one stored here keeps its own
        _log.logger().warning("moved a damaged stored distribution aside (%s): %s", why, layout.path(*stored.parts()))
    return gone is not None


def fit(layout: Layout, dist: DistId) -> bool:
    """Whether ``dist`` is stored whole, every file hashed against its RECORD, so that linking it into a tree links
    nothing changed. Something at its path that is not (a file changed in place through a tree that links it, a
    dist-info edited) is set aside here, and the caller installs the distribution afresh, with new inodes."""
    stored = Stored.of(dist)
    try:
        audit = check(layout, stored)
    except FileNotFoundError:
        return False  # set aside by a peer since we looked
    except PermissionError as error:
        # Not ours to judge, let alone set aside (mode 000, another UID's): one line naming it, its owner and mode.
        raise _fs.denied(layout.root, error, stored.parts()) from None
    if audit is None:
        return False
    if audit.whole:
        return True
    set_aside(layout, stored, audit.why())
    return False
