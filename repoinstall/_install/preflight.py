"""Before the lock and the installer: refuse what would make an install fail only after the installer ran.

A file or symlink where the directory of a tree, its record, its lock or its stored distributions belongs, or a
directory where its record file belongs, cannot be repaired by an install: the tree would be published and then
have no record (a tree nobody finds, which the next ensure refuses again), its distributions could not be stored,
or the lock could not be made. So it is one line now naming it and what it is (exit 2), with nothing created, no
lock taken and no installer run.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from .._disk import fs as _fs
from .._disk.layout import RECORD_SUFFIX, STORE, STORE_LOCKS

if TYPE_CHECKING:
    from .._disk.identity import TreeId
    from .._disk.layout import Layout


def refuse_obstacles(layout: Layout, tid: TreeId, *, locking: bool) -> None:
    """:class:`RepoUnusable` naming the first thing in the way of installing ``tid`` and what it is; what is missing
    is fine. The store's directories for the tree's own name are checked too (its distributions' other names, once
    they are known, before the installer runs: :func:`repoinstall._store.strays.clear`)."""
    root = layout.writable_fd()
    stored = [(STORE, tid.env, tid.name), *([(STORE_LOCKS, tid.env, tid.name)] if locking else [])]
    for parts in (layout.tree_dir(tid), layout.record_dir(tid), *([layout.lock_dir(tid)] if locking else []), *stored):
        _fs.check_dirs(root, parts, layout.root)
    _fs.check_file(root, (*layout.record_dir(tid), tid.leaf + RECORD_SUFFIX), layout.root)
