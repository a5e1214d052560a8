"""What the store holds and what sharing it saves: the figures ``list --json`` and ``doctor`` show.

Bytes are file sizes (``st_size``) of regular files, each inode counted once by ``(st_dev, st_ino)``: a file
linked into many trees takes its bytes once. ``bytes_saved`` compares the trees with what they would take as
separate copies (each tree file's size, counted in every tree that has it) against what their files take on disk
(each inode once): 0 while no two trees share a file, and the bytes of every extra tree that holds a distribution
otherwise. Where the filesystem refuses links, trees are copies and it stays 0.

Everything is walked through directory descriptors, never following a symlink (see :mod:`repoinstall._disk.walk`);
what this UID may not read is left out, with one warning.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from typing import NamedTuple

from .. import _log
from .._disk import fs as _fs
from .._disk import walk as _walk
from .._disk.layout import STORE, TREES, Layout
from .identity import split_leaf


class StoreUsage(NamedTuple):
    """The store's figures. As JSON (``as_dict``): ``distributions`` (stored), ``bytes`` (the store's files, each
    inode once), ``tree_bytes`` (every tree's files, as if each tree had its own copy), ``bytes_saved``
    (``tree_bytes`` minus what the trees' files take on disk, each inode once)."""

    distributions: int
    bytes: int
    tree_bytes: int
    bytes_saved: int

    def as_dict(self) -> dict[str, int]:
        return self._asdict()

    def summary(self) -> str:
        """One line for people: ``3 distributions, 1.2 MB; hard links save 0.4 MB of 1.6 MB in trees``."""
        return (
            f"{self.distributions} distribution{'' if self.distributions == 1 else 's'}, {_mb(self.bytes)}; "
            f"hard links save {_mb(self.bytes_saved)} of {_mb(self.tree_bytes)} in trees"
        )


def _mb(count: int) -> str:
    return f"{count / 1e6:.1f} MB" if count >= 100_000 else f"{count / 1e3:.1f} kB"


def usage(layout: Layout) -> StoreUsage:
    """The figures of the repo ``layout`` as it is now (every environment)."""
    root = layout.existing_fd()
    skipped: list[str] = []
    stored: dict[tuple[int, int], int] = {}
    distributions = 0
    for parts in _below(root, (STORE,), 3, skipped):
        if split_leaf(parts[-1]) is None:
            continue  # not the store's (gc names it)
        distributions += 1
        _sizes(root, parts, stored, skipped)
    in_trees: dict[tuple[int, int], int] = {}
    tree_bytes = 0
    for parts in _below(root, (TREES,), 3, skipped):
        tree_bytes += _sizes(root, parts, in_trees, skipped)
    if skipped:
        _log.logger().warning(
            "left %d unreadable dir(s) out of the store's figures (uid %d may not read them), first %s",
            len(skipped),
            os.geteuid(),
            layout.path(*skipped[0].split("/")),
        )
    return StoreUsage(distributions, sum(stored.values()), tree_bytes, tree_bytes - sum(in_trees.values()))


def _below(root: int, top: tuple[str, ...], levels: int, skipped: list[str]) -> Iterator[tuple[str, ...]]:
    """The real directories ``levels`` below ``top`` (``store/<env>/<name>/<leaf>``, ``trees/<env>/<name>/<leaf>``);
    symlinks and hidden names left out."""
    if levels == 0:
        yield top
        return
    try:
        fd = _fs.open_dir(root, top)
        if fd is None:
            return
        try:
            names = [name for name, kind in _walk.entries(fd) if kind == _walk.DIR and not name.startswith(".")]
        finally:
            os.close(fd)
    except PermissionError:
        skipped.append("/".join(top))
        return
    for name in names:
        yield from _below(root, (*top, name), levels - 1, skipped)


def _sizes(root: int, parts: tuple[str, ...], inodes: dict[tuple[int, int], int], skipped: list[str]) -> int:
    """Note the size of each regular file below ``parts`` by its inode; the sum of their sizes, each counted."""
    total = 0
    try:
        fd = _fs.open_dir(root, parts)
        if fd is None:
            return 0
        try:
            for entry in _walk.walk(fd):
                if entry.kind != _walk.FILE:
                    continue
                try:
                    info = os.stat(entry.name, dir_fd=entry.dir_fd, follow_symlinks=False)
                except FileNotFoundError:
                    continue  # removed since it was listed
                inodes[(info.st_dev, info.st_ino)] = info.st_size
                total += info.st_size
        finally:
            os.close(fd)
    except PermissionError:
        skipped.append("/".join(parts))
    return total
