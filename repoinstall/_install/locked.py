"""A lock file's packages as one tree (``ensure -r pylock.toml``, ``-r`` of a fully hashed requirements file,
:meth:`Repo.ensure_lock`): exactly the artifacts the lock names for this environment, every one hash-checked,
nothing resolved and no dependency added (``--no-deps``). Any other tree installed here before comes back the
same way, from its kept closure (:func:`pinned`, :mod:`repoinstall._disk.closures`).

The lock becomes a local metapackage, ``locked-<its names>-<10 hex of the lock's key>`` version 1 (see
:func:`repoinstall._disk.identity.lock_name`), as a set installed together does (``_install.together``): its
wheel holds a ``Requires-Dist`` pin per package and ``lock.json``, each package's version and hashes (its record
says each artifact's URL), so the tree itself says how to reinstall it byte for byte, and its bytes are the same
for one closure on every cluster. It is installed by path with the lock's artifacts in one installer run, then
checked to hold each package at its locked version and nothing else; to everything else it is an ordinary tree
(checked, locked, staged, verified, published, listed, collected). The key is the set of (name, version,
artifact hashes) the lock installs here, so every file of one resolution for this environment is one tree, and a
changed hash is another. The lock file itself is read in the input layer (:mod:`repoinstall._lockfile.request`):
here a lock is its pins.
"""

from __future__ import annotations

import hashlib
import json
import os
from typing import TYPE_CHECKING

from .. import _log
from .._disk import fs as _fs
from .._disk.identity import TreeId, TreeKind, canonical_name, normal_version
from .._disk.metadata import dist_info_name
from .._disk.pin import Pin, pins_of
from .._errors import InstallError, RepoinstallError
from .._lockfile.request import lock_request
from .._requirements import Requested

if TYPE_CHECKING:
    from collections.abc import Callable, Sequence

    from .._disk.closures import Closure
    from .._disk.dists import Dist
    from .._disk.layout import Layout
    from .._disk.manifest import Artifact, TreeEntry
    from .._store.identity import DistId

#: The file in the metapackage's dist-info that lists what the tree was installed from.
LOCK_JSON = "lock.json"


def all_pins(tid: TreeId, requested: Requested, write: Callable[[str, bytes], str]) -> list[Pin]:
    """The pinned install's pins, and for a set's or lock's tree its own metapackage's (written by ``write``)."""
    pins = list(requested.locked)
    if tid.kind.own_metapackage:  # the tree's own metapackage, made here
        filename, data = _metapackage(tid, requested)
        url = _file_url(write(filename, data))
        pins.append(Pin(tid.name, tid.version_text, url, (f"sha256:{hashlib.sha256(data).hexdigest()}",)))
    return pins


def _file_url(path: str) -> str:
    from pathlib import Path

    return Path(path).as_uri()


def _metapackage(tid: TreeId, requested: Requested) -> tuple[str, bytes]:
    from .together import wheel

    if tid.kind is TreeKind.SET:
        return wheel(tid, requested.members)
    # Of the closure alone (names, versions, hashes; no URL, so no credentials either): every pod makes the same
    # bytes for one closure, whatever its lock's URLs, so a tree's image pulled by another cluster holds this very
    # metapackage. Where each artifact came from is in the tree's record.
    bare = [Pin(pin.name, pin.version, "", pin.hashes) for pin in requested.locked]
    document = {"members": [pin.member for pin in bare], "lines": [pin.line() for pin in bare]}
    extra = {LOCK_JSON: (json.dumps(document, indent=1, sort_keys=True) + "\n").encode()}
    return wheel(tid, requested.members, summary="a lock file's packages, installed by repoinstall", files=extra)


def check_members(tid: TreeId, expected: Sequence[str], dists: Sequence[Dist]) -> None:
    """Refuse a staged tree that does not hold exactly the ``expected`` distributions (``name==version``) at their
    versions (and a set's or lock's own metapackage)."""
    own = tid.kind.own_metapackage
    found = [(d.name, d.version) for d in dists if not (own and tid.is_named(d.name, d.version))]
    _refuse_unlike(tid, expected, found)


