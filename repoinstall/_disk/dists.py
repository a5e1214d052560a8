"""The distributions inside a tree: their ``*.dist-info`` metadata and RECORD hashes.

Everything here reads through directory descriptors (see :mod:`repoinstall._disk.walk`): a symlink inside a tree
is a finding, never a way out of it, and a FIFO or device is never opened.
"""

from __future__ import annotations

import base64
import contextlib
import csv
import hashlib
import io
import os
import posixpath
import stat
from collections.abc import Iterator
from dataclasses import dataclass

from . import fs as _fs
from . import walk as _walk
from .metadata import parse_metadata

#: pip --target installs into a temporary home scheme (purelib ``lib/python``, scripts ``bin``) and moves it
#: into the target, so RECORD paths are relative to ``lib/python``: ``../../bin/tool`` is the tree's ``bin/tool``.
_TARGET_PURELIB = "lib/python"
#: The largest METADATA and RECORD read (torch's RECORD is about 2 MB).
_METADATA_LIMIT = 1 << 20
RECORD_LIMIT = 64 << 20
_CHUNK = 1 << 20


@dataclass(frozen=True, slots=True)
class Dist:
    """One ``*.dist-info`` directory of a tree, with the project and version its METADATA names."""

    dist_info: str
    name: str
    version: str


@contextlib.contextmanager
def opened(tree: int | str) -> Iterator[int]:
    """A descriptor of ``tree``: an open directory as it is, or a path opened without following its last part."""
    if isinstance(tree, int):
        yield tree
        return
    fd = os.open(tree, _fs.DIR_FLAGS)
    try:
        yield fd
    finally:
        os.close(fd)


def scan(tree: int | str) -> list[Dist]:
    """Every dist-info in ``tree`` whose METADATA names a project and version."""
    found: list[Dist] = []
    with opened(tree) as fd:
        for name, kind in _walk.entries(fd):
            if kind != _walk.DIR or not name.endswith(".dist-info"):
                continue
            data = _fs.read_file(fd, (name, "METADATA"), _METADATA_LIMIT)
            if data is not None and (parsed := parse_metadata(data)) is not None:
                found.append(Dist(name, *parsed))
    return found


@dataclass(frozen=True, slots=True)
class RecordProblems:
    """What a RECORD check found wrong: files missing, files whose hash, size or kind differs, files nobody
    recorded. ``bytecode`` lists unrecorded ``__pycache__/*.pyc`` files (a worker that ran ``python -O`` on a
    writable mount writes ``*.opt-1.pyc``): reported, but they do not make a tree wrong. ``size``: the bytes of
    the recorded files that matched (of a tree with no problems, all its files' but unrecorded bytecode's).
    ``compiled``: in a tree made without bytecode (``--no-compile``), the compiled pycs it holds all the same
    (unrecorded, or recorded without a hash as a compiler records them): a fault, unlike ``bytecode``."""

    missing: tuple[str, ...] = ()
    changed: tuple[str, ...] = ()
    extra: tuple[str, ...] = ()
    bytecode: tuple[str, ...] = ()
    size: int = 0
    compiled: tuple[str, ...] = ()

    def __bool__(self) -> bool:
        return bool(self.missing or self.changed or self.extra or self.compiled)

    def summary(self) -> str:
        parts = [
            f"{len(files)} {label} (e.g. {files[0]})"
            for label, files in (
                ("missing", self.missing),
                ("changed", self.changed),
                ("extra", self.extra),
                ("compiled bytecode in a tree made without it", self.compiled),
            )
            if files
        ]
        return ", ".join(parts) or "ok"


def tree_relative(recorded: str) -> str | None:
    """Where a RECORD path lies in a --target tree, or ``None`` if it points outside the tree."""
    if "\\" not in recorded:
        parts = recorded.split("/")
        if "" not in parts and "." not in parts and ".." not in parts:
            return recorded  # already normal and inside (nearly every row): what the join below would give
    path = posixpath.normpath(posixpath.join(_TARGET_PURELIB, recorded.replace("\\", "/")))
    if path.startswith(_TARGET_PURELIB + "/"):
        return path[len(_TARGET_PURELIB) + 1 :]
    if posixpath.isabs(path) or path == ".." or path.startswith("../") or path.startswith(_TARGET_PURELIB):
        return None
    return path


def record_rows(tree: int | str, dist: Dist) -> list[list[str]] | None:
    """The rows of a dist's RECORD, or ``None`` if it is missing, unreadable, not a regular file or too big."""
    with opened(tree) as fd:
        data = _fs.read_file(fd, (dist.dist_info, "RECORD"), RECORD_LIMIT)
    if data is None:
        return None
    try:
        return list(csv.reader(io.StringIO(data.decode("utf-8"))))
    except (UnicodeDecodeError, csv.Error):
        return None


def is_bytecode(relative: str) -> bool:
    """A compiled module in a ``__pycache__`` directory, as the interpreter writes them."""
    return relative.endswith(".pyc") and posixpath.basename(posixpath.dirname(relative)) == "__pycache__"


