"""Private staging dirs: one per install attempt, alive while its owner is, published from by one rename.

``<repo>/staging/<env>/<tree>.<host>.<pid>.<random>/`` holds ``owner.json`` (who made it: host, pid, and what
tells that process apart from any other: boot id, pid namespace, process start time), the installer's ``tmp/``
and the staged ``tree/``. While the install runs, a heartbeat refreshes the note's mtime, so gc can prove a
staging dir dead without any lock: its owner's process is gone (same machine and pid namespace), or its
heartbeat stopped for the stale threshold (anywhere else). ``--no-lock`` installs are protected the same way.
"""

from __future__ import annotations

import contextlib
import errno
import json
import os
import threading
from typing import TYPE_CHECKING

from .. import _log
from .._disk import fs as _fs
from .._disk.dists import Hashed
from .._disk.identity import TreeId
from .._disk.layout import OWNER_NOTE, STAGING, TREES, Layout
from .._disk.owner import owner_note
from .._errors import InstallError, RepoinstallError

if TYPE_CHECKING:
    from collections.abc import Sequence

    from .._disk.manifest import TreeEntry
    from .._requirements import Requested
    from .backends.run import Built

#: The staged tree and the installer's temporary files, inside a staging dir.
TREE = "tree"
TMP = "tmp"


