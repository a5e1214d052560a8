"""Which of a resolved set of distributions one tree holds: its root and everything the root's ``Requires-Dist``
reaches, with markers evaluated for the tree's interpreter (extras included, as an installer follows them).

The set is one installer's resolution of a whole batch (every tree's pin at once), so each name in it has one
version, and each tree's part of it is closed under its requirements. A requirement that names nothing in the
set means the set is not one resolution of these roots: ``None``, and the caller installs the tree on its own.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping
from email.parser import HeaderParser

from packaging.markers import InvalidMarker, UndefinedComparison, UndefinedEnvironmentName
from packaging.requirements import InvalidRequirement, Requirement
from packaging.specifiers import SpecifierSet

from .._disk.dists import scan
from .._disk.identity import canonical_name


def requirements(stored: str) -> tuple[list[Requirement], str | None] | None:
    """The ``Requires-Dist`` and ``Requires-Python`` (``None``: it sets none) of the one distribution in the dir
    ``stored`` (``None`` if unreadable)."""
    found = scan(stored)
    if len(found) != 1:
        return None
    try:
        with open(os.path.join(stored, found[0].dist_info, "METADATA"), encoding="utf-8", errors="replace") as handle:
            headers = HeaderParser().parse(handle)
        return [Requirement(line) for line in headers.get_all("Requires-Dist") or []], headers.get("Requires-Python")
    except (OSError, InvalidRequirement):
        return None


def closure(
    root: str, extras: Iterable[str], needs: Mapping[str, list[Requirement]], environment: Mapping[str, str]
) -> dict[str, SpecifierSet] | None:
    """The canonical names the tree of ``root[extras]`` holds, within the resolved set whose ``needs`` are each
    member's requirements (by canonical name), each with what the tree's own requirements ask of it (its root:
    nothing); ``None`` if a requirement of the tree names nothing in the set."""
    held: dict[str, set[str]] = {}  # name -> the extras followed for it ("": its base requirements)
    asked: dict[str, SpecifierSet] = {canonical_name(root): SpecifierSet()}
    todo = [(canonical_name(root), {""} | {canonical_name(e) for e in extras})]
    while todo:
        name, contexts = todo.pop()
        if name not in needs:
            return None
        followed = held.setdefault(name, set())
        new = contexts - followed
        if not new:
            continue
        followed |= new
        for requirement in needs[name]:
            if any(_applies(requirement, environment, extra) for extra in new):
                wanted = canonical_name(requirement.name)
                asked[wanted] = asked.get(wanted, SpecifierSet()) & requirement.specifier
                todo.append((wanted, {""} | {canonical_name(e) for e in requirement.extras}))
    return {name: asked.get(name, SpecifierSet()) for name in held}


def _applies(requirement: Requirement, environment: Mapping[str, str], extra: str) -> bool:
    if requirement.marker is None:
        return extra == ""
    try:
        return requirement.marker.evaluate({**environment, "extra": extra})
    except (InvalidMarker, UndefinedComparison, UndefinedEnvironmentName):
        return False
