"""``list``: every recorded tree in the repo, all environments, with its path."""

from __future__ import annotations

import os

from .. import _log
from .._disk import fs as _fs
from .._disk import manifest as _manifest
from .._disk.check import unreadable
from .._disk.layout import RECORDS, Layout


def installed(layout: Layout) -> list[tuple[_manifest.TreeEntry, str]]:
    """Each recorded tree whose directory is there, with its path (nothing below a symlink is followed). A tree
    or record this process may not read (another UID's) is left out with a warning naming it."""
    root = layout.existing_fd()
    try:
        recorded = layout.discover(RECORDS)
    except PermissionError as error:  # a records directory of another UID's, not a tree
        raise _fs.denied(layout.root, error, (RECORDS,)) from None
    found = []
    for tid in recorded:
        try:
            entry = _manifest.read(layout, tid)
            tree = _fs.open_dir(root, (*layout.tree_dir(tid), tid.leaf))
        except PermissionError as error:
            _log.logger().warning("%s; left out", unreadable(layout, tid, error))
            continue
        if tree is None:
            continue  # a record whose tree is gone (removed by hand, or mid-gc) is not an installed tree
        os.close(tree)
        if entry is not None:
            found.append((entry, layout.tree_path(tid)))
    return found
