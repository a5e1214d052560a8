"""A tree composed from the store while gc may take from it: a live ensure never fails because of gc.

gc removes a stored distribution that no tree holds (no record names it, no file of it has a second link) once it
is old enough, under its lock taken without waiting (:mod:`repoinstall._ops.gcstore`). An ensure composes a tree
from stored distributions lock-free: looking one up, then linking its files, is not atomic against that, so gc
can take a distribution between the two (one whose last tree was just removed, say), and the compose then finds
it gone (:class:`~repoinstall._store.compose.Taken`). Taking every distribution's lock for every compose would
cost the warm path a lock per distribution; gc taking one from under a compose is rare. So:

Invariant: **a compose that finds a stored distribution taken composes again, holding the lock of every
distribution of the tree, after storing again whatever is missing.** gc removes a stored distribution only
holding its lock (taken without waiting: it never waits for us), and re-checks under it that no file of it is
linked; so while we hold them, nothing of this tree is taken, and once our links exist gc keeps what they link.
A compose that found nothing taken needs no lock: it checked, after linking, that each stored dir was still at its
path (gc renames before it deletes, so the links it made are of whole files). Only ``--no-lock`` (ours or gc's),
or a lock that cannot be had here, leaves the second compose unguarded: it is tried :data:`_ATTEMPTS` times.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING

from ... import _log
from ..._errors import InstallError
from ..._store import store as _store
from ..._store.compose import Composed, Taken, compose
from ..._store.identity import DistId

if TYPE_CHECKING:
    from ..._disk.layout import Layout
    from ..._lock.locks import TreeLocks

#: Composes of one tree, the first lock-free and the others holding every distribution's lock.
_ATTEMPTS = 3

#: Stores again the distributions gc took (the caller holds their locks): given them and a new scratch dir name.
Restore = Callable[[Sequence[DistId], str], None]


def compose_stored(
    layout: Layout,
    locks: TreeLocks,
    dists: Sequence[DistId],
    target: str,
    scratch: str,
    restore: Restore,
    what: str,
) -> tuple[Composed, int]:
    """Compose ``target`` of the stored ``dists`` (see the module's docstring); what it took, and how many
    distributions were stored again because gc took them meanwhile. ``scratch``: a private dir, where a tree
    composed short of a taken distribution is moved out of the way."""
    paths = {_store.path(layout, dist): dist for dist in dists}
    restored = 0
    for attempt in range(1, _ATTEMPTS + 1):
        with contextlib.ExitStack() as held:
            if attempt > 1:
                for dist in sorted(set(dists)):  # in DistId order, as every holder of several: never a circle
                    held.enter_context(locks.hold(dist.lock_key(), gone=_always))
                gone = [dist for dist in dists if not _store.present(layout, dist)]
                restore(gone, os.path.join(scratch, f"restore-{attempt}"))
                restored += len(gone)
            try:
                return compose(target, [(str(dist), path) for path, dist in paths.items()]), restored
            except Taken as taken:
                _log.logger().info(
                    "%s: %s was taken out of the store (by gc) while this tree was composed from it; storing it "
                    "again and composing anew, holding the lock of each distribution",
                    what,
                    paths[taken.stored],
                )
                with contextlib.suppress(FileNotFoundError):  # nothing linked yet: nothing made
                    os.rename(target, os.path.join(scratch, f"taken-{attempt}"))
    raise InstallError(
        f"{what}: its distributions were taken out of the store (by gc) at each of {_ATTEMPTS} composes; "
        "no lock keeps gc out here (--no-lock)"
    )


def _always() -> bool:
    return True
