"""A stored distribution as an OCI layer, and a layer unpacked back into a private directory, under bounds.

The layer holds the distribution's files at their paths in a tree, so the image's root filesystem is the tree
(a grouped layer, several distributions' files: see :mod:`.groups`).
It is reproducible: entries sorted (a directory before what it holds), owner 0:0 with no names, one fixed mtime,
modes 0644/0755 (0777 links) whatever the repo's, no extended headers but for long names, and gzip with no name,
mtime 0 and one fixed level. The same stored distribution gives the same bytes, and so the same digest, from any
repo (with the same zlib).

Unpacking refuses, with one line, what no layer of ours holds: absolute paths or ``..``, a path below a symlink,
symlinks leaving the tree, hard links, devices, FIFOs, whiteouts, sparse files, a name twice; and stops a layer
that decompresses to more than a bound (a gzip bomb), that writes more bytes or files than its :class:`Budget`
allows (per layer, and for its image in all), or whose uncompressed digest is not its ``diff_id``.
"""

from __future__ import annotations

import contextlib
import gzip
import hashlib
import io
import os
import posixpath
import tarfile
import threading
import zlib
from collections.abc import Callable, Iterator
from typing import IO, NamedTuple

from .._disk import walk as _walk
from .._disk.dists import Hashed, record_hash
from .._errors import InstallError, SourceRefused
from .._redact import shown
from .settings import Settings

MEDIA_TYPE = "application/vnd.oci.image.layer.v1.tar+gzip"
#: Every entry's mtime: a constant, so that a layer does not depend on when a repo stored its files.
MTIME = 0
COMPRESSLEVEL = 6
_CHUNK = 1 << 20
#: zlib's window bits for one gzip member (header and trailer checked).
_GZIP = 16 + zlib.MAX_WBITS
#: A layer may decompress to at most this many times its compressed size (plus a floor), and never more than
#: the ceiling: Python distributions compress 3-10 times; a bomb compresses a thousand times and more.
RATIO = 100
FLOOR = 64 << 20
CEILING = 16 << 30


class Layer(NamedTuple):
    """A layer blob written to ``path``: its digest (compressed), diff_id (uncompressed) and size in bytes."""

    path: str
    digest: str
    diff_id: str
    size: int


class _Hashing(io.RawIOBase):
    """A write-only stream that hashes and counts what passes through it on the way to ``sink``."""

    def __init__(self, sink: IO[bytes] | None) -> None:
        self.sink = sink
        self.sha = hashlib.sha256()
        self.count = 0

    def writable(self) -> bool:
        return True

    def write(self, data: bytes) -> int:  # type: ignore[override]
        view = bytes(data)
        self.sha.update(view)
        self.count += len(view)
        if self.sink is not None:
            self.sink.write(view)
        return len(view)


def build(stored: str | list[str], out: str) -> Layer:
    """Write the layer of the stored distribution at ``stored`` (or of several, one tree's: their files never
    share a path, their directories merge) to the new file ``out``."""
    sources = [stored] if isinstance(stored, str) else stored
    files: dict[str, tuple[str, str]] = {}  # path in the tree -> (its kind, the stored dir it is read from)
    for source in sources:
        fd = os.open(source, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW)
        try:
            for entry in _walk.walk(fd):
                if entry.kind not in (_walk.FILE, _walk.LINK):
                    raise InstallError(f"{source}: {entry.path} is not a file or a link: no layer holds it")
                if files.setdefault(entry.path, (entry.kind, source))[1] != source:
                    raise InstallError(f"{source}: {entry.path} is in {files[entry.path][1]} too: one layer holds one")
        finally:
            os.close(fd)
    directories = {posixpath.dirname(path) for path in files}
    for leaf in list(directories):
        directory = leaf
        while directory:
            directories.add(directory)
            directory = posixpath.dirname(directory)
    directories.discard("")
    if clash := sorted(directories & set(files)):
        raise InstallError(f"{files[clash[0]][1]}: {clash[0]} is a directory in another distribution: not one tree")
    entries = sorted([(d, _walk.DIR, "") for d in directories] + [(p, *found) for p, found in files.items()],
                     key=lambda item: item[0].split("/"))  # fmt: skip
    with open(out, "xb") as raw:
        compressed = _Hashing(raw)
        with gzip.GzipFile(filename="", mode="wb", compresslevel=COMPRESSLEVEL, fileobj=compressed, mtime=0) as gz:
            plain = _Hashing(gz)  # type: ignore[arg-type]
            with tarfile.open(fileobj=plain, mode="w|", format=tarfile.PAX_FORMAT) as tar:
                for path, kind, source in entries:
                    _add(tar, source, path, kind)
    return Layer(out, f"sha256:{compressed.sha.hexdigest()}", f"sha256:{plain.sha.hexdigest()}", compressed.count)


