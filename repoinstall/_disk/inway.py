"""What stands where one of the repo's own directories belongs: a symlink, a file, a FIFO, a socket or a device at
``<top>``, ``<top>/<env>`` or ``<top>/<env>/<name>`` (``store/``, ``store-locks/``, ``locks/``).

Nothing of the repo's is ever made there but a directory, and nothing there is ever followed or opened, so such a
thing blocks whatever needs that directory: installs refuse it in one line (exit 2) before anything runs
(:mod:`repoinstall._install.preflight`), and ``verify``, ``locks`` and gc name it with its kind. It is left alone:
it may be an operator's doing, and a person should look at it.
"""

from __future__ import annotations

import os
from typing import NamedTuple

from . import fs as _fs
from . import walk as _walk
from .layout import Layout
from .things import Thing, thing_at


class Obstacle(NamedTuple):
    """A non-directory at ``path``, where a directory of the repo belongs; or a directory there this UID may not
    read (``why`` says whose it is and its mode): nothing below it can be looked at or installed."""

    path: str
    thing: Thing
    why: str = ""

    def describe(self) -> str:
        return self.why or f"{self.thing.named} where a repo directory belongs"

    def as_dict(self) -> dict[str, str]:
        return {"path": self.path, "kind": self.thing.key, "problem": self.describe()}


def below(layout: Layout, top: str, levels: int = 2) -> list[Obstacle]:
    """Every obstacle at ``top`` and in the directories ``levels`` below it (hidden names are not the repo's), in
    order; what is missing is fine."""
    root = layout.root_fd()
    if root is None:
        return []
    found: list[Obstacle] = []
    thing = thing_at(root, top)
    if thing is not None and thing is not Thing.DIRECTORY:
        return [Obstacle(layout.path(top), thing)]
    _scan(layout, root, (top,), levels, found)
    return found


def _scan(layout: Layout, root: int, parts: tuple[str, ...], levels: int, found: list[Obstacle]) -> None:
    try:
        fd = _fs.open_dir(root, parts)  # at the last level too: one this UID may not list is named
    except PermissionError:
        fd = None
        unreadable(layout, parts, found)
    if fd is None or levels == 0:
        if fd is not None:
            os.close(fd)
        return
    try:
        listed = _walk.entries(fd)
        things = {name: thing_at(fd, name) for name, kind in listed if kind != _walk.DIR and not name.startswith(".")}
    finally:
        os.close(fd)
    for name, kind in listed:
        if name.startswith("."):
            continue
        if kind == _walk.DIR:
            _scan(layout, root, (*parts, name), levels - 1, found)
        elif (thing := things.get(name)) is not None:
            found.append(Obstacle(layout.path(*parts, name), thing))


def unreadable(layout: Layout, parts: tuple[str, ...], found: list[Obstacle]) -> None:
    """Add the directory ``parts`` that this UID may not list (another UID's private one) to ``found``, with its
    owner and mode, unless a directory above it was named already."""
    path = layout.path(*parts)
    if any(path.startswith(other.path + os.sep) for other in found):
        return
    try:
        info = os.stat(path, follow_symlinks=False)
    except OSError:
        return  # gone since
    why = f"uid {os.geteuid()} may not read it ({_fs.ownership(info)}): nothing below it can be checked"
    found.append(Obstacle(path, Thing.DIRECTORY, why))
