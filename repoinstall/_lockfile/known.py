"""Which tree a lock file named last time: a per-user hint that lets a warm ``ensure -r LOCK`` parse nothing.

A lock file's tree is named for the closure it resolves to (:meth:`repoinstall._choose.Chooser.pinned`), which
takes parsing the file (TOML or pip's requirements grammar), evaluating its markers and wheel tags and, for
hashed requirements, finding each pin's artifact in the index cache. Once an ensure has named the tree of a file,
:func:`remember` keeps that name in the user's cache directory (``~/.cache/repoinstall/lock-trees/``, as the
environment tag is kept) under a key of everything the name was derived from:

- the sha256 of the file's exact bytes (any change, one byte or a line ending, misses);
- the environment: its tag, the fingerprint of the interpreter build it is derived from, and the kernel's
  ``uname`` (markers such as ``platform_release`` read it);
- the PEP 751 extras and dependency groups chosen;
- the options that choose artifacts: :class:`~repoinstall._options.InstallOptions` but for its timeout and cache
  directory, whether the index is asked for artifacts at all (not with ``--from``), and every ``PIP_*`` variable
  (pip's configuration names indexes too);
- this release of repoinstall and the way names are derived (:data:`_DERIVATION`).

The key is hashed: no index URL or credential is written. Per user, not in the shared repo: an entry there would
let anyone who may write the repo point another user's lock file at a tree of their choosing, unseen by
``verify``; the user's own cache is as trusted as the rest of their home. A pod with an empty home parses its
lock file once, as before, and every later ensure in it reads the hint.

An entry is only a hint. :func:`look` answers the name it holds; the caller then checks that tree as the warm
path checks any tree (its record and the METADATA it names) and, if it is not there, reads the file as if there
were no entry, so a stale entry never skips an install. An entry that is not exactly the JSON :func:`remember`
writes, whose key is not the one asked for (a copy of another file's entry) or whose name is not a lock tree's is
ignored. Nothing here raises for a cache that cannot be read or written (a read-only home): that only means
parsing each time.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import sys
from collections.abc import Iterable
from typing import TYPE_CHECKING, NamedTuple

from .._disk import envtag
from .._disk.identity import TreeKind, kind_of

if TYPE_CHECKING:
    from .._options import InstallOptions

#: Part of every key: bump it when what names a lock file's tree changes (so no entry of the former way is used).
_DERIVATION = 1
#: The cache directory's subdirectory of entries, one file per key.
_ENTRIES = "lock-trees"
#: A requirements file that includes another (``-r``/``-c``, also written ``-rfile`` or ``--requirement=file``):
#: its bytes do not cover what it installs, so it is never remembered.
_INCLUDES = re.compile(r"(?:^|\s)(?:-[rc]|--requirement|--constraint)", re.MULTILINE)
_MAX_ENTRY = 4096
#: A file's digest is remembered in the process only if its ctime was this old when it was read (see :func:`look`).
_SETTLED_NS = 2_000_000_000
_MEMO_SIZE = 64
#: (path, working directory for a relative one) -> the file's signature and digest when read (see :func:`look`).
_digests: dict[tuple[str, str], tuple[tuple[int, int, int, int, int], str]] = {}
#: Files this small are hashed by CPython's own sha256 (see :func:`sha256`).
_OWN_SHA256_BELOW = 1 << 20


class Hint(NamedTuple):
    """A lock file as read for its key: the name an earlier ensure gave its tree (``None``: none known)."""

    path: str
    #: Hex sha256 of the key (see the module's docstring).
    key: str
    #: Hex sha256 of the file's bytes, and its ``(device, inode, size, mtime, ctime)`` when they were read.
    digest: str
    signature: tuple[int, int, int, int, int]
    tree: str | None


def look(
    path: str,
    *,
    env: str,
    install: InstallOptions | None,
    look_up_artifacts: bool = True,
    extras: Iterable[str] = (),
    groups: Iterable[str] | None = None,
) -> Hint | None:
    """The file at ``path`` read once and keyed, with the tree name remembered for that key if any; ``None`` if
    the file cannot be read as a lock file is (the full read says why).

    Asked again in this process for a file unchanged since (the same device, inode, size, mtime and ctime: any
    write changes the ctime, which no user can set back), its digest is taken from memory after one ``stat``, as
    :mod:`.read` remembers a parsed lock; only for a file whose ctime was over :data:`_SETTLED_NS` old when it
    was read, so two writes within one tick of a coarse ctime clock cannot both look unchanged."""
    import time

    where = (path, "" if path.startswith("/") else os.getcwd())
    try:
        signature = _signature(os.stat(path))
    except OSError:
        return None  # the full read says why
    memo = _digests.get(where)
    if memo is not None and memo[0] == signature:
        digest = memo[1]
    else:
        from .._errors import RequirementsFileError
        from .._textfile import read_bytes

        try:
            data, info = read_bytes(path, "lock file")
        except RequirementsFileError:
            return None
        digest, signature = sha256(data), _signature(info)
        if time.time_ns() - info.st_ctime_ns > _SETTLED_NS:
            if len(_digests) >= _MEMO_SIZE:
                del _digests[next(iter(_digests))]
            _digests[where] = (signature, digest)
    key = _key(digest, env, install, look_up_artifacts, extras, groups)
    return Hint(path, key, digest, signature, _entry(key))


def remember(hint: Hint, tree: str) -> None:
    """Keep ``tree`` as the name of the tree of ``hint``'s file, if the file still holds the bytes that were read
    (so the name was derived from those bytes: a write in between changes the ctime, which no user can set back,
    or the bytes) and includes no other file. Written whole or not at all: a temporary file renamed over the
    entry, so a reader sees the former entry or this one, never a mix; concurrent writers of one key each write a
    name derived from the same bytes (two repos may hold the same closure under its former name and its new one),
    and the last rename wins."""
    if hint.tree == tree or kind_of(tree) is not TreeKind.LOCKED:
        return
    from .._errors import RequirementsFileError
    from .._textfile import read_bytes

    try:
        data, info = read_bytes(hint.path, "lock file")
    except RequirementsFileError:
        return
    if sha256(data) != hint.digest or _signature(info) != hint.signature:
        return  # changed since it was read: the name may be of other bytes
    if _INCLUDES.search(data.decode("utf-8", "replace")):
        return
    directory = os.path.join(envtag.user_cache_dir(), _ENTRIES)
    entry = os.path.join(directory, hint.key)
    temporary = f"{entry}.{os.getpid()}.{os.urandom(4).hex()}.tmp"
    with contextlib.suppress(OSError):
        os.makedirs(directory, mode=0o700, exist_ok=True)
        fd = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, 0o600)
        try:
            with os.fdopen(fd, "w", encoding="utf-8") as handle:
                json.dump({"key": hint.key, "tree": tree}, handle)
            os.replace(temporary, entry)  # the commit point
        except BaseException:
            with contextlib.suppress(OSError):
                os.unlink(temporary)
            raise


def _entry(key: str) -> str | None:
    """The tree name the entry of ``key`` holds, if it is a well-formed entry of that key naming a lock tree."""
    try:
        fd = os.open(os.path.join(envtag.user_cache_dir(), _ENTRIES, key), os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    except OSError:
        return None
    try:
        raw = os.read(fd, _MAX_ENTRY + 1)
        entry = json.loads(raw) if len(raw) <= _MAX_ENTRY else None
    except (OSError, ValueError):  # ValueError: not JSON, not UTF-8 (a FIFO or device reads nothing here)
        return None
    finally:
        os.close(fd)
    if not isinstance(entry, dict) or set(entry) != {"key", "tree"} or entry["key"] != key:
        return None
    tree = entry["tree"]
    return tree if isinstance(tree, str) and kind_of(tree) is TreeKind.LOCKED else None


def _key(
    digest: str,
    env: str,
    install: InstallOptions | None,
    look_up_artifacts: bool,
    extras: Iterable[str],
    groups: Iterable[str] | None,
) -> str:
    from .._disk.identity import canonical_name
    from .._options import InstallOptions
    from .._version import __version__

    # The timeout and the installers' cache choose no artifact.
    options = repr((install or InstallOptions())._replace(timeout=0.0, cache_dir=None, file_index=None))
    material = {
        "derivation": _DERIVATION,
        "release": __version__,
        "bytes": digest,
        "env": env,
        "interpreter": envtag.fingerprint(),
        "uname": list(os.uname()),
        "extras": sorted({canonical_name(extra) for extra in extras}),
        "groups": None if groups is None else sorted(set(groups)),
        "options": options,
        "artifacts": look_up_artifacts,
        "pip": sorted((k, v) for k, v in os.environ.items() if k.startswith("PIP_")),
    }
    return sha256(json.dumps(material, sort_keys=True).encode())


def sha256(data: bytes) -> str:
    """Hex sha256 of ``data``. CPython's own sha256 module for what a lock file holds: hashlib would load OpenSSL
    (its library and configuration, about 3 ms, the warm run's largest import) to hash 300 KB 0.6 ms sooner."""
    if len(data) < _OWN_SHA256_BELOW:
        own = None
        with contextlib.suppress(ImportError):  # a build without it: hashlib's
            if sys.version_info >= (3, 12):
                from _sha2 import sha256 as own  # type: ignore[import-not-found,unused-ignore]
            else:
                from _sha256 import sha256 as own  # type: ignore[import-not-found,no-redef,unused-ignore]
        if own is not None:
            return str(own(data).hexdigest())
    import hashlib

    return hashlib.sha256(data).hexdigest()


def _signature(info: os.stat_result) -> tuple[int, int, int, int, int]:
    return (info.st_dev, info.st_ino, info.st_size, info.st_mtime_ns, info.st_ctime_ns)
