"""The install protocol, top to bottom: check, lock, check again, stage, install, verify, publish, record.

Nothing here depends on the lock for correctness: **the rename is the commit point; the lock only saves
duplicate work.** A crash, a SIGKILL, a lost lease or ``--no-lock`` can cost an install, never a half-written
tree that anyone sees.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import TYPE_CHECKING, NamedTuple

from .. import _log, _stop
from .._disk import manifest as _manifest
from .._disk.check import Appeared, State, check, in_use, missing, present
from .._disk.tree import adopt, clear_for_install
from .._errors import ArtifactGone, InstallError, SourceRefused
from .._lock.key import tree_key
from .._options import InstallOptions

if TYPE_CHECKING:
    from collections.abc import Collection

    from .._disk.closures import Closure
    from .._disk.dists import Hashed
    from .._disk.identity import TreeId
    from .._disk.layout import Layout
    from .._lock.locks import TreeLocks
    from .._requirements import Requested
    from .._results import Action
    from .._store.identity import DistId
    from .backends.run import Built
    from .staging import Staging

#: Step 5 done another way than by an installer (a tree's image in a registry): given the repo, its locks, the
#: tree, what it is installed from and its staging dir, fill the staged tree; what built it, how many distributions
#: went into the store.
Filler = Callable[["Layout", "TreeLocks", "TreeId", "Requested", "Staging"], "tuple[Built, int]"]


class Outcome(NamedTuple):
    """What making one tree exist took: its action, seconds waited for a peer, seconds installing."""

    action: Action
    waited: float = 0.0
    installing: float = 0.0
    #: Bytes in the installed tree (0 unless this call installed it).
    size: int = 0
    #: Distributions this call installed into the store (0: the tree was composed of stored ones alone).
    stored: int = 0


def ensure_tree(
    layout: Layout,
    locks: TreeLocks,
    options: InstallOptions | None,
    requested: Requested,
    tid: TreeId,
    resolved: Closure | None = None,
    checked: Collection[DistId] = (),
    filler: Filler | None = None,
    hashed: Hashed | None = None,
) -> Outcome:
    """Make the tree ``tid`` exist in the repo, installing it at most once cluster-wide; what it took.
    ``resolved``: its closure as its batch's one resolution found it (see :mod:`.fill.batch`), for a tree that has
    no lock or kept closure; ``checked``: the stored distributions its batch checked; ``filler``: step 5 from
    elsewhere than an installer (a registry's image); ``hashed``: what its batch's install hashed of the files it
    stored (see :class:`repoinstall._disk.dists.Hashed`), which this install's own hashes join."""
    from .fill.tree import fill
    from .locked import keep_closure, pinned
    from .preflight import refuse_obstacles
    from .staging import Staging

    clock = locks.clock
    # 1. Check, lock-free: a record AND the tree's METADATA naming it mean installed. No lock, no network. Then
    #    as the server has it now: an NFS client may still hold "missing" from before a peer published, or have
    #    looked below a handle another client replaced (which can read as "missing" rather than ESTALE).
    if in_use(layout, tid) or in_use(layout, tid, fresh=True):
        return Outcome("present")
    # 2. Lock, per tree: it only saves duplicate work. A peer's publish ends our wait at once (the tree is
    #    there); where no lock can be had, we go on without one, which stays correct (step 7). Before it, refuse
    #    what would stop the install only after the installer ran (a symlink where the record goes): nothing is
    #    created. A lock whose tree does not exist as we leave (we failed) goes with us, unless a peer is in it.
    refuse_obstacles(layout, tid, locking=locks.settings.enabled)
    with locks.hold(tree_key(tid), ready=Appeared(layout, tid), gone=lambda: missing(layout, tid)) as held:
        if held.peer_finished:
            return Outcome("waited", held.waited)
        # 3. Check again inside the lock: a peer may have finished while we waited, so look as the server has
        #    it now (an NFS client may still hold "missing" from before). A whole tree without a record (crash
        #    between steps 7 and 8) is re-recorded; anything broken at its path is set aside.
        if present(layout, tid, fresh=True):
            return Outcome("waited", held.waited)
        if (done := clear_for_install(layout, requested.text, tid)) is not None:
            return Outcome(done, held.waited)
        started = clock.now()
        # 4. Stage: a private dir under staging/ whose heartbeat keeps gc off it; nobody reads it.
        with Staging(layout, tid, locks.settings.heartbeat, hashed) as staging:
            # 5. Install: the installer writes only into the staging dir (its TMPDIR too). A set installed
            #    together is its metapackage's wheel, written to the installer's scratch dir. A lock file's tree,
            #    and a tree installed here before (its kept closure), are exactly their artifacts, hash-checked.
            installing_from = requested
            try:
                installing_from, expected = pinned(layout, requested, tid, resolved)
                if filler is not None:
                    opts = options or InstallOptions()
                    built, stored = _from_source(filler, layout, locks, opts, tid, installing_from, staging, checked)
                else:
                    built, stored = fill(
                        layout, locks, options or InstallOptions(), tid, installing_from, staging, checked
                    )
                _stop.check()  # stopping: an installer that finished just now is not verified and published either
                # 6. Verify the staged tree: our dist-info is there and every file matches its RECORD hash (and a
                #    pinned tree holds exactly the distributions it was pinned to).
                entry, size = staging.verified_entry(requested, built, expected)
            except InstallError as error:
                # An installer (or a check) that failed because our staging dir was taken from under it is no
                # verdict on the package: ESTALE, and the protocol runs again in a new staging dir.
                if staging.lost():
                    raise staging.lost_error() from None
                if isinstance(error, ArtifactGone) and installing_from is not requested:
                    # Pinned by the tree's kept closure, not by a lock the user gave: say how to resolve afresh.
                    raise ArtifactGone(
                        f"{error}; this tree's kept closure names it: `repoinstall remove {tid} --forget` lets the "
                        "next install resolve afresh"
                    ) from None
                raise
            # 7. Publish: the rename is the commit point; it never replaces what is there. After a lost lease
            #    a peer may be publishing this very tree: if anything is at its path, theirs stands.
            taken = held.lease_lost and check(layout, tid, fresh=True).state is not State.MISSING
            published = not taken and staging.publish()
        installing = clock.now() - started
        if not published:
            # A peer published first (our lease lapsed, or no lock): use theirs once it checks out.
            if not adopt(layout, requested.text, tid):
                raise InstallError(f"{tid}: {layout.tree_path(tid)} is taken by something that is not a valid tree")
            _log.logger().info("%s: a peer published it first; using theirs", tid)
            return Outcome("waited", held.waited, installing)
        # 8. Record, after the commit point: a crash before this write leaves an unrecorded tree, which
        #    step 3 of the next ensure re-records from its RECORD hashes, without an installer.
        _manifest.write(layout, tid, entry)
        # Then its closure is kept, once, for whoever installs this tree again (see _disk.closures).
        keep_closure(
            layout, tid, entry, pinned_before=expected is not None and not requested.locked and resolved is None
        )
        return Outcome("installed", held.waited, installing, size, stored)


def _from_source(
    filler: Filler,
    layout: Layout,
    locks: TreeLocks,
    options: InstallOptions,
    tid: TreeId,
    requested: Requested,
    staging: Staging,
    checked: Collection[DistId],
) -> tuple[Built, int]:
    """Step 5 from a registry's image. Refused, nothing of it was stored (it publishes once every layer passed):
    installed from the index instead where one is allowed, with a warning naming the refusal. With ``--no-index``
    (no find-links) the refusal is the answer, and it is the answer too if the index fails: an attack is never
    hidden."""
    from .fill.tree import fill

    try:
        return filler(layout, locks, tid, requested, staging)
    except SourceRefused as refusal:
        if not options.index_allowed() or os.path.lexists(staging.target):
            raise  # no index to ask, or refused while composing (a layer fetched again): the refusal is the answer
        _log.logger().warning("%s; installing %s from the index instead", refusal, tid)
        try:
            return fill(layout, locks, options, tid, requested, staging, checked)
        except InstallError as error:
            raise InstallError(f"{refusal}; installing it from the index instead failed: {error}") from None