class Hashed:
    """Digests already taken, so that a file is hashed once: its (device, inode, size, mtime, algorithm), and in a
    verify its ctime too, -> (digest, size).

    * **A verify run** (``Hashed()``): trees composed from the store share their files' inodes, so each is hashed
      once, not once per tree that links it. Only files with several links are kept (a file with one is met once).
      Any write to a file changes its ctime (which no call can set back; it ticks at the kernel's coarse clock, and
      a stored file's last change is its install or link, long before a verify), so a changed file is hashed again.
    * **One install** (``Hashed(fresh=True)``): what this process wrote into its private staging dir and hashed
      there (each pyc it compiled, each file of a distribution as it was checked before its publish into the store)
      is not hashed again when the tree composed of those files' links is verified, moments later. The split's
      renames, the read-only chmods and the tree's links each change a file's ctime, so it is not in the key: the
      content of a file changes only with its mtime (or by a deliberate ``utime`` after a write, which the next
      ``verify`` catches by ctime), and until its publish nobody else can reach it. A batch's install shares its
      own with the trees it composes (see :mod:`repoinstall._install.fill.batch`).

    Shared by threads (a batch's trees verify at once, a thread hashes while the compile runs): each call is one
    dict lookup or store, atomic in CPython, and a key's value is the same whoever stores it (the digest of the
    same bytes), so no lock is needed; the limit may be overshot by a few entries.
    """

    #: Past this many entries nothing more is kept (about 100 bytes each): the check stays right, only slower.
    LIMIT = 1 << 20

    def __init__(self, *, fresh: bool = False) -> None:
        self.fresh = fresh
        self._known: dict[tuple[int, int, int, int, int, str], tuple[str, int]] = {}

    def _key(self, info: os.stat_result, algorithm: str) -> tuple[int, int, int, int, int, str] | None:
        if not self.fresh and info.st_nlink < 2:
            return None
        ctime = 0 if self.fresh else info.st_ctime_ns
        return (info.st_dev, info.st_ino, info.st_size, info.st_mtime_ns, ctime, algorithm)

    def __len__(self) -> int:
        return len(self._known)

    def get(self, info: os.stat_result, algorithm: str) -> tuple[str, int] | None:
        """The digest (as RECORD writes it) and size of the file ``info`` describes, if it was hashed so."""
        key = self._key(info, algorithm)
        return None if key is None else self._known.get(key)

    def put(self, info: os.stat_result, algorithm: str, known: tuple[str, int]) -> None:
        key = self._key(info, algorithm)
        if key is not None and len(self._known) < self.LIMIT:
            self._known[key] = known

    def remember(self, seen: tuple[int, int, int, int], algorithm: str, known: tuple[str, int]) -> None:
        """One install's: the digest of a file another of its processes hashed (a bytecode compiler), by the
        (device, inode, size, mtime in ns) it saw."""
        if self.fresh and len(self._known) < self.LIMIT:
            self._known[(*seen, 0, algorithm)] = known


def check_tree(
    tree: int | str,
    dists: list[Dist],
    *,
    extra: bool = True,
    hashed: Hashed | None = None,
    seal: bool = False,
    bytecode: bool = True,
) -> RecordProblems:
    """Check all ``dists`` of a tree against their RECORDs and, with ``extra``, find files none of them lists.

    One walk of the tree: each recorded file is hashed when the walk reaches it, through its directory's
    descriptor, and only if it is a regular file; a symlink or FIFO where a file was installed is "changed".
    ``hashed``: digests taken before in the same run (see :class:`Hashed`), used again and added to. ``seal``
    (a private staged dir about to be published): each regular file the walk finds as recorded, and each
    unrecorded pyc, is made read-only for everyone (0444, 0555 for an executable) as it is met, by the call that
    checked it, so no worker can change the files that trees will link: one walk, not a second one to chmod.
    ``bytecode`` false (a tree or stored distribution made without it): every ``__pycache__`` pyc but one its
    wheel ships (recorded with a hash) is ``compiled``, a fault.
    """
    missing: list[str] = []
    expected: dict[str, tuple[str, str]] = {}  # tree-relative path -> (hash field, size field)
    with opened(tree) as fd:
        for dist in dists:
            rows = record_rows(fd, dist)
            if rows is None:
                missing.append(f"{dist.dist_info}/RECORD")
                continue
            for row in rows:
                if row and (relative := tree_relative(row[0])) is not None:
                    expected[relative] = (row[1] if len(row) > 1 else "", row[2] if len(row) > 2 else "")
        changed: list[str] = []
        found_extra: list[str] = []
        pycs: list[str] = []  # unrecorded bytecode
        compiled: list[str] = []
        size = 0
        for entry in _walk.walk(fd):
            fields = expected.pop(entry.path, None)
            if not bytecode and is_bytecode(entry.path) and (fields is None or not fields[0]):
                compiled.append(entry.path)
            elif fields is not None:
                is_file = entry.kind == _walk.FILE
                matched = _matches(entry.dir_fd, entry.name, *fields, hashed, seal) if is_file else None
                if matched is None:
                    changed.append(entry.path)
                else:
                    size += matched
            elif entry.kind == _walk.DIR:
                changed.append(f"{entry.path}/ (nested deeper than {_walk.MAX_DEPTH} levels)")
            elif is_bytecode(entry.path) and entry.kind == _walk.FILE:
                pycs.append(entry.path)
                if seal:
                    mode = os.stat(entry.name, dir_fd=entry.dir_fd, follow_symlinks=False).st_mode
                    os.chmod(entry.name, sealed(mode), dir_fd=entry.dir_fd)  # a regular file, in a private dir
            elif entry.kind == _walk.FILE and _walk.silly_renamed(entry.name):
                continue  # a file removed while still open on this NFS client: gone at its last close
            else:
                found_extra.append(entry.path)
    # RECORD lists itself without a hash; a recorded path the walk never reached (under a symlink, say) is missing.
    missing += sorted(expected)
    return RecordProblems(
        tuple(missing),
        tuple(changed),
        tuple(found_extra) if extra else (),
        tuple(pycs) if extra else (),
        size,
        tuple(compiled),
    )


