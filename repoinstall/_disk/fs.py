"""Filesystem steps that never follow a symlink out of the repo and never leave a half-written file visible.

Every path below the repo root is walked one component at a time with ``O_NOFOLLOW``, so a symlink planted
anywhere inside the repo reads as "not there" (or as an error naming it) instead of leading outside.
"""

from __future__ import annotations

import contextlib
import errno
import os
import stat
import struct
from collections.abc import Sequence
from typing import Any

from .._errors import RepoUnusable

DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
#: A directory opened only to look names up below it (no listing): on NFS this costs no GETATTR, where an open
#: for reading revalidates the directory (close-to-open). A symlink fails with ENOTDIR, as with DIR_FLAGS.
LOOKUP_FLAGS = os.O_PATH | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
#: O_NONBLOCK: opening a FIFO planted where a file belongs returns at once instead of waiting for a writer.
FILE_FLAGS = os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC | os.O_NONBLOCK
#: A temporary file of :func:`write_atomic`: made new (never an existing name, never through a symlink).
_CREATE_FLAGS = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC
#: What an open reports when a component is missing, is a symlink (ELOOP), or is a file where a directory is due.
#: Not ESTALE: a stale handle says nothing about the name, only that a handle we held was replaced or removed on
#: the server (by another client); it is looked up again from a good handle (see :func:`stale`).
_ABSENT = frozenset({errno.ENOENT, errno.ELOOP, errno.ENOTDIR})
#: How many times a name whose handle went stale is looked up again before the error stands. The kernel retries a
#: path walk once with revalidation (LOOKUP_REVAL); a peer that keeps replacing the name may need another.
STALE_LOOKUPS = 3
#: Group-writable, so pods with different UIDs that share an fsGroup can all use the repo.
DIR_MODE = 0o2775
FILE_MODE = 0o664


class Unreadable(RepoUnusable):
    """A file or directory of the repo this process may not read: another UID made it private (exit 2)."""


#: How many entries :func:`denied` looks at below a directory it may read, to find what it may not.
_DENIED_SEARCH = 10_000


def denied(root: str, error: OSError, *candidates: Sequence[str]) -> Unreadable:
    """What ``error`` (EACCES on the way to one of ``candidates``, paths below the repo ``root`` as parts) was
    about, as one line: the first directory on the way this process may not list or search, or file it may not
    read, with its owner and mode; below the last directory of a candidate, the first such entry. Only for the
    error path: it costs a stat per step."""
    for parts in candidates:
        path = root
        for part in parts:
            path = os.path.join(path, part)
            if os.path.islink(path):
                break  # never followed, here either: not what was refused
            if (found := _forbidden(path)) is not None:
                return found
        else:
            if not os.path.isdir(path):
                continue
            seen = 0
            for top, dirs, files in os.walk(path):
                for name in (*dirs, *files):
                    if (found := _forbidden(os.path.join(top, name))) is not None:
                        return found
                    seen += 1
                if seen > _DENIED_SEARCH:
                    break
    # Nothing the permission bits forbid (a security module's refusal, say): what the error itself names.
    return Unreadable(f"repo {root}: permission denied to uid {os.geteuid()} at {error.filename or root}")


def _forbidden(path: str) -> Unreadable | None:
    try:
        info = os.stat(path, follow_symlinks=False)
    except OSError:
        return None  # not there, or below what was named already
    if stat.S_ISLNK(info.st_mode):
        return None  # never followed: not a reason for EACCES
    need = os.R_OK | os.X_OK if stat.S_ISDIR(info.st_mode) else os.R_OK
    if os.access(path, need, effective_ids=True):
        return None
    return Unreadable(
        f"{path}: permission denied: uid {os.geteuid()} cannot read it ({ownership(info)}); pods sharing a repo "
        "need group read access to it (one fsGroup, umask 002) or one runAsUser"
    )


