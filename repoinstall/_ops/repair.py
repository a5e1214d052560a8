"""``verify --repair``: fix what verify found, under the tree's lock; a healthy tree is never touched.

A damaged stored distribution is set aside first (:func:`repair_stored`), then the trees composed from it are
reinstalled (:func:`repair_tree`): their kept closures pin the same artifacts, the store lacks it now, so it is
installed afresh, with new inodes, and no tree links a changed file again."""

from __future__ import annotations

from typing import TYPE_CHECKING

from .._disk.check import check, missing
from .._disk.things import Thing
from .._disk.tree import drop, hold, put_back, record_existing
from .._errors import InstallError, RepoUnusable
from .._lock.key import tree_key
from .._store import strays
from .._store.audit import set_aside as set_aside_stored
from .verify import CHANGED, MISSING, UNREADABLE, UNRECORDED, verify

if TYPE_CHECKING:
    from .._disk.identity import TreeId
    from .._disk.layout import Layout
    from .._lock.locks import TreeLocks
    from .._options import InstallOptions
    from .storeverify import DistReport


def repair_tree(
    layout: Layout, locks: TreeLocks, options: InstallOptions | None, tid: TreeId, env: str, *, unproven: bool = False
) -> str:
    """Re-record a whole tree or reinstall a broken one: "ok", "re-recorded" or "reinstalled". ``unproven``: composed
    from a stored distribution a registry's annotation named, so reinstalled however whole it looks."""
    from .._disk.identity import TreeKind, env_tag, has_bytecode
    from .._install import locked
    from .._install.protocol import ensure_tree
    from .._install.together import recorded
    from .._options import InstallOptions
    from .._requirements import parse_spec

    if env_tag(tid.env) != env_tag(env):
        raise InstallError(f"{tid} ({tid.env}): built for another environment; repair it there")
    # With its bytecode or without, as its environment says, whatever this run's trees carry.
    options = (options or InstallOptions())._replace(bytecode=has_bytecode(tid.env))
    # A tree still missing as we leave the lock (never installed, or set aside below) leaves no lock behind.
    with locks.hold(tree_key(tid), gone=lambda: missing(layout, tid)):
        report = verify(layout, tid)  # again: a peer may have repaired it while we waited for the lock
        if unproven and report.ok:
            # Whole as its RECORD says, which a registry wrote: reinstalled, never re-recorded (a peer's repair
            # that reinstalled it meanwhile costs one install more, nothing else).
            report = report._replace(status=CHANGED)
        if report.ok or (report.status == MISSING and "not installed" in report.notes):
            return "ok"  # whole, or nothing was ever published here
        if report.status == UNREADABLE:
            raise RepoUnusable(report.notes[0])  # another UID's: not ours to judge, let alone set aside
        # A set's members, read before setting it aside takes its METADATA and record away.
        # A lock's tree: what it was installed from, as its metapackage's lock.json says (URLs and hashes).
        if tid.kind is TreeKind.LOCKED:
            requested = locked.recorded(layout, tid, _source(layout, tid))
        elif tid.kind is TreeKind.SET:
            requested = recorded(layout, tid)
        else:
            requested = parse_spec(tid.pin, source="repair")
        if report.status in (UNRECORDED, CHANGED) and not report.problems and not unproven:
            # Every file checks out; only the record is missing or stale.
            status = check(layout, tid)
            if status.dist_info is not None and record_existing(layout, requested.text, tid, status.dist_info):
                return "re-recorded"
        # Record first: from here the tree is missing, never seen half-removed. Kept in trash/ meanwhile.
        held = hold(layout, tid)
    # The ordinary protocol reinstalls it (a peer that gets there first saves us the work).
    try:
        ensure_tree(layout, locks, options, requested, tid)
    except BaseException:
        # Never a clean report over a tree that vanished: put back as it was (damaged, recorded), so verify still
        # names it and list and path still show it, until a repair can install it (its artifact's source is
        # down, say). Under its lock, and only where nothing stands now.
        if held is not None:
            with locks.hold(tree_key(tid), gone=lambda: missing(layout, tid)):
                if missing(layout, tid):
                    put_back(layout, tid, held)
                else:
                    drop(layout, held)
        raise
    if held is not None:
        drop(layout, held)
    return "reinstalled"


def _source(layout: Layout, tid: TreeId) -> str:
    """Where a lock's tree came from, as its record says (``repair`` if the record is gone)."""
    from .._disk.manifest import read

    record = read(layout, tid)
    return record.requirement if record is not None else "repair"


def repair_stored(layout: Layout, report: DistReport, env: str) -> str:
    """Set a damaged stored distribution aside (renamed into trash/, never mended in place: its inodes are in
    trees), so the trees composed from it, reinstalled next, install it afresh with new inodes: "ok" if a check
    made now finds it whole (or gone: a peer repaired it), else "set aside". A stray at its path (a file, a FIFO)
    is set aside as well; a symlink there is refused in one line (:class:`RepoUnusable`)."""
    from .._disk.identity import env_tag
    from .storeverify import verify_one

    stored = report.stored
    if env_tag(stored.env) != env_tag(env):
        raise InstallError(f"{report} ({stored.env}): stored for another environment; repair it there")
    if report.unproven:
        # Whole as the RECORD a registry wrote says: set aside all the same (no tree links it again; each is
        # reinstalled next), under its name, by a rename into trash/ as any damaged one.
        return "set aside" if set_aside_stored(layout, stored, "named from a registry's annotation") else "ok"
    thing = strays.at_entry(layout, stored)
    if thing is Thing.SYMLINK:
        raise RepoUnusable(strays.refusal(layout, stored))  # may be an operator's: a person looks at it
    if thing is not None:
        return "set aside" if strays.set_aside(layout, stored, thing) else "ok"
    again = verify_one(layout, stored)  # again: a peer may have set it aside (and stored it afresh) meanwhile
    if again.ok or again.status == MISSING:
        return "ok"
    if again.status == UNREADABLE:
        raise RepoUnusable(again.notes[0])  # another UID's: not ours to judge, let alone set aside
    why = again.problems.summary() if again.problems else "; ".join(again.notes)
    return "set aside" if set_aside_stored(layout, stored, why) else "ok"
