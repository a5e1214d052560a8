"""``remove``: take the trees that specs name out of the repo, the way gc ``--unused-for`` takes unused ones.

Each tree goes through :meth:`Collector.unpublish <repoinstall._ops.gc.Collector.unpublish>`, gc's own removal:
under the tree's lock (taken without waiting: a held lock means a process is using the tree, and it is left whole;
so is a tree a process on this host uses, by its working directory, an open or mapped file, its PYTHONPATH or its
command line: see :mod:`repoinstall._ops.inuse`), its record first, then the tree renamed into ``trash/`` and
deleted there. So a concurrent ``ensure`` sees the tree installed or missing (and reinstalls it), never
half-deleted, and nothing but the named trees, their records and their idle lock state is touched.

Which trees a spec names, in this interpreter's environment: ``name[extras]==version`` the one tree of that
version and those extras; a bare name or a range every tree of that name and those extras (none: no extras) whose
version it admits, pre-releases included. A spec that names no tree there is skipped with a warning, as pip's
``uninstall`` skips a package that is not installed.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Literal, NamedTuple

from .. import _log
from .._disk.check import State, check
from .._disk.identity import TreeId
from .._disk.layout import RECORDS, TREES, Layout
from .._disk.manifest import as_recorded
from .._options import LockSettings
from .._requirements import Requested
from .gc import NOT_ALL_DELETED, Collector

#: removed; would-remove (``--dry-run``); kept (could not be removed: ``reason`` says why); skipped (the spec
#: names no installed tree here, or its marker is false).
RemoveAction = Literal["removed", "would-remove", "kept", "skipped"]


class Removed(NamedTuple):
    """What became of one tree a spec named (or of a spec that named none: ``tree`` is then empty)."""

    requirement: str
    tree: str
    env: str
    path: str | None
    action: RemoveAction
    reason: str = ""

    @property
    def ok(self) -> bool:
        """Whether this needs no one's attention: only a tree ``kept`` does."""
        return self.action != "kept"

    def as_dict(self) -> dict[str, object]:
        return self._asdict()


def remove_trees(
    layout: Layout,
    env: str,
    settings: LockSettings,
    specs: Iterable[Requested],
    *,
    dry_run: bool,
    forget: bool = False,
) -> list[Removed]:
    """Remove every tree ``specs`` name (see the module), each at most once, in the order named. ``forget``: drop
    each removed tree's kept closure too, so its next install resolves afresh (see ``_disk.closures``)."""
    collector = Collector(layout, env, settings, older_than=0.0, unused_for=None, dry_run=dry_run)
    collector.prepare("no tree can be removed")
    # Markers first: one that cannot be evaluated is bad input (exit 2) before anything is removed.
    applying = [(requested, requested.marker_applies()) for requested in specs]
    outcomes: list[Removed] = []
    seen: set[tuple[str, str, str]] = set()
    for requested, applies in applying:
        if not applies:
            _log.logger().info("skipped %s: its marker is false here", requested.text)
            outcomes.append(Removed(requested.text, "", env, None, "skipped", "marker is false"))
            continue
        named = layout.retrying(_named_trees, layout, env, requested)
        if not named:
            # As pip uninstall: "Skipping X as it is not installed", and the others go on (exit 0).
            _log.logger().warning("skipping %s: not installed in %s (%s)", requested.text, layout.root, env)
            reason = "not installed"
            if forget and (version := requested.pinned_version()) is not None and not dry_run:
                # Its kept closure may be what fails its install (an artifact gone): let it resolve afresh.
                from .._disk import closures

                layout.retrying(closures.forget, layout, TreeId(env, requested.name, version, requested.extras))
                reason = "not installed; its kept closure, if any, dropped"
            outcomes.append(Removed(requested.text, "", env, None, "skipped", reason))
        for tid in named:
            if (tid.env, tid.name, tid.leaf) not in seen:  # one tree, however its version is spelled
                seen.add((tid.env, tid.name, tid.leaf))
                outcome = layout.retrying(_remove_one, collector, requested, tid)
                if forget and outcome.action == "removed":
                    from .._disk import closures

                    layout.retrying(closures.forget, layout, tid)
                outcomes.append(outcome)
    return outcomes


def _named_trees(layout: Layout, env: str, requested: Requested) -> list[TreeId]:
    """The trees in ``env`` that ``requested`` names and that are there (something at the tree's path), lowest
    version first, each named as its record spells it."""
    version = requested.pinned_version()
    if version is not None:
        candidates = [TreeId(env, requested.name, version, requested.extras)]
    else:
        specifier = requested.specifier()
        found = {*layout.discover(RECORDS, env, requested.name), *layout.discover(TREES, env, requested.name)}
        candidates = sorted(
            (
                tid
                for tid in found
                if tid.extras == requested.extras and specifier.contains(tid.version, prereleases=True)
            ),
            key=lambda tid: tid.version,
        )
    named = []
    for tid in candidates:
        status = check(layout, tid, fresh=True)  # a peer's publish on another NFS client counts too
        if status.state is not State.MISSING:
            named.append(as_recorded(layout, tid, status.record))
    return named


def _remove_one(collector: Collector, requested: Requested, tid: TreeId) -> Removed:
    path = collector.layout.tree_path(tid)
    reason = f"named by {requested.text}"
    before = len(collector.found)
    if not collector.dry_run:
        # In gc's order (lock debris, then unused trees): a dead holder's lock is set aside once everyone in it is
        # proven gone, so the tree's lock can be had now; a live holder's is never taken from it. Looked at before
        # our own attempt on the lock, which renews its state.
        collector.lock_debris_of(tid)
    kept = collector.unpublish(tid, reason)
    if kept is not None:
        return Removed(requested.text, tid.pin, tid.env, path, "kept", kept)
    if collector.dry_run:
        return Removed(requested.text, tid.pin, tid.env, path, "would-remove")
    said = [r for r in collector.found[before:] if r.kind == "tree"]
    if said and not said[-1].done and not said[-1].reason.endswith(NOT_ALL_DELETED):
        return Removed(requested.text, tid.pin, tid.env, path, "kept", said[-1].reason.removeprefix(f"{reason}; "))
    # Gone from the repo's view (by us, or by a peer just before): a tree set aside in trash/ but not wholly
    # deleted (a file still open on this NFS client) is removed too; a later gc deletes what is left.
    partly = "set aside in trash/, not all deleted yet: gc finishes it" if said and not said[-1].done else ""
    return Removed(requested.text, tid.pin, tid.env, path, "removed", partly)
