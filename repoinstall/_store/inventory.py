"""What the store holds and which trees hold it: ``store/<env>/<name>/<leaf>/``, and the trees whose records name
each stored distribution's artifact.

A stored dir's name keeps 16 hex of its artifact's sha256, not all 64, so a dir found by listing is a
:class:`Stored` (where it is), and a tree's record row, which has the whole hash, becomes one by its
:class:`~.identity.DistId`. Listing goes through directory descriptors: a symlink planted at any level of
``store/`` is neither followed nor listed.
"""

from __future__ import annotations

import os
from typing import NamedTuple

from .._disk import fs as _fs
from .._disk import walk as _walk
from .._disk.identity import TreeId
from .._disk.layout import STORE, Layout
from .identity import DistId, of_row


class Stored(NamedTuple):
    """A stored distribution's dir, ``store/<env>/<name>/<leaf>``, as listing finds it."""

    env: str
    name: str
    leaf: str

    @classmethod
    def of(cls, dist: DistId) -> Stored:
        _, env, name, leaf = dist.parts()
        return cls(env, name, leaf)

    def parts(self) -> tuple[str, str, str, str]:
        return (STORE, self.env, self.name, self.leaf)

    def __str__(self) -> str:
        return f"{self.name} {self.leaf} ({self.env})"


def every(layout: Layout) -> list[Stored]:
    """Every stored distribution's dir, all environments, sorted (hidden names, a peer's in-flight temporaries,
    are left out)."""
    found: list[Stored] = []
    root = layout.root_fd()
    top = None if root is None else _readable(root, STORE)
    if top is None:
        return found
    try:
        for env in _dirs(top):
            env_fd = _readable(top, env)
            if env_fd is None:
                continue
            try:
                for name in _dirs(env_fd):
                    name_fd = _readable(env_fd, name)
                    if name_fd is None:
                        continue
                    try:
                        found += [Stored(env, name, leaf) for leaf in _dirs(name_fd)]
                    finally:
                        os.close(name_fd)
            finally:
                os.close(env_fd)
    finally:
        os.close(top)
    return found


def _readable(dir_fd: int, name: str) -> int | None:
    """The directory ``name`` open, or ``None`` if it is gone or this UID may not list it (another UID's private
    one: ``verify`` names it among the obstacles, with its owner and mode)."""
    try:
        return _fs.open_dir(dir_fd, (name,))
    except PermissionError:
        return None


def _dirs(dir_fd: int) -> list[str]:
    return [name for name, kind in _walk.entries(dir_fd) if kind == _walk.DIR and not name.startswith(".")]


def holders(layout: Layout, trees: list[TreeId]) -> dict[Stored, list[TreeId]]:
    """Of ``trees``, those whose record names each stored distribution (its name, version and wheel sha256 or
    layer diff_id): the trees composed from it. A tree without a record, or a row without a hash, names none."""
    from .._disk.manifest import read, recorded_dists

    held: dict[Stored, list[TreeId]] = {}
    for tid in trees:
        try:
            record = read(layout, tid)
        except (PermissionError, _fs.Unreadable):
            continue  # another UID's record: verify reports that tree as unreadable
        for row in () if record is None else recorded_dists(record):
            dist = of_row(tid.env, row)
            if dist is None:
                continue  # a row without a hash, or not one the store could have made
            held.setdefault(Stored.of(dist), []).append(tid)
    return held
