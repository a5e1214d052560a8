"""Deep verification of trees: every RECORD hash and size, files nobody recorded, and the manifest record."""

from __future__ import annotations

import os
from typing import NamedTuple

from .._disk import fs as _fs
from .._disk.check import State, check, unreadable
from .._disk.dists import Hashed, RecordProblems, check_tree, scan
from .._disk.identity import TreeId, has_bytecode
from .._disk.layout import Layout
from .._disk.manifest import recorded_dists

#: Report statuses, worst last. UNREADABLE: this process may not read the tree or its record (another UID's).
OK, UNRECORDED, CHANGED, BROKEN, MISSING = "ok", "unrecorded", "changed", "broken", "missing"
UNREADABLE = "unreadable"
#: What verify says of a store entry that repoinstall 0.4.0 named from a registry's annotation, and of the trees
#: composed from it: its files check out against a RECORD the registry wrote, but nothing proves it is the wheel
#: its name says. --repair sets it aside and reinstalls those trees.
UNPROVEN = (
    "named by the wheel sha256 a registry's annotation claimed (a pull by repoinstall 0.4.0), never proven to be "
    "that wheel: --repair sets it aside and reinstalls the trees composed from it"
)


class TreeReport(NamedTuple):
    """What ``verify`` found for one tree."""

    tid: TreeId
    path: str
    status: str
    problems: RecordProblems
    notes: tuple[str, ...] = ()
    #: Composed from a stored distribution that repoinstall 0.4.0 named from a registry's annotation: whole as its
    #: RECORD says, and reinstalled by ``--repair`` all the same.
    unproven: bool = False

    @property
    def ok(self) -> bool:
        return self.status == OK

    def as_dict(self) -> dict[str, object]:
        return {
            "tree": self.tid.pin,
            "env": self.tid.env,
            "path": self.path,
            "status": self.status,
            "missing": list(self.problems.missing),
            "changed": list(self.problems.changed),
            "extra": list(self.problems.extra),
            "bytecode": list(self.problems.bytecode),
            "compiled": list(self.problems.compiled),
            "notes": list(self.notes),
        }


def verify(layout: Layout, tid: TreeId, hashed: Hashed | None = None) -> TreeReport:
    """Check one tree file by file. Reads only; takes no lock (a published tree never changes). A tree or record
    this process may not read is reported UNREADABLE, naming what and why: the other trees go on. ``hashed``: the
    hashed of files linked from the store, taken while checking other trees of the same run."""
    try:
        return _verify(layout, tid, hashed)
    except _fs.Unreadable as error:
        problem = error
    except PermissionError as error:  # below the tree, where the check does not look
        problem = unreadable(layout, tid, error)
    return TreeReport(tid, layout.tree_path(tid), UNREADABLE, RecordProblems(), (str(problem),))


def _verify(layout: Layout, tid: TreeId, hashed: Hashed | None) -> TreeReport:
    path = layout.tree_path(tid)
    status = check(layout, tid)
    if status.state is State.MISSING:
        note = "a record names this tree but it is not there" if status.record else "not installed"
        return TreeReport(tid, path, MISSING, RecordProblems(), (note,))
    if status.state is State.BROKEN:
        return TreeReport(tid, path, BROKEN, RecordProblems(), ("no dist-info names this project and version",))
    root = layout.root_fd()
    tree = None if root is None else _fs.open_dir(root, (*layout.tree_dir(tid), tid.leaf))
    if tree is None:  # removed since the check
        return TreeReport(tid, path, MISSING, RecordProblems(), ("removed while being verified",))
    try:
        dists = scan(tree)
        problems = check_tree(tree, dists, hashed=hashed, bytecode=has_bytecode(tid.env))
    finally:
        os.close(tree)
    mismatched: list[str] = []  # the manifest record and the tree disagree on which dists are there
    if status.state is State.PRESENT and status.record is not None:
        recorded = {(d.get("name"), d.get("version"), d.get("dist_info")) for d in recorded_dists(status.record)}
        present = {(d.name, d.version, d.dist_info) for d in dists}
        mismatched += [f"recorded but not in the tree: {n}=={v}" for n, v, _ in sorted(recorded - present, key=str)]
        mismatched += [f"in the tree but not recorded: {n}=={v}" for n, v, _ in sorted(present - recorded, key=str)]
    notes = list(mismatched)
    if status.state is State.UNRECORDED:
        notes.append("no manifest record (a crash between publish and record?)")
    if problems.bytecode:
        # A worker running ``python -O`` on a writable mount writes *.opt-1.pyc: reported, not a fault of the tree.
        notes.append(f"{len(problems.bytecode)} unrecorded bytecode file(s), e.g. {problems.bytecode[0]} (harmless)")
    if problems or mismatched:
        return TreeReport(tid, path, CHANGED, problems, tuple(notes))
    if status.state is State.UNRECORDED:
        return TreeReport(tid, path, UNRECORDED, problems, tuple(notes))
    return TreeReport(tid, path, OK, problems, tuple(notes))


def every_tree(layout: Layout) -> list[TreeId]:
    """Every tree the repo has a record or a directory of, all environments, as its record spells it."""
    from .._disk.layout import RECORDS, TREES

    try:
        seen = set(layout.discover(RECORDS)) | set(layout.discover(TREES))
    except PermissionError as error:  # a records/ or trees/ directory of another UID's, not a tree
        raise _fs.denied(layout.root, error, (RECORDS,), (TREES,)) from None
    return [_spelled(layout, t) for t in sorted(seen, key=lambda t: (t.env, t.name, t.version, t.extras))]


def _spelled(layout: Layout, tid: TreeId) -> TreeId:
    from .._disk.manifest import as_recorded

    try:
        return as_recorded(layout, tid)
    except PermissionError:
        return tid  # a record this process may not read: verify reports the tree as unreadable


def unproven(report: TreeReport) -> TreeReport:
    """``report`` of a tree composed from an annotation-named stored distribution: broken, whole as it looks."""
    if report.status in (MISSING, UNREADABLE):
        return report
    return report._replace(status=BROKEN, notes=(*report.notes, UNPROVEN), unproven=True)
