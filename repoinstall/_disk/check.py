"""Is a tree installed? The lock-free check: no lock, no network, no process, a handful of small reads."""

from __future__ import annotations

import enum
import os
from typing import NamedTuple

from . import fs as _fs
from . import manifest as _manifest
from .identity import TreeId
from .layout import RECORD_SUFFIX, TREES, Layout
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


def check(layout: Layout, tid: TreeId, *, fresh: bool = False) -> Status:
    """Installed means BOTH a manifest record of the tree AND the tree's METADATA naming that project and version.

    About five small opens, none of them below a symlink, whatever the size of the repo. ``fresh``: as the
    server has it now, even on an NFS client that recently saw the tree missing (two more opens); for the looks
    that decide whether to install, whose "missing" must not come from a client cache. A handle that went stale
    on the way (another NFS client replaced the repo, a tree or a record) is looked up again: never "missing"
    because of it. Something this process may not read (another UID's private record or tree) is
    :class:`fs.Unreadable`, naming it.
    """
    try:
        return layout.retrying(_check, layout, tid, fresh)
    except PermissionError as error:
        raise unreadable(layout, tid, error) from None


def unreadable(layout: Layout, tid: TreeId, error: OSError) -> _fs.Unreadable:
    """What of the tree and its record ``error`` (EACCES) was about, as :func:`fs.denied` names it."""
    record = (*layout.record_dir(tid), tid.leaf + RECORD_SUFFIX)
    return _fs.denied(layout.root, error, record, (*layout.tree_dir(tid), tid.leaf))


def _check(layout: Layout, tid: TreeId, fresh: bool) -> Status:
    fresh = fresh or layout.revalidating
    trees = layout.env_fd(TREES, tid.env, fresh=fresh)
    if trees is None:
        return Status(State.MISSING)
    record = _manifest.read(layout, tid, fresh=fresh)
    # Looked up only (no GETATTR per directory on NFS) unless fresh: the files read below are revalidated anyway.
    tree = _fs.open_dir(trees, (tid.name, tid.leaf), lookup_only=not fresh)
    if tree is None:
        # Nothing usable at the path; if a symlink or file is planted there, the install step renames it aside.
        present = _exists(trees, tid)
        return Status(State.BROKEN if present else State.MISSING, record)
    try:
        # The dist-info the record names, opened without following a symlink: a planted link leads nowhere.
        metadata = _fs.read_file(tree, (record.dist_info, "METADATA"), lookup_only=not fresh) if record else None
        if record is not None and _names(metadata, tid):
            return Status(State.PRESENT, record, record.dist_info)
        # No (usable) record: find the project's own dist-info, by today's naming or by scanning the tree.
        guess = dist_info_name(tid.name, tid.version_text)
        candidates = [guess] + [e for e in _listing(tree) if e.endswith(".dist-info") and e != guess]
        for entry in candidates:
            if _names(_fs.read_file(tree, (entry, "METADATA")), tid):
                return Status(State.UNRECORDED, record, entry)
        return Status(State.BROKEN, record)
    finally:
        os.close(tree)


def _listing(tree: int) -> list[str]:
    # The tree's own entries, through a descriptor that can list ("." of the looked-up one): nothing is followed.
    fd = os.open(".", _fs.DIR_FLAGS, dir_fd=tree)
    try:
        return os.listdir(fd)
    finally:
        os.close(fd)


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


def missing(layout: Layout, tid: TreeId) -> bool:
    """Whether nothing is at the tree's path (a record alone counts as nothing), as the server has it now."""
    return check(layout, tid, fresh=True).state is State.MISSING


def present(layout: Layout, tid: TreeId, *, fresh: bool = False) -> bool:
    """Whether the tree is installed (:func:`check` says PRESENT)."""
    return check(layout, tid, fresh=fresh).state is State.PRESENT


class Appeared:
    """A waiter's look at one tree: ``look()`` says whether it is installed now, as the server says. While it
    is not there, a look costs one metadata operation on NFS (opening the project's directory revalidates it,
    and an unchanged directory needs nothing more); the full fresh check runs once the directory changed."""

    def __init__(self, layout: Layout, tid: TreeId) -> None:
        self._layout = layout
        self._tid = tid
        self._watch = _fs.DirWatch()
        self._env_watch = _fs.DirWatch()
        self._root_watch = _fs.DirWatch()

    def __call__(self) -> bool:
        return self._layout.retrying(self._look)

    def _look(self) -> bool:
        tid = self._tid
        trees = self._layout.env_fd(TREES, tid.env)
        if trees is None:
            # Nothing installed for this env yet: look again from the root once the root changed.
            root = self._layout.root_fd()
            return root is not None and self._root_watch.changed(root) and present(self._layout, tid, fresh=True)
        project = _fs.open_dir(trees, (tid.name,))
        if project is None:
            # No version of the project yet: watch trees/<env> for its directory to appear.
            return self._env_watch.changed(trees) and present(self._layout, tid, fresh=True)
        try:
            if not self._watch.changed(project, revalidated=True):
                return False
            os.stat(tid.leaf, dir_fd=project, follow_symlinks=False)
        except OSError:
            return False
        finally:
            os.close(project)
        return present(self._layout, tid, fresh=True)


def in_use(layout: Layout, tid: TreeId, *, fresh: bool = False) -> bool:
    """:func:`present`, and if so noted as just used (at most one small write an hour), for gc ``--unused-for``."""
    if not present(layout, tid, fresh=fresh):
        return False
    import time

    layout.retrying(_manifest.mark_used, layout, tid, time.time())
    return True
