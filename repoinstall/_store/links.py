"""Whether the repo's filesystem takes hard links: trees are links of the store's files where it does, copies of
them where it refuses (many FUSE filesystems answer EPERM). Probed by linking a file of our own in ``staging/``,
where trees are composed, then removing both names."""

from __future__ import annotations

import contextlib
import errno
import os
import stat
from typing import NamedTuple

from .._disk import fs as _fs
from .._disk import walk as _walk
from .._disk.layout import STAGING, STORE, Layout

#: How many stored files :func:`foreign` looks at for one of another UID: enough for any store's first few
#: distributions, bounded for a store of millions.
_LOOK_AT = 2000


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


class Foreign(NamedTuple):
    """A stored file of another UID, and what linking it answered (``None``: it linked)."""

    path: str
    uid: int
    refused: int | None

    def describe(self) -> str:
        if self.refused is None:
            return f"yes, another UID's stored files too (uid {self.uid})"
        why = errno.errorcode.get(self.refused, str(self.refused))
        hint = "; fs.protected_hardlinks" if self.refused == errno.EPERM else ""
        return (
            f"own files only: another UID's stored files (uid {self.uid}) are refused ({why}{hint}), so trees "
            "this UID composes from them are copies"
        )


def foreign(layout: Layout) -> Foreign | None:
    """Link a stored file another UID owns (the first found, looking at a bounded number) into ``staging/`` and
    remove the link: under ``fs.protected_hardlinks`` the kernel refuses it to whoever may not write the file,
    so a pod of another ``runAsUser`` composes its trees of copies. ``None`` if the store holds none."""
    root = layout.root_fd()
    found = None if root is None else _first_foreign(root, os.geteuid())
    if root is None or found is None:
        return None
    parts, uid = found
    directory = _fs.make_dirs(layout.writable_fd(), (STAGING,), layout.root)
    name = f".links.{os.uname().nodename}.{os.getpid()}.{os.urandom(4).hex()}.foreign"
    try:
        source = _fs.open_dir(root, parts[:-1], lookup_only=True)
        if source is None:
            return None
        try:
            os.link(parts[-1], name, src_dir_fd=source, dst_dir_fd=directory, follow_symlinks=False)
        except OSError as error:
            return Foreign(layout.path(*parts), uid, error.errno or errno.EPERM)
        finally:
            os.close(source)
        return Foreign(layout.path(*parts), uid, None)
    finally:
        with contextlib.suppress(OSError):
            os.unlink(name, dir_fd=directory)
        os.close(directory)


def _first_foreign(root: int, me: int) -> tuple[tuple[str, ...], int] | None:
    """``(parts, owner)`` of the first regular file below ``store/`` another UID owns, breadth first."""
    queue: list[tuple[str, ...]] = [(STORE,)]
    seen = 0
    while queue and seen < _LOOK_AT:
        parts = queue.pop(0)
        try:
            fd = _fs.open_dir(root, parts)
        except OSError:
            continue
        if fd is None:
            continue
        try:
            for entry, kind in _walk.entries(fd):
                seen += 1
                if entry.startswith("."):
                    continue
                if kind == _walk.DIR:
                    queue.append((*parts, entry))
                    continue
                with contextlib.suppress(OSError):
                    info = os.stat(entry, dir_fd=fd, follow_symlinks=False)
                    if stat.S_ISREG(info.st_mode) and info.st_uid != me and len(parts) >= 4:
                        return (*parts, entry), info.st_uid
        finally:
            os.close(fd)
    return None
