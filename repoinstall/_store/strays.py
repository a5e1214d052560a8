"""Something at a stored distribution's path that is not a stored distribution: a regular file, a FIFO, a socket,
a device, or a symlink at ``store/<env>/<name>/<version>-<sha16>``.

The store only ever renames a whole directory there (:func:`repoinstall._store.store.publish`), and the name is
its artifact's: nothing else of ours is ever at it, in flight or not. So a non-directory there is a stray, and
ours to set aside: renamed into ``trash/`` (never opened, never followed) and deleted there, by the install that
needs the distribution (before its installer runs), by gc and by ``verify --repair``; the install then stores it
as usual. A symlink is the exception, as everywhere in the repo: it may be an operator's doing, so it is refused
in one line naming it (exit 2) and left for a person to look at; ``verify`` and gc name it.
"""

from __future__ import annotations

import os

from .. import _log
from .._disk import fs as _fs
from .._disk import walk as _walk
from .._disk.layout import STORE, Layout
from .._disk.things import Thing, thing_at
from .._errors import RepoUnusable
from .identity import DistId, split_leaf
from .inventory import Stored


def at_entry(layout: Layout, stored: Stored) -> Thing | None:
    """What is at ``stored``'s path if it is not a directory (``None``: a directory, or nothing)."""
    root = layout.root_fd()
    try:
        parent = None if root is None else _fs.open_dir(root, stored.parts()[:-1])
    except PermissionError as error:
        raise _fs.denied(layout.root, error, stored.parts()[:-1]) from None  # whose directory, and its mode
    if parent is None:
        return None
    try:
        thing = thing_at(parent, stored.leaf)
    finally:
        os.close(parent)
    return None if thing is Thing.DIRECTORY else thing


def every(layout: Layout) -> list[tuple[Stored, Thing]]:
    """Every stray in the store: a non-directory named as a stored distribution (hidden names are not ours)."""
    found: list[tuple[Stored, Thing]] = []
    root = layout.root_fd()
    for env, name in _names(root):
        try:
            parent = None if root is None else _fs.open_dir(root, (STORE, env, name))
        except PermissionError:
            continue  # another UID's private directory: verify names it among the obstacles
        if parent is None:
            continue
        try:
            for leaf, kind in _walk.entries(parent):
                if kind != _walk.DIR and split_leaf(leaf) is not None and (thing := thing_at(parent, leaf)):
                    found.append((Stored(env, name, leaf), thing))
        finally:
            os.close(parent)
    return found


def _names(root: int | None) -> list[tuple[str, str]]:
    """``(env, name)`` of every ``store/<env>/<name>/`` directory (hidden names are not the store's)."""
    found: list[tuple[str, str]] = []
    try:
        top = None if root is None else _fs.open_dir(root, (STORE,))
    except PermissionError:
        top = None  # another UID's private directory: verify names it among the obstacles
    if top is None:
        return found
    try:
        for env, kind in _walk.entries(top):
            try:
                env_fd = _fs.open_dir(top, (env,)) if kind == _walk.DIR and not env.startswith(".") else None
            except PermissionError:
                continue  # as above
            if env_fd is None:
                continue
            try:
                found += [(env, n) for n, k in _walk.entries(env_fd) if k == _walk.DIR and not n.startswith(".")]
            finally:
                os.close(env_fd)
    finally:
        os.close(top)
    return found


def refusal(layout: Layout, stored: Stored) -> str:
    """What an install, and ``verify --repair``, say of a symlink at ``stored``'s path (exit 2)."""
    return (
        f"{layout.path(*stored.parts())} is a symlink where a stored distribution belongs: it is never followed; "
        "remove it"
    )


def set_aside(layout: Layout, stored: Stored, thing: Thing) -> bool:
    """Rename the stray (not a symlink: see :func:`refusal`) at ``stored``'s path into trash/ and delete it there,
    never opening it; whether it was there."""
    label = f"stray.{stored.env}.{stored.name}.{stored.leaf}"[:120]
    gone = layout.discard(stored.parts()[:-1], stored.leaf, label)
    if gone is not None:
        _log.logger().warning(
            "set aside %s where a stored distribution belongs: %s", thing.named, layout.path(*stored.parts())
        )
    return gone is not None


def clear(layout: Layout, dist: DistId, *, locking: bool) -> None:
    """Before ``dist`` is installed into the store: refuse (:class:`RepoUnusable`, exit 2, nothing created) a
    non-directory where the store's or its lock's directories belong, or a symlink at its path; set aside any
    other stray there. What is missing is fine."""
    root = layout.writable_fd()
    for parts in (dist.parts()[:-1], *([dist.lock_parts()] if locking else [])):
        _fs.check_dirs(root, parts, layout.root)
    stored = Stored.of(dist)
    thing = at_entry(layout, stored)
    if thing is Thing.SYMLINK:
        raise RepoUnusable(refusal(layout, stored))
    if thing is not None:
        set_aside(layout, stored, thing)
