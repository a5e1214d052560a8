"""What a name in the repo is, by its ``lstat``, for messages that name what stands in the way: a symlink, a
regular file, a FIFO, a socket, a device, or a directory. Never followed, never opened (a FIFO would block)."""

from __future__ import annotations

import enum
import os
import stat


class Thing(enum.Enum):
    """The kind of one directory entry; its value is how a message names it."""

    DIRECTORY = "directory"
    FILE = "regular file"
    SYMLINK = "symlink"
    FIFO = "FIFO"
    SOCKET = "socket"
    CHAR_DEVICE = "character device"
    BLOCK_DEVICE = "block device"

    @classmethod
    def of(cls, mode: int) -> Thing:
        for test, thing in _TESTS:
            if test(mode):
                return thing
        return cls.FILE  # S_IFWHT and the like: nothing Linux makes; named as a plain file

    @property
    def named(self) -> str:
        """With its article: ``a FIFO``, ``a symlink``, ``a regular file``."""
        return f"a {self.value}"

    @property
    def key(self) -> str:
        """Its one-word name in JSON output: ``dir``, ``file``, ``symlink``, ``fifo``, ``socket``, ``device``."""
        return _KEYS[self]


_TESTS = (
    (stat.S_ISDIR, Thing.DIRECTORY),
    (stat.S_ISREG, Thing.FILE),
    (stat.S_ISLNK, Thing.SYMLINK),
    (stat.S_ISFIFO, Thing.FIFO),
    (stat.S_ISSOCK, Thing.SOCKET),
    (stat.S_ISCHR, Thing.CHAR_DEVICE),
    (stat.S_ISBLK, Thing.BLOCK_DEVICE),
)
_KEYS = {
    Thing.DIRECTORY: "dir",
    Thing.FILE: "file",
    Thing.SYMLINK: "symlink",
    Thing.FIFO: "fifo",
    Thing.SOCKET: "socket",
    Thing.CHAR_DEVICE: "device",
    Thing.BLOCK_DEVICE: "device",
}


def thing_at(dir_fd: int, name: str) -> Thing | None:
    """What ``name`` below the open directory ``dir_fd`` is (a symlink is a SYMLINK), ``None`` if nothing is there
    (or it cannot be looked at)."""
    try:
        return Thing.of(os.stat(name, dir_fd=dir_fd, follow_symlinks=False).st_mode)
    except OSError:
        return None
