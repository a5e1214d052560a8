"""Publishing a staged tree: one atomic rename of a directory, never over anything already there.

**Invariant: the rename is the commit point; the lock only saves duplicate work.** A tree is visible at its
final path whole or not at all, whoever holds (or lost, or never took) the lock.
"""

from __future__ import annotations

import ctypes
import errno
import functools
import os

_AT_FDCWD = -100
_RENAME_NOREPLACE = 1
#: What a rename onto a taken directory reports: local filesystems and NFS say EEXIST or ENOTEMPTY, sshfs EPERM.
_TAKEN = frozenset({errno.EEXIST, errno.ENOTEMPTY, errno.EPERM, errno.EACCES, errno.EISDIR, errno.ENOTDIR})


@functools.cache
def _renameat2() -> object | None:
    try:
        return ctypes.CDLL(None, use_errno=True).renameat2
    except (OSError, AttributeError):
        return None


def _rename_noreplace(source: str, target: str) -> bool:
    """``renameat2(RENAME_NOREPLACE)``; ``False`` where the filesystem refuses flags (NFS, CephFS, FUSE)."""
    call = _renameat2()
    if call is None:
        return False
    if call(_AT_FDCWD, os.fsencode(source), _AT_FDCWD, os.fsencode(target), _RENAME_NOREPLACE) == 0:  # type: ignore[operator]
        return True
    code = ctypes.get_errno()
    if code in (errno.EINVAL, errno.ENOSYS, errno.ENOTSUP):
        return False
    raise OSError(code, os.strerror(code), target)


def publish(staged: str, final: str) -> bool:
    """Rename ``staged`` to ``final``. ``True`` if ours is now published, ``False`` if ``final`` was taken."""
    try:
        if _rename_noreplace(staged, final):
            return True
        # No flags here: a plain rename of a directory still never replaces a non-empty one, and a tree is
        # never empty, so a peer's published tree cannot be overwritten.
        if os.path.lexists(final):
            return False
        os.rename(staged, final)
        return True
    except OSError as error:
        # EPERM/EACCES also mean "taken" on sshfs, but only if something really is there now.
        if error.errno in _TAKEN and os.path.lexists(final):
            return False
        raise
