"""Whole-tree moves on the store: record a published tree that has no record, set a broken tree aside, adopt
a tree a peer published. Each keeps the reader's rule: a record is only ever seen beside a whole tree."""

from __future__ import annotations

import errno
import os
import stat
from typing import TYPE_CHECKING, NamedTuple

from .. import _log
from . import closures as _closures
from . import fs as _fs
from . import manifest as _manifest
from .check import State, check
from .layout import TRASH

if TYPE_CHECKING:
    from .._results import Action
    from .identity import TreeId
    from .layout import Layout


def record_existing(layout: Layout, requirement: str, tid: TreeId, dist_info: str) -> bool:
    """Write the record of a published tree that has none, if every RECORD hash in it checks out."""
    from .dists import check_tree, scan
    from .identity import has_bytecode

    tree = _fs.open_dir(layout.writable_fd(), (*layout.tree_dir(tid), tid.leaf))
    if tree is None:
        return False
    try:
        dists = scan(tree)
        if problems := check_tree(tree, dists, bytecode=has_bytecode(tid.env)):
            _log.logger().warning(
                "%s does not match its RECORDs (%s); reinstalling", layout.tree_path(tid), problems.summary()
            )
            return False
        installer = _fs.read_file(tree, (dist_info, "INSTALLER"))
    finally:
        os.close(tree)
    name = (installer or b"unknown").decode("utf-8", "replace").strip() or "unknown"
    # Which artifact each distribution came from died with the installer's report, but a kept closure (written
    # when this tree was first recorded) says, so export and the store's holders read the record as before.
    kept = _closures.read(layout, tid)
    artifacts = () if kept is None else _closures.artifacts(kept)
    entry = _manifest.TreeEntry.new(tid, requirement, dist_info, dists, name, "unknown", artifacts)
    _manifest.write(layout, tid, entry)
    return True


def set_aside(layout: Layout, tid: TreeId) -> None:
    """Move a broken tree out of the way: the record goes first, so nobody sees a record with a broken tree."""
    _manifest.remove(layout, tid)
    if layout.discard(layout.tree_dir(tid), tid.leaf, f"{tid.env}.{tid.name}.{tid.leaf}") is not None:
        _log.logger().warning("moved a broken tree aside: %s", layout.tree_path(tid))


class Held(NamedTuple):
    """A tree set aside by :func:`hold`, kept in trash/ until :func:`put_back` or :func:`drop`."""

    name: str
    mode: int
    record: _manifest.TreeEntry | None


def hold(layout: Layout, tid: TreeId) -> Held | None:
    """:func:`set_aside`, keeping the tree: its record goes first, then the tree is renamed into trash/ and left
    there, so a repair that cannot reinstall it puts it back (``None`` if it was not there)."""
    record = _manifest.read(layout, tid, fresh=True)
    root = layout.writable_fd()
    try:
        mode = os.stat(os.path.join(*layout.tree_dir(tid), tid.leaf), dir_fd=root, follow_symlinks=False).st_mode
    except FileNotFoundError:
        mode = 0
    _manifest.remove(layout, tid)
    name = layout.to_trash(layout.tree_dir(tid), tid.leaf, f"held.{tid.env}.{tid.name}.{tid.leaf}")
    if name is None:
        return None
    _log.logger().warning("moved a broken tree aside, to install it again: %s", layout.tree_path(tid))
    return Held(name, stat.S_IMODE(mode), record)


def put_back(layout: Layout, tid: TreeId, held: Held) -> bool:
    """Under the tree's lock, with its path found empty: the held tree renamed back where it was, with its mode,
    then its record (the reader's rule: a record is only seen beside the tree). ``False`` (and the held tree
    deleted) if something stands at its path now, a peer's install say, or the held tree is gone."""
    root = layout.writable_fd()
    trash = _fs.open_dir(root, (TRASH,))
    if trash is None:
        return False
    try:
        parent = _fs.make_dirs(root, layout.tree_dir(tid), layout.root)
        try:
            # rename(2) onto an empty directory would replace it; trees are never empty, and the lock is ours.
            os.rename(held.name, tid.leaf, src_dir_fd=trash, dst_dir_fd=parent)
            if held.mode:
                os.chmod(tid.leaf, held.mode, dir_fd=parent, follow_symlinks=False)
        except OSError as error:
            if error.errno not in (errno.ENOENT, errno.EEXIST, errno.ENOTEMPTY):
                raise
            from .walk import remove

            remove(trash, held.name)
            return False
        finally:
            os.close(parent)
    finally:
        os.close(trash)
    if held.record is not None:
        _manifest.write(layout, tid, held.record)
    _log.logger().warning("put back the broken tree, as it could not be installed again: %s", layout.tree_path(tid))
    return True


def drop(layout: Layout, held: Held) -> None:
    """Delete the held tree in trash/ (once its reinstall published a new one)."""
    from .walk import remove

    trash = _fs.open_dir(layout.writable_fd(), (TRASH,))
    if trash is not None:
        try:
            remove(trash, held.name)
        finally:
            os.close(trash)


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
