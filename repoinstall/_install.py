"""The install protocol's locked half: check again, repair or set aside, stage, pip, verify, publish, record.

Runs while the caller holds the tree's lock (or none, with ``--no-lock``). Nothing here depends on the
lock for correctness: **the rename is the commit point; the lock only saves duplicate work.**
"""

from __future__ import annotations

import os
import time
from typing import TYPE_CHECKING

from . import _fs, _log, _manifest
from ._check import State, check
from ._errors import InstallError
from ._layout import Layout
from ._options import HEARTBEAT

if TYPE_CHECKING:
    from ._identity import TreeId
    from ._lock import TreeLock
    from ._options import InstallOptions
    from ._requirements import Requested
    from ._results import Action, Timing


def install_locked(
    layout: Layout,
    options: InstallOptions | None,
    requested: Requested,
    tid: TreeId,
    lock: TreeLock,
    timing: Timing,
    heartbeat: float = HEARTBEAT,
) -> Action:
    """Make the tree exist, returning what it took. The caller holds ``lock``."""
    # Check again inside the lock: a peer may have finished while we waited.
    status = check(layout, tid)
    if status.state is State.PRESENT:
        return "waited"
    if status.state is State.UNRECORDED:
        # A crash between publish and record: the tree is whole if its RECORD hashes say so; no pip needed.
        assert status.dist_info is not None
        if record_existing(layout, requested, tid, status.dist_info):
            return "repaired"
        if check(layout, tid).state is not State.PRESENT:
            set_aside(layout, tid)
    elif status.state is State.BROKEN:
        set_aside(layout, tid)
    started = time.monotonic()
    try:
        return stage_and_publish(layout, options, requested, tid, lock, heartbeat)
    finally:
        timing.installing = time.monotonic() - started


def record_existing(layout: Layout, requested: Requested, tid: TreeId, dist_info: str) -> bool:
    """Write the record of a published tree that has none, if every RECORD hash in it checks out."""
    from ._dists import check_tree, scan

    tree = _fs.open_dir(layout.writable_fd(), (*layout.tree_dir(tid), tid.leaf))
    if tree is None:
        return False
    try:
        dists = scan(tree)
        if problems := check_tree(tree, dists):
            _log.logger().warning(
                "%s does not match its RECORDs (%s); reinstalling", layout.tree_path(tid), problems.summary()
            )
            return False
        installer = _fs.read_file(tree, (dist_info, "INSTALLER"))
    finally:
        os.close(tree)
    name = (installer or b"unknown").decode("utf-8", "replace").strip() or "unknown"
    _manifest.write(layout, tid, _manifest.TreeEntry.new(tid, requested.text, dist_info, dists, name, "unknown"))
    return True


def set_aside(layout: Layout, tid: TreeId) -> None:
    """Move a broken tree out of the way: the record goes first, so nobody sees a record with a broken tree."""
    _manifest.remove(layout, tid)
    if layout.discard(layout.tree_dir(tid), tid.leaf, f"{tid.env}.{tid.name}.{tid.leaf}") is not None:
        _log.logger().warning("moved a broken tree aside: %s", layout.tree_path(tid))


def stage_and_publish(
    layout: Layout,
    options: InstallOptions | None,
    requested: Requested,
    tid: TreeId,
    lock: TreeLock,
    heartbeat: float = HEARTBEAT,
) -> Action:
    from . import _installer
    from ._dists import check_tree, scan
    from ._options import InstallOptions
    from ._pipconfig import index_config
    from ._staging import Staging

    options = options or InstallOptions()
    index_config(options)  # every index URL readable, or one line (exit 2) before an installer could show a password
    # The staging dir lives (its heartbeat runs) exactly as long as this block: gc leaves it alone until then.
    with Staging(layout, tid, heartbeat) as staging:
        built = _installer.install(options, staging.target, requested, tid.pin, staging.tmp, str(tid))
        tree = staging.tree_fd()
        try:
            dists = scan(tree)
            own = [d for d in dists if tid.is_named(d.name, d.version)]
            if not own:
                raise InstallError(
                    f"{tid}: {built.installer} finished but the staged tree has no {tid.name} {tid.version} dist-info"
                )
            if problems := check_tree(tree, dists):
                raise InstallError(f"{tid}: staged tree does not match its RECORDs: {problems.summary()}")
        finally:
            os.close(tree)
        record = _manifest.TreeEntry.new(tid, requested.text, own[0].dist_info, dists, *built)
        # The rename is the commit point; the lock only saves duplicate work. After a lost lease, a peer
        # may be publishing this very tree: publish never replaces what is there, so theirs stands.
        taken = lock.lost.is_set() and check(layout, tid).state is not State.MISSING
        published = False if taken else staging.publish()
    if not published:
        # A peer published first (our lease lapsed, or --no-lock): use theirs once it checks out.
        status = check(layout, tid)
        if status.state is State.UNRECORDED:
            assert status.dist_info is not None
            record_existing(layout, requested, tid, status.dist_info)
            status = check(layout, tid)
        if status.state is State.PRESENT:
            _log.logger().info("%s: a peer published it first; using theirs", tid)
            return "waited"
        raise InstallError(f"{tid}: {layout.tree_path(tid)} is taken by something that is not a valid tree")
    # After the commit point. A crash before this write leaves an unrecorded tree that the next
    # ensure re-records from its RECORD hashes, without pip.
    _manifest.write(layout, tid, record)
    return "installed"


def repair_locked(
    layout: Layout, options: InstallOptions | None, tid: TreeId, lock: TreeLock, heartbeat: float = HEARTBEAT
) -> str:
    """Under the lock: verify again, then re-record a whole tree or reinstall a broken one; a healthy tree is
    never touched. Returns what it did: "ok", "re-recorded" or "reinstalled"."""
    from ._requirements import parse_spec
    from ._verify import CHANGED, MISSING, UNRECORDED, verify

    report = verify(layout, tid)  # again: a peer may have repaired it while we waited for the lock
    if report.ok:
        return "ok"
    if report.status == MISSING and "not installed" in report.notes:
        return "ok"  # nothing was ever published here: nothing to repair
    requested = parse_spec(tid.pin, source="repair")
    if report.status in (UNRECORDED, CHANGED) and not report.problems:
        # Every file checks out; only the record is missing or stale.
        status = check(layout, tid)
        if status.dist_info is not None and record_existing(layout, requested, tid, status.dist_info):
            return "re-recorded"
    set_aside(layout, tid)
    stage_and_publish(layout, options, requested, tid, lock, heartbeat)
    return "reinstalled"