def _refusal(where: str, parts: Sequence[str], index: int, error: OSError, *, create: bool) -> Unreadable:
    """Why this UID could not open (or make) ``parts[index]`` on the way down from ``where``: a directory it may
    not read or search, or the one it may not create in, named with its owner and mode."""
    for depth in range(1, index + 2):
        if (found := _forbidden(os.path.join(where, *parts[:depth]))) is not None:
            return found
    parent = os.path.join(where, *parts[:index])
    try:
        info = os.stat(parent, follow_symlinks=False)
    except OSError:
        info = None
    if create and info is not None and not os.access(parent, os.W_OK | os.X_OK, effective_ids=True):
        return Unreadable(
            f"{parent}: permission denied: uid {os.geteuid()} cannot create {parts[index]} in it ({ownership(info)}); "
            "pods sharing a repo need group write access to it (one fsGroup, umask 002) or one runAsUser"
        )
    return denied(where, error, parts[: index + 1])


def ownership(info: os.stat_result, *, group: bool = True) -> str:
    """``owner uid 0 (root), gid 1001, mode 2700``: who may read a file, for a line about a refusal. The owner's
    name is shown where this host knows it (a pod may not: its uid is then the name)."""
    import pwd

    try:
        owner = f"owner uid {info.st_uid} ({pwd.getpwuid(info.st_uid).pw_name})"
    except KeyError:
        owner = f"owner uid {info.st_uid}"
    return f"{owner}{f', gid {info.st_gid}' if group else ''}, mode {stat.S_IMODE(info.st_mode):04o}"


def stale(error: BaseException) -> bool:
    """Whether ``error`` is ESTALE: a file handle this NFS client held names an object the server no longer has,
    because another client replaced or removed it. The name may well exist again: look it up afresh."""
    return isinstance(error, OSError) and error.errno == errno.ESTALE


def vanished(error: OSError) -> bool:
    """Whether ``error``, raised by a call on a descriptor (no file name), says that what it names was replaced or
    removed by another client since we opened it: ESTALE on NFS; ENOENT on a FUSE filesystem that serves
    descriptors by their path (a local filesystem keeps an open file readable after its unlink)."""
    return error.errno == errno.ESTALE or (error.errno == errno.ENOENT and error.filename is None)


def revalidate(dir_fd: int) -> None:
    """Make this client see the directory as the server has it now, entries peers made or removed included.

    On NFS the client caches a directory's entries (a name looked up and not found stays "not there") until the
    directory's attributes expire, up to ``acdirmax`` (60 s). Opening a directory revalidates its attributes
    (close-to-open), and a changed directory drops those cached entries: one GETATTR. Elsewhere: one cheap open.
    """
    with contextlib.suppress(OSError):
        os.close(os.open(".", DIR_FLAGS, dir_fd=dir_fd))


_AT_SYMLINK_NOFOLLOW = 0x100
_AT_STATX_FORCE_SYNC = 0x2000
_STATX_MTIME = 0x40
_statx: Any = None


def fresh_mtime_ns(dir_fd: int, name: str) -> int | None:
    """The mtime of ``name`` (not followed if a symlink) as the server has it now, ``None`` if it is not there.

    ``statx`` with AT_STATX_FORCE_SYNC makes an NFS client ask the server (one GETATTR) instead of answering from
    its attribute cache; without statx in libc, an open (close-to-open revalidates) and fstat do it instead."""
    global _statx
    if _statx is None:
        import ctypes

        _statx = getattr(ctypes.CDLL(None, use_errno=True), "statx", False)
    if _statx is False:
        try:
            fd = os.open(name, FILE_FLAGS, dir_fd=dir_fd)
        except OSError:
            return None
        try:
            return os.fstat(fd).st_mtime_ns
        except OSError:
            return None  # replaced or removed by another client since the open (ESTALE): not there as it was
        finally:
            os.close(fd)
    import ctypes

    buffer = ctypes.create_string_buffer(256)  # struct statx
    flags = _AT_SYMLINK_NOFOLLOW | _AT_STATX_FORCE_SYNC
    if _statx(dir_fd, os.fsencode(name), flags, _STATX_MTIME, buffer) != 0:
        return None
    seconds, nanoseconds = struct.unpack_from("<qI", buffer, 112)  # stx_mtime
    return int(seconds) * 1_000_000_000 + int(nanoseconds)


