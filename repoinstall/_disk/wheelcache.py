"""Whole wheels that resolution downloaded, kept on the volume so the installer is given them, not fetching again.

    <repo>/cache/wheels/<sha256>.whl   one wheel's bytes, named by the sha256 they hashed to as they were stored
    <repo>/cache/wheels/<key>.json     which kept wheel a pin (``name==version``) resolved to on some sources

To choose an unpinned spec's version, resolution reads the best candidate's ``Requires-Python``; from a host with
no PEP 658 metadata and no byte ranges (a plain find-links page, ``python -m http.server``) that is a download of
the whole wheel. That read is single-flight per file (``IndexCache.shared`` in ``_index``: one pod reads, the
others wait for its answer), and the bytes it read are kept here, so that the installer run that follows, in
whichever pod, is given them (:func:`repoinstall._install.backends.run.install`) instead of fetching the wheel
once more: each wheel crosses the network once per repo.

Which file a pinned spec (``name==version``) resolved to, for the sources asked, is a fact kept beside the wheels
(:func:`remember`, :func:`recall`): that file's URL, its name and the sha256 it was stored under (and the index's
sha256 where the index gave one).

**Invariant: a kept wheel is an input only as the private copy :func:`copy_checked` makes, hashing each byte it
copies: that copy is handed out only if its bytes hash to the sha256 they were stored under (and to the index's
sha256, when it gave one); anything else (a file missing, damaged, truncated, replaced, or not a regular file) is
a miss, and the installer fetches the wheel as it would have.** A wheel is stored through a temporary file and one
rename, so a reader sees all of it or none; two pods storing the same bytes write the same name, and either rename
leaves the same bytes. Nothing but gc removes one (a cache: any entry may go, and is fetched again).
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import stat
from collections.abc import Callable, Iterator, Sequence
from typing import TYPE_CHECKING, NamedTuple

from .. import _log
from .._errors import RepoinstallError
from .._urls import split_credentials
from . import fs as _fs
from .layout import CACHE

if TYPE_CHECKING:
    from .layout import Layout

CACHE_DIR = (CACHE, "wheels")
_SUFFIX = ".whl"


class Kept(NamedTuple):
    """A wheel kept in the repo's cache: where it came from, its file name, the sha256 it was stored under, and
    the index's sha256 of it (``None``: the index gave none)."""

    url: str
    filename: str
    sha256: str
    index_sha256: str | None = None


def _writable_dir(layout: Layout) -> int | None:
    try:
        return layout.retrying(lambda: _fs.make_dirs(layout.writable_fd(), CACHE_DIR, layout.root))
    except (OSError, RepoinstallError):
        return None  # a read-only or full repo: the installer fetches, as without a cache


def _write(layout: Layout | None, name: str, data: bytes) -> bool:
    directory = _writable_dir(layout) if layout is not None else None
    if directory is None:
        return False
    try:
        _fs.write_atomic(directory, name, data)
    except OSError as error:
        _log.logger().debug("wheel cache not written (%s)", error.strerror)
        return False
    finally:
        os.close(directory)
    return True


def keep(layout: Layout | None, body: bytes) -> str | None:
    """Store ``body`` (a whole wheel just downloaded) in the repo's wheel cache; its sha256, or ``None`` where it
    could not be stored (no repo, a read-only or full one: the installer then fetches it, as without a cache)."""
    sha256 = hashlib.sha256(body).hexdigest()
    return sha256 if _write(layout, sha256 + _SUFFIX, body) else None


def _fact(sources: Sequence[str], project: str, version: str) -> str:
    # The sources asked are part of the question (another file list, another file); never their credentials.
    parts = ("wheel", *(split_credentials(source)[0] for source in sources), project, version)
    return hashlib.sha256("\n".join(parts).encode()).hexdigest()[:40] + ".json"


def remember(layout: Layout | None, sources: Sequence[str], project: str, version: str, kept: Kept) -> None:
    """Note that ``project==version`` resolved, on ``sources``, to the kept wheel ``kept``."""
    _write(layout, _fact(sources, project, version), json.dumps({"wheel": list(kept)}).encode())


