"""Filesystem steps that never follow a symlink out of the repo and never leave a half-written file visible.

Every path below the repo root is walked one component at a time with ``O_NOFOLLOW``, so a symlink planted
anywhere inside the repo reads as "not there" (or as an error naming it) instead of leading outside.
"""

from __future__ import annotations

import contextlib
import errno
import os
import stat
from collections.abc import Sequence

from .._errors import RepoUnusable

DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
#: O_NONBLOCK: opening a FIFO planted where a file belongs returns at once instead of waiting for a writer.
FILE_FLAGS = os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC | os.O_NONBLOCK
#: What an open reports when a component is missing, is a symlink (ELOOP), or is a file where a directory is due.
_ABSENT = frozenset({errno.ENOENT, errno.ELOOP, errno.ENOTDIR, errno.ESTALE})
#: Group-writable, so pods with different UIDs that share an fsGroup can all use the repo.
DIR_MODE = 0o2775
FILE_MODE = 0o664


def open_dir(dir_fd: int, parts: Sequence[str]) -> int | None:
    """Open the directory ``parts`` below ``dir_fd`` without following symlinks; ``None`` if it is not there."""
    fd = dir_fd
    try:
        for part in parts:
            try:
                nxt = os.open(part, DIR_FLAGS, dir_fd=fd)
            except OSError as error:
                if error.errno in _ABSENT:
                    return None
                raise
            if fd != dir_fd:
                os.close(fd)
            fd = nxt
        return os.dup(fd) if fd == dir_fd else fd
    except BaseException:
        if fd != dir_fd:
            os.close(fd)
        raise


def read_file(dir_fd: int, parts: Sequence[str], limit: int = 1 << 22) -> bytes | None:
    """Read the regular file ``parts`` below ``dir_fd``; ``None`` if it is missing, a symlink or not a file."""
    parent = dir_fd if len(parts) == 1 else open_dir(dir_fd, parts[:-1])
    if parent is None:
        return None
    try:
        fd = os.open(parts[-1], FILE_FLAGS, dir_fd=parent)
    except OSError as error:
        if error.errno in _ABSENT or error.errno == errno.ENXIO:
            return None
        raise
    finally:
        if parent != dir_fd:
            os.close(parent)
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            return None
        # Sized from fstat: os.read allocates its whole buffer, so a generous fixed size costs microseconds.
        return os.read(fd, min(info.st_size + 1, limit)) if info.st_size < limit else None
    finally:
        os.close(fd)


def make_dirs(dir_fd: int, parts: Sequence[str], where: str) -> int:
    """Create (as needed) and open the directory ``parts`` below ``dir_fd``; refuse a symlink or file on the way."""
    fd = os.dup(dir_fd)
    try:
        for index, part in enumerate(parts):
            try:
                os.mkdir(part, DIR_MODE, dir_fd=fd)
                created = True
            except FileExistsError:
                created = False
            try:
                nxt = os.open(part, DIR_FLAGS, dir_fd=fd)
            except OSError as error:
                if error.errno in (errno.ELOOP, errno.ENOTDIR):
                    shown = os.path.join(where, *parts[: index + 1])
                    raise RepoUnusable(f"{shown} is not a directory (a symlink or file is in the way)") from None
                raise
            os.close(fd)
            fd = nxt
            if created:
                set_group_mode(fd, DIR_MODE)
        return fd
    except BaseException:
        os.close(fd)
        raise


def read_json(dir_fd: int, parts: Sequence[str], limit: int = 1 << 22) -> dict[str, object] | None:
    """The JSON object in the regular file ``parts`` (as :func:`read_file` finds it); ``None`` if it is missing
    or not one JSON object."""
    import json

    try:
        value = json.loads(read_file(dir_fd, parts, limit) or b"")
    except ValueError:
        return None
    return value if isinstance(value, dict) else None


def set_group_mode(fd: int, mode: int) -> None:
    """Give a file or directory we created its intended mode despite the umask (pods of one fsGroup share it)."""
    # Not ours to change (another UID made it) is fine: nothing to fix then.
    with contextlib.suppress(OSError):
        os.fchmod(fd, mode)


def write_atomic(dir_fd: int, name: str, data: bytes) -> None:
    """Write ``name`` in ``dir_fd`` through a temporary file and one rename, so readers see all of it or none."""
    tmp = f".{name}.{os.urandom(6).hex()}.tmp"
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, FILE_MODE, dir_fd=dir_fd)
    try:
        try:
            set_group_mode(fd, FILE_MODE)
            view = memoryview(data)
            while view:
                view = view[os.write(fd, view) :]
            os.fsync(fd)
        finally:
            os.close(fd)
        os.rename(tmp, name, src_dir_fd=dir_fd, dst_dir_fd=dir_fd)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp, dir_fd=dir_fd)
        raise


def unlink(dir_fd: int, name: str) -> None:
    with contextlib.suppress(FileNotFoundError):
        os.unlink(name, dir_fd=dir_fd)


def remove_tree(path: str) -> None:
    """Delete a directory tree we own (staging, trash), best effort, never following symlinks."""
    import shutil

    shutil.rmtree(path, ignore_errors=True)