class DirWatch:
    """A directory as a waiter last saw it: :meth:`changed` revalidates it and says whether its entries may have
    changed since the previous call (its mtime or ctime moved). A look that finds nothing new costs one GETATTR
    on NFS, however many names the waiter cares about in it."""

    def __init__(self) -> None:
        self._seen: tuple[int, int, int] | None = None
        #: The directory was removed (no links left; on NFS its handle went stale): nothing can appear in it again.
        self.removed = False

    def changed(self, dir_fd: int, *, revalidated: bool = False) -> bool:
        """``revalidated``: ``dir_fd`` was just opened (which revalidated it already)."""
        if not revalidated:
            revalidate(dir_fd)
        info = _linked(dir_fd)
        self.removed = info is None
        seen = None if info is None else (info.st_ino, info.st_mtime_ns, info.st_ctime_ns)
        changed, self._seen = seen != self._seen, seen
        return changed


def removed(dir_fd: int) -> bool:
    """Whether the open directory was removed (see :func:`_linked`), as the server has it now: an NFS client
    answers fstat from its attribute cache, which knows nothing of another client's rmdir until it expires."""
    revalidate(dir_fd)
    return _linked(dir_fd) is None


def _linked(dir_fd: int) -> os.stat_result | None:
    """The open directory's attributes; ``None`` if it was removed: rmdir leaves it no links, and on NFS a
    directory another client removed answers with a stale handle. One fstat (a GETATTR on NFS, or its cache)."""
    try:
        info = os.fstat(dir_fd)
    except OSError as error:
        if error.errno in (errno.ESTALE, errno.ENOENT):
            return None
        raise
    return info if info.st_nlink > 0 else None


def open_dir(dir_fd: int, parts: Sequence[str], *, lookup_only: bool = False) -> int | None:
    """Open the directory ``parts`` below ``dir_fd`` without following symlinks; ``None`` if it is not there.
    ``lookup_only``: for opening names below it, not for listing it (see LOOKUP_FLAGS)."""
    flags = LOOKUP_FLAGS if lookup_only else DIR_FLAGS
    fd = dir_fd
    try:
        for part in parts:
            try:
                nxt = os.open(part, flags, dir_fd=fd)
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


def read_file(dir_fd: int, parts: Sequence[str], limit: int = 1 << 22, *, lookup_only: bool = False) -> bytes | None:
    """Read the regular file ``parts`` below ``dir_fd``; ``None`` if it is missing, a symlink or not a file.
    ``lookup_only``: the directories on the way are only looked up (see LOOKUP_FLAGS); the file's own open
    still revalidates it on NFS."""
    parent = dir_fd if len(parts) == 1 else open_dir(dir_fd, parts[:-1], lookup_only=lookup_only)
    if parent is None:
        return None
    try:
        # A file replaced (write_atomic's rename) or removed by another client between our open and our read reads
        # as ESTALE on NFS, and as ENOENT on a FUSE filesystem that resolves our descriptor by its path: look its
        # name up again from the parent, a handle that is still good, as the kernel does. Still gone: missing.
        for attempt in range(STALE_LOOKUPS):
            try:
                return _read_regular(parent, parts[-1], limit)
            except OSError as error:
                if not vanished(error) or (attempt == STALE_LOOKUPS - 1 and stale(error)):
                    raise
        return None
    finally:
        if parent != dir_fd:
            os.close(parent)


def _read_regular(parent: int, name: str, limit: int) -> bytes | None:
    try:
        fd = os.open(name, FILE_FLAGS, dir_fd=parent)
    except OSError as error:
        if error.errno in _ABSENT or error.errno == errno.ENXIO:
            return None
        raise
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            return None
        # Sized from fstat: os.read allocates its whole buffer, so a generous fixed size costs microseconds.
        return os.read(fd, min(info.st_size + 1, limit)) if info.st_size < limit else None
    finally:
        os.close(fd)


def make_parent(path: str, made: set[str]) -> None:
    """Make the directory ``path`` goes in (and its parents), unless ``made`` says it was made already: a run of
    files placed into a private dir makes each directory once, not one failed ``mkdir`` per file and level."""
    parent = os.path.dirname(path)
    if parent not in made:
        os.makedirs(parent, exist_ok=True)
        made.add(parent)


