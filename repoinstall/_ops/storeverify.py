"""Deep verification of the store: every stored distribution's files against its RECORD, each named with the
trees whose records name it (a file changed in place in the store is changed in each of them too: one inode), and
anything else at a stored distribution's path (a file, a FIFO, a symlink: :mod:`repoinstall._store.strays`).
"""

from __future__ import annotations

from typing import NamedTuple

from .._disk import fs as _fs
from .._disk.dists import RecordProblems
from .._disk.identity import TreeId
from .._disk.layout import Layout
from .._disk.things import Thing
from .._store import audit as _audit
from .._store import digests, strays
from .._store.identity import is_layer_leaf
from .._store.inventory import Stored, every, holders
from .verify import BROKEN, CHANGED, MISSING, OK, UNPROVEN, UNREADABLE


class DistReport(NamedTuple):
    """What ``verify`` found for one stored distribution."""

    stored: Stored
    path: str
    status: str
    problems: RecordProblems
    #: The trees whose records name this distribution's artifact (composed from it), as pins.
    trees: tuple[TreeId, ...] = ()
    notes: tuple[str, ...] = ()
    #: ``name==version`` as its dist-info says, when one names it.
    dist: str = ""
    #: Named from a registry's annotation by repoinstall 0.4.0, never proven to be that wheel: ``--repair`` sets
    #: it aside and reinstalls the trees composed from it.
    unproven: bool = False

    @property
    def ok(self) -> bool:
        return self.status == OK

    def as_dict(self) -> dict[str, object]:
        return {
            "dist": self.dist or self.stored.name,
            "env": self.stored.env,
            "stored": self.stored.leaf,
            "path": self.path,
            "status": self.status,
            "missing": list(self.problems.missing),
            "changed": list(self.problems.changed),
            "extra": list(self.problems.extra),
            "compiled": list(self.problems.compiled),
            "trees": [t.pin for t in self.trees],
            "notes": list(self.notes),
            "provenance": "registry" if is_layer_leaf(self.stored.leaf) else "wheel",
        }

    def __str__(self) -> str:
        return f"{self.dist or self.stored.name} (store/{self.stored.env}/{self.stored.name}/{self.stored.leaf})"


def verify_store(layout: Layout, trees: list[TreeId], only: list[TreeId] | None = None) -> list[DistReport]:
    """Check the stored distributions: all of them, or (``only``) those these trees are composed from. Each
    report names the trees, of ``trees`` (every tree of the repo, say), composed from it."""
    held = holders(layout, trees)
    if only is None:
        wanted = sorted({*every(layout), *(stray for stray, _ in strays.every(layout))})
    else:
        wanted = sorted(set(holders(layout, only)))
    named = annotation_named(layout, trees)
    reports = [verify_one(layout, stored, tuple(held.get(stored, ()))) for stored in wanted]
    return [
        report._replace(status=BROKEN, notes=(*report.notes, UNPROVEN), unproven=True)
        if report.stored in named and report.status in (OK, CHANGED)
        else report
        for report in reports
    ]


def annotation_named(layout: Layout, trees: list[TreeId]) -> set[Stored]:
    """The stored distributions that repoinstall 0.4.0 stored from a registry's layers, named by the wheel sha256
    their annotations claimed: those a pulled tree's record (installer ``oci-image``) names by a ``sha256``, where
    this release records a layer's ``diff_id`` instead."""
    from .._disk.manifest import read, recorded_dists
    from .._oci.pull import INSTALLER
    from .._store.identity import of_row

    found: set[Stored] = set()
    for tid in trees:
        try:
            record = read(layout, tid)
        except (PermissionError, _fs.Unreadable):
            continue  # another UID's record: verify reports that tree as unreadable
        if record is None or record.installer != INSTALLER:
            continue
        for row in recorded_dists(record):
            dist = of_row(tid.env, row)
            if dist is not None and not dist.layer:
                found.add(Stored.of(dist))
    return found


def verify_one(layout: Layout, stored: Stored, trees: tuple[TreeId, ...] = ()) -> DistReport:
    """Check one stored distribution file by file. Reads only; takes no lock (it never changes once stored)."""
    path = layout.path(*stored.parts())
    thing = strays.at_entry(layout, stored)
    if thing is not None:
        # Not a stored distribution at all: what stands at its path, named (a stray is set aside by --repair).
        whose = "never followed: remove it" if thing is Thing.SYMLINK else "--repair sets it aside"
        note = f"{thing.named} where a stored distribution belongs ({whose})"
        return DistReport(stored, path, BROKEN, RecordProblems(), trees, (note,))
    try:
        found = _audit.check(layout, stored)
    except (_fs.Unreadable, PermissionError) as error:
        return DistReport(stored, path, UNREADABLE, RecordProblems(), trees, (str(error),))
    if found is None:
        return DistReport(stored, path, MISSING, RecordProblems(), trees, ("not in the store",))
    if found.broken is not None or found.dist is None:
        return DistReport(stored, path, BROKEN, RecordProblems(), trees, (found.broken or "no dist-info",))
    named = f"{found.dist.name}=={found.dist.version}"
    notes: tuple[str, ...] = ()
    if found.problems.bytecode:
        notes = (f"{len(found.problems.bytecode)} unrecorded bytecode file(s) (harmless)",)
    if found.problems:
        return DistReport(stored, path, CHANGED, found.problems, trees, notes, named)
    if found.untrusted is not None:
        return DistReport(stored, path, CHANGED, found.problems, trees, (*notes, found.untrusted), named)
    if digests.kept(layout, stored) is None:
        notes = (
            *notes,
            "no RECORD digest kept (stored by an earlier release): a RECORD changed with its files is not seen",
        )
    return DistReport(stored, path, OK, found.problems, trees, notes, named)
