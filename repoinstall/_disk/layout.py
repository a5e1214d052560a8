"""Where things live in a repo directory.

    <repo>/format                                       its format and lock protocol, stated once (repoformat)
    <repo>/trees/<env>/<name>/<version>[extras]/        one immutable tree of links into store/ (importable)
    <repo>/records/<env>/<name>/<version>[extras].json  its manifest record (one small file per tree; .used beside)
    <repo>/locks/<env>/<name>/<version>[extras].lock    its install lock (state in .lock.rw/, holder in .owner)
    <repo>/closures/<env>/<name>/<version>[extras].json what a tree was installed from, kept when it goes
    <repo>/store/<env>/<name>/<version>-<sha16>/        each installed distribution once, trees link to it
    <repo>/store-locks/<env>/<name>/<leaf>.lock         a stored distribution's lock (and a cold store's batch)
    <repo>/store-digests/<env>/<name>/<leaf>.json       the sha256 of a stored distribution's RECORD, as stored
    <repo>/cache/index/                                 answers from package indexes
    <repo>/cache/wheels/<sha256>.whl                    wheels resolution downloaded whole, for the installer
    <repo>/staging/<env>/<tree>.<host>.<pid>.<random>/  a private staging dir per install attempt
    <repo>/trash/                                       what is being removed, renamed aside before deletion

One file per tree, never one manifest for the whole repo, keeps the check's cost proportional to the
packages asked for and lets installs of different trees never write the same file.
"""

from __future__ import annotations

import errno
import os
import stat
import threading
from collections.abc import Callable
from typing import ParamSpec, TypeVar

from .._errors import RepoUnusable
from . import fs as _fs
from .identity import TreeId

TREES = "trees"
RECORDS = "records"
LOCKS = "locks"
STAGING = "staging"
TRASH = "trash"
#: Answers from package indexes (see _indexcache).
CACHE = "cache"
#: What each tree was installed from (see closures): kept when the tree goes, so it comes back the same.
CLOSURES = "closures"
#: Each installed distribution once (see repoinstall._store): ``store/<env>/<name>/<version>-<sha16>/``.
STORE = "store"
#: The locks of stored distributions, ``store-locks/<env>/<name>/<leaf>.lock``: apart from ``locks/``, whose
#: readers (gc, ``locks``) take every lock there for a tree's.
STORE_LOCKS = "store-locks"
#: A digest of each stored distribution's RECORD, kept apart from it (see repoinstall._store.digests):
#: ``store-digests/<env>/<name>/<leaf>.json``.
STORE_DIGESTS = "store-digests"
RECORD_SUFFIX = ".json"
#: The repo's statement of its format and lock protocol (see repoformat), at its top.
FORMAT_FILE = "format"
#: Inside a staging dir: who made it (host, pid, started) and for which tree.
OWNER_NOTE = "owner.json"
#: Beside a lock: who holds it and since when, for people and for waiters' log lines.
OWNER_SUFFIX = ".owner"
#: Beside a record: its mtime says when the tree was last ensured (refreshed at most hourly).
USED_SUFFIX = ".used"


P = ParamSpec("P")
T = TypeVar("T")

#: What a repo holds at its top; a directory with other entries and none of these is not a repo.
_TOP = frozenset({TREES, RECORDS, LOCKS, STAGING, TRASH, CACHE, CLOSURES, STORE, STORE_LOCKS})


def default_repo() -> str:
    """The per-user default repo: ``$XDG_DATA_HOME/repoinstall/repo`` (``~/.local/share/...``)."""
    base = os.environ.get("XDG_DATA_HOME") or os.path.join(os.path.expanduser("~"), ".local", "share")
    return os.path.join(base, "repoinstall", "repo")


