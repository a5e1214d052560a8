"""An installer's run into the store: what it installed, each distribution by its artifact, split by RECORD into
one dir per distribution, each checked, made read-only and published by a rename that never replaces.

Every way into the store ends here: a run of what the store lacks (:mod:`.store`), a tree an installer resolved
and installed whole (:mod:`.tree`), a cold batch's one run (:mod:`.batch`), a set's or lock's own metapackage,
and a registry's layer (:mod:`repoinstall._oci.pull`). Nothing at a store path is ever written in place: a
publish that finds a peer's there (the same artifact's files) uses theirs, and ours goes with its scratch dir.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from typing import TYPE_CHECKING

from ... import _log
from ..._disk import fs as _fs
from ..._disk.dists import scan
from ..._disk.identity import canonical_name, normal_version
from ..._errors import InstallError
from ..._store import digests
from ..._store import store as _store
from ..._store.audit import fit
from ..._store.compose import freeze
from ..._store.identity import DistId
from ..._store.inventory import Stored
from ..._store.split import split
from ..._store.strays import clear
from ..._urls import file_path

if TYPE_CHECKING:
    from ..._disk.dists import Hashed
    from ..._disk.layout import Layout
    from ..._disk.manifest import Artifact
    from ..._disk.pin import Pin


def identify(
    env: str, target: str, artifacts: Sequence[Artifact], what: str, *, own: str = "", by_url: bool = False
) -> list[tuple[DistId, Artifact]] | None:
    """Each distribution an installer's run left at ``target`` (but the metapackage ``own``, nobody's), by the
    artifact the installer said it took: its stored distribution, named by that artifact's sha256. ``None`` if the
    installer did not say one's hash (or, ``by_url``, its URL): it cannot be named in the store."""
    hashes = {(canonical_name(a.name), normal_version(a.version)): a for a in artifacts if a.sha256}
    found = []
    for dist in scan(target):
        if canonical_name(dist.name) == own:
            continue
        artifact = hashes.get((canonical_name(dist.name), normal_version(dist.version)))
        if artifact is None or (by_url and not artifact.url):
            _log.logger().debug("%s: %s %s has no known artifact; not stored", what, dist.name, dist.version)
            return None
        found.append((DistId.of(env, dist.name, dist.version, artifact.sha256), artifact))
    return found


def into_store(
    layout: Layout, target: str, scratch: str, dists: Sequence[DistId], hashed: Hashed | None = None
) -> tuple[dict[DistId, str], list[DistId]]:
    """Split an installer's run at ``target`` by RECORD (into ``scratch``) and publish each of ``dists`` the store
    does not hold whole; where each one's split dir was (gone once published), and those this call published.
    ``hashed``: what the install hashed of its own files, kept and added to (see :func:`publish`)."""
    label = f"storing {len(dists)} distribution(s)"
    total = len(dists)
    with _log.phase(
        "store.done", label, "stored %d distribution(s)", total, total=total, unit="distributions"
    ) as storing:
        made = split(target, os.path.join(scratch, "split"))
        staged = {dist: _staged_of(made, dist) for dist in dists}
        stored = []
        for dist in dists:
            if not fit(layout, dist):  # else the same artifact's files, stored before: this copy goes
                publish(layout, dist, staged[dist], hashed)
                stored.append(dist)
            storing.advance(1)
        storing.figures["new"] = len(stored)
    return staged, stored


def publish(layout: Layout, dist: DistId, staged: str, hashed: Hashed | None = None, *, checked: bool = False) -> None:
    """Check the staged dir is ``dist`` whole, making its files read-only as they are checked, and rename it into
    the store (a peer's, there first, is the same artifact's files: ours is dropped with the scratch dir).
    ``hashed``: what this install hashed of its own files (its pycs), used, and each file's digest taken here
    added, for the tree's verify; ``checked``: the caller checked it so already (with ``seal``)."""
    # Read-only before the rename, so no file is ever writable at a store path; its directories stay writable
    # until it is published (a rename of a directory needs write permission on it), then freeze() takes that too.
    if not checked and (problem := _store.check(staged, dist, hashed, seal=True)) is not None:
        raise InstallError(problem)
    clear(layout, dist, locking=False)  # a stray at its path (set aside), or a symlink (refused)
    if not _store.publish(layout, dist, staged):
        _log.logger().debug("%s: a peer stored it first; using theirs", dist)
        return
    root = layout.root_fd()
    fd = None if root is None else _fs.open_dir(root, dist.parts())
    if fd is not None:
        try:
            freeze(fd)
            # Ours is the one stored: what its RECORD is, kept apart from it, for verify (see _store.digests).
            found = scan(fd)
            record = digests.of_record(fd, found[0].dist_info) if len(found) == 1 else None
        finally:
            os.close(fd)
        if record is not None:
            digests.keep(layout, Stored.of(dist), record)


def unpack_own(layout: Layout, dist: DistId, pin: Pin, scratch: str) -> None:
    """Store a metapackage wheel that repoinstall made (a set's, a lock's: a dist-info of metadata alone, named by
    its file URL in ``pin``), by unpacking it as an installer would, then publishing it as any distribution."""
    import zipfile

    path = file_path(pin.url)
    staged = os.path.join(scratch, "own")
    os.makedirs(staged)
    with zipfile.ZipFile(path) as wheel:
        for member in wheel.namelist():
            # Its own names: one dist-info dir of plain files (what ``together.wheel`` writes), nothing else.
            parts = member.split("/")
            if len(parts) != 2 or not parts[0].endswith(".dist-info") or parts[1] in ("", ".", ".."):
                raise InstallError(f"{dist}: {member} is not in a metapackage's dist-info")
            os.makedirs(os.path.join(staged, parts[0]), exist_ok=True)
            with open(os.path.join(staged, *parts), "wb") as handle:
                handle.write(wheel.read(member))
    publish(layout, dist, staged)


def _staged_of(made: dict[str, str], dist: DistId) -> str:
    for dist_info, staged in made.items():
        name, _, version = dist_info.removesuffix(".dist-info").rpartition("-")
        if dist.names(name, version):
            return staged
    raise InstallError(f"{dist}: the installer did not install it")
