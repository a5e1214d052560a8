"""Listing and deleting below the repo by directory descriptor: no symlink followed, no recursion, bounded fds.

A repo lives on a volume every pod can write, so anything below its root may have been replaced by a symlink,
a FIFO, a device or a directory nested a thousand deep. Every walk here is iterative and relative to an open
directory (``openat``/``unlinkat``, as ``shutil.rmtree`` does with ``dir_fd``): a symlink is reported or removed
as a link, never followed, and a non-regular file is never opened, so nothing can lead a walk out of the repo
or make it hang.
"""

from __future__ import annotations

import contextlib
import errno
import os
import stat
from collections.abc import Iterator
from typing import NamedTuple

from .fs import DIR_FLAGS

#: How deep a walk descends. Python trees are rarely 20 deep; deeper than this is reported, not entered, so the
#: walk never holds more descriptors than this.
MAX_DEPTH = 128
#: How many directories a removal holds open at once; deeper ones are renamed up beside the victim first.
_REMOVE_DEPTH = 64
#: What an ``openat`` of a directory entry reports when it was removed or replaced since it was listed.
_GONE = frozenset({errno.ENOENT, errno.ELOOP, errno.ENOTDIR, errno.ESTALE})

FILE, DIR, LINK, OTHER = "file", "dir", "link", "other"


def silly_renamed(name: str) -> bool:
    """Whether ``name`` is an NFS client's silly-rename (``.nfs`` and hex): a file this client removed while a
    process here still had it open. The client deletes it at the last close; until then it is expected, not
    corruption, and it cannot be removed (EBUSY)."""
    return name.startswith(".nfs") and len(name) > 12 and all(c in "0123456789abcdef" for c in name[4:])


class Entry(NamedTuple):
    """One entry found by :func:`walk`. ``dir_fd`` (its directory) is valid only until the next entry."""

    dir_fd: int
    name: str
    #: Relative to the walk's top, "/"-separated.
    path: str
    #: FILE (regular), LINK (a symlink, not followed), OTHER (FIFO, socket, device), or DIR for a directory
    #: deeper than :data:`MAX_DEPTH` (reported, not entered).
    kind: str


def kind_of(mode: int) -> str:
    if stat.S_ISREG(mode):
        return FILE
    if stat.S_ISDIR(mode):
        return DIR
    return LINK if stat.S_ISLNK(mode) else OTHER


def entries(dir_fd: int) -> list[tuple[str, str]]:
    """(name, kind) of every entry of an open directory, sorted, never following a link. Kinds come from the
    listing's own entry types where the filesystem gives them (ext4, xfs, NFS, most FUSE: no call per entry), else
    from ``lstat``, as ``os.scandir`` does."""
    found = []
    with os.scandir(dir_fd) as listing:
        for entry in listing:
            if entry.is_symlink():
                kind = LINK
            elif entry.is_dir(follow_symlinks=False):
                kind = DIR
            elif entry.is_file(follow_symlinks=False):
                kind = FILE
            else:  # a FIFO, socket or device, or an entry removed since the listing
                try:
                    kind = kind_of(entry.stat(follow_symlinks=False).st_mode)
                except FileNotFoundError:
                    continue
            found.append((entry.name, kind))
    return sorted(found)


def walk(top_fd: int, max_depth: int = MAX_DEPTH) -> Iterator[Entry]:
    """Every non-directory below ``top_fd``, depth first, iteratively; directories are entered with
    ``O_NOFOLLOW`` only, so a symlink is yielded as a LINK, never entered."""
    stack: list[tuple[int, str, list[tuple[str, str]]]] = []
    try:
        first = os.dup(top_fd)
        stack.append((first, "", entries(first)[::-1]))
        while stack:
            fd, prefix, pending = stack[-1]
            if not pending:
                os.close(fd)
                stack.pop()
                continue
            name, kind = pending.pop()
            path = prefix + name
            if kind != DIR:
                yield Entry(fd, name, path, kind)
                continue
            if len(stack) > max_depth:
                yield Entry(fd, name, path, DIR)
                continue
            try:
                child = os.open(name, DIR_FLAGS, dir_fd=fd)
            except OSError as error:
                if error.errno in _GONE:
                    continue  # replaced or removed since it was listed: what is there now is not ours to enter
                raise
            try:
                listed = entries(child)[::-1]
            except BaseException:
                os.close(child)
                raise
            stack.append((child, path + "/", listed))
    finally:
        for fd, _, _ in stack:
            os.close(fd)


