"""``list``: every recorded tree in the repo, all environments, with its path."""

from __future__ import annotations

import os

from .._store import fs as _fs
from .._store import manifest as _manifest
from .._store.layout import RECORDS, Layout


def installed(layout: Layout) -> list[tuple[_manifest.TreeEntry, str]]:
    """Each recorded tree whose directory is there, with its path (nothing below a symlink is followed)."""
    root = layout.existing_fd()
    found = []
    for tid in layout.discover(RECORDS):
        entry = _manifest.read(layout, tid)
        tree = _fs.open_dir(root, (*layout.tree_dir(tid), tid.leaf))
        if tree is None:
            continue  # a record whose tree is gone (removed by hand, or mid-gc) is not an installed tree
        os.close(tree)
        if entry is not None:
            found.append((entry, layout.tree_path(tid)))
    return found
