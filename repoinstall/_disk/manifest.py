"""The manifest: one small JSON record per tree saying what was installed there, how and when."""

from __future__ import annotations

import contextlib
import json
import os
import time
from typing import TYPE_CHECKING, Any, NamedTuple

from packaging.version import InvalidVersion, Version

from .._errors import RepoUnusable
from . import fs as _fs
from .identity import TreeId
from .layout import RECORD_SUFFIX, RECORDS, USED_SUFFIX, Layout

if TYPE_CHECKING:
    from collections.abc import Iterable

    from .dists import Dist

FORMAT = 1


class Artifact(NamedTuple):
    """The file one distribution of a tree was installed from, as its installer reported it: the sha256 (hex) of
    that very file and the URL it came from, credentials removed; ``""`` for what is not known.

    A registry's layer is no wheel: its ``sha256`` stays ``""``; ``diff_id`` is the layer's uncompressed digest
    (``sha256:<hex>``, recomputed here: the stored distribution's name) and ``claimed`` the wheel sha256 the
    registry's annotation said, recorded as a claim only (see :mod:`repoinstall._store.identity`)."""

    name: str
    version: str
    sha256: str = ""
    url: str = ""
    diff_id: str = ""
    claimed: str = ""


class TreeEntry(NamedTuple):
    """What the manifest knows about one tree."""

    requirement: str
    name: str
    version: str
    extras: tuple[str, ...]
    env: str
    dist_info: str
    installer: str
    installer_version: str
    installed_at: str
    host: str
    dists: tuple[dict[str, str], ...] = ()
    format: int = FORMAT

    def to_json(self) -> bytes:
        return (json.dumps(self._asdict(), sort_keys=True, separators=(",", ":")) + "\n").encode("utf-8")

    @classmethod
    def new(
        cls,
        tid: TreeId,
        requirement: str,
        dist_info: str,
        dists: list[Dist],
        installer: str,
        installer_version: str,
        artifacts: Iterable[Artifact] = (),
    ) -> TreeEntry:
        """The record of a tree holding ``dists``; each dist's row names the artifact it came from (``sha256``,
        ``url``) when ``artifacts`` has it (its name and version), and leaves those keys out otherwise."""
        return cls(
            requirement=requirement,
            name=tid.name,
            # The version the project's own METADATA names (1.0 when 1.0.0 was asked: the same version).
            version=next((d.version for d in dists if d.dist_info == dist_info), tid.version_text),
            extras=tid.extras,
            env=tid.env,
            dist_info=dist_info,
            installer=installer,
            installer_version=installer_version,
            installed_at=time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
            host=os.uname().nodename,
            dists=tuple(_row(d, artifacts) for d in dists),
        )


def _row(dist: Dist, artifacts: Iterable[Artifact]) -> dict[str, str]:
    """One ``dists`` row: name, version and dist-info, plus its artifact's ``sha256``, ``url``, ``diff_id`` and
    ``claimed`` where known.
    Every value is a string, so readers that know only the first three keys read the row as before."""
    from packaging.utils import canonicalize_name

    row = {"name": dist.name, "version": dist.version, "dist_info": dist.dist_info}
    name = canonicalize_name(dist.name)
    for artifact in artifacts:
        if canonicalize_name(artifact.name) == name and _same(artifact.version, dist.version):
            row.update((key, value) for key, value in zip(_ARTIFACT_KEYS, artifact[2:], strict=True) if value)
            break
    return row


#: An artifact's fields a row holds, where known.
_ARTIFACT_KEYS = ("sha256", "url", "diff_id", "claimed")


def _same(one: str, other: str) -> bool:
    try:
        return one == other or Version(one) == Version(other)
    except InvalidVersion:
        return False


#: The fields a record holds as strings. A record with any of them of another JSON type is garbage.
_TEXT_FIELDS = (
    "requirement",
    "name",
    "version",
    "env",
    "dist_info",
    "installer",
    "installer_version",
    "installed_at",
    "host",
)


_JUST_TEXT = {str}


def parse(data: bytes, tid: TreeId) -> TreeEntry | None:
    """The record in ``data`` if it is well formed and describes ``tid``; ``None`` for anything else.

    The one place a record's shape is checked, so every reader gets a well-typed entry: a field of the wrong JSON
    type (a number for ``dist_info``, a list for ``version``) makes the record garbage, like unparseable JSON. The
    one exception is ``dists``, which only verify reads (it compares them with the tree): rows that are not
    objects of strings are read there as no dists (:func:`recorded_dists`), so verify reports the tree as not
    matching its record. Plain loops
    of type checks: this runs on the warm path, once per package."""
    try:
        raw: Any = json.loads(data)
    except ValueError:  # not JSON, or not UTF-8
        return None
    if type(raw) is not dict or type(raw.get("format")) is not int or raw["format"] != FORMAT:
        return None
    if set(map(type, map(raw.get, _TEXT_FIELDS))) != _JUST_TEXT:  # in C: this runs once per package, warm
        return None
    extras = raw.get("extras") or []
    if type(extras) is not list:
        return None
    for extra in extras:
        if type(extra) is not str:
            return None
    dists = raw.get("dists") or []
    if type(dists) is not list:
        dists = []  # its rows are checked by the one reader of them, verify (see recorded_dists): not here, on the
        # warm path, where their number grows with the tree's closure
    raw["extras"] = tuple(extras)
    raw["dists"] = tuple(dists)
    try:
        record = TreeEntry(**raw)
    except TypeError:  # a field we do not know
        return None
    if (record.name, record.extras, record.env) != (tid.name, tid.extras, tid.env) or not _same_version(record, tid):
        return None
    if "/" in record.dist_info or record.dist_info in ("", ".", "..") or not record.dist_info.endswith(".dist-info"):
        return None
    return record


