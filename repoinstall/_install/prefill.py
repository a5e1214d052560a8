"""A batch's distributions into the store before its trees: one resolution, then one installer run of what the
store lacks, so that each tree of the batch is then only composed.

``ensure a b c`` (and ``-r``, several lock files, the API's ``ensure_all``) first learns every missing tree's
closure: a lock's lines, a tree's kept closure (:mod:`repoinstall._store.closures`), or, for the rest, one
resolution of all their pins together (:mod:`.resolve`). Every distribution those name that the store lacks is
then installed at once (:mod:`.storing`: each under its own lock, so one another pod is installing is waited
for, never installed twice). What each resolved tree holds is read off the stored distributions' own
``Requires-Dist`` (:mod:`repoinstall._dstore.requires`), and handed to the tree's protocol, which composes it
from the store, verifies, publishes and records it as it does any tree.

Everything here is an optimisation over installing each tree on its own, and nothing depends on it for
correctness: a batch that cannot be resolved together, or whose artifacts have no hashes, or that fails to
install, leaves its trees to their own protocols (whose errors are then the ones shown), and what it did store
is whole (the rename into the store is the commit point).
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Sequence
from typing import TYPE_CHECKING, NamedTuple

from packaging.version import Version

from .. import _log
from .._dstore import store as _store
from .._dstore.identity import DistId
from .._dstore.requires import closure, requirements
from .._errors import InstallError, InvalidRequirement
from .._options import InstallOptions
from .._store import closures as _closures
from .._store.closures import Closure
from .._store.identity import TreeId

if TYPE_CHECKING:
    from .._requirements import Requested
    from .._store.layout import Layout
    from .._store.locks import TreeLocks

#: The name of a batch's staging dir (its owner note says it is a batch, for gc and for people).
_BATCH = "repoinstall-batch"


class Prefilled(NamedTuple):
    """What prefilling took: each resolved tree's closure, and how many distributions it installed for each tree
    (each one counted for the first tree of the batch that holds it)."""

    closures: dict[TreeId, Closure]
    stored: dict[TreeId, int]


def prefill(
    layout: Layout, locks: TreeLocks, options: InstallOptions | None, items: Sequence[tuple[Requested, TreeId]]
) -> Prefilled:
    """Store what the trees ``items`` need (see above); their closures, for the trees resolved here."""
    from .resolve import resolve
    from .staging import Staging
    from .storing import store_missing

    chosen = options or InstallOptions()
    pinned: list[str] = []
    unresolved: list[tuple[Requested, TreeId]] = []
    for requested, tid in items:
        if requested.locked:
            pinned += requested.locked
        elif requested.members or requested.hashes:
            continue  # a set's metapackage, or hashes the user gave: the tree's own protocol installs it
        elif (kept := _closures.read(layout, tid)) is not None:
            pinned += kept.lines
        else:
            unresolved.append((requested, tid))
    if not unresolved and len(items) < 2:
        return Prefilled({}, {})  # one pinned tree: its own protocol stores what it lacks, in one run as here
    env = items[0][1].env
    what = f"{len(items)} trees" if len(items) > 1 else str(items[0][1])
    key = hashlib.sha256("\n".join(sorted(str(tid) for _, tid in items)).encode()).hexdigest()[:16]
    with Staging(layout, TreeId(env, f"{_BATCH}-{key}", Version("1")), locks.settings.heartbeat) as staging:
        resolutions: list[tuple[list[tuple[Requested, TreeId]], list[str]]] = []
        for number, group in enumerate(_groups(unresolved)):
            # One resolution per group of distinct names (one cannot hold two versions of a project).
            scratch = os.path.join(staging.tmp, f"resolve-{number}")
            os.makedirs(scratch)
            resolutions.append((group, resolve(chosen, [tid.pin for _, tid in group], scratch, what) or []))
        planned = _planned(env, [*pinned, *(line for _, lines in resolutions for line in lines)])
        if not planned:
            return Prefilled({}, {})
        try:
            stored, _ = store_missing(layout, locks, chosen, planned, staging.tmp, staging.scratch_file, what)
        except InstallError as error:
            # Each tree's own install says what is wrong with it; this was only to save runs.
            _log.logger().debug("%s: storing them together failed (%s); one by one", what, str(error).splitlines()[0])
            return Prefilled({}, {})
        found: dict[TreeId, Closure] = {}
        for group, lines in resolutions:
            if lines:
                found.update(_closures_of(layout, chosen, group, _planned(env, lines)))
        return Prefilled(found, _counted(layout, items, found, stored))


def _groups(trees: Sequence[tuple[Requested, TreeId]]) -> list[list[tuple[Requested, TreeId]]]:
    """``trees`` in as few groups as hold each project name once (several versions of one adaptor: one group
    per version)."""
    groups: list[list[tuple[Requested, TreeId]]] = []
    for item in trees:
        group = next((g for g in groups if all(tid.name != item[1].name for _, tid in g)), None)
        if group is None:
            groups.append(group := [])
        group.append(item)
    return groups


def _counted(
    layout: Layout, items: Sequence[tuple[Requested, TreeId]], found: dict[TreeId, Closure], stored: list[DistId]
) -> dict[TreeId, int]:
    """How many of the ``stored`` distributions each tree is the first of the batch to hold."""
    left = set(stored)
    counted: dict[TreeId, int] = {}
    for requested, tid in items:
        closure_of = found.get(tid) or _closures.read(layout, tid)
        lines = requested.locked or (closure_of.lines if closure_of is not None else ())
        mine = {dist for dist, _ in _planned(tid.env, lines)} & left
        left -= mine
        counted[tid] = len(mine)
    return counted


def _planned(env: str, lines: Sequence[str]) -> list[tuple[DistId, str]]:
    """Each line that names one artifact by its sha256, with its stored distribution (others are left to their
    trees' own installs)."""
    from .locked import line_artifact

    found: dict[DistId, str] = {}
    for line in lines:
        parsed = line_artifact(line)
        if parsed is None:
            continue
        name, version, sha256, _ = parsed
        try:
            found.setdefault(DistId.of(env, name, version, sha256), line)
        except InvalidRequirement:
            continue
    return sorted(found.items())


def _closures_of(
    layout: Layout,
    options: InstallOptions,
    trees: Sequence[tuple[Requested, TreeId]],
    planned: list[tuple[DistId, str]],
) -> dict[TreeId, Closure]:
    """Each tree's part of the batch's resolution, by the stored distributions' requirements."""
    from .markerenv import marker_environment

    environment = marker_environment(options.python)
    needs = {}
    for dist, _ in planned:
        if not _store.present(layout, dist) or (found := requirements(_store.path(layout, dist))) is None:
            return {}
        needs[dist.name] = found
    if environment is None or len(needs) != len(planned):
        return {}  # one name twice in one resolution, or no marker values: each tree resolves on its own
    by_name = {dist.name: (dist, line) for dist, line in planned}
    found_closures: dict[TreeId, Closure] = {}
    for _, tid in trees:
        names = closure(tid.name, tid.extras, needs, environment)
        if names is None:
            continue
        held = [by_name[name] for name in sorted(names)]
        found_closures[tid] = Closure(
            tuple(sorted(line for _, line in held)), tuple(sorted(f"{d.name}=={d.version}" for d, _ in held))
        )
    return found_closures
