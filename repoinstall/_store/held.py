"""Which stored distributions the trees' records name: what gc keeps, whatever the filesystem does with links.

A tree's record lists every distribution it holds (``dists``), each with its artifact's ``sha256`` where the
installer said it: that is the stored distribution ``store/<env>/<name>/<canonical version>-<sha16>/``. A row
without a hash (a record older than the store, or an installer that did not say) cannot name one artifact, so it
holds every stored artifact of its version; a row whose version does not parse, every stored version of its
name. Holding more than needed only keeps bytes a later gc frees; holding less would empty a tree's source.
"""

from __future__ import annotations

from typing import NamedTuple

from packaging.version import InvalidVersion, Version

from .._disk import manifest as _manifest
from .._disk.identity import canonical_name, canonical_version
from .._disk.layout import RECORDS, Layout
from .identity import of_row, split_leaf

#: What a record row holds, keyed by ``(env, canonical name)``: a leaf, ``v:<canonical version>``, or ``*``.
_EVERY = "*"


class Held(NamedTuple):
    """The stored distributions the repo's records name, by ``(env, canonical name)``."""

    named: dict[tuple[str, str], frozenset[str]]
    #: How many records were read (garbage ones, which name nothing, left out).
    records: int

    def holds(self, env: str, name: str, leaf: str) -> bool:
        marks = self.named.get((env, name))
        if not marks:
            return False
        if leaf in marks or _EVERY in marks:
            return True
        parsed = split_leaf(leaf)
        return parsed is not None and f"v:{parsed[0]}" in marks


def held(layout: Layout) -> Held:
    """What every record in the repo (every environment) names. :class:`PermissionError` if a record cannot be read
    (another UID's): then nothing can be proven unheld, and the caller leaves the store alone."""
    named: dict[tuple[str, str], set[str]] = {}
    records = 0
    for tid in layout.discover(RECORDS):
        entry = _manifest.read(layout, tid)
        if entry is None:
            continue  # gone, or garbage: its tree, if any, still holds its files by their links
        records += 1
        for row in _manifest.recorded_dists(entry):
            name = row.get("name")
            if not name:
                continue
            named.setdefault((tid.env, canonical_name(name)), set()).add(_mark(tid.env, row))
    return Held({key: frozenset(marks) for key, marks in named.items()}, records)


def _mark(env: str, row: dict[str, str]) -> str:
    """What one ``dists`` row holds: its stored distribution's leaf, or every artifact of its version, or all."""
    try:
        version = canonical_version(Version(row.get("version", "")))
    except InvalidVersion:
        return _EVERY
    named = of_row(env, row)
    if named is not None and split_leaf(named.leaf) is not None:
        return named.leaf
    return f"v:{version}"
