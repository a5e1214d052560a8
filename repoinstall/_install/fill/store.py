"""Install the distributions the store lacks, each once per repo: locked one by one, installed together.

For a set of pinned artifacts (each line names one file by its sha256), everything not yet stored is locked by
its own lock (``store-locks/<env>/<name>/<leaf>.lock``: the heartbeat, takeover and wait of a tree's lock), in
one global order (by :class:`DistId`), so two pods wanting overlapping sets never wait for each other in a
circle. What a peer stores while we wait for its lock ends that wait; what we hold is installed in ONE installer
run (``--no-deps --require-hashes``) into a private dir, split by RECORD into one dir per distribution, each
checked, made read-only and published into the store by a rename that never replaces anything (:mod:`.publish`).

Invariant: **the rename into the store is the commit point; a distribution's lock only saves duplicate work.**
A stored distribution is named by its artifact's sha256, so whoever publishes it first publishes the same files,
and a publish that finds a peer's there uses theirs. Lost locks, ``--no-lock`` and crashes can cost an install,
never a partial distribution at a store path.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Callable, Collection, Sequence
from typing import TYPE_CHECKING

from ... import _log
from ..._disk.identity import kind_of
from ..._disk.pin import Pin
from ..._errors import InstallError
from ..._options import InstallOptions
from ..._store import store as _store
from ..._store.audit import fit
from ..._store.identity import DistId
from ..._store.inventory import Stored
from ..._store.strays import at_entry, clear
from .plan import distinct
from .publish import into_store, unpack_own

if TYPE_CHECKING:
    from ..._disk.dists import Hashed
    from ..._disk.layout import Layout
    from ..._lock.locks import TreeLocks
    from ..backends.run import Built

#: Rounds of "lock what is missing, install what we hold": a peer that held a lock and then failed (or died)
#: leaves its distributions missing, which the next round installs; more rounds than this is a fault to report.
_ROUNDS = 3


def store_missing(
    layout: Layout,
    locks: TreeLocks,
    options: InstallOptions,
    planned: Sequence[tuple[DistId, Pin]],
    scratch: str,
    what: str,
    checked: Collection[DistId] = (),
    hashed: Hashed | None = None,
) -> tuple[list[DistId], Built | None]:
    """Make every distribution of ``planned`` (each with its pin) stored; those this call installed, and
    its last installer run (``None`` if it needed none). ``checked``: those this process stored or hashed whole
    moments ago (its batch did, see :mod:`.batch`); ``hashed``: where what the install hashes is kept."""
    for dist, _ in planned:
        # Before any installer runs: a symlink or file where its directories belong refused, a stray at its path
        # (a file, a FIFO: nothing the store makes) set aside, so what the installer makes can be published.
        clear(layout, dist, locking=locks.settings.enabled)
    # Each one hashed whole before it is linked into another tree: a changed one is set aside and installed afresh.
    # One in ``checked`` is only looked up: the tree's own verify checks every file it links against its RECORD
    # anyway (by the digest this process took of that very inode moments ago, or hashed again if its size or mtime
    # changed since), so trusting a check this process made moments ago can cost a failed tree, never a changed
    # file published unnoticed.
    todo = sorted(
        {
            dist: pin for dist, pin in planned
            if not (_store.present(layout, dist) if dist in checked else fit(layout, dist))
        }.items()
    )  # fmt: skip
    installed: list[DistId] = []
    built = None
    for turn in range(1, _ROUNDS + 1):
        if not todo:
            return installed, built
        with contextlib.ExitStack() as held_locks:
            mine = []
            for dist, pin in todo:  # in DistId order: never a circle of waits
                # Its lock's state goes as it is released (unless a peer is in it): waiters ask the store, not it.
                held = held_locks.enter_context(locks.hold(dist.lock_key(), ready=_present(layout, dist), gone=_always))
                if held.peer_finished or _store.present(layout, dist):
                    continue  # a peer stored it while we waited (the same artifact's files)
                mine.append((dist, pin))
            built = install_now(layout, options, mine, os.path.join(scratch, f"store-{turn}"), what, hashed) or built
            installed += [dist for dist, _ in mine]
        todo = [(dist, pin) for dist, pin in todo if not _store.present(layout, dist)]
    if todo:
        dist = todo[0][0]
        thing = at_entry(layout, Stored.of(dist))
        there = f"; {thing.named} is at {_store.path(layout, dist)}" if thing is not None else ""
        raise InstallError(f"{what}: {dist} is still not stored after {_ROUNDS} rounds of installing it{there}")
    return installed, built


def install_now(
    layout: Layout,
    options: InstallOptions,
    mine: Sequence[tuple[DistId, Pin]],
    scratch: str,
    what: str,
    hashed: Hashed | None = None,
) -> Built | None:
    """Store ``mine`` now, whoever holds their locks (the caller does, or goes without): the installer's runs
    first, then a set's or lock's own metapackage, so an installer that fails (a hash that does not match) stores
    nothing of a tree that cannot be; its last installer run (``None``: it needed none). Its scratch dirs are new
    ones named ``scratch`` and a suffix."""
    own = [(d, pin) for d, pin in mine if kind_of(d.name).own_metapackage]
    others = [(d, pin) for d, pin in mine if not kind_of(d.name).own_metapackage]
    built = None
    for number, group in enumerate(_runs(others)):
        built = _install(layout, options, group, f"{scratch}-{number}", what, hashed)
    for dist, pin in own:
        # A set's or lock's own metapackage, a wheel made here of metadata alone: unpacked, no installer.
        unpack_own(layout, dist, pin, f"{scratch}-own-{dist.name}")
    return built


def _runs(mine: Sequence[tuple[DistId, Pin]]) -> list[list[tuple[DistId, Pin]]]:
    """``mine`` in as few installer runs as hold each project once (one ``--target`` dir cannot hold two versions
    of one project): one run, unless the batch wants several versions of something."""
    return distinct(mine, lambda item: item[0].name)


def _present(layout: Layout, dist: DistId) -> Callable[[], bool]:
    return lambda: _store.present(layout, dist)


def _always() -> bool:
    return True


def _install(
    layout: Layout,
    options: InstallOptions,
    mine: Sequence[tuple[DistId, Pin]],
    scratch: str,
    what: str,
    hashed: Hashed | None,
) -> Built:
    """One installer run of ``mine`` into a private dir, then each distribution published into the store."""
    from ..backends.run import install_pins

    os.makedirs(scratch)
    combined = os.path.join(scratch, "combined")
    _log.logger().debug("%s: installing %d distribution(s) into the store", what, len(mine))
    built = install_pins(options, combined, [pin for _, pin in mine], scratch, what, hashed, layout)
    into_store(layout, combined, scratch, [dist for dist, _ in mine], hashed)
    return built
