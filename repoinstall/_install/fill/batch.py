"""A batch's distributions into the store before its trees: one resolution, then one installer run of what the
store lacks, so that each tree of the batch is then only composed.

``ensure a b c`` (and ``-r``, several lock files, the API's ``ensure_all``: two trees or more; one tree does this
inside its own protocol) first learns every missing tree's closure: a lock's pins, a tree's kept closure
(:mod:`repoinstall._disk.closures`), or, for the rest, one resolution of all their pins together
(:mod:`repoinstall._install.resolve`; into a cold store, resolved and installed in one installer run:
:func:`_whole`). Every distribution those name that the store lacks is then installed at once (:mod:`.store`:
each under its own lock, so one another pod is installing is waited for, never installed twice). What each
resolved tree holds is read off the stored distributions' own ``Requires-Dist``
(:mod:`repoinstall._store.requires`), and handed to the tree's protocol, which composes it from the store,
verifies, publishes and records it as it does any tree.

Everything here is an optimisation over installing each tree on its own, and nothing depends on it for
correctness: a batch that cannot be resolved together, or whose artifacts have no hashes, or that fails to
install, leaves its trees to their own protocols (whose errors are then the ones shown), and what it did store
is whole (the rename into the store is the commit point).
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, NamedTuple

from packaging.specifiers import SpecifierSet
from packaging.version import Version

from ... import _log, _stop
from ..._disk import closures as _closures
from ..._disk.closures import Closure
from ..._disk.identity import TreeId
from ..._disk.pin import Pin
from ..._errors import InstallError, RepoinstallError, RepoUnusable
from ..._options import InstallOptions
from ..._requirements import Requested
from ..._store import store as _store
from ..._store.identity import DistId
from ..._store.requires import closure, requirements
from .plan import distinct, plannable

if TYPE_CHECKING:
    from ..._disk.dists import Hashed
    from ..._disk.layout import Layout
    from ..._lock.locks import TreeLocks
    from ..staging import Staging

#: What :func:`_whole` says when the store stopped being cold while it waited: resolve first instead.
_WARM: tuple[dict[TreeId, Closure], list[DistId], list[DistId]] = ({}, [], [])

#: The name of a batch's staging dir (its owner note says it is a batch, for gc and for people).
_BATCH = "repoinstall-batch"


class Prefilled(NamedTuple):
    """What prefilling took: each resolved tree's closure, and how many distributions it installed for each tree
    (each one counted for the first tree of the batch that holds it)."""

    closures: dict[TreeId, Closure]
    stored: dict[TreeId, int]
    #: Every stored distribution of this batch, checked against its RECORD moments ago: hashed whole here, or
    #: checked by the publish that stored it (ours, or a peer's we waited for). Its trees link them as they are
    #: (each tree's verify checks what it links, by the digests in ``hashed`` where this batch took them), not
    #: hashing each once more per tree.
    checked: frozenset[DistId] = frozenset()
    #: What the batch's install hashed of the files it stored (each pyc as compiled, every other file while the
    #: compile ran, each file of a distribution as it was checked before its publish), by device, inode, size and
    #: mtime: each tree's verify of the links it composes of them finds them there instead of hashing them again
    #: (see :class:`repoinstall._disk.dists.Hashed`; one shared by the batch's trees, on their threads at once).
    hashed: Hashed | None = None


def prefill(
    layout: Layout,
    locks: TreeLocks,
    options: InstallOptions | None,
    items: Sequence[tuple[Requested, TreeId]],
    versions: Newest | None = None,
) -> Prefilled:
    """Store what the trees ``items`` need (see above); their closures, for the trees resolved here."""
    from ..preflight import refuse_obstacles
    from ..resolve import resolve
    from ..staging import Staging
    from .store import store_missing

    chosen = options or InstallOptions()
    pinned: list[Pin] = []
    unresolved: list[tuple[Requested, TreeId]] = []
    for requested, tid in items:
        _stop.check()  # a batch of thousands: a stop lands here, not after every one was looked at
        try:
            refuse_obstacles(layout, tid, locking=locks.settings.enabled)
        except RepoinstallError:
            continue  # its own protocol says so in one line, before any installer runs for it
        if requested.locked:
            pinned += requested.locked
        elif requested.members or requested.hashes:
            continue  # a set's metapackage, or hashes the user gave: the tree's own protocol installs it
        elif (kept := _closures.read(layout, tid)) is not None:
            pinned += kept.pins
        else:
            unresolved.append((requested, tid))
    if not unresolved and len(items) < 2:
        return Prefilled({}, {})  # one pinned tree: its own protocol stores what it lacks, in one run as here
    env = items[0][1].env
    what = f"{len(items)} trees" if len(items) > 1 else str(items[0][1])
    key = hashlib.sha256("\n".join(sorted(str(tid) for _, tid in items)).encode()).hexdigest()[:16]
    with Staging(layout, TreeId(env, f"{_BATCH}-{key}", Version("1")), locks.settings.heartbeat) as staging:
        found: dict[TreeId, Closure] = {}
        stored: list[DistId] = []
        checked: list[DistId] = []
        groups = _groups(unresolved)
        if groups and not _store.used(layout, env):
            # A cold store: nothing to spare, so the first group is resolved AND installed in one installer run.
            whole = _whole(layout, locks, chosen, groups[0], staging, what, versions)
            if whole is None:
                return Prefilled({}, {})  # each tree installs on its own, as before the store
            if whole is not _WARM:
                groups.pop(0)
                found, stored, checked = whole
                pinned += [pin for closure in found.values() for pin in closure.pins]
        resolutions: list[tuple[list[tuple[Requested, TreeId]], list[Pin]]] = []
        for number, group in enumerate(groups):
            # One resolution per group of distinct names (one cannot hold two versions of a project).
            scratch = os.path.join(staging.tmp, f"resolve-{number}")
            os.makedirs(scratch)
            resolutions.append((group, resolve(chosen, [tid.pin for _, tid in group], scratch, what) or []))
        planned = plannable(env, [*pinned, *(pin for _, pins in resolutions for pin in pins)])
        try:
            stored += store_missing(
                layout, locks, chosen, planned, staging.tmp, what, frozenset(checked), staging.hashed
            )[0]
        except (InstallError, RepoUnusable) as error:
            # Each tree's own install says what is wrong with it (a symlink in the store's way, say: exit 2, for
            # the trees that need what it blocks); this was only to save runs.
            _log.logger().debug("%s: storing them together failed (%s); one by one", what, str(error).splitlines()[0])
            return Prefilled(found, _counted(layout, items, found, stored))
        for group, pins in resolutions:
            if pins:
                found.update(_closures_of(layout, chosen, group, plannable(env, pins), versions))
        checked_now = frozenset(dist for dist, _ in planned)
        return Prefilled(found, _counted(layout, items, found, stored), checked_now, staging.hashed)


def _whole(
    layout: Layout,
    locks: TreeLocks,
    options: InstallOptions,
    trees: list[tuple[Requested, TreeId]],
    staging: Staging,
    what: str,
    versions: Newest | None,
) -> tuple[dict[TreeId, Closure], list[DistId], list[DistId]] | None:
    """Into a cold store: ``trees`` resolved and installed in ONE installer run (their pins as one local
    metapackage, as a set installed together is), split by RECORD into the store, and each tree's closure read
    off the stored distributions and kept, so every pod composes these trees from the same distributions. Under
    one lock for this set of trees: a fleet of pods starting together with the same specs makes one run, the
    others wait for its closures; with the distributions it stored, and every one it stored or hashed whole. ``None``
    where the store cannot take them (an artifact without a hash)."""
    from ..._disk.layout import STORE_LOCKS
    from ..._lock.key import LockKey
    from ..backends.run import install
    from ..together import wheel
    from .publish import identify, into_store

    env = trees[0][1].env
    pins = tuple(sorted(tid.pin for _, tid in trees))
    key = hashlib.sha256("\n".join(pins).encode()).hexdigest()[:16]
    batch = TreeId(env, f"{_BATCH}-{key}", Version("1"))

    def kept() -> dict[TreeId, Closure] | None:
        found = {tid: closure for _, tid in trees if (closure := _closures.read(layout, tid)) is not None}
        return found if len(found) == len(trees) else None

    # ONE lock for every batch into this environment's cold store. Its run holds no distribution's lock (which
    # distributions it installs is known only once it ran), so no other batch may install beside it: a pod that
    # waited for it finds its own trees' closures kept (the same batch: nothing left to do), or a store no longer
    # cold, and resolves first, under each distribution's lock. The lock only saves duplicate work: a pod that runs
    # this without it (no lock possible, a lost lease) stores the same artifacts' files, and each publish into the
    # store is a rename that never replaces.
    lock = LockKey((STORE_LOCKS, env, _BATCH), "cold", f"the first batch into the store ({what})")
    with locks.hold(lock, ready=lambda: kept() is not None, gone=lambda: True) as held:
        if held.peer_finished or kept() is not None:
            return kept() or {}, [], []  # a peer installed them while we waited: its closures, its stored files
        if _store.used(layout, env):
            return _WARM  # a peer's batch stored its distributions first: ours resolves first, under their locks
        scratch = os.path.join(staging.tmp, "whole")
        os.makedirs(scratch)
        combined = os.path.join(scratch, "combined")
        path = staging.scratch_file(*wheel(batch, pins, summary="a batch installed by repoinstall"))
        request = Requested(what, batch.name, (), batch.version, source="batch", members=pins)
        # Its hashes kept in the batch's ``hashed``: the store's checks and each tree's verify reuse them.
        built = install(options, combined, request, path, scratch, what, staging.hashed, kept=layout)
        # Each distribution by the artifact the installer took (the batch's own metapackage is nobody's).
        found = identify(env, combined, built.artifacts, what, own=batch.name, by_url=True)
        if found is None:
            return None
        planned = [(dist, Pin(dist.name, str(dist.version), a.url, (f"sha256:{a.sha256}",))) for dist, a in found]
        _, stored = into_store(layout, combined, scratch, [dist for dist, _ in planned], staging.hashed)
        found_closures = _closures_of(layout, options, trees, sorted(planned), versions)
        for tid, closure in found_closures.items():
            _closures.write(layout, tid, closure)  # the closure every pod installs this tree from
        return found_closures, stored, [dist for dist, _ in planned]


#: Asks the index for the newest version of each spec, as the chooser does for a tree's own version; given the
#: ``Requires-Python`` of the distributions the batch stored (by name and version), which it reads from there.
Newest = Callable[[Sequence[Requested], Mapping[tuple[str, str], str | None]], Sequence[object]]


def _newest(
    asked: list[tuple[TreeId, dict[str, SpecifierSet]]], versions: Newest, known: Mapping[tuple[str, str], str | None]
) -> dict[tuple[str, str], object]:
    """The newest version the index offers for what each tree asks of each of its distributions (its own pin
    aside): what that tree alone would get."""
    from ..._requirements import parse_spec

    questions = sorted({(name, str(spec)) for tid, names in asked for name, spec in names.items() if name != tid.name})
    if not questions:
        return {}
    try:
        answers = versions([parse_spec(f"{name}{spec}", source="batch") for name, spec in questions], known)
    except RepoinstallError:
        return {}
    return dict(zip(questions, answers, strict=True))


def _held_back(
    trees: Sequence[tuple[Requested, TreeId]], asked: list[tuple[TreeId, dict[str, SpecifierSet]]]
) -> list[tuple[TreeId, dict[str, SpecifierSet]]]:
    """What each tree asks of a distribution that the rest of its batch asked more of: only there can the batch's
    one resolution have held back what the tree alone would get. Where the whole batch asks one name exactly what
    the tree asks (every adaptor of a fleet wanting ``lib>=1``), the resolver had the tree's own choice for it, so
    the index is not asked (all of it is, when a tree's part could not be read)."""
    if len(asked) != len(trees):
        return asked
    batch: dict[str, SpecifierSet] = {}
    for tid, names in asked:
        for name, specifier in [*names.items(), (tid.name, SpecifierSet(f"=={tid.version}"))]:
            batch[name] = batch.get(name, SpecifierSet()) & specifier
    return [(tid, {n: s for n, s in names.items() if n != tid.name and s != batch[n]}) for tid, names in asked]


def _groups(trees: Sequence[tuple[Requested, TreeId]]) -> list[list[tuple[Requested, TreeId]]]:
    """``trees`` in as few groups as hold each project name once (several versions of one adaptor: one group
    per version)."""
    return distinct(trees, lambda item: item[1].name)


def _counted(
    layout: Layout, items: Sequence[tuple[Requested, TreeId]], found: dict[TreeId, Closure], stored: list[DistId]
) -> dict[TreeId, int]:
    """How many of the ``stored`` distributions each tree is the first of the batch to hold."""
    left = set(stored)
    counted: dict[TreeId, int] = {}
    for requested, tid in items:
        closure_of = found.get(tid) or _closures.read(layout, tid)
        pins = requested.locked or (closure_of.pins if closure_of is not None else ())
        mine = {dist for dist, _ in plannable(tid.env, pins)} & left
        left -= mine
        counted[tid] = len(mine)
    return counted


def _closures_of(
    layout: Layout,
    options: InstallOptions,
    trees: Sequence[tuple[Requested, TreeId]],
    planned: list[tuple[DistId, Pin]],
    versions: Newest | None,
) -> dict[TreeId, Closure]:
    """Each tree's part of the batch's resolution, by the stored distributions' requirements."""
    from ..markerenv import marker_environment

    environment = marker_environment(options.python)
    needs = {}
    known: dict[tuple[str, str], str | None] = {}  # each stored one's Requires-Python: not fetched again
    for dist, _ in planned:
        if not _store.present(layout, dist) or (found := requirements(_store.path(layout, dist))) is None:
            return {}
        needs[dist.name], known[(dist.name, str(dist.version))] = found
    if environment is None or len(needs) != len(planned):
        return {}  # one name twice in one resolution, or no marker values: each tree resolves on its own
    by_name = {dist.name: (dist, pin) for dist, pin in planned}
    asked = [(tid, names) for _, tid in trees if (names := closure(tid.name, tid.extras, needs, environment))]
    newest = _newest(_held_back(trees, asked), versions, known) if versions is not None else {}
    found_closures: dict[TreeId, Closure] = {}
    for tid, names in asked:
        behind = [
            name for name, specifier in names.items()
            if versions is not None and name != tid.name and (name, str(specifier)) in newest
            and newest[(name, str(specifier))] != by_name[name][0].version
        ]  # fmt: skip
        if behind:
            # Another tree of the batch held a shared distribution back: alone, this tree would hold a newer one.
            # A tree's content must not depend on what it was installed beside: it is resolved on its own.
            _log.logger().info(
                "%s: resolved with its batch it would hold an older %s; resolving it alone", tid, behind[0]
            )
            continue
        held = [by_name[name] for name in sorted(names)]
        found_closures[tid] = Closure(tuple(sorted(pin for _, pin in held)))
    return found_closures
