"""Before the lock and the installer: refuse what would make an install fail only after the installer ran.

A file or symlink where the directory of a tree, its record or its lock belongs, or a directory where its record
file belongs, cannot be repaired by an install: the tree would be published and then have no record
(a tree nobody finds, which the next ensure refuses again), or the lock could not be made. So it is one line now
(exit 2), with nothing created, no lock taken and no installer run.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from .._store import fs as _fs
from .._store.layout import RECORD_SUFFIX

if TYPE_CHECKING:
    from .._store.identity import TreeId
    from .._store.layout import Layout


def refuse_obstacles(layout: Layout, tid: TreeId, *, locking: bool) -> None:
    """:class:`RepoUnusable` naming the first thing in the way of installing ``tid``; what is missing is fine."""
    root = layout.writable_fd()
    for parts in (layout.tree_dir(tid), layout.record_dir(tid), *([layout.lock_dir(tid)] if locking else [])):
        _fs.check_dirs(root, parts, layout.root)
    _fs.check_file(root, (*layout.record_dir(tid), tid.leaf + RECORD_SUFFIX), layout.root)