def make_dirs(dir_fd: int, parts: Sequence[str], where: str) -> int:
    """Create (as needed) and open the directory ``parts`` below ``dir_fd``; refuse a symlink or file on the way."""
    fd = _descend(dir_fd, parts, where, create=True)
    assert fd is not None
    return fd


def check_dirs(dir_fd: int, parts: Sequence[str], where: str) -> None:
    """Refuse, as :func:`make_dirs` would, a symlink or file where a directory of ``parts`` belongs; create
    nothing (what is missing is fine)."""
    if (fd := _descend(dir_fd, parts, where, create=False)) is not None:
        os.close(fd)


def check_file(dir_fd: int, parts: Sequence[str], where: str) -> None:
    """Refuse, creating nothing, a directory at ``parts`` (a file written there by :func:`write_atomic` cannot
    replace it), and a symlink or file where one of its directories belongs, as :func:`check_dirs` does. A
    symlink, FIFO or device at ``parts`` itself is fine: the rename that writes the file replaces it, never
    following it. What is missing is fine."""
    parent = _descend(dir_fd, parts[:-1], where, create=False)
    if parent is None:
        return
    try:
        mode = os.stat(parts[-1], dir_fd=parent, follow_symlinks=False).st_mode
    except FileNotFoundError:
        return
    finally:
        os.close(parent)
    if stat.S_ISDIR(mode):
        shown = os.path.join(where, *parts)
        raise RepoUnusable(f"{shown} is not a regular file (a directory is in the way)")


def _descend(dir_fd: int, parts: Sequence[str], where: str, *, create: bool) -> int | None:
    """Open ``parts`` below ``dir_fd`` one directory at a time, creating what is missing if ``create`` (else
    ``None`` at the first missing one); :class:`RepoUnusable` naming a symlink or file in the way."""
    fd = os.dup(dir_fd)
    try:
        for index, part in enumerate(parts):
            try:
                found = _step(fd, part, create=create)
            except PermissionError as error:
                # Which directory on the way refused this UID, with its owner and mode (not just the name).
                raise _refusal(where, parts, index, error, create=create) from None
            if isinstance(found, OSError):
                raise RepoUnusable(in_the_way(fd, part, os.path.join(where, *parts[: index + 1]))) from None
            os.close(fd)
            if found is None:
                return None
            fd, created = found
            if created:
                set_group_mode(fd, DIR_MODE)
        return fd
    except BaseException:
        os.close(fd)
        raise


def _step(fd: int, part: str, *, create: bool) -> tuple[int, bool] | OSError | None:
    """The directory ``part`` below ``fd`` opened (and whether we made it), ``None`` if it is missing (and not
    ``create``), or the error of a symlink or file in its place.

    Invariant: gc removes empty directories of the repo by rmdir, without a lock (a lock's directory, a store
    name's: see ``Layout.prune``), so one found there by our mkdir (EEXIST) may be gone by our open: it was empty,
    nothing of anyone's went with it, and it is made again."""
    for attempt in range(STALE_LOOKUPS):
        created = False
        if create:
            with contextlib.suppress(FileExistsError):
                os.mkdir(part, DIR_MODE, dir_fd=fd)
                created = True
        try:
            return os.open(part, DIR_FLAGS if create else LOOKUP_FLAGS, dir_fd=fd), created
        except FileNotFoundError:
            if not create:
                return None
            if attempt == STALE_LOOKUPS - 1:
                raise
        except OSError as error:
            if error.errno in (errno.ELOOP, errno.ENOTDIR):
                return error
            raise
    raise AssertionError("unreachable")


def in_the_way(dir_fd: int, name: str, shown: str) -> str:
    """One line saying that ``name`` below ``dir_fd`` (``shown`` in full) is not the directory it should be, and
    what it is instead: a symlink, a regular file, a FIFO, a socket or a device."""
    from .things import Thing, thing_at  # here: only an error needs it

    thing = thing_at(dir_fd, name)
    what = thing.named if thing is not None and thing is not Thing.DIRECTORY else "a symlink or file"
    return f"{shown} is not a directory ({what} is in the way)"


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


