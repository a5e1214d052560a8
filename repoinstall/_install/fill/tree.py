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
from collections.abc import Collection, Sequence
from typing import TYPE_CHECKING

from ... import _log
from ..._disk.identity import TreeKind, canonical_name
from ..._disk.pin import Pin
from ..._errors import InstallError
from ..._options import InstallOptions
from ..._requirements import Requested
from ..._store import store as _store
from ..._store.identity import DistId
from .plan import plan

if TYPE_CHECKING:
    from ..._disk.dists import Hashed
    from ..._disk.identity import TreeId
    from ..._disk.layout import Layout
    from ..._lock.locks import TreeLocks
    from ..backends.run import Built
    from ..staging import Staging


def fill(
    layout: Layout,
    locks: TreeLocks,
    options: InstallOptions,
    tid: TreeId,
    requested: Requested,
    staging: Staging,
    checked: Collection[DistId] = (),
) -> tuple[Built, int]:
    """Step 5 of the protocol: fill ``staging``'s tree dir with the tree ``tid`` as ``requested`` (pinned, if it
    can be: see :func:`repoinstall._install.locked.pinned`); what built it and how many distributions went into
    the store. ``checked``: stored distributions this process checked moments ago (see :func:`.store.store_missing`)."""
    from ..backends.run import install
    from ..locked import all_pins
    from ..together import wheel

    pins = all_pins(tid, requested, staging.scratch_file) if requested.locked else []
    if not pins and not requested.hashes and _store.used(layout, tid.env):
        # The store holds distributions already: resolve first (a set: its members at once), so that only what it
        # lacks is installed; a set's own metapackage is made here and unpacked, no installer.
        from ..resolve import resolve

        scratch = os.path.join(staging.tmp, "resolve")
        os.makedirs(scratch)
        if (resolved := resolve(options, list(requested.members) or [tid.pin], scratch, str(tid))) is not None:
            requested = requested._replace(locked=tuple(resolved))
            pins = all_pins(tid, requested, staging.scratch_file)
    if pins and (planned := plan(tid.env, pins)) is not None:
        # Every artifact known by its hash: what the store lacks is installed, the tree composed.
        return build(
            layout, locks, options, tid, requested, planned, staging.target, staging.tmp, checked, staging.hashed
        )
    if pins:
        requested, pin = requested._replace(locked=tuple(pins)), None  # the backend writes the pins' file
    elif requested.members:
        pin = staging.scratch_file(*wheel(tid, requested.members))
    else:
        pin = tid.pin
    built = install(options, staging.target, requested, pin, staging.tmp, str(tid), staging.hashed, layout)
    # Its distributions into the store, each once per repo; the tree composed of them.
    return built, store_installed(layout, locks, options, tid, staging, built) or 0


def build(
    layout: Layout,
    locks: TreeLocks,
    options: InstallOptions,
    tid: TreeId,
    requested: Requested,
    planned: Sequence[tuple[DistId, Pin]],
    target: str,
    scratch: str,
    checked: Collection[DistId] = (),
    hashed: Hashed | None = None,
) -> tuple[Built, int]:
    """Compose the tree ``tid`` at ``target`` from the store, installing what it lacks first (see
    :mod:`.store`); what built it, and how many distributions this call installed into the store. ``hashed``:
    where the install keeps what it hashed of its own files (see :class:`repoinstall._disk.dists.Hashed`)."""
    from ..backends.run import Built as _Built
    from ..backends.run import backend
    from ..locked import artifacts_of, check_planned
    from .compose import compose_stored
    from .store import install_now, store_missing

    if tid.kind is TreeKind.LOCKED:  # before anything is stored: else its own metapackage would be, for nothing
        check_planned(tid, requested.members, [dist for dist, _ in planned])
    installed, built = store_missing(layout, locks, options, planned, scratch, str(tid), checked, hashed)
    if not installed:
        _log.logger().info("%s: every distribution is in the store; composing it", tid)
    pins = dict(planned)

    def restore(gone: Sequence[DistId], where: str) -> None:
        install_now(layout, options, [(dist, pins[dist]) for dist in gone], where, str(tid))

    composed, restored = compose_stored(layout, locks, list(pins), target, scratch, restore, str(tid))
    if composed.copied:
        _log.logger().info("%s: %d files copied where the filesystem refused hard links", tid, composed.copied)
    # Its record names every distribution's artifact, stored now or before: the pins say them all (where a pin
    # names no URL, a hashed requirement's, the URL its installer run reported taking that very file from).
    every = artifacts_of([pin for _, pin in planned])
    if built is None:
        chosen = backend(options.installer)
        return _Built(chosen.name, chosen.version(), every), len(installed) + restored
    reported = {(canonical_name(a.name), a.sha256): a.url for a in built.artifacts if a.sha256 and a.url}
    every = tuple(a if a.url else a._replace(url=reported.get((a.name, a.sha256), "")) for a in every)
    return built._replace(artifacts=every), len(installed) + restored


def store_installed(
    layout: Layout,
    locks: TreeLocks,
    options: InstallOptions,
    tid: TreeId,
    staging: Staging,
    built: Built,
) -> int | None:
    """After an installer resolved and installed a whole tree into the staging dir's tree: move its distributions
    into the store (each checked, read-only, published by rename; one already stored is used as it is and the fresh
    copy dropped) and compose the tree again from the store, by hard links; how many it stored. ``None`` (the tree
    stays as installed) when the installer did not say every distribution's artifact hash: it cannot be named in
    the store."""
    from .compose import compose_stored
    from .publish import identify, into_store, publish
    from .store import install_now

    target, scratch = staging.target, staging.tmp
    found = identify(tid.env, target, built.artifacts, str(tid))
    if found is None:
        return None
    artifacts = dict(found)
    staged, stored = into_store(layout, target, scratch, list(artifacts), staging.hashed)
    os.rename(target, os.path.join(scratch, "emptied"))  # only directories are left in it

    def restore(gone: Sequence[DistId], where: str) -> None:
        # Our own copy where we did not publish it (a peer's was stored); else the artifact the installer took.
        fetch = []
        for dist in gone:
            if os.path.isdir(staged[dist]):
                publish(layout, dist, staged[dist], staging.hashed)
                continue
            artifact = artifacts[dist]
            if not artifact.url:
                raise InstallError(f"{tid}: {dist} was taken out of the store (by gc) as it was composed; ensure again")
            fetch.append((dist, Pin(dist.name, artifact.version, artifact.url, (f"sha256:{artifact.sha256}",))))
        install_now(layout, options, fetch, where, str(tid))

    _, restored = compose_stored(layout, locks, list(artifacts), target, scratch, restore, str(tid))
    return len(stored) + restored
