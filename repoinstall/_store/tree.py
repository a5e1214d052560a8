"""Whole-tree moves on the store: record a published tree that has no record, set a broken tree aside, adopt
a tree a peer published. Each keeps the reader's rule: a record is only ever seen beside a whole tree."""

from __future__ import annotations

import os
from typing import TYPE_CHECKING

from .. import _log
from . import fs as _fs
from . import manifest as _manifest
from .check import State, check

if TYPE_CHECKING:
    from .._results import Action
    from .identity import TreeId
    from .layout import Layout


def record_existing(layout: Layout, requirement: str, tid: TreeId, dist_info: str) -> bool:
    """Write the record of a published tree that has none, if every RECORD hash in it checks out."""
    from .dists import check_tree, scan

    tree = _fs.open_dir(layout.writable_fd(), (*layout.tree_dir(tid), tid.leaf))
    if tree is None:
        return False
    try:
        dists = scan(tree)
        if problems := check_tree(tree, dists):
            _log.logger().warning(
                "%s does not match its RECORDs (%s); reinstalling", layout.tree_path(tid), problems.summary()
            )
            return False
        installer = _fs.read_file(tree, (dist_info, "INSTALLER"))
    finally:
        os.close(tree)
    name = (installer or b"unknown").decode("utf-8", "replace").strip() or "unknown"
    _manifest.write(layout, tid, _manifest.TreeEntry.new(tid, requirement, dist_info, dists, name, "unknown"))
    return True


def set_aside(layout: Layout, tid: TreeId) -> None:
    """Move a broken tree out of the way: the record goes first, so nobody sees a record with a broken tree."""
    _manifest.remove(layout, tid)
    if layout.discard(layout.tree_dir(tid), tid.leaf, f"{tid.env}.{tid.name}.{tid.leaf}") is not None:
        _log.logger().warning("moved a broken tree aside: %s", layout.tree_path(tid))


def clear_for_install(layout: Layout, requirement: str, tid: TreeId) -> Action | None:
    """Under the tree's lock, before installing. A whole tree without a record (a crash between publish and
    record) is re-recorded from its RECORD hashes, no installer needed: "repaired" ("waited" if a peer recorded
    it meanwhile). Anything else at the tree's path is set aside, so the publish finds it free: ``None``."""
    status = check(layout, tid, fresh=True)
    if status.state is State.UNRECORDED:
        assert status.dist_info is not None
        if record_existing(layout, requirement, tid, status.dist_info):
            return "repaired"
        if check(layout, tid).state is State.PRESENT:
            return "waited"
        set_aside(layout, tid)
    elif status.state is State.BROKEN:
        set_aside(layout, tid)
    return None


def adopt(layout: Layout, requirement: str, tid: TreeId) -> bool:
    """Whether the tree a peer published first (our publish found its path taken) is whole: recorded by us if
    the peer has not yet, and then used as if ours."""
    status = check(layout, tid, fresh=True)
    if status.state is State.UNRECORDED:
        assert status.dist_info is not None
        record_existing(layout, requirement, tid, status.dist_info)
        status = check(layout, tid, fresh=True)
    return status.state is State.PRESENT