def _matches(
    dir_fd: int, name: str, hash_field: str, size_field: str, hashed: Hashed | None = None, seal: bool = False
) -> int | None:
    """The size of the regular file ``name`` if it has the recorded hash and size (no hash recorded: it only must
    exist); ``None`` if it does not. ``seal``: one that does is made read-only (see :func:`check_tree`)."""
    algorithm, _, expected = hash_field.partition("=")
    if hashed is not None and hash_field:
        # Hashed already (another tree's link of it, this install's own file): one lstat, no open, no read.
        try:
            seen = os.stat(name, dir_fd=dir_fd, follow_symlinks=False)
        except OSError:
            return None
        if not stat.S_ISREG(seen.st_mode):
            return None
        if (known := hashed.get(seen, algorithm)) is not None:
            verdict = _verdict(known, expected, size_field)
            if seal and verdict is not None:
                os.chmod(name, sealed(seen.st_mode), dir_fd=dir_fd)  # the regular file lstat saw, in a private dir
            return verdict
    try:
        digest = hashlib.new(algorithm) if hash_field else None
    except ValueError:
        return None  # an algorithm nobody can check is no proof
    try:
        fd = os.open(name, _fs.FILE_FLAGS, dir_fd=dir_fd)
    except OSError:
        return None
    try:
        try:
            info = os.fstat(fd)
            if not stat.S_ISREG(info.st_mode):
                return None  # replaced since the listing
            known = None if hashed is None or digest is None else hashed.get(info, algorithm)
            if known is None and digest is not None:
                size = 0
                while chunk := os.read(fd, _CHUNK):
                    digest.update(chunk)
                    size += len(chunk)
                known = record_hash(digest.digest()), size
                if hashed is not None:
                    hashed.put(info, algorithm, known)
        except OSError:
            return None
        verdict = info.st_size if known is None else _verdict(known, expected, size_field)
        if seal and verdict is not None:
            os.fchmod(fd, sealed(info.st_mode))
        return verdict
    finally:
        os.close(fd)


def sealed(mode: int) -> int:
    """The mode a published file gets: read-only for everyone, executable for everyone if it was for anyone."""
    return 0o555 if mode & 0o111 else 0o444


def _verdict(known: tuple[str, int], expected: str, size_field: str) -> int | None:
    """The size of a file hashed as ``known`` (digest, size) if it is what its RECORD row says; else ``None``."""
    digest, size = known
    return size if digest == expected and (not size_field or size_field == str(size)) else None


@contextlib.contextmanager
def hashing_meanwhile(tree: str, hashed: Hashed | None) -> Iterator[None]:
    """Hash (sha256) the files an installer left in the private dir ``tree`` into ``hashed`` on a thread of its
    own while the block runs (the bytecode compile: processes on every core, this one waiting), so the checks
    that follow it find them hashed; it stops when the block ends, done or not. Bytecode and RECORDs, which
    the compile writes, are left alone; a file changed after it was hashed is hashed again (see :class:`Hashed`)."""
    if hashed is None or not hashed.fresh:
        yield
        return
    import threading

    done = threading.Event()

    def hash_all() -> None:
        with contextlib.suppress(OSError), opened(tree) as top:
            for entry in _walk.walk(top):
                if done.is_set():
                    return
                if entry.kind != _walk.FILE or entry.name.endswith(".pyc") or entry.name == "RECORD":
                    continue
                _matches(entry.dir_fd, entry.name, "sha256=", "", hashed)  # hashed and kept; the verdict is not

    worker = threading.Thread(target=hash_all, name="hashing meanwhile", daemon=True)
    worker.start()
    try:
        yield
    finally:
        done.set()
        worker.join()


def record_hash(digest: bytes) -> str:
    """A digest as RECORD writes it: urlsafe base64 without padding (after ``sha256=``)."""
    return base64.urlsafe_b64encode(digest).rstrip(b"=").decode("ascii")
