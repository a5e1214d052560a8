"""Several requirements as one tree (``--together``, :meth:`Repo.ensure_together`): the installer resolves them
and their dependencies in one go, so the tree holds one version of every distribution.

The set becomes a local metapackage, ``together-<digest of the set>`` version 1, whose wheel holds nothing but
its ``Requires-Dist`` lines. Installed by path from the installer's scratch dir, it is an ordinary tree to
everything else: checked by its dist-info and record, locked, staged, verified, published, listed and
collected like any other. The digest keys the tree by the set of pinned members, so the same set in any
order is one tree, and a different set another.
"""

from __future__ import annotations

import hashlib
import io
import zipfile
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING

from packaging.version import Version

from .._disk import fs as _fs
from .._disk import manifest as _manifest
from .._disk.dists import record_hash
from .._disk.identity import SET_PREFIX, TreeId
from .._disk.metadata import dist_info_name
from .._errors import InstallError, InvalidInput, RepoinstallError
from .._requirements import Requested

if TYPE_CHECKING:
    from .._disk.layout import Layout

# SET_PREFIX names set trees; the digest makes a clash with a real project's name a non-issue, and the wheel is
# installed by path, so an index that serves such a name is never asked for it.
_VERSION = Version("1")
_REQUIRES = "Requires-Dist: "


def combined(env: str, members: Sequence[tuple[Requested, TreeId]]) -> tuple[Requested, TreeId]:
    """The request and tree of a set of chosen trees (two or more, each with its requirement as asked)."""
    hashed = [requested.text for requested, _ in members if requested.hashes]
    if hashed:
        raise InvalidInput(f"{hashed[0]}: --hash cannot be checked for a set installed together; drop --together")
    pins = tuple(sorted({tid.pin for _, tid in members}))
    names = [tid.name for _, tid in members]
    if len(set(names)) != len(names):
        twice = next(name for name in names if names.count(name) > 1)
        raise InvalidInput(f"{twice} is asked for twice in one set: a tree holds one version of it")
    # One installer run resolves the set: its members must be asked of the same indexes.
    indexes = {requested.file_index for requested, _ in members}
    if len(indexes) > 1:
        raise InvalidInput(
            "specs from requirements files with different index lines (--index-url, --extra-index-url, "
            "--find-links, --no-index) cannot be installed together; drop --together or give the same lines"
        )
    key = "\n".join(sorted(f"{tid.name}=={tid.leaf}" for _, tid in members))
    tid = TreeId(env, SET_PREFIX + hashlib.sha256(key.encode()).hexdigest()[:16], _VERSION)
    return _request(tid, pins, "together")._replace(file_index=indexes.pop()), tid


def recorded(layout: Layout, tid: TreeId) -> Requested:
    """What the set tree ``tid`` holds, for re-recording or reinstalling it: the ``Requires-Dist`` lines of its
    metapackage's METADATA, or, when those are damaged, its record's requirement."""
    metadata = _fs.read_file(
        layout.existing_fd(), (*layout.tree_dir(tid), tid.leaf, dist_info_name(tid.name, tid.version_text), "METADATA")
    )
    declared = tuple(
        line[len(_REQUIRES) :].strip()
        for line in (metadata or b"").decode("utf-8", "replace").splitlines()
        if line.startswith(_REQUIRES)
    )
    record = _manifest.read(layout, tid)
    for pins in (declared, tuple(record.requirement.split()) if record is not None else ()):
        if _pinned(pins):
            return _request(tid, pins, "repair")
    raise InstallError(f"{tid}: neither its METADATA nor its record says which set it holds; ensure the set again")


def _pinned(pins: tuple[str, ...]) -> bool:
    from .._requirements import parse_spec

    try:
        return len(pins) > 1 and all(parse_spec(pin, source="repair").pinned for pin in pins)
    except RepoinstallError:
        return False


def _request(tid: TreeId, pins: tuple[str, ...], source: str) -> Requested:
    return Requested(" ".join(pins), tid.name, (), tid.version, source=source, members=pins)


def wheel(
    tid: TreeId,
    members: Sequence[str],
    *,
    summary: str = "installed together by repoinstall",
    files: Mapping[str, bytes] | None = None,
) -> tuple[str, bytes]:
    """A metapackage wheel (a set's, a lock's): its file name and its bytes. ``files``: more files for its
    dist-info, by name."""
    module = tid.name.replace("-", "_")
    dist_info = f"{module}-{tid.version_text}.dist-info"
    metadata = [
        "Metadata-Version: 2.1",
        f"Name: {tid.name}",
        f"Version: {tid.version_text}",
        f"Summary: {summary}: " + ", ".join(members),
        *(f"{_REQUIRES}{member}" for member in members),
    ]
    contents = {
        f"{dist_info}/METADATA": ("\n".join(metadata) + "\n\n").encode(),
        f"{dist_info}/WHEEL": b"Wheel-Version: 1.0\nGenerator: repoinstall\nRoot-Is-Purelib: true\nTag: py3-none-any\n",
        **{f"{dist_info}/{name}": data for name, data in (files or {}).items()},
    }
    record = [
        f"{path},sha256={record_hash(hashlib.sha256(data).digest())},{len(data)}" for path, data in contents.items()
    ]
    contents[f"{dist_info}/RECORD"] = ("\n".join([*record, f"{dist_info}/RECORD,,"]) + "\n").encode()
    buffer = io.BytesIO()
    # Fixed timestamps: the same members make the same bytes, so the same hash.
    with zipfile.ZipFile(buffer, "w") as archive:
        for name, data in contents.items():
            archive.writestr(zipfile.ZipInfo(name, date_time=(1980, 1, 1, 0, 0, 0)), data)
    return f"{module}-{tid.version_text}-py3-none-any.whl", buffer.getvalue()