def check_planned(tid: TreeId, expected: Sequence[str], planned: Sequence[DistId]) -> None:
    """Refuse, before anything is installed or stored, a lock's tree whose lines name other distributions than
    its packages (a version its lock gives that is not its artifact's): the staged tree would not hold what it was
    pinned to, and its own metapackage, stored for nothing, would be left in the store."""
    _refuse_unlike(tid, expected, [(d.name, str(d.version)) for d in planned if d.name != tid.name])


def _refuse_unlike(tid: TreeId, expected: Sequence[str], names: Sequence[tuple[str, str]]) -> None:
    """:class:`InstallError` unless ``names`` (name, version) are exactly the ``expected`` pins."""
    wanted = {_split(pin) for pin in expected}
    found = {(canonical_name(name), normal_version(version)) for name, version in names}
    if found != wanted:
        missing = ", ".join(f"{n}=={v}" for n, v in sorted(wanted - found)) or "nothing"
        extra = ", ".join(f"{n}=={v}" for n, v in sorted(found - wanted)) or "nothing"
        raise InstallError(
            f"{tid}: the staged tree does not hold what it was pinned to: missing {missing}; extra {extra}"
        )


def _split(pin: str) -> tuple[str, str]:
    name, _, version = pin.partition("==")
    return canonical_name(name), normal_version(version)


def recorded(layout: Layout, tid: TreeId, source: str) -> Requested:
    """What the lock tree ``tid`` was installed from, for reinstalling it exactly: its record's closure (each
    artifact's URL and sha256), or, without one, its metapackage's ``lock.json`` (covered by its RECORD, so verify
    vouches for it: each distribution's version and hashes, from the index; a tree of an earlier release: URLs
    too)."""
    from .._disk import closures
    from .._disk.manifest import read

    record = read(layout, tid)
    closure = None if record is None else closures.of_record(tid, record)
    if closure is not None:
        return lock_request(tid.name, source, closure.pins)
    path = (*layout.tree_dir(tid), tid.leaf, dist_info_name(tid.name, tid.version_text), LOCK_JSON)
    data = _fs.read_file(layout.existing_fd(), path)
    try:
        document = json.loads(data or b"")
        lines, members = document["lines"], document["members"]
        if all(type(v) is list and v and all(type(s) is str for s in v) for v in (lines, members)):
            pins = pins_of(lines, members)
            if pins is not None:
                return lock_request(tid.name, source, pins)
    except (ValueError, KeyError, TypeError):
        pass
    raise InstallError(
        f"{tid}: neither its {LOCK_JSON} ({os.path.join(*path)}) nor its record says what it was installed from; "
        "ensure the lock file again"
    )


def pinned(
    layout: Layout, requested: Requested, tid: TreeId, resolved: Closure | None = None
) -> tuple[Requested, tuple[str, ...] | None]:
    """What to install for ``tid``, and the ``name==version`` of each distribution the tree must then hold
    (``None``: whatever the installer resolves). A lock's tree: its lines. Any other tree installed here before:
    its kept closure (see :mod:`repoinstall._disk.closures`), so it comes back the same, never resolved afresh.
    Else its batch's resolution, ``resolved``, if it has one."""
    if requested.locked:
        return requested, requested.members
    from .._disk import closures

    closure = closures.read(layout, tid) or resolved
    if closure is None:
        return requested, None
    _log.logger().debug("%s: installing its kept closure: %s", tid, ", ".join(closure.members))
    return requested._replace(locked=closure.pins), closure.members


def keep_closure(layout: Layout, tid: TreeId, entry: TreeEntry, *, pinned_before: bool) -> None:
    """Keep the closure of a tree just published (not a lock's tree: its lock.json is its closure), unless it was
    installed from a kept one (the same). Best effort: a tree without it is resolved afresh next time."""
    if pinned_before or tid.kind is TreeKind.LOCKED:
        return
    from .._disk import closures

    closure = closures.of_record(tid, entry)
    if closure is None:
        return
    try:
        closures.write(layout, tid, closure)
    except (OSError, RepoinstallError) as error:
        _log.logger().warning("%s: could not keep its closure (%s); a reinstall resolves it afresh", tid, error)


def artifacts_of(pins: Sequence[Pin]) -> tuple[Artifact, ...]:
    """The artifact each pin names by one sha256 (and URL, if it has one): what the installer was made to take,
    whatever it reports."""
    from .._disk.manifest import Artifact

    return tuple(Artifact(p.name, p.version, sha256, p.public().url) for p in pins if (sha256 := p.sha256))
