"""Install the distributions the store lacks, each once per repo: locked one by one, installed together.

For a set of pinned artifacts (each line names one file by its sha256), everything not yet stored is locked by
its own lock (``store-locks/<env>/<name>/<leaf>.lock``: the heartbeat, takeover and wait of a tree's lock), in
one global order (by :class:`DistId`), so two pods wanting overlapping sets never wait for each other in a
circle. What a peer stores while we wait for its lock ends that wait; what we hold is installed in ONE installer
run (``--no-deps --require-hashes``) into a private dir, split by RECORD into one dir per distribution, each
checked, made read-only and published into the store by a rename that never replaces anything.

Invariant: **the rename into the store is the commit point; a distribution's lock only saves duplicate work.**
A stored distribution is named by its artifact's sha256, so whoever publishes it first publishes the same files,
and a publish that finds a peer's there uses theirs. Lost locks, ``--no-lock`` and crashes can cost an install,
never a partial distribution at a store path.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Callable, Collection, Sequence
from typing import TYPE_CHECKING, TypeVar

from packaging.version import Version

from .. import _log
from .._dstore import digests
from .._dstore import store as _store
from .._dstore.audit import fit
from .._dstore.compose import freeze, read_only
from .._dstore.identity import DistId
from .._dstore.inventory import Stored
from .._dstore.split import split
from .._dstore.strays import at_entry, clear
from .._errors import InstallError
from .._options import InstallOptions
from .._requirements import Requested
from .._store import fs as _fs
from .._store.dists import scan
from .._store.identity import is_locked, is_set
from .._store.pin import Pin

if TYPE_CHECKING:
    from .._lock.locks import TreeLocks
    from .._store.layout import Layout
    from .backends.run import Built

T = TypeVar("T")

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
) -> tuple[list[DistId], Built | None]:
    """Make every distribution of ``planned`` (each with its pin) stored; those this call installed, and
    its last installer run (``None`` if it needed none). ``checked``: those this process stored or hashed whole
    moments ago (its batch did, see :mod:`.prefill`)."""
    for dist, _ in planned:
        # Before any installer runs: a symlink or file where its directories belong refused, a stray at its path
        # (a file, a FIFO: nothing the store makes) set aside, so what the installer makes can be published.
        clear(layout, dist, locking=locks.settings.enabled)
    # Each one hashed whole before it is linked into another tree: a changed one is set aside and installed afresh.
    # One in ``checked`` is only looked up: the tree's own verify hashes every file it links anyway, so trusting a
    # check this process made moments ago can cost a failed tree, never a tampered one published.
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
            built = install_now(layout, options, mine, os.path.join(scratch, f"store-{turn}"), what) or built
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
) -> Built | None:
    """Store ``mine`` now, whoever holds their locks (the caller does, or goes without): the installer's runs
    first, then a set's or lock's own metapackage, so an installer that fails (a hash that does not match) stores
    nothing of a tree that cannot be; its last installer run (``None``: it needed none). Its scratch dirs are new
    ones named ``scratch`` and a suffix."""
    own = [(d, pin) for d, pin in mine if is_set(d.name) or is_locked(d.name)]
    others = [(d, pin) for d, pin in mine if not (is_set(d.name) or is_locked(d.name))]
    built = None
    for number, group in enumerate(_runs(others)):
        built = _install(layout, options, group, f"{scratch}-{number}", what)
    for dist, pin in own:
        # A set's or lock's own metapackage, a wheel made here of metadata alone: unpacked, no installer.
        _unpack_own(layout, dist, pin, f"{scratch}-own-{dist.name}")
    return built


def _unpack_own(layout: Layout, dist: DistId, pin: Pin, scratch: str) -> None:
    """Store a metapackage wheel that repoinstall made (a set's, a lock's: a dist-info of metadata alone, named by
    its file URL in ``pin``), by unpacking it as an installer would, then publishing it as any distribution."""
    import urllib.parse
    import urllib.request
    import zipfile

    path = urllib.request.url2pathname(urllib.parse.urlsplit(pin.url).path)
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


def _runs(mine: Sequence[tuple[DistId, Pin]]) -> list[list[tuple[DistId, Pin]]]:
    """``mine`` in as few installer runs as hold each project once (one ``--target`` dir cannot hold two versions
    of one project): one run, unless the batch wants several versions of something."""
    return distinct(mine, lambda item: item[0].name)


def distinct(items: Sequence[T], name: Callable[[T], str]) -> list[list[T]]:
    """``items`` in as few groups as hold each ``name`` once, in order."""
    groups: list[list[T]] = []
    names: list[set[str]] = []
    for item in items:
        number = next((n for n, held in enumerate(names) if name(item) not in held), len(groups))
        if number == len(groups):
            groups.append([])
            names.append(set())
        groups[number].append(item)
        names[number].add(name(item))
    return groups


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
) -> Built:
    """One installer run of ``mine`` into a private dir, then each distribution published into the store."""
    from .backends.run import install

    os.makedirs(scratch)
    combined = os.path.join(scratch, "combined")
    batch = Requested(what, "repoinstall-store", (), Version("1"), source="store", locked=tuple(p for _, p in mine))
    _log.logger().debug("%s: installing %d distribution(s) into the store", what, len(mine))
    built = install(options, combined, batch, "", scratch, what)
    made = split(combined, os.path.join(scratch, "split"))
    for dist, _ in mine:
        publish(layout, dist, _staged_of(made, dist))
    return built


def publish(layout: Layout, dist: DistId, staged: str) -> None:
    """Check the staged dir is ``dist`` whole, make it read-only, and rename it into the store (a peer's, there
    first, is the same artifact's files: ours is dropped with the scratch dir)."""
    if (problem := _store.check(staged, dist)) is not None:
        raise InstallError(problem)
    read_only(staged)
    clear(layout, dist, locking=False)  # a stray at its path (set aside), or a symlink (refused)
    if not _store.publish(layout, dist, staged):
        _log.logger().debug("%s: a peer stored it first; using theirs", dist)
        return
    root = layout.root_fd()
    fd = None if root is None else _fs.open_dir(root, dist.parts())
    if fd is not None:
        try:
            freeze(fd)
            # Ours is the one stored: what its RECORD is, kept apart from it, for verify (see _dstore.digests).
            found = scan(fd)
            record = digests.of_record(fd, found[0].dist_info) if len(found) == 1 else None
        finally:
            os.close(fd)
        if record is not None:
            digests.keep(layout, Stored.of(dist), record)


def _staged_of(made: dict[str, str], dist: DistId) -> str:
    for dist_info, staged in made.items():
        name, _, version = dist_info.removesuffix(".dist-info").rpartition("-")
        if dist.names(name, version):
            return staged
    raise InstallError(f"{dist}: the installer did not install it")
