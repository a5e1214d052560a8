"""The store on disk: ``store/<env>/<name>/<version>-<sha16>/``, each a distribution installed once, read-only.

A stored distribution is published like a tree: staged privately, checked (every file of its RECORD, and its
dist-info naming it), then one rename that never replaces anything (the rename is the commit point; a lock only
saves duplicate work). What is at a stored distribution's path is therefore whole, and, being named by its
artifact's sha256, the same bytes whoever published it: a peer that published first is used as it is.
"""

from __future__ import annotations

import errno
import os

from .._disk import fs as _fs
from .._disk.dists import Hashed, check_tree, scan
from .._disk.identity import has_bytecode
from .._disk.layout import Layout
from .._disk.publish import publish as _publish
from .identity import DistId


def path(layout: Layout, dist: DistId) -> str:
    return layout.path(*dist.parts())


def present(layout: Layout, dist: DistId) -> bool:
    """Whether ``dist`` is stored: its dir is there with a dist-info naming it (its files are vouched for by the
    publish that put it there, and checked again by verify)."""
    root = layout.root_fd()
    try:
        fd = None if root is None else fresh_dir(root, dist.parts())
        if fd is None:
            return False
        try:
            return any(d.name and d.version for d in scan(fd) if dist.names(d.name, d.version))
        finally:
            os.close(fd)
    except PermissionError as error:  # mode 000, another UID's: one line naming it, its owner and mode
        raise _fs.denied(layout.root, error, dist.parts()) from None


def check(staged: str, dist: DistId, hashed: Hashed | None = None, *, seal: bool = False) -> str | None:
    """Why the staged dir is not ``dist`` whole (``None`` if it is): its dist-info names it, its RECORD matches.
    ``hashed``: what the install that staged it hashed of its files already, and where what is hashed here goes;
    ``seal``: each file checked is made read-only as it is (see :func:`repoinstall._disk.dists.check_tree`)."""
    found = scan(staged)
    if not any(dist.names(d.name, d.version) for d in found) or len(found) != 1:
        return f"{dist}: the staged dir holds {', '.join(d.dist_info for d in found) or 'no dist-info'}"
    problems = check_tree(staged, found, hashed=hashed, seal=seal, bytecode=has_bytecode(dist.env))
    return f"{dist}: {problems.summary()}" if problems else None


def publish(layout: Layout, dist: DistId, staged: str) -> bool:
    """Rename ``staged`` to ``dist``'s path: ``True`` if ours is published, ``False`` if a peer's is there (the
    same artifact's files: use theirs).

    Invariant: gc removes an empty ``store/<env>/<name>/`` by rmdir, without a lock (:mod:`repoinstall._ops.gcstore`),
    so the directory we made or found may be gone by the time we rename into it: rmdir removes only an empty one,
    so nothing of anyone's went with it, and we make it again and rename again."""
    root = layout.writable_fd()
    source = os.open(os.path.dirname(staged), os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW)
    try:
        for attempt in range(_fs.STALE_LOOKUPS):
            parent = _fs.make_dirs(root, dist.parts()[:-1], layout.root)
            try:
                return _publish(source, os.path.basename(staged), parent, dist.leaf)
            except OSError as error:
                gone = error.errno in (errno.ENOENT, errno.ESTALE) and _fs.removed(parent)
                if not gone or attempt == _fs.STALE_LOOKUPS - 1:
                    raise
            finally:
                os.close(parent)
        raise AssertionError("unreachable")
    finally:
        os.close(source)


def used(layout: Layout, env: str) -> bool:
    """Whether the store holds anything for ``env`` (a cold store: nothing there to spare an installer)."""
    from .._disk.layout import STORE

    root = layout.root_fd()
    fd = None if root is None else fresh_dir(root, (STORE, env))
    if fd is None:
        return False
    try:
        return bool(os.listdir(fd))
    finally:
        os.close(fd)


def fresh_dir(dir_fd: int, parts: tuple[str, ...]) -> int | None:
    """:func:`repoinstall._disk.fs.open_dir` as the server has it now: each directory revalidated before a name
    is looked up in it (an NFS client trusts a cached "not there" until its parent's attributes expire, up to
    ``acdirmax``; a peer on another client may have stored the distribution since). One GETATTR per level."""
    fd = os.dup(dir_fd)
    try:
        for part in parts:
            _fs.revalidate(fd)
            nxt = _fs.open_dir(fd, (part,))
            os.close(fd)
            if nxt is None:
                return None
            fd = nxt
        return fd
    except BaseException:
        os.close(fd)
        raise