_is_text = str.__instancecheck__


def recorded_dists(record: TreeEntry) -> tuple[dict[str, str], ...]:
    """The record's distributions if every row is an object of strings, else none (verify then reports the tree
    as not matching its record)."""
    rows = record.dists
    return rows if all(type(row) is dict and all(map(_is_text, row.values())) for row in rows) else ()


def _same_version(record: TreeEntry, tid: TreeId) -> bool:
    if record.version == tid.version_text:
        return True
    try:
        return Version(record.version) == tid.version
    except InvalidVersion:
        return False


def read(layout: Layout, tid: TreeId, *, fresh: bool = False) -> TreeEntry | None:
    fd = layout.env_fd(RECORDS, tid.env, fresh=fresh)
    if fd is None:
        return None
    # "<name>" and "<leaf>.json" opened one at a time without following a symlink: a planted records/<env>/<name>
    # link reads as "no record", so it can neither mislead the check nor lead a write (mark_used) outside.
    data = _fs.read_file(fd, (tid.name, tid.leaf + RECORD_SUFFIX), lookup_only=not fresh)
    return None if data is None else parse(data, tid)


def write(layout: Layout, tid: TreeId, record: TreeEntry) -> None:
    """Write the record atomically; writers of one tree all write equivalent records, so last one wins."""
    directory = _fs.make_dirs(layout.writable_fd(), layout.record_dir(tid), layout.root)
    try:
        _fs.write_atomic(directory, tid.leaf + RECORD_SUFFIX, record.to_json())
    except OSError as error:
        if error.errno in _fs.IN_THE_WAY:  # a directory at the record's path: the preflight's words, as a race
            path = layout.path(*layout.record_dir(tid), tid.leaf + RECORD_SUFFIX)
            raise RepoUnusable(f"{path} is not a regular file (a directory is in the way)") from None
        raise
    finally:
        os.close(directory)


def remove(layout: Layout, tid: TreeId) -> None:
    """Unpublish the record (and its "last ensured" note): from here the tree reads as not installed."""
    fd = layout.root_fd()
    if fd is None:
        return
    directory = _fs.open_dir(fd, layout.record_dir(tid))
    if directory is not None:
        try:
            _fs.unlink(directory, tid.leaf + RECORD_SUFFIX)
            _fs.unlink(directory, tid.leaf + USED_SUFFIX)
        finally:
            os.close(directory)


#: "Last ensured" is refreshed at most this often: a warm check costs one stat, and one small write an hour.
USED_REFRESH = 3600.0


def mark_used(layout: Layout, tid: TreeId, now: float) -> None:
    """Note that the tree was just ensured, if the note is older than :data:`USED_REFRESH` (best effort)."""
    records = layout.env_fd(RECORDS, tid.env)
    if records is None:
        return
    # The record's directory opened without following a symlink, so the note is never written outside the repo.
    fd = _fs.open_dir(records, (tid.name,), lookup_only=not layout.revalidating)
    if fd is None:
        return
    name = tid.leaf + USED_SUFFIX
    try:
        if now - os.stat(name, dir_fd=fd, follow_symlinks=False).st_mtime < USED_REFRESH:
            return
        os.utime(name, dir_fd=fd, follow_symlinks=False)
    except FileNotFoundError:
        # A read-only repo, or the record's directory is gone: nothing to note.
        with contextlib.suppress(OSError):
            os.close(os.open(name, os.O_WRONLY | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC, _fs.FILE_MODE, dir_fd=fd))
    except OSError:
        pass  # a read-only repo or a foreign file: "last ensured" is only a hint for gc
    finally:
        os.close(fd)


def last_used(layout: Layout, tid: TreeId) -> float | None:
    """When the tree was last ensured (the note's mtime), else when its record was written; ``None`` if neither."""
    root = layout.root_fd()
    fd = None if root is None else _fs.open_dir(root, layout.record_dir(tid))
    if fd is None:
        return None
    try:
        for suffix in (USED_SUFFIX, RECORD_SUFFIX):
            try:
                return os.stat(tid.leaf + suffix, dir_fd=fd, follow_symlinks=False).st_mtime
            except OSError:
                continue
        return None
    finally:
        os.close(fd)


def as_recorded(layout: Layout, tid: TreeId, entry: TreeEntry | None = None) -> TreeId:
    """A tree found on disk is named by its canonical version ("1"); its entry says how it is spelled ("1.0")."""
    entry = entry or read(layout, tid)
    if entry is None or entry.version == tid.version_text:
        return tid
    return TreeId(tid.env, tid.name, Version(entry.version), tid.extras)
