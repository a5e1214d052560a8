"""What a test asserts of the store of distributions (``store/<env>/<name>/<version>-<sha16>/``): every stored
dir whole, what is stored, and how a tree's files relate to the store's (links or copies)."""

from __future__ import annotations

import os
import re
import stat
from pathlib import Path

from repoinstall._disk.dists import check_tree, scan

_LEAF = re.compile(r"^[^/]+-[0-9a-f]{16}$")


def stored(repo: Path) -> dict[str, Path]:
    """Each stored distribution as ``<name>/<leaf>``, with its dir."""
    top = repo / "store"
    if not top.is_dir():
        return {}
    return {f"{d.parent.name}/{d.name}": d for env in top.iterdir() for name in env.iterdir() for d in name.iterdir()}


def assert_store_whole(repo: Path) -> dict[str, Path]:
    """Every entry under ``store/<env>/<name>/`` is a stored distribution, whole: a dir named ``<version>-<sha16>``
    holding one dist-info whose RECORD matches every file, every file read-only. Nothing else (no temporary or
    half-written dir) is there. The stored distributions."""
    found = stored(repo)
    for shown, directory in found.items():
        assert _LEAF.match(directory.name), f"store/{shown}: not a stored distribution's name"
        assert directory.is_dir() and not directory.is_symlink(), f"store/{shown}: not a directory"
        dists = scan(str(directory))
        assert len(dists) == 1, f"store/{shown}: holds {[d.dist_info for d in dists]}"
        problems = check_tree(str(directory), dists)
        assert not problems, f"store/{shown}: {problems.summary()}"
        for path in directory.rglob("*"):
            mode = path.lstat().st_mode
            if stat.S_ISREG(mode):
                assert mode & 0o222 == 0, f"{path}: writable in the store"
    return found


def files(tree: Path) -> dict[str, os.stat_result]:
    """Every regular file of a tree, by its relative path, with its lstat."""
    return {str(p.relative_to(tree)): p.lstat() for p in tree.rglob("*") if p.is_file() and not p.is_symlink()}


def shares(tree: Path, stored_dir: Path) -> tuple[int, int]:
    """How many of ``stored_dir``'s files ``tree`` holds as the same inode (linked), and as another (copied)."""
    linked = copied = 0
    held = files(tree)
    for relative, info in files(stored_dir).items():
        mine = held[relative]
        if (mine.st_dev, mine.st_ino) == (info.st_dev, info.st_ino):
            linked += 1
        else:
            copied += 1
    return linked, copied


def ownership(directory: Path) -> dict[str, tuple[int, int, int, int, int]]:
    """Every path below ``directory`` with (inode, mode, uid, size, mtime_ns): to prove nobody changed it."""
    return {
        str(p.relative_to(directory)): (s.st_ino, s.st_mode, s.st_uid, s.st_size, s.st_mtime_ns)
        for p in sorted(directory.rglob("*"))
        for s in [p.lstat()]
    }
