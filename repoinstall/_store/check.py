"""Is a tree installed? The lock-free check: no lock, no network, no process, a handful of small reads."""

from __future__ import annotations

import enum
import os
from typing import NamedTuple

from . import fs as _fs
from . import manifest as _manifest
from .identity import TreeId
from .layout import TREES, Layout
from .metadata import dist_info_name, parse_metadata


class State(enum.Enum):
    PRESENT = "present"  # record and METADATA agree: use it
    MISSING = "missing"  # nothing at the tree path (a record, if any, is stale)
    UNRECORDED = "unrecorded"  # a tree whose METADATA matches but no record: a crash between publish and record
    BROKEN = "broken"  # something at the tree path that is not this tree


class Status(NamedTuple):
    state: State
    record: _manifest.TreeEntry | None = None
    dist_info: str | None = None


def _names(data: bytes | None, tid: TreeId) -> bool:
    return data is not None and (parsed := parse_metadata(data)) is not None and tid.is_named(*parsed)


def check(layout: Layout, tid: TreeId) -> Status:
    """Installed means BOTH a manifest record of the tree AND the tree's METADATA naming that project and version.

    About five small opens, none of them below a symlink, whatever the size of the repo.
    """
    trees = layout.env_fd(TREES, tid.env)
    if trees is None:
        return Status(State.MISSING)
    record = _manifest.read(layout, tid)
    tree = _fs.open_dir(trees, (tid.name, tid.leaf))
    if tree is None:
        # Nothing usable at the path; if a symlink or file is planted there, the install step renames it aside.
        present = _exists(trees, tid)
        return Status(State.BROKEN if present else State.MISSING, record)
    try:
        # The dist-info the record names, opened without following a symlink: a planted link leads nowhere.
        if record is not None and _names(_fs.read_file(tree, (record.dist_info, "METADATA")), tid):
            return Status(State.PRESENT, record, record.dist_info)
        # No (usable) record: find the project's own dist-info, by today's naming or by scanning the tree.
        guess = dist_info_name(tid.name, tid.version_text)
        candidates = [guess] + [e for e in os.listdir(tree) if e.endswith(".dist-info") and e != guess]
        # os.listdir(fd) lists the open directory itself: nothing below it is followed.
        for entry in candidates:
            if _names(_fs.read_file(tree, (entry, "METADATA")), tid):
                return Status(State.UNRECORDED, record, entry)
        return Status(State.BROKEN, record)
    finally:
        os.close(tree)


def _exists(trees: int, tid: TreeId) -> bool:
    parent = _fs.open_dir(trees, (tid.name,))
    if parent is None:
        return False
    try:
        os.stat(tid.leaf, dir_fd=parent, follow_symlinks=False)
        return True
    except FileNotFoundError:
        return False
    finally:
        os.close(parent)


def present(layout: Layout, tid: TreeId) -> bool:
    """Whether the tree is installed (:func:`check` says PRESENT)."""
    return check(layout, tid).state is State.PRESENT


def in_use(layout: Layout, tid: TreeId) -> bool:
    """:func:`present`, and if so noted as just used (at most one small write an hour), for gc ``--unused-for``."""
    if not present(layout, tid):
        return False
    import time

    _manifest.mark_used(layout, tid, time.time())
    return True