class Staging:
    """One install attempt's staging dir. ``with Staging(...) as staging``: made with its note and heartbeat on
    enter; on exit the heartbeat stops and the dir is set aside into trash/ and deleted there."""

    def __init__(self, layout: Layout, tid: TreeId, heartbeat: float, hashed: Hashed | None = None) -> None:
        self._layout = layout
        #: What this install hashed of its own files (its pycs, each distribution it checked before storing it):
        #: the staged tree's verify does not hash them again (see :class:`repoinstall._disk.dists.Hashed`).
        self.hashed = hashed if hashed is not None else Hashed(fresh=True)
        self._tid = tid
        self._heartbeat = heartbeat
        host = "".join(c if c.isalnum() or c in "-_" else "_" for c in os.uname().nodename)[:40]
        self.name = f"{tid.name}-{tid.leaf}.{host}.{os.getpid()}.{os.urandom(4).hex()}"
        self.parts = (STAGING, tid.env)
        self.path = layout.path(*self.parts, self.name)
        self._fd = -1
        self._identity: tuple[int, int] | None = None
        self._stop = threading.Event()
        self._beat: threading.Thread | None = None

    @property
    def target(self) -> str:
        """Where the installer puts the tree; it creates the dir itself, so it never installs into a used one."""
        return os.path.join(self.path, TREE)

    @property
    def tmp(self) -> str:
        return os.path.join(self.path, TMP)

    def scratch_file(self, name: str, data: bytes) -> str:
        """Write ``name`` into the installer's scratch dir (through our descriptor, no link followed); its path.
        Mode 0600: a requirements file may name a lock's URL with its password, and a killed run leaves it in
        the staging dir until gc proves its owner gone; other UIDs of the repo's group must not read it."""
        fd = _fs.open_dir(self._fd, (TMP,))
        if fd is None:
            raise InstallError(f"{self._tid}: its staging dir {self.path} lost its scratch dir")
        try:
            _fs.write_atomic(fd, name, data, 0o600)
        finally:
            os.close(fd)
        return os.path.join(self.tmp, name)

    def __enter__(self) -> Staging:
        # Where the tree and its record go was checked before the lock (see preflight).
        parent = _fs.make_dirs(self._layout.writable_fd(), self.parts, self._layout.root)
        try:
            os.mkdir(self.name, _fs.DIR_MODE, dir_fd=parent)
            fd = _fs.open_dir(parent, (self.name,))
            assert fd is not None
            self._fd = fd
            info = os.fstat(fd)
            self._identity = (info.st_dev, info.st_ino)
            _fs.set_group_mode(fd, _fs.DIR_MODE)
            _fs.write_atomic(fd, OWNER_NOTE, json.dumps(owner_note()).encode())
            os.mkdir(TMP, 0o700, dir_fd=fd)
        except BaseException:
            self.__exit__()
            raise
        finally:
            os.close(parent)
        self._beat = threading.Thread(target=self._beating, name=f"staging {self._tid}", daemon=True)
        self._beat.start()
        return self

    def _beating(self) -> None:
        # The note's mtime is this dir's lease: gc removes a staging dir of another machine only once the note
        # has not been refreshed for the stale threshold. Touched through our own descriptor of the dir.
        while not self._stop.wait(self._heartbeat):
            with contextlib.suppress(OSError):
                os.utime(OWNER_NOTE, dir_fd=self._fd, follow_symlinks=False)

    def tree_fd(self) -> int:
        """The staged tree, opened through the staging dir's own descriptor (no symlink followed)."""
        fd = _fs.open_dir(self._fd, (TREE,))
        if fd is None:
            raise InstallError(f"{self._tid}: the installer left no tree in {self.path}")
        return fd

    def verified_entry(
        self, requested: Requested, built: Built, expected: Sequence[str] | None = None
    ) -> tuple[TreeEntry, int]:
        """The manifest entry of the staged tree once it checks out, and the bytes in its files (for the line that
        says an install ended): the tree's own dist-info is there and every file matches its RECORD hash;
        :class:`InstallError` otherwise (nothing is published)."""
        from .._disk.dists import check_tree, scan
        from .._disk.identity import has_bytecode
        from .._disk.manifest import TreeEntry

        tid = self._tid
        tree = self.tree_fd()
        try:
            dists = scan(tree)
            own = [d for d in dists if tid.is_named(d.name, d.version)]
            if not own:
                raise InstallError(
                    f"{tid}: {built.installer} finished but the staged tree has no {tid.name} {tid.version} dist-info"
                )
            if problems := check_tree(tree, dists, hashed=self.hashed, bytecode=has_bytecode(tid.env)):
                raise InstallError(f"{tid}: staged tree does not match its RECORDs: {problems.summary()}")
            if expected is not None:  # a lock's tree, or one installed from its kept closure
                from .locked import check_members

                check_members(tid, expected, dists)
        finally:
            os.close(tree)
        return TreeEntry.new(tid, requested.text, own[0].dist_info, dists, *built), problems.size

    def publish(self) -> bool:
        """Rename the staged tree to its final path: ``True`` if ours is published, ``False`` if a tree is there.

        The rename is the commit point; the lock only saves duplicate work. It renames ``<name>/tree`` by its
        path in staging/<env>, not through our descriptor: if gc has moved this dir into trash/ (and is deleting
        it there), the path is gone and the rename fails, instead of publishing a tree being deleted.
        """
        from .._disk.publish import publish

        root = self._layout.writable_fd()
        parent = _fs.open_dir(root, self.parts)
        trees = _fs.make_dirs(root, (TREES, self._tid.env, self._tid.name), self._layout.root)
        try:
            try:
                here = os.stat(self.name, dir_fd=parent, follow_symlinks=False) if parent is not None else None
            except FileNotFoundError:
                here = None
            if here is None or (here.st_dev, here.st_ino) != self._identity:
                raise self.lost_error()
            assert parent is not None
            try:
                published = publish(parent, f"{self.name}/{TREE}", trees, self._tid.leaf)
            except FileNotFoundError:
                raise self.lost_error() from None
            if published and (tree := _fs.open_dir(trees, (self._tid.leaf,))) is not None:
                from .._store.compose import freeze

                try:
                    freeze(tree)  # immutable from here: directories too
                finally:
                    os.close(tree)
            return published
        finally:
            os.close(trees)
            if parent is not None:
                os.close(parent)

    def lost(self) -> bool:
        """Whether our staging dir is no longer at its path as we made it: removed or replaced (by gc, an operator,
        or another NFS client), so whatever the installer wrote may be anywhere. As the server has it now."""
        root = self._layout.root_fd()
        parent = None if root is None else _fs.open_dir(root, self.parts)
        if parent is None:
            return True
        try:
            here = os.stat(self.name, dir_fd=parent, follow_symlinks=False)
        except OSError:
            return True
        finally:
            os.close(parent)
        return (here.st_dev, here.st_ino) != self._identity

    def lost_error(self) -> OSError:
        """What an install whose staging dir was lost raises: ESTALE, the handle we held names nothing now, so the
        protocol runs again from the start in a new staging dir (see :meth:`Layout.retrying`). Nothing was
        published from the lost one."""
        return OSError(errno.ESTALE, "its staging dir was removed or replaced while installing", self.path)

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        if self._beat is not None:
            self._beat.join()
        if self._fd >= 0:
            os.close(self._fd)
            self._fd = -1
        # Set aside, then delete in trash/: our tree, if published, was renamed out before this.
        try:
            self._layout.discard(self.parts, self.name, f"staging.{self.name}")
        except (OSError, RepoinstallError) as error:
            _log.logger().debug("could not remove %s: %s", self.path, error)