def size_of(stored: str) -> int:
    """The bytes of the regular files of the stored distribution at ``stored`` (what :mod:`.groups` weighs)."""
    fd = os.open(stored, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW)
    try:
        return sum(
            os.stat(entry.name, dir_fd=entry.dir_fd, follow_symlinks=False).st_size
            for entry in _walk.walk(fd)
            if entry.kind == _walk.FILE
        )
    finally:
        os.close(fd)


def _add(tar: tarfile.TarFile, stored: str, path: str, kind: str) -> None:
    info = tarfile.TarInfo(path)
    info.mtime = MTIME
    info.uid = info.gid = 0
    info.uname = info.gname = ""
    full = os.path.join(stored, path)
    if kind == _walk.DIR:
        info.type, info.mode = tarfile.DIRTYPE, 0o755
        tar.addfile(info)
    elif kind == _walk.LINK:
        info.type, info.mode, info.linkname = tarfile.SYMTYPE, 0o777, os.readlink(full)
        tar.addfile(info)
    else:
        with open(full, "rb", opener=_no_follow) as handle:
            mode = os.fstat(handle.fileno()).st_mode
            info.type, info.mode = tarfile.REGTYPE, 0o755 if mode & 0o111 else 0o644
            info.size = os.fstat(handle.fileno()).st_size
            tar.addfile(info, handle)


def _no_follow(path: str, flags: int) -> int:
    return os.open(path, flags | os.O_NOFOLLOW)


class Refused(SourceRefused):
    """A layer that is not one of ours: unsafe, or not what its manifest says (exit 1). Nothing is stored."""


class Budget:
    """What the layers of one image may write, in bytes (files' contents, as each file's header claims them)
    and files (every entry), per layer and in all: created once per image, charged by each :func:`unpack`."""

    def __init__(self, settings: Settings | None = None) -> None:
        self.settings = settings or Settings()
        self.bytes = 0
        self.files = 0
        # Invariant: the totals change only under this lock, so layers unpacked on several threads are all
        # counted, and none passes the bound because another's charge was lost.
        self._guard = threading.Lock()

    def charge(self, spent: _Spent, size: int, files: int) -> None:
        """Charge ``size`` bytes and ``files`` entries of one layer (``spent``) to it and to the image; refused
        past either bound, before anything is written."""
        settings = self.settings
        spent.bytes += size
        spent.files += files
        if spent.bytes > settings.max_layer_bytes:
            raise Refused(f"{spent.what}: writes more than {settings.max_layer_bytes} bytes "
                          "(--registry-max-layer-bytes): refused")  # fmt: skip
        if spent.files > settings.max_layer_files:
            raise Refused(f"{spent.what}: writes more than {settings.max_layer_files} files "
                          "(--registry-max-layer-files): refused")  # fmt: skip
        with self._guard:
            self.bytes += size
            self.files += files
            over_bytes, over_files = self.bytes > settings.max_bytes, self.files > settings.max_files
        if over_bytes:
            raise Refused(f"{spent.what}: its image writes more than {settings.max_bytes} bytes in all "
                          "(--registry-max-bytes): refused")  # fmt: skip
        if over_files:
            raise Refused(f"{spent.what}: its image writes more than {settings.max_files} files in all "
                          "(--registry-max-files): refused")  # fmt: skip

    def refund(self, spent: _Spent) -> None:
        """Give back what one layer's failed unpack (``spent``) charged: its dir is thrown away."""
        with self._guard:
            self.bytes -= spent.bytes
            self.files -= spent.files
        spent.bytes = spent.files = 0


class _Spent:
    """What one layer's unpack has written so far."""

    def __init__(self, what: str) -> None:
        self.what = what
        self.bytes = 0
        self.files = 0


