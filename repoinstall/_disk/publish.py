"""Publishing a staged directory (a tree, a stored distribution): one atomic rename, never over anything there.

**Invariant: the rename is the commit point; the lock only saves duplicate work.** A tree is visible at its
final path whole or not at all, whoever holds (or lost, or never took) the lock.
"""

from __future__ import annotations

import ctypes
import errno
import functools
import os

_RENAME_NOREPLACE = 1
#: What a rename onto a taken directory reports: local filesystems and NFS say EEXIST or ENOTEMPTY, sshfs EPERM.
_TAKEN = frozenset({errno.EEXIST, errno.ENOTEMPTY, errno.EPERM, errno.EACCES, errno.EISDIR, errno.ENOTDIR})


@functools.cache
def _renameat2() -> object | None:
    try:
        return ctypes.CDLL(None, use_errno=True).renameat2
    except (OSError, AttributeError):
        return None


def _rename_noreplace(src_fd: int, source: str, dst_fd: int, target: str) -> bool:
    """``renameat2(RENAME_NOREPLACE)``; ``False`` where the filesystem refuses flags (NFS, CephFS, FUSE)."""
    call = _renameat2()
    if call is None:
        return False
    if call(src_fd, os.fsencode(source), dst_fd, os.fsencode(target), _RENAME_NOREPLACE) == 0:  # type: ignore[operator]
        return True
    code = ctypes.get_errno()
    if code in (errno.EINVAL, errno.ENOSYS, errno.ENOTSUP):
        return False
    raise OSError(code, os.strerror(code), target)


def _taken(dst_fd: int, target: str) -> bool:
    try:
        os.stat(target, dir_fd=dst_fd, follow_symlinks=False)
    except FileNotFoundError:
        return False
    return True


def publish(src_fd: int, source: str, dst_fd: int, target: str) -> bool:
    """Rename ``source`` (relative to ``src_fd``) to ``target`` (relative to ``dst_fd``). ``True`` if ours is now
    published, ``False`` if ``target`` was taken."""
    try:
        if _rename_noreplace(src_fd, source, dst_fd, target):
            return True
        # No flags here: a plain rename of a directory still never replaces a non-empty one, and a tree is
        # never empty, so a peer's published tree cannot be overwritten.
        if _taken(dst_fd, target):
            return False
        os.rename(source, target, src_dir_fd=src_fd, dst_dir_fd=dst_fd)
        return True
    except OSError as error:
        # EPERM/EACCES also mean "taken" on sshfs, but only if something really is there now.
        if error.errno in _TAKEN and _taken(dst_fd, target):
            return False
        raise