class Layout:
    """The repo root and the paths of one tree's parts below it. Holds one directory descriptor of the root."""

    def __init__(self, root: str | os.PathLike[str]) -> None:
        given = os.fspath(root)
        if not given.strip():
            raise RepoUnusable("the repo path is empty: name a directory (--repo DIR or REPOINSTALL_REPO)")
        path = os.path.abspath(given)
        if path == os.path.abspath(os.sep):
            raise RepoUnusable("repo /: the filesystem root cannot be a repo: name a directory below it")
        try:
            mode = os.stat(path).st_mode
        except FileNotFoundError:
            mode = None
        except OSError as error:
            raise RepoUnusable(f"repo {path}: cannot be used: {error.strerror}") from None
        if mode is not None and not stat.S_ISDIR(mode):
            raise RepoUnusable(f"repo {path}: exists and is not a directory")
        self.root = path
        self._fd: int | None = None
        self._env_fds: dict[tuple[str, str], int] = {}
        #: Handles dropped by :meth:`forget`, closed only by :meth:`close`: another thread may be using one now.
        self._retired: list[int] = []
        #: Set on a thread while :meth:`retrying` runs its work again after ESTALE (see :attr:`revalidating`), and
        #: how many threads do.
        self._again = threading.local()
        self._rerunning = 0
        self._guard = threading.Lock()
        #: Whether this repo's format file was read (and, for ``writable``, stated) by this handle: once each.
        self._format_read = False
        self._format_stated = False

    def root_fd(self, *, create: bool = False) -> int | None:
        """The root's descriptor, or ``None`` if the repo does not exist yet and ``create`` is false."""
        if self._fd is None:
            created = False
            if create:
                try:
                    os.makedirs(self.root, _fs.DIR_MODE)  # FileExistsError when it is there (or a peer made it)
                    created = True
                except FileExistsError:
                    pass
                except OSError as error:
                    raise RepoUnusable(f"repo {self.root}: cannot be created: {error.strerror}") from None
            try:
                self._fd = os.open(self.root, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
            except FileNotFoundError:
                if not create:
                    return None
                # makedirs found the name taken, yet it opens as missing: a symlink to nothing (an unmounted
                # volume, say). Nothing is created through it: the install would land wherever the link points.
                raise RepoUnusable(f"repo {self.root}: {_dangling(self.root)}") from None
            except NotADirectoryError:
                raise RepoUnusable(f"repo {self.root}: exists and is not a directory") from None
            except OSError as error:
                raise RepoUnusable(f"repo {self.root}: cannot be opened: {error.strerror}") from None
            if created:
                _fs.set_group_mode(self._fd, _fs.DIR_MODE)  # like every directory below it, whatever the umask
        return self._fd

    def existing_fd(self) -> int:
        """The root's descriptor for a command that reads a repo (verify, list, locks, gc, doctor): never created,
        and :class:`RepoUnusable` if it is missing or a directory that is not a repo (so a mistyped --repo is
        named, not reported as an empty repo)."""
        return self.retrying(self._existing_fd)

    def _existing_fd(self) -> int:
        fd = self.root_fd()
        if fd is None:
            raise RepoUnusable(f"repo {self.root} does not exist (ensure creates it)")
        try:
            entries = os.listdir(fd)
        except OSError as error:
            if _fs.stale(error):
                raise  # the repo was replaced under a handle we kept: looked up again by retrying
            raise RepoUnusable(f"repo {self.root}: cannot be listed: {error.strerror}") from None
        if entries and FORMAT_FILE not in entries and not any(name in _TOP for name in entries):
            raise RepoUnusable(f"{self.root} is not a repoinstall repo (it has no {'/, '.join(sorted(_TOP))}/)")
        if not self._format_read and FORMAT_FILE in entries:
            from . import repoformat  # not on the warm check's path, which never reads the format

            repoformat.check(
                fd, self.root, FORMAT_FILE, write=False
            )  # a reader too must not misread a format it does not speak
            self._format_read = True
        return fd

    def writable_fd(self) -> int:
        """The root's descriptor for an install; a clear error when the repo is read-only or not writable."""
        fd = self.root_fd(create=True)
        assert fd is not None
        # Relative to the open root and with effective ids: what this process can do there, whatever the
        # permissions of the directories above it.
        if not os.access(".", os.W_OK, dir_fd=fd, effective_ids=True):
            # access() says False for a handle gone stale too (the repo replaced by another client): ask again of
            # the repo as a fresh lookup finds it before refusing.
            self.forget()
            fd = self.root_fd(create=True)
            assert fd is not None
        if not os.access(".", os.W_OK, dir_fd=fd, effective_ids=True):
            if read_only_filesystem(self.root):
                raise RepoUnusable(f"repo {self.root} is read-only: cannot install missing packages here")
            raise RepoUnusable(f"repo {self.root} is not writable by uid {os.getuid()}")
        if not self._format_stated:
            # Before any lock or write of this process: a repo in a format this code does not speak is refused here,
            # so it is never shared with a protocol one side does not follow. Every writer comes through here.
            from . import repoformat

            repoformat.check(fd, self.root, FORMAT_FILE, write=True)
            self._format_stated = self._format_read = True
        return fd

    def env_fd(self, kind: str, env: str, *, fresh: bool = False) -> int | None:
        """The open ``<kind>/<env>`` directory (trees or records), cached once it exists: they are never removed,
        so the warm check opens only what is below them. ``fresh``: as the server has it now, for a look that
        must see what peers on other NFS clients did (see :func:`fs.revalidate`)."""
        fd = self._env_fds.get((kind, env))
        if fd is not None:
            if fresh:
                _fs.revalidate(fd)
            return fd
        root = self.root_fd()
        if root is None:
            return None
        if fresh:
            _fs.revalidate(root)  # a peer may have made <kind>/ since this client last looked
        with self._guard:
            if (fd := self._env_fds.get((kind, env))) is None and (fd := _fs.open_dir(root, (kind, env))) is not None:
                self._env_fds[(kind, env)] = fd
        return fd

    def close(self) -> None:
        for fd in [*self._env_fds.values(), *self._retired]:
            os.close(fd)
        self._env_fds.clear()
        self._retired.clear()
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None

    def forget(self) -> None:
        """Drop the handles this layout keeps (the root's, the env directories'): the next use looks the root up
        again by its path, from the mount. After ESTALE, one of them may name a directory another NFS client
        replaced or removed (a repo restored from a copy, say); a fresh lookup finds what is there now.

        Not closed here: another thread may be in the middle of an ``openat`` on one of them, and a closed number
        could be reused for an unrelated file before that call. They are closed with the layout."""
        with self._guard:
            self._retired.extend(self._env_fds.values())
            self._env_fds.clear()
            if self._fd is not None:
                self._retired.append(self._fd)
                self._fd = None

    def retrying(self, work: Callable[P, T], *args: P.args, **kwargs: P.kwargs) -> T:
        """``work(*args, **kwargs)``, run again from fresh handles when a handle it used went stale (ESTALE), up to
        :data:`fs.STALE_LOOKUPS` times in all, as the kernel looks a path up again when a cached handle is stale.

        Only for work that may run again from its start: a read, a check, or a step of the install protocol,
        which a crash may cut at any point anyway (the rename is the commit point), so a second run after an
        unwound first one is what a restarted pod would do. The first run costs one call: it is the warm path."""
        try:
            return work(*args, **kwargs)
        except OSError as error:
            if not _fs.stale(error):
                raise
            return self._again_after(error, work, *args, **kwargs)

    def _again_after(self, error: OSError, work: Callable[P, T], *args: P.args, **kwargs: P.kwargs) -> T:
        from .. import _log

        outer = self.revalidating
        # Counted under the guard (threads may rerun at once): while it is above zero, revalidating reads this
        # thread's flag; at zero it is False without one (the warm path's single attribute read).
        with self._guard:
            self._rerunning += 1
        self._again.on = True
        try:
            for _ in range(_fs.STALE_LOOKUPS - 2):
                _log.logger().debug("%s: a handle went stale (%s); looking the repo up again", self.root, error)
                self.forget()
                try:
                    return work(*args, **kwargs)
                except OSError as again:
                    if not _fs.stale(again):
                        raise
                    error = again
            _log.logger().debug("%s: a handle went stale (%s); looking the repo up again", self.root, error)
            self.forget()
            return work(*args, **kwargs)
        finally:
            self._again.on = outer
            with self._guard:
                self._rerunning -= 1

    @property
    def revalidating(self) -> bool:
        """Whether this thread runs work again after ESTALE: then every lookup must revalidate what it passes (a
        plain open, not ``O_PATH``), or this client's cache of a replaced name hands the stale handle out again.
        Costs one attribute read while no thread of the process does (the warm path)."""
        return self._rerunning > 0 and bool(getattr(self._again, "on", False))

    @staticmethod
    def tree_dir(tid: TreeId) -> tuple[str, ...]:
        return (TREES, tid.env, tid.name)

    @staticmethod
    def lock_dir(tid: TreeId) -> tuple[str, ...]:
        return (LOCKS, tid.env, tid.name)

    @staticmethod
    def record_dir(tid: TreeId) -> tuple[str, ...]:
        return (RECORDS, tid.env, tid.name)

    def discover(
        self, kind: str, env: str | None = None, name: str | None = None, *, suffix: str | None = None
    ) -> list[TreeId]:
        """The trees that have an entry under ``kind`` (TREES or RECORDS; LOCKS with the ``suffix`` of a lock's
        state, which :func:`repoinstall._lock.filelock_rw.lock_trees` passes), optionally of one env and name.

        Listed through directory descriptors, so a symlink planted at any level is not followed (and not listed).
        Names that are not ours (temporary files, foreign debris) are skipped.
        """
        suffix = {TREES: "", RECORDS: RECORD_SUFFIX}[kind] if suffix is None else suffix
        root = self.root_fd()
        top = None if root is None else _fs.open_dir(root, (kind,))
        if top is None:
            return []
        found = []
        try:
            for env_name in [env] if env else _subdirs(top):
                env_fd = _fs.open_dir(top, (env_name,))
                if env_fd is None:
                    continue
                try:
                    for project in [name] if name else _subdirs(env_fd):
                        project_fd = _fs.open_dir(env_fd, (project,))
                        if project_fd is None:
                            continue
                        try:
                            entries = sorted(os.listdir(project_fd))
                        finally:
                            os.close(project_fd)
                        for entry in entries:
                            if entry.startswith(".") or not entry.endswith(suffix):
                                continue
                            tid = TreeId.from_leaf(env_name, project, entry[: len(entry) - len(suffix)])
                            if tid is not None:
                                found.append(tid)
                finally:
                    os.close(env_fd)
        finally:
            os.close(top)
        return found

    def discard(self, parts: tuple[str, ...], name: str, label: str) -> bool | None:
        """Take ``parts/name`` out of the repo's view: one rename into trash/ (a symlink is moved, never followed),
        then delete it there. A reader sees the whole thing or nothing, never a half-deleted tree, and a peer
        that renames something into ``parts/name`` afterwards is untouched: the deletion only ever runs in trash/.

        ``None`` if it was not there, ``True`` once deleted, ``False`` if set aside but not wholly deleted (gc
        finishes it later). Raises :class:`RepoUnusable` if ``parts`` or trash/ is a symlink or file.
        """
        target = self.to_trash(parts, name, label)
        if target is None:
            return None
        from .walk import remove  # here: the warm path discards nothing

        trash = _fs.make_dirs(self.writable_fd(), (TRASH,), self.root)
        try:
            return remove(trash, target)
        finally:
            os.close(trash)

    def to_trash(self, parts: tuple[str, ...], name: str, label: str) -> str | None:
        """Take ``parts/name`` out of the repo's view by one rename into trash/ (a symlink is moved, never
        followed) and leave it there: its name in trash/, or ``None`` if it was not there. Deleting it is the
        caller's (:meth:`discard`), or gc's once it is older than ``--older-than``."""
        root = self.writable_fd()
        parent = _fs.open_dir(root, parts)
        if parent is None:
            return None
        try:
            trash = _fs.make_dirs(root, (TRASH,), self.root)
            try:
                target = f"{label}.{os.urandom(4).hex()}"
                try:
                    os.rename(name, target, src_dir_fd=parent, dst_dir_fd=trash)
                except FileNotFoundError:
                    return None
                except PermissionError:
                    # A read-only directory of ours: moving it to another parent rewrites its "..". Its owner
                    # may write it (it is going); anything else, or another UID's, refuses as before.
                    if not _let_owner_write(parent, name):
                        raise
                    os.rename(name, target, src_dir_fd=parent, dst_dir_fd=trash)
                return target
            finally:
                os.close(trash)
        finally:
            os.close(parent)

    def prune(self, parts: tuple[str, ...]) -> bool:
        """Remove the directory ``parts`` if it is empty; whether it was removed. rmdir removes only an empty
        directory and never follows a symlink, so an entry a peer made in it first keeps it. Only for directories
        whose users open them again when they find them removed (the locks' directories: see ``FileTreeLock``)."""
        root = self.root_fd()
        parent = None if root is None else _fs.open_dir(root, parts[:-1])
        if parent is None:
            return False
        try:
            os.rmdir(parts[-1], dir_fd=parent)
        except OSError:
            return False  # not empty (a peer's lock, another version's), gone already, or not ours to remove
        finally:
            os.close(parent)
        return True

    def path(self, *parts: str) -> str:
        return os.path.join(self.root, *parts)

    def tree_path(self, tid: TreeId) -> str:
        return self.path(*self.tree_dir(tid), tid.leaf)


def _let_owner_write(parent: int, name: str) -> bool:
    """Make the directory ``name`` (never followed) writable by its owner if it is ours and is not; whether it
    was made so."""
    from .walk import owner_writes

    try:
        fd = os.open(name, _fs.DIR_FLAGS, dir_fd=parent)
    except OSError:
        return False  # not a directory (or a symlink): nothing of its own blocks the move
    try:
        before = os.fstat(fd).st_mode
        owner_writes(fd)
        return os.fstat(fd).st_mode != before
    except OSError:
        return False
    finally:
        os.close(fd)


def read_only_filesystem(path: str) -> bool:
    try:
        return bool(os.statvfs(path).f_flag & os.ST_RDONLY)
    except OSError as error:
        return error.errno == errno.EROFS


def _dangling(path: str) -> str:
    """What is wrong with a repo path that exists by name but opens as missing."""
    try:
        target = os.readlink(path)
    except OSError:
        return "cannot be opened: it was removed as it was made"
    return f"is a symlink to {target}, which does not exist (nothing is created through it: create it, or fix the link)"


def _subdirs(dir_fd: int) -> list[str]:
    """The names of the real (not symlinked) directories in an open directory, sorted, hidden ones left out."""
    with os.scandir(dir_fd) as entries:
        return sorted(e.name for e in entries if e.is_dir(follow_symlinks=False) and not e.name.startswith("."))
