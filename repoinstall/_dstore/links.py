"""Whether the repo's filesystem takes hard links: trees are links of the store's files where it does, copies of
them where it refuses (many FUSE filesystems answer EPERM). Probed by linking a file of our own in ``staging/``,
where trees are composed, then removing both names."""

from __future__ import annotations

import contextlib
import errno
import os
from typing import NamedTuple

from .._store import fs as _fs
from .._store.layout import STAGING, Layout


class Links(NamedTuple):
    """What one probe found: ``refused`` is the errno ``link()`` answered (``None``: it linked), ``same_inode``
    whether the link is the same file (sshfs links, then reports two inodes)."""

    refused: int | None
    same_inode: bool

    @property
    def taken(self) -> bool:
        return self.refused is None and self.same_inode

    def describe(self) -> str:
        if self.refused is not None:
            return f"refused ({errno.errorcode.get(self.refused, str(self.refused))}): trees are copies of the store"
        return "yes" if self.same_inode else "linked, but inodes differ"


def probe(layout: Layout) -> Links:
    """Link a new file in ``staging/`` and look; both names are removed whatever happens. :class:`OSError` if no
    file can be made there (a read-only repo, a full disk), :class:`RepoUnusable` if ``staging/`` is a symlink."""
    directory = _fs.make_dirs(layout.writable_fd(), (STAGING,), layout.root)
    name = f".links.{os.uname().nodename}.{os.getpid()}.{os.urandom(4).hex()}"
    try:
        os.close(os.open(name, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o644, dir_fd=directory))
        try:
            os.link(name, name + ".link", src_dir_fd=directory, dst_dir_fd=directory, follow_symlinks=False)
        except OSError as error:
            return Links(error.errno or errno.EPERM, False)
        one, other = (os.stat(n, dir_fd=directory, follow_symlinks=False) for n in (name, name + ".link"))
        return Links(None, (one.st_dev, one.st_ino) == (other.st_dev, other.st_ino))
    finally:
        for leftover in (name, name + ".link"):
            with contextlib.suppress(OSError):
                os.unlink(leftover, dir_fd=directory)
        os.close(directory)
