"""Why no lock can be had here: what stands in the way of a lock on the shared volume, found before anyone waits
for it (waiting would then fail or hang forever). Its state belongs to another UID, a file or symlink sits where
its state belongs, or hard links on this filesystem lose identity (sshfs).

Going on without a lock stays correct, because the rename is the commit point; it only risks duplicate work.
"""

from __future__ import annotations

import os
import stat
from typing import TYPE_CHECKING

from .._disk import fs as _fs
from .filelock_rw import foreign_owner, state_name
from .taken import Unusable

if TYPE_CHECKING:
    from .._disk.layout import Layout
    from .key import LockKey


def _replaced(directory_fd: int, name: str) -> bool:
    """Whether something that is not a directory (a file, a symlink) sits where the lock's state dir belongs."""
    try:
        return not stat.S_ISDIR(os.stat(name, dir_fd=directory_fd, follow_symlinks=False).st_mode)
    except OSError:
        return False


def links_keep_identity(directory_fd: int) -> bool:
    """Whether a hard link here names the same file (same inode) as its source.

    filelock's lock commits by hard link and confirms the commit by that identity. sshfs, for one, shows a
    link as a separate file with its own inode, so there a lock could never be taken.
    """
    source = f".link-probe.{os.getpid()}.{os.urandom(4).hex()}"
    target = source + ".linked"
    try:
        os.close(os.open(source, os.O_CREAT | os.O_EXCL | os.O_WRONLY | os.O_CLOEXEC, 0o600, dir_fd=directory_fd))
        os.link(source, target, src_dir_fd=directory_fd, dst_dir_fd=directory_fd)
        first = os.stat(source, dir_fd=directory_fd, follow_symlinks=False)
        second = os.stat(target, dir_fd=directory_fd, follow_symlinks=False)
        return (first.st_dev, first.st_ino) == (second.st_dev, second.st_ino)
    except OSError:
        return False
    finally:
        for name in (source, target):
            _fs.unlink(directory_fd, name)


def foreign_lock(what: str, owner: int) -> Unusable:
    # filelock keeps its lock state private to one UID (0600 files, 0700 dirs).
    return Unusable(
        "foreign",
        f"the lock for {what} belongs to uid {owner} and this is uid {os.geteuid()}: going on without it (safe, "
        "may duplicate work). Fix: run every pod with one runAsUser (and one fsGroup).",
    )


#: Repo root -> whether hard links there keep file identity; probed once per process.
_links_work: dict[str, bool] = {}


def obstacle(layout: Layout, key: LockKey, directory: int) -> Unusable | None:
    """Why the lock of ``key`` (its directory ``directory`` open) cannot be had here, or ``None``."""
    if (owner := foreign_owner(directory, key.leaf)) is not None:
        return foreign_lock(key.what, owner)
    if _replaced(directory, state_name(key.leaf)):
        # Not ours to remove here (gc sets it aside); without the lock the install stays correct: the rename
        # is the commit point.
        return Unusable(
            "replaced",
            f"the lock state {os.path.join(layout.path(*key.parts), state_name(key.leaf))} is not a directory (a "
            "symlink or file is in the way): going on without the lock (safe, may duplicate work); `repoinstall gc` "
            "sets it aside",
        )
    if layout.root not in _links_work:
        _links_work[layout.root] = links_keep_identity(directory)
    if not _links_work[layout.root]:
        return Unusable(
            "links",
            f"hard links on {layout.root} do not keep file identity (sshfs does this), so install locks cannot "
            "work here: going on without them (safe, may duplicate work). `repoinstall doctor` tells more.",
        )
    return None
