"""Deep verification of trees: every RECORD hash and size, files nobody recorded, and the manifest record."""

from __future__ import annotations

from typing import NamedTuple

from ._check import State, check
from ._dists import RecordProblems, check_tree, scan
from ._identity import TreeId
from ._layout import Layout

#: Report statuses, worst last.
OK, UNRECORDED, CHANGED, BROKEN, MISSING = "ok", "unrecorded", "changed", "broken", "missing"


class TreeReport(NamedTuple):
    """What ``verify`` found for one tree."""

    tid: TreeId
    path: str
    status: str
    problems: RecordProblems
    notes: tuple[str, ...] = ()

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
            "notes": list(self.notes),
        }


def verify(layout: Layout, tid: TreeId) -> TreeReport:
    """Check one tree file by file. Reads only; takes no lock (a published tree never changes)."""
    path = layout.tree_path(tid)
    status = check(layout, tid)
    if status.state is State.MISSING:
        note = "a record names this tree but it is not there" if status.record else "not installed"
        return TreeReport(tid, path, MISSING, RecordProblems(), (note,))
    if status.state is State.BROKEN:
        return TreeReport(tid, path, BROKEN, RecordProblems(), ("no dist-info names this project and version",))
    dists = scan(path)
    problems = check_tree(path, dists)
    notes: list[str] = []
    if status.state is State.UNRECORDED:
        notes.append("no manifest record (a crash between publish and record?)")
    elif status.record is not None:
        recorded = {(d.get("name"), d.get("version"), d.get("dist_info")) for d in status.record.dists}
        present = {(d.name, d.version, d.dist_info) for d in dists}
        notes += [f"recorded but not in the tree: {n}=={v}" for n, v, _ in sorted(recorded - present, key=str)]
        notes += [f"in the tree but not recorded: {n}=={v}" for n, v, _ in sorted(present - recorded, key=str)]
    if problems or (notes and status.state is State.PRESENT):
        return TreeReport(tid, path, CHANGED, problems, tuple(notes))
    if status.state is State.UNRECORDED:
        return TreeReport(tid, path, UNRECORDED, problems, tuple(notes))
    return TreeReport(tid, path, OK, problems, tuple(notes))
