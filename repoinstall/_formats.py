"""Which formats of a project may be installed: pip's ``--no-binary`` and ``--only-binary``, as one value.

pip reads each value (``:all:``, ``:none:``, project names, comma-separated) in turn: a name moves to the list
given last, ``:all:`` empties both lists and stands alone in its own, ``:none:`` empties its list. A project named
in only-binary takes wheels only, one named in no-binary source distributions only; else ``:all:`` in either
decides, only-binary's first. repoinstall's own choice of a version for an unpinned spec keeps to the same rule,
so the tree it names is the one the installer can install.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import NamedTuple

NO_BINARY = "no-binary"
ONLY_BINARY = "only-binary"


class Formats(NamedTuple):
    no_binary: frozenset[str] = frozenset()
    only_binary: frozenset[str] = frozenset()

    @classmethod
    def of(cls, given: Iterable[tuple[str, str]]) -> Formats:
        """The lists after each ``(NO_BINARY or ONLY_BINARY, value)`` in turn, as pip reads its options."""
        from packaging.utils import canonicalize_name

        lists: dict[str, set[str]] = {NO_BINARY: set(), ONLY_BINARY: set()}
        for flag, value in given:
            target, other = lists[flag], lists[ONLY_BINARY if flag == NO_BINARY else NO_BINARY]
            names = [part.strip() for part in value.replace(" ", ",").split(",") if part.strip()]
            for name in names:
                if name == ":all:":
                    other.clear()
                    target.clear()
                    target.add(":all:")
                elif name == ":none:":
                    target.clear()
                else:
                    other.discard(canonicalize_name(name))
                    target.add(canonicalize_name(name))
        return cls(frozenset(lists[NO_BINARY]), frozenset(lists[ONLY_BINARY]))

    def allows(self, project: str, *, wheel: bool) -> bool:
        """Whether a wheel (``wheel``) or a source distribution of the canonical ``project`` may be installed."""
        if project in self.only_binary:
            return wheel
        if project in self.no_binary:
            return not wheel
        if ":all:" in self.only_binary:
            return wheel
        if ":all:" in self.no_binary:
            return not wheel
        return True
