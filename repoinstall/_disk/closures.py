"""What each tree was installed from, kept so that it comes back the same: ``closures/<env>/<name>/<leaf>.json``.

When a tree is first recorded with every distribution's artifact known (its sha256, and the URL it came from),
its closure is written here: one pin per distribution (kept as the requirement line an installer reads,
``name @ URL --hash=sha256:...``, beside its ``name==version``: see :mod:`.pin`). From then
on, whoever installs that tree again (``verify --repair``, an ensure after ``gc`` or ``remove`` took it away)
installs exactly those pins with ``--no-deps --require-hashes``: the same versions from the same artifacts,
never a fresh resolution that might pick a newer dependency. A closure is small and is never removed with its
tree; ``remove --forget`` drops it with the tree, for the one who wants the next install resolved afresh.

Writers of one tree's closure all write what the published tree holds (step 8 of the protocol, after the rename
that is the commit point), so the last write wins with the same content; a reader sees a whole file or none
(written by rename).
"""

from __future__ import annotations

import json
import os
from typing import TYPE_CHECKING, Any, NamedTuple

from . import fs as _fs
from .identity import TreeId, canonical_name
from .layout import CLOSURES, Layout
from .pin import Pin, pins_of

if TYPE_CHECKING:
    from .manifest import Artifact, TreeEntry

_SUFFIX = ".json"


class Closure(NamedTuple):
    """The pins a tree is installed from: one per distribution, sorted."""

    pins: tuple[Pin, ...]

    @property
    def members(self) -> tuple[str, ...]:
        """``name==version`` of each distribution, sorted."""
        return tuple(sorted(pin.member for pin in self.pins))


def of_record(tid: TreeId, record: TreeEntry) -> Closure | None:
    """The closure a record describes, or ``None`` if some distribution's artifact is not known (no sha256 or
    URL: installed before records held them, or by an installer that could not say). A set's or lock's own
    metapackage is not in it: repoinstall makes that one itself."""
    from .manifest import recorded_dists

    pins = []
    for row in recorded_dists(record):
        name = canonical_name(row.get("name", ""))
        if tid.kind.own_metapackage and name == tid.name:
            continue
        url, sha256, version = row.get("url", ""), row.get("sha256", ""), row.get("version", "")
        if not (name and sha256 and version) or any(c.isspace() for c in url + sha256 + version):
            return None
        # From where it came; from the index, by its version and hash, when no URL was reported.
        pins.append(Pin(name, version, url, (f"sha256:{sha256}",)))
    return Closure(tuple(sorted(pins))) if pins else None


def artifacts(closure: Closure) -> tuple[Artifact, ...]:
    """The artifact of each distribution ``closure`` names (its version, sha256 and URL from its pin), for a
    record re-made without an installer: what the tree was installed from, as first recorded."""
    from .manifest import Artifact

    return tuple(Artifact(pin.name, pin.version, pin.sha256, pin.url) for pin in closure.pins if pin.sha256)


def write(layout: Layout, tid: TreeId, closure: Closure) -> None:
    """Keep ``closure`` as ``tid``'s (atomically; the same content from every writer of one tree)."""
    lines = sorted(pin.line() for pin in closure.pins)
    data = json.dumps({"lines": lines, "members": list(closure.members)}, indent=1) + "\n"
    directory = _fs.make_dirs(layout.writable_fd(), (CLOSURES, tid.env, tid.name), layout.root)
    try:
        _fs.write_atomic(directory, tid.leaf + _SUFFIX, data.encode())
    finally:
        os.close(directory)


def read(layout: Layout, tid: TreeId) -> Closure | None:
    """``tid``'s kept closure, ``None`` if there is none (or it is not one: then the tree is resolved afresh)."""
    root = layout.root_fd()
    if root is None:
        return None
    data = _fs.read_file(root, (CLOSURES, tid.env, tid.name, tid.leaf + _SUFFIX))
    try:
        document: Any = json.loads(data or b"")
        lines, members = document["lines"], document["members"]
    except (ValueError, KeyError, TypeError):
        return None
    if all(type(v) is list and v and all(type(s) is str and s.strip() == s for s in v) for v in (lines, members)):
        pins = pins_of(lines, members)
        return None if pins is None else Closure(tuple(sorted(pins)))
    return None


def forget(layout: Layout, tid: TreeId) -> None:
    """Drop ``tid``'s kept closure (``remove --forget``): its next install resolves afresh."""
    root = layout.root_fd()
    directory = None if root is None else _fs.open_dir(root, (CLOSURES, tid.env, tid.name))
    if directory is not None:
        try:
            _fs.unlink(directory, tid.leaf + _SUFFIX)
        finally:
            os.close(directory)