#: What a rename reports when a directory is where its destination belongs.
IN_THE_WAY = frozenset({errno.EISDIR, errno.ENOTEMPTY, errno.EEXIST})


def write_atomic(dir_fd: int, name: str, data: bytes, mode: int = FILE_MODE) -> None:
    """Write ``name`` in ``dir_fd`` through a temporary file and one rename, so readers see all of it or none;
    ``mode``: the group's by default, ``0o600`` for what only this UID may read.

    The temporary file never outlives a failure or an interrupt; a directory in the way of ``name`` fails with
    an error naming ``name`` (not the temporary file)."""
    tmp = f".{name}.{os.urandom(6).hex()}.tmp"
    created = True
    try:
        # The create is inside the try that removes the file by name. A signal handler's exception (SIGTERM's
        # SystemExit, Ctrl-C) comes at the earliest as the os.open call ends (CPython runs handlers between
        # bytecodes, never inside the call once its openat succeeded): already within this try, so the file is
        # removed. The window left is that exception arriving before the descriptor is bound to ``fd`` and
        # _write_all's try is entered: then the descriptor alone is not closed here (the exiting process closes it).
        try:
            fd = os.open(tmp, _CREATE_FLAGS, mode, dir_fd=dir_fd)
        except OSError:
            created = False  # O_EXCL: nothing was created, and whatever is at ``tmp`` is not ours to remove
            raise
        _write_all(fd, data, mode)
        try:
            os.rename(tmp, name, src_dir_fd=dir_fd, dst_dir_fd=dir_fd)
        except OSError as error:
            if error.errno in IN_THE_WAY:  # a directory at ``name``: the temporary file is no news to the reader
                error.filename, error.filename2 = name, None
            raise
    except BaseException:
        if created:
            with contextlib.suppress(OSError):
                os.unlink(tmp, dir_fd=dir_fd)
        raise


def _write_all(fd: int, data: bytes, mode: int) -> None:
    """Give the new file ``fd`` its mode and all of ``data``, on disk before it is named (fsync), and close it."""
    try:
        set_group_mode(fd, mode)
        view = memoryview(data)
        while view:
            view = view[os.write(fd, view) :]
        os.fsync(fd)
    finally:
        os.close(fd)


def write_once(dir_fd: int, name: str, data: bytes) -> bool:
    """Write ``name`` in ``dir_fd`` if nobody has: a temporary file, then one hard link to ``name``. ``False`` if
    ``name`` was there (a peer's write won; read theirs). Readers see all of it or none, and a second writer never
    replaces the first's: link() fails with EEXIST, atomically, on local filesystems and on the NFS server alike.
    Where hard links are refused (some FUSE filesystems), a rename onto a name still missing a moment ago."""
    tmp = f".{name}.{os.urandom(6).hex()}.tmp"
    fd = os.open(tmp, _CREATE_FLAGS, FILE_MODE, dir_fd=dir_fd)
    try:
        _write_all(fd, data, FILE_MODE)
        try:
            os.link(tmp, name, src_dir_fd=dir_fd, dst_dir_fd=dir_fd, follow_symlinks=False)
            return True
        except FileExistsError:
            return False
        except OSError as error:
            if error.errno not in (errno.EPERM, errno.ENOTSUP, errno.EOPNOTSUPP, errno.EMLINK):
                raise
        try:
            os.stat(name, dir_fd=dir_fd, follow_symlinks=False)
            return False
        except FileNotFoundError:
            pass
        os.rename(tmp, name, src_dir_fd=dir_fd, dst_dir_fd=dir_fd)
        return True
    finally:
        with contextlib.suppress(OSError):
            os.unlink(tmp, dir_fd=dir_fd)


def unlink(dir_fd: int, name: str) -> None:
    with contextlib.suppress(FileNotFoundError):
        os.unlink(name, dir_fd=dir_fd)


def remove_tree(path: str) -> None:
    """Delete a directory tree we own (staging, trash), best effort, never following symlinks."""
    import shutil

    shutil.rmtree(path, ignore_errors=True)
