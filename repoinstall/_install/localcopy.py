"""A lock's local artifacts, handed to the installer as private copies of the file that was checked.

A lock may name a local file (:mod:`repoinstall._lockfile.local`): it is checked to be a regular file below the
lock's directory when the lock is read, and the installer opens it later, by name. In between, whoever may write
that directory can put a FIFO or a device in its place, and the installer would block or read forever while it
holds the tree's lock. So before the installer runs, each such file is opened once (non-blocking, no symlink
followed), checked with ``fstat`` to be a regular file, and linked (or copied, from that very descriptor) into the
install's private scratch dir; the installer reads that copy, checks its hash as ever, and the record still names
the file the lock named.
"""

from __future__ import annotations

import os
import stat
from collections.abc import Sequence
from pathlib import Path
from urllib.parse import urlsplit

from .._disk.pin import Pin
from .._errors import RequirementsFileError
from .._urls import file_path

_COPIES = "local-artifacts"


def private_copies(pins: Sequence[Pin], scratch: str) -> dict[str, str]:
    """For each pin naming a ``file:`` URL outside ``scratch``: its URL -> the URL of a private copy made in
    ``scratch``. :class:`RequirementsFileError` (exit 2) if one is not a regular file (any more)."""
    copies: dict[str, str] = {}
    for pin in pins:
        url = pin.url
        parts = urlsplit(url)
        if parts.scheme.lower() != "file" or url in copies:
            continue
        path = file_path(url)
        if _inside(path, scratch):
            continue  # repoinstall's own metapackage, written there
        directory = os.path.join(scratch, _COPIES, str(len(copies)))
        os.makedirs(directory, exist_ok=True)
        copies[url] = Path(_copy(path, os.path.join(directory, os.path.basename(path)))).as_uri()
    return copies


def _copy(source: str, target: str) -> str:
    try:
        fd = os.open(source, os.O_RDONLY | os.O_NONBLOCK | os.O_NOFOLLOW | os.O_CLOEXEC | os.O_NOCTTY)
    except OSError as error:
        raise RequirementsFileError(f"{source}: the lock's artifact cannot be read: {error.strerror}") from None
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            raise RequirementsFileError(f"{source}: the lock's artifact is no longer a regular file")
        try:
            # The very inode checked, by its descriptor (no name looked up again); another filesystem, or
            # another UID's file under fs.protected_hardlinks, refuses: then its bytes, read from it.
            os.link(f"/proc/self/fd/{fd}", target, follow_symlinks=True)
        except OSError:
            with open(target, "wb", opener=lambda name, flags: os.open(name, flags, 0o600)) as out:
                os.lseek(fd, 0, os.SEEK_SET)
                while chunk := os.read(fd, 1 << 20):
                    out.write(chunk)
    finally:
        os.close(fd)
    return target


def _inside(path: str, directory: str) -> bool:
    real, top = os.path.realpath(path), os.path.realpath(directory)
    return real == top or real.startswith(top + os.sep)