def remove(parent_fd: int, name: str) -> bool:
    """Delete ``name`` below ``parent_fd`` and everything in it, never following a symlink; ``True`` if it is gone.

    Only for what was already renamed into ``trash/`` (or is private to us): a peer can no longer reach it by
    its old path, so deleting it cannot empty anything published. Directories nested deeper than a few dozen
    levels are renamed up beside ``name`` and removed in turn, so any depth takes a bounded number of fds.
    """
    victims = [name]
    complete = True
    while victims:
        complete = _remove_one(parent_fd, victims.pop(), victims) and complete
    # Files still open on this NFS client stay, silly-renamed, until their last close: that is all that is left.
    if complete:
        return True
    silly, other = _left_below(parent_fd, name)
    return silly > 0 and other == 0


def _remove_one(parent_fd: int, name: str, victims: list[str]) -> bool:
    try:
        mode = os.stat(name, dir_fd=parent_fd, follow_symlinks=False).st_mode
    except FileNotFoundError:
        return True
    if not stat.S_ISDIR(mode):
        return _unlink(parent_fd, name)
    complete = True
    stack: list[tuple[int, int, str, list[str]]] = []  # (fd, its parent's fd, its name, subdirectories left)
    try:
        top = _open_to_empty(name, parent_fd)
        stack.append((top, parent_fd, name, []))
        fresh = True
        while stack:
            fd, up, here, subdirs = stack[-1]
            if fresh:
                for entry, kind in entries(fd):
                    if kind == DIR:
                        subdirs.append(entry)
                    else:
                        complete = _unlink(fd, entry) and complete
            if subdirs:
                child = subdirs.pop()
                if len(stack) >= _REMOVE_DEPTH:
                    # Too deep to hold every level open: move it up beside the victim, and remove it from there.
                    moved = f"{name[:60]}.deep.{os.urandom(6).hex()}"  # bounded: names of moved ones stay short
                    try:
                        os.rename(child, moved, src_dir_fd=fd, dst_dir_fd=parent_fd)
                        victims.append(moved)
                    except OSError:
                        complete = False
                    fresh = False
                    continue
                try:
                    stack.append((_open_to_empty(child, fd), fd, child, []))
                    fresh = True
                except OSError as error:
                    complete = complete and error.errno == errno.ENOENT
                    fresh = False
                continue
            stack.pop()
            os.close(fd)
            fresh = False
            try:
                os.rmdir(here, dir_fd=up)
            except FileNotFoundError:
                pass
            except OSError:
                complete = False
    except OSError:
        complete = False
    finally:
        for fd, _, _, _ in stack:
            os.close(fd)
    return complete


def _open_to_empty(name: str, dir_fd: int) -> int:
    """The directory ``name`` opened (never followed) to remove what is in it, writable if it is ours."""
    fd = os.open(name, DIR_FLAGS, dir_fd=dir_fd)
    with contextlib.suppress(OSError):  # not made writable: unlinking in it then fails, and says so
        owner_writes(fd)
    return fd


def owner_writes(fd: int) -> None:
    """Let the owner write the open directory ``fd`` if it is ours and read-only (a tree's or a stored
    distribution's made so): entries are removed from it, and moving it to another parent rewrites its "..".
    Only for what is being removed; another UID's stays as it is (its removal then fails, and says so)."""
    info = os.fstat(fd)
    if not info.st_mode & stat.S_IWUSR and info.st_uid == os.geteuid():
        os.fchmod(fd, stat.S_IMODE(info.st_mode) | stat.S_IRWXU)


def _unlink(dir_fd: int, name: str) -> bool:
    try:
        os.unlink(name, dir_fd=dir_fd)
    except FileNotFoundError:
        pass
    except OSError as error:
        # A silly-renamed file still open on this NFS client: the client deletes it at its last close.
        return error.errno == errno.EBUSY and silly_renamed(name)
    return True


def _left_below(parent_fd: int, name: str) -> tuple[int, int]:
    """What is left below the directory ``name``: (silly-renamed files, anything else but directories)."""
    try:
        fd = os.open(name, DIR_FLAGS, dir_fd=parent_fd)
    except OSError:
        return 0, 0
    try:
        silly = [entry.kind == FILE and silly_renamed(entry.name) for entry in walk(fd)]
    finally:
        os.close(fd)
    return sum(silly), len(silly) - sum(silly)


def still_open(parent_fd: int, name: str) -> int:
    """How many silly-renamed files keep the directory ``name`` (removed as far as it can be) in place."""
    return _left_below(parent_fd, name)[0]