class _Inflating(io.RawIOBase):
    """A readable stream of a gzip layer's decompressed bytes, made from its compressed chunks as they arrive (the
    download's, whose digest is checked as the last of them is read): each gzip member in turn, as
    :class:`gzip.GzipFile` reads them (zero bytes between members skipped), each member's CRC and length checked
    by zlib; hashed on the way (the diff_id), and stopped past ``limit`` (a bomb) before more is handed on."""

    def __init__(self, chunks: Iterator[bytes], limit: int, what: str) -> None:
        self.chunks = chunks
        self.limit = limit
        self.what = what
        self.sha = hashlib.sha256()
        self.count = 0
        self._zlib = zlib.decompressobj(_GZIP)
        self._input = b""  # compressed bytes not yet handed to zlib
        self._open = False  # a member begun and not ended
        self._members = 0

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: bytearray | memoryview) -> int:  # type: ignore[override]
        want = min(len(buffer), _CHUNK)
        while True:
            if not self._input:
                chunk = next(self.chunks, None)
                if chunk is None:
                    if self._open:
                        raise EOFError("compressed data ended before the end-of-stream marker")
                    return 0
                self._input = chunk
            if not self._open:
                self._input = self._input.lstrip(b"\0") if self._members else self._input
                if not self._input:
                    continue
                self._open, self._members = True, self._members + 1
            data = self._zlib.decompress(self._input, want)  # at most ``want``: a bomb never fills memory
            self._input = self._zlib.unconsumed_tail
            if self._zlib.eof:  # this member ended (its CRC and length checked): what follows is the next one's
                self._input, self._open = self._zlib.unused_data, False
                self._zlib = zlib.decompressobj(_GZIP)
            if data:
                self.count += len(data)
                if self.count > self.limit:
                    raise Refused(f"{self.what}: decompresses to more than {self.limit} bytes (a gzip bomb?): refused")
                self.sha.update(data)
                buffer[: len(data)] = data
                return len(data)


def unpack(
    blob: str | Iterator[bytes],
    size: int,
    diff_id: str,
    target: str,
    what: str,
    budget: Budget | None = None,
    hashed: Hashed | None = None,
) -> int:
    """Unpack the gzip layer ``blob`` (a verified file, or its compressed bytes as they arrive, ``size`` of them,
    checked as the last is read) into the empty private dir ``target``; its uncompressed size. One pass: the
    bytes are decompressed, hashed for the diff_id and written as they come, each file hashed as it is written
    into ``hashed`` (this install's, see :class:`repoinstall._disk.dists.Hashed`), so the checks against its
    RECORD that follow read none of it again. :class:`Refused` for anything unsafe, a bomb, more than ``budget``
    allows (its image's, shared by all its layers; by default the default bounds for this layer alone), or an
    uncompressed digest other than ``diff_id``. What it charged to ``budget`` is given back if it fails (an
    attempt the download starts over leaves a new dir)."""
    limit = min(CEILING, FLOOR + RATIO * size)
    budget = budget or Budget()
    spent = _Spent(what)
    seen: dict[str, str] = {}
    try:
        with contextlib.ExitStack() as stack:
            if isinstance(blob, str):
                raw = stack.enter_context(open(blob, "rb"))
                blob = iter(lambda: raw.read(_CHUNK), b"")
            inflating = _Inflating(blob, limit, what)
            reader = io.BufferedReader(inflating, _CHUNK)
            with tarfile.open(fileobj=reader, mode="r|") as tar:
                for member in tar:
                    _extract(tar, member, target, seen, what, lambda size, files: budget.charge(spent, size, files),
                             hashed)  # fmt: skip
            while reader.read(_CHUNK):  # the tar's end padding counts into its digest too, and the blob's end
                pass
    except (tarfile.TarError, OSError, EOFError, zlib.error) as error:
        budget.refund(spent)
        raise Refused(f"{what}: not a gzip tar layer: {shown(error)}") from None
    except BaseException:
        budget.refund(spent)
        raise
    if f"sha256:{inflating.sha.hexdigest()}" != diff_id:
        raise Refused(f"{what}: its uncompressed digest is not the diff_id its image's config names: refused")
    return inflating.count


