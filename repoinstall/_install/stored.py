"""A pinned tree built from the store: install only the distributions the store lacks, then compose the tree.

A pinned install (a lock file's tree, or a tree installed here before, from its kept closure) knows every
artifact and its sha256 before it runs, so it knows which distributions the store already holds. Those are used
as they are; the missing ones are installed in ONE installer run (``--no-deps --require-hashes``) into a private
dir, split by their RECORDs into one dir per distribution, each checked, made read-only and published into the
store by a rename that never replaces (a peer's, being the same artifact's files, is used instead). The tree is
then composed in its staging dir from the stored dirs by hard links, and goes on through the protocol as any
staged tree: verified, published by rename, recorded. Nothing here is visible until one of those renames.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING

from .. import _log
from .._dstore import store as _store
from .._dstore.audit import usable
from .._dstore.compose import compose, read_only
from .._dstore.identity import DistId
from .._dstore.split import split
from .._errors import InstallError
from .._options import InstallOptions
from .._requirements import Requested

if TYPE_CHECKING:
    from .._store.identity import TreeId
    from .._store.layout import Layout
    from .backends.run import Built


def plan(env: str, lines: Sequence[str]) -> list[tuple[DistId, str]] | None:
    """Each line's stored distribution; ``None`` if a line does not name one artifact by its sha256 (hashed
    requirements with several hashes: only the installer knows which it takes), so the tree is installed whole."""
    from .locked import line_artifact

    planned = []
    for line in lines:
        parsed = line_artifact(line)
        if parsed is None:
            return None
        name, version, sha256, _ = parsed
        planned.append((DistId.of(env, name, version, sha256), line))
    return planned


def build(
    layout: Layout,
    options: InstallOptions,
    tid: TreeId,
    requested: Requested,
    planned: Sequence[tuple[DistId, str]],
    target: str,
    scratch: str,
    write: Callable[[str, bytes], str],
) -> Built:
    """Compose the tree ``tid`` at ``target`` from the store, installing what it lacks first."""
    from .backends.run import install

    # A stored distribution whose files are not their recorded sizes is set aside and installed again: never
    # linked into another tree (one changed in place but not in size is caught by the staged tree's hash check).
    missing = [(dist, line) for dist, line in planned if not usable(layout, dist)]
    built: Built | None = None  # by the installer run, if one was needed
    if missing:
        combined = os.path.join(scratch, "combined")
        pin = write("missing.txt", ("\n".join(line for _, line in missing) + "\n").encode())
        batch = requested._replace(locked=tuple(line for _, line in missing))
        built = install(options, combined, batch, pin, scratch, str(tid))
        split_dir = os.path.join(scratch, "split")
        made = split(combined, split_dir)
        for dist, _ in missing:
            staged = _staged_of(made, dist)
            if (problem := _store.check(staged, dist)) is not None:
                raise InstallError(problem)
            read_only(staged)
            if not _store.publish(layout, dist, staged):
                _log.logger().debug("%s: a peer stored it first; using theirs", dist)
    else:
        _log.logger().info("%s: every distribution is in the store; composing it", tid)
    composed = compose(target, [(str(dist), _store.path(layout, dist)) for dist, _ in planned])
    if composed.copied:
        _log.logger().info("%s: %d files copied where the filesystem refused hard links", tid, composed.copied)
    # Its record names every distribution's artifact, stored now or before: the lines say them all.
    from .backends.run import Built as _Built
    from .backends.run import backend
    from .locked import artifacts_of

    chosen = backend(options.installer)
    every = artifacts_of(requested._replace(locked=tuple(line for _, line in planned)))
    return _Built(chosen.name, chosen.version(), every) if built is None else built._replace(artifacts=every)


def _staged_of(made: dict[str, str], dist: DistId) -> str:
    from .._store.identity import canonical_name

    for dist_info, staged in made.items():
        name, _, version = dist_info.removesuffix(".dist-info").rpartition("-")
        if canonical_name(name) == dist.name and _same(version, dist):
            return staged
    raise InstallError(f"{dist}: the installer did not install it")


def _same(version: str, dist: DistId) -> bool:
    from packaging.version import InvalidVersion, Version

    try:
        return Version(version) == dist.version
    except InvalidVersion:
        return False


def store_installed(layout: Layout, tid: TreeId, target: str, scratch: str, built: Built) -> bool:
    """After an installer resolved and installed a whole tree into ``target``: move its distributions into the
    store (each checked, read-only, published by rename; one already stored is used as it is and the fresh copy
    dropped) and compose ``target`` again from the store, by hard links. ``False`` (the tree stays as installed)
    when the installer did not say every distribution's artifact hash: it cannot be named in the store."""
    from .._store.dists import scan
    from .._store.identity import canonical_name

    hashes = {(canonical_name(a.name), _normal(a.version)): a.sha256 for a in built.artifacts if a.sha256}
    planned: list[tuple[DistId, str]] = []
    for found in scan(target):
        sha256 = hashes.get((canonical_name(found.name), _normal(found.version)))
        if sha256 is None:
            _log.logger().debug("%s: %s %s has no known artifact hash; not stored", tid, found.name, found.version)
            return False
        planned.append((DistId.of(tid.env, found.name, found.version, sha256), found.dist_info))
    made = split(target, os.path.join(scratch, "split"))
    for dist, dist_info in planned:
        staged = made[dist_info]
        if usable(layout, dist):
            continue  # the same artifact's files, stored before: this copy is not needed
        if (problem := _store.check(staged, dist)) is not None:
            raise InstallError(problem)
        read_only(staged)
        if not _store.publish(layout, dist, staged):
            _log.logger().debug("%s: a peer stored it first; using theirs", dist)
    os.rename(target, os.path.join(scratch, "emptied"))  # only directories are left in it
    compose(target, [(str(dist), _store.path(layout, dist)) for dist, _ in planned])
    return True


def _normal(version: str) -> str:
    from packaging.version import InvalidVersion, Version

    try:
        return str(Version(version))
    except InvalidVersion:
        return version
