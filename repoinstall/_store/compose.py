"""A tree composed of stored distributions: one directory to put on sys.path, made of hard links.

Every file of every distribution is linked into the tree's staging dir at its own relative path; directories
are made, never linked. A stored file and its links are one inode, so the bytes are on disk once however many
trees hold them, and the tree's RECORD hashes are the store's. Where the filesystem refuses a link (no hard links
at all, another device, too many links, or ``fs.protected_hardlinks`` refusing a link to another UID's file this
one may not write), that file is copied instead and counted: the tree is the same, it only costs its bytes.

Two distributions that write one path cannot be one tree: the second is refused with one line naming both,
before the tree is published (it is composed in a private staging dir, published by rename like any tree).
"""

from __future__ import annotations

import contextlib
import errno
import os
import shutil
from collections.abc import Sequence
from typing import NamedTuple

from .._disk import fs as _fs
from .._disk import walk as _walk
from .._errors import InstallError

#: What ``link()`` answers where a copy has to do: links unsupported (EPERM on many FUSE filesystems, EOPNOTSUPP),
#: another filesystem (EXDEV), the inode's link count at its maximum (EMLINK), or fs.protected_hardlinks (EPERM).
_NO_LINK = frozenset({errno.EPERM, errno.EXDEV, errno.EMLINK, errno.EOPNOTSUPP, errno.EACCES})


class Composed(NamedTuple):
    """What composing a tree took: files linked, files copied (where links were refused), bytes copied."""

    linked: int
    copied: int
    copied_bytes: int


class Taken(InstallError):
    """A stored distribution left its path (gc took it) before or while a tree was composed from it: the tree is
    short of its files and must not be published. ``stored`` is the path the caller gave for it."""

    def __init__(self, what: str, stored: str) -> None:
        super().__init__(f"{what}: taken out of the store (by gc) while a tree was composed from it")
        self.stored = stored


def compose(tree: str, dists: Sequence[tuple[str, str]]) -> Composed:
    """Fill the empty dir ``tree`` with the files of ``dists`` (each ``(what it is, its stored dir)``);
    :class:`InstallError` naming both when two write one path (nothing is published from a refused tree), and
    :class:`Taken` when a stored dir is not at its path (any more): the caller stores it again and composes anew
    (:mod:`repoinstall._install.fill.compose`)."""
    written: dict[str, str] = {}
    parents: set[str] = set()
    linked = copied = copied_bytes = 0
    for what, stored in dists:
        try:
            fd = os.open(stored, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW)
        except FileNotFoundError:
            raise Taken(what, stored) from None
        try:
            for entry in _walk.walk(fd):
                if entry.kind not in (_walk.FILE, _walk.LINK):
                    raise InstallError(f"{what}: {entry.path} in the store is not a file")
                first = written.setdefault(entry.path, what)
                if first != what:
                    raise InstallError(f"{first} and {what} both write {entry.path}: one tree cannot hold both")
                source, target = os.path.join(stored, entry.path), os.path.join(tree, entry.path)
                _fs.make_parent(target, parents)
                if entry.kind == _walk.LINK:
                    os.symlink(os.readlink(source), target)  # a link the installer made, as it made it
                    continue
                try:
                    os.link(source, target, follow_symlinks=False)
                    linked += 1
                except OSError as error:
                    if error.errno not in _NO_LINK:
                        raise
                    shutil.copy2(source, target, follow_symlinks=False)
                    copied += 1
                    copied_bytes += os.stat(target, follow_symlinks=False).st_size
            _still_stored(what, stored, fd)
        except OSError:
            # A file gone from under the walk (ENOENT; ESTALE on NFS): gc took the dir, or this is another fault.
            _still_stored(what, stored, fd)
            raise
        finally:
            os.close(fd)
    return Composed(linked, copied, copied_bytes)


def _still_stored(what: str, stored: str, fd: int) -> None:
    """:class:`Taken` if the stored dir walked through ``fd`` is no longer at its path: gc took it while this tree
    was composed from it, so what the walk found may be short of files deleted meanwhile.

    Invariant: gc renames a stored dir into trash/ before it deletes anything in it, so while the path still leads
    to the dir the walk read (checked after the walk, as the server has it now), the walk read it whole and every
    file it linked is the stored file."""
    try:
        parent = os.open(os.path.dirname(stored), os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW)
        try:
            _fs.revalidate(parent)  # an NFS client may answer from a cached lookup of the name
            here = os.stat(os.path.basename(stored), dir_fd=parent, follow_symlinks=False)
        finally:
            os.close(parent)
        same = os.path.samestat(here, os.fstat(fd))
    except OSError:
        same = False  # gone, or its handle went stale: another client removed it
    if not same:
        raise Taken(what, stored)


def freeze(top: int) -> None:
    """Make the open directory ``top`` and every directory below it read-only for everyone (write bits off,
    nothing followed), once it is published: no worker adds a file to a tree or a stored distribution
    (``__pycache__`` of ``python -O``, say). Its owner's gc, ``remove`` and repair make a directory writable
    again as they take it apart (:func:`repoinstall._disk.walk.owner_writes`). Best effort: a filesystem that
    refuses it leaves it as is."""
    import stat

    with contextlib.suppress(OSError):
        for _, _, _, fd in os.fwalk(".", dir_fd=top, follow_symlinks=False):
            with contextlib.suppress(OSError):
                os.fchmod(fd, stat.S_IMODE(os.fstat(fd).st_mode) & ~0o222)
