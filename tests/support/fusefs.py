"""A FUSE passthrough filesystem built on high-level libfuse2 (through fusepy): a stand-in network filesystem.

Like the Linux NFS and CephFS kernel clients, a high-level libfuse2 filesystem cannot take rename flags: the
kernel answers ``renameat2(RENAME_NOREPLACE / RENAME_EXCHANGE)`` with EINVAL. Two mounts of one backing
directory are two clients with their own attribute caches.

    python fusefs.py BACKING MOUNTPOINT [--no-links] [--vanish=SUFFIX]    (runs in the foreground until unmounted)

``--vanish=SUFFIX``: a file whose name ends with SUFFIX is removed from the backing directory just after this
client opened it for reading, as a peer on another client would remove it between our open and our read. This
client then answers calls on the open descriptor as such a filesystem does: by its path, which is gone (ENOENT),
asking the server each time (no attribute cache).
"""

from __future__ import annotations

import errno
import os
import sys
from typing import Any

from fuse import FUSE, FuseOSError, Operations


class Passthrough(Operations):  # type: ignore[misc]
    def __init__(self, root: str, *, links: bool = True, vanish: str | None = None) -> None:
        self.root = os.path.realpath(root)
        self.links = links
        self.vanish = vanish

    def _full(self, path: str) -> str:
        return os.path.join(self.root, path.lstrip("/"))

    def _call(self, fn: Any, *args: Any) -> Any:
        try:
            return fn(*args)
        except OSError as error:
            raise FuseOSError(error.errno or errno.EIO) from None

    def access(self, path: str, amode: int) -> None:
        if not os.access(self._full(path), amode):
            raise FuseOSError(errno.EACCES)

    def getattr(self, path: str, fh: Any = None) -> dict[str, Any]:
        st = self._call(os.lstat, self._full(path))
        keys = ("st_mode", "st_nlink", "st_uid", "st_gid", "st_size", "st_ino", "st_atime", "st_mtime", "st_ctime")
        return {key: getattr(st, key) for key in keys}

    def readdir(self, path: str, fh: Any) -> list[str]:
        return [".", "..", *self._call(os.listdir, self._full(path))]

    def readlink(self, path: str) -> str:
        return self._call(os.readlink, self._full(path))

    def mkdir(self, path: str, mode: int) -> None:
        self._call(os.mkdir, self._full(path), mode)

    def rmdir(self, path: str) -> None:
        self._call(os.rmdir, self._full(path))

    def unlink(self, path: str) -> None:
        self._call(os.unlink, self._full(path))

    def symlink(self, target: str, source: str) -> None:
        self._call(os.symlink, source, self._full(target))

    def link(self, target: str, source: str) -> None:
        if not self.links:
            raise FuseOSError(errno.EPERM)  # as filesystems without hard links answer
        self._call(os.link, self._full(source), self._full(target))

    def rename(self, old: str, new: str) -> None:
        self._call(os.rename, self._full(old), self._full(new))

    def chmod(self, path: str, mode: int) -> None:
        self._call(os.chmod, self._full(path), mode)

    def chown(self, path: str, uid: int, gid: int) -> None:
        self._call(os.lchown, self._full(path), uid, gid)

    def utimens(self, path: str, times: Any = None) -> None:
        self._call(os.utime, self._full(path), times)

    def truncate(self, path: str, length: int, fh: Any = None) -> None:
        self._call(os.truncate, self._full(path), length)

    def statfs(self, path: str) -> dict[str, Any]:
        st = self._call(os.statvfs, self._full(path))
        keys = (
            "f_bavail",
            "f_bfree",
            "f_blocks",
            "f_bsize",
            "f_favail",
            "f_ffree",
            "f_files",
            "f_flag",
            "f_frsize",
            "f_namemax",
        )
        return {key: getattr(st, key) for key in keys}

    # raw_fi: the kernel's open flags (O_EXCL included) reach os.open unchanged.
    def open(self, path: str, fi: Any) -> int:
        fi.fh = self._call(os.open, self._full(path), fi.flags)
        if self.vanish and path.endswith(self.vanish) and fi.flags & os.O_ACCMODE == os.O_RDONLY:
            self._call(os.unlink, self._full(path))
        return 0

    def create(self, path: str, mode: int, fi: Any) -> int:
        fi.fh = self._call(os.open, self._full(path), fi.flags | os.O_CREAT, mode)
        return 0

    def read(self, path: str, size: int, offset: int, fi: Any) -> bytes:
        return self._call(os.pread, fi.fh, size, offset)

    def write(self, path: str, data: bytes, offset: int, fi: Any) -> int:
        return self._call(os.pwrite, fi.fh, data, offset)

    def flush(self, path: str, fi: Any) -> None:
        return None

    def fsync(self, path: str, datasync: int, fi: Any) -> None:
        self._call(os.fsync, fi.fh)

    def release(self, path: str, fi: Any) -> None:
        self._call(os.close, fi.fh)


def main() -> None:
    backing, mountpoint = sys.argv[1], sys.argv[2]
    vanish = next((arg.split("=", 1)[1] for arg in sys.argv[3:] if arg.startswith("--vanish=")), None)
    FUSE(
        Passthrough(backing, links="--no-links" not in sys.argv[3:], vanish=vanish),
        mountpoint,
        foreground=True,
        nothreads=False,
        raw_fi=True,
        use_ino=True,
        allow_other=False,
        fsname="repoinstall-test",
        # With --vanish, every call on a descriptor asks the server, as a client whose cached attributes just
        # expired does: the race it stands for is then met every time, not only once the cache times out.
        **({"attr_timeout": 0} if vanish else {}),
    )


if __name__ == "__main__":
    main()