def _extract(
    tar: tarfile.TarFile,
    member: tarfile.TarInfo,
    target: str,
    seen: dict[str, str],
    what: str,
    charge: Callable[[int, int], None],
    hashed: Hashed | None = None,
) -> None:
    name = member.name
    path = posixpath.normpath(name.removeprefix("./")) if name not in ("", ".", "./") else ""
    if not path or path == "." or "\0" in name:
        if member.isdir():
            return  # the root itself
        raise Refused(f"{what}: an entry with an empty name: refused")
    if posixpath.isabs(name) or path == ".." or path.startswith("../") or ".." in name.split("/"):
        raise Refused(f"{what}: {name!r} leaves the tree: refused")
    if member.issparse() or any(key.startswith("GNU.sparse.") for key in member.pax_headers):
        # GNU's 'S' type or PAX sparse headers (0.0, 0.1, 1.0): a few bytes that write a file of any size.
        raise Refused(f"{what}: {name!r} is a sparse file: no layer of ours holds one: refused")
    base = posixpath.basename(path)
    if base.startswith(".wh."):
        raise Refused(f"{what}: {name!r} is a whiteout: no layer of a tree deletes anything: refused")
    parent = posixpath.dirname(path)
    made = []  # the directories this entry creates on its way, which no entry before it named: files too
    while parent:
        kind = seen.get(parent)
        if kind is None:
            made.append(parent)
        elif kind not in ("dir", "made"):
            raise Refused(f"{what}: {name!r} lies below {parent!r}, which is not a directory: refused")
        parent = posixpath.dirname(parent)
    if path in seen and not (member.isdir() and seen[path] == "made"):
        raise Refused(f"{what}: {name!r} is in the layer twice: refused")
    # Charged before anything of it is written: its bytes, itself (unless made already) and its new parents.
    charge(member.size if member.isreg() else 0, len(made) + (0 if path in seen else 1))
    seen.update(dict.fromkeys(made, "made"))
    full = os.path.join(target, path)
    for directory in reversed(made):  # each directory made once, outermost first: no mkdir that fails per file
        os.mkdir(os.path.join(target, directory))
    if member.isdir():
        if seen.get(path) != "made":
            os.mkdir(full)
        seen[path] = "dir"
    elif member.isreg():
        seen[path] = "file"
        _write(tar, member, full, hashed)
    elif member.issym():
        link = member.linkname
        resolved = posixpath.normpath(posixpath.join(posixpath.dirname(path), link))
        if not link or posixpath.isabs(link) or resolved == ".." or resolved.startswith("../"):
            raise Refused(f"{what}: the symlink {name!r} -> {link!r} leaves the tree: refused")
        seen[path] = "link"
        os.symlink(link, full)
    elif member.islnk():
        raise Refused(f"{what}: {name!r} is a hard link (to {member.linkname!r}): no layer of a tree has one: refused")
    else:
        kind = "a device" if member.ischr() or member.isblk() else "a FIFO" if member.isfifo() else "not a file"
        raise Refused(f"{what}: {name!r} is {kind}: refused")


def _write(tar: tarfile.TarFile, member: tarfile.TarInfo, full: str, hashed: Hashed | None) -> None:
    """The regular file ``member`` written to the new path ``full``, and hashed as it is written: the check
    against its RECORD before its publish, and the tree's verify, read it no more (this install's own file in
    its private dir: see :class:`repoinstall._disk.dists.Hashed`).

    Not fsynced, as no file a distribution is stored with is (containerd neither fsyncs a layer's files): the
    rename that publishes its dir is the commit point, readers see all of it or none; a file a power loss left
    empty or short after that is found by ``verify`` (every file hashed against its RECORD) and put back by
    ``repair``, and no new tree is published with it (see docs/concepts/store.md)."""
    source = tar.extractfile(member)
    assert source is not None
    fd = os.open(full, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o755 if member.mode & 0o111 else 0o644)
    try:
        digest = hashlib.sha256()
        while chunk := source.read(_CHUNK):
            digest.update(chunk)
            view = memoryview(chunk)
            while view:
                view = view[os.write(fd, view) :]
        if hashed is not None:
            info = os.fstat(fd)
            hashed.put(info, "sha256", (record_hash(digest.digest()), info.st_size))
    finally:
        os.close(fd)