def recall(layout: Layout, sources: Sequence[str], project: str, version: str) -> Kept | None:
    """The kept wheel ``project==version`` resolved to on ``sources``, if resolution kept one (see above)."""
    root = layout.root_fd()
    try:
        data = _fs.read_file(root, (*CACHE_DIR, _fact(sources, project, version))) if root is not None else None
        entry = json.loads(data or b"null")
    except (OSError, ValueError):
        return None
    row = entry.get("wheel") if isinstance(entry, dict) else None
    if not isinstance(row, list) or len(row) != len(Kept._fields):
        return None
    url, filename, sha256, index_sha256 = row
    if not (isinstance(url, str) and isinstance(filename, str) and isinstance(sha256, str)):
        return None
    if index_sha256 is not None and not isinstance(index_sha256, str):
        return None
    if os.sep in filename or filename.startswith(".") or not filename.endswith(_SUFFIX) or not _hex(sha256):
        return None  # garbled: a miss, never a path
    return Kept(url, filename, sha256, index_sha256)


def copy_checked(layout: Layout, kept: Kept, directory: str) -> str | None:
    """A private copy of the kept wheel in ``directory`` (made if need be), under its own file name, if its bytes
    hash to what it was stored under and to the index's hash (see the invariant above); else ``None`` and no
    copy."""
    root = layout.root_fd()
    cache = _fs.open_dir(root, CACHE_DIR, lookup_only=True) if root is not None else None
    if cache is None:
        return None
    target = os.path.join(directory, kept.filename)
    try:
        try:
            # Non-blocking and no symlink followed: a FIFO or a link planted in the cache is no input.
            flags = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC
            fd = os.open(kept.sha256 + _SUFFIX, flags, dir_fd=cache)
        except OSError:
            return None
        try:
            if not stat.S_ISREG(os.fstat(fd).st_mode):
                return None
            os.makedirs(directory, exist_ok=True)
            digest = hashlib.sha256()
            with open(target, "xb", opener=lambda name, flags: os.open(name, flags, 0o600)) as out:
                while chunk := os.read(fd, 1 << 20):
                    digest.update(chunk)
                    out.write(chunk)
        finally:
            os.close(fd)
    except OSError as error:
        _log.logger().debug("%s: the kept wheel cannot be copied (%s); fetching it", kept.filename, error.strerror)
        _discard(target)
        return None
    finally:
        os.close(cache)
    found = digest.hexdigest()
    if found != kept.sha256 or (kept.index_sha256 is not None and found != kept.index_sha256):
        _log.logger().warning("%s: the repo's cached copy is damaged (sha256 %s); fetching it", kept.filename, found)
        _discard(target)
        return None
    return target


def _discard(path: str) -> None:
    with contextlib.suppress(FileNotFoundError):
        os.unlink(path)


def _hex(value: str) -> bool:
    return len(value) == 64 and all(c in "0123456789abcdef" for c in value)


def garbage(directory: int, old: Callable[[str], bool]) -> Iterator[tuple[str, str, str]]:
    """(entry, kind, reason) for what in the open wheel cache directory may go, given which names are ``old``: any
    wheel stored that long ago (a later need fetches it again), temporaries of interrupted writes, and
    anything else found there (never followed)."""
    from . import walk as _walk

    for entry, kind in _walk.entries(directory):
        if not old(entry):
            continue
        if entry.startswith(".") and entry.endswith(".tmp"):
            yield entry, "temp", "temporary file of an interrupted write"
        elif kind == _walk.FILE and entry.endswith(_SUFFIX) and _hex(entry.removesuffix(_SUFFIX)):
            yield entry, "cache", "a cached wheel stored that long ago"
        elif kind == _walk.FILE and entry.endswith(".json"):
            yield entry, "cache", "which cached wheel a pin resolved to, noted that long ago"
        elif kind == _walk.LINK:
            yield entry, "cache", "a symlink among cached wheels"
