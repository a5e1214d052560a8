"""What an ensure would do, with nothing done (``ensure --dry-run``): which trees are there, and for each missing one
the distributions it would hold, which of them the store has, which it would store and which it would download.

Nothing in the repo is written, created or locked: a tree is looked up as ``path`` looks it up (the installed
trees only, no index), a stored distribution as the store answers ``present``. A lock file's tree holds what the
lock pins; any other tree what the installer resolves for it, in a temporary directory outside the repo (pip's
``install --dry-run --report``, uv's ``pip compile``, as a batch is resolved), which may fill the installer's own
download cache as any resolution does.
"""

from __future__ import annotations

import tempfile
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any, Literal, NamedTuple

from .._errors import NotInstalled
from .._options import for_file

if TYPE_CHECKING:
    from .._disk.layout import Layout
    from .._disk.pin import Pin
    from .._options import InstallOptions
    from .._requirements import Requested

PlanAction = Literal["present", "install", "skipped", "unresolved"]


class PlannedDist(NamedTuple):
    """One distribution a missing tree would hold."""

    name: str
    version: str
    sha256: str | None  # ``None``: the input names several files (hashed requirements): the installer picks one
    url: str  # credentials removed; "" where the input names none
    stored: bool  # the store has it already: linked, not installed
    download: bool  # not stored and not a local file: fetched from an index or URL

    def as_dict(self) -> dict[str, Any]:
        return self._asdict()


class Planned(NamedTuple):
    """What ensure would do for one requirement."""

    requirement: str
    action: PlanAction
    path: str | None = None  # a present tree's
    dists: tuple[PlannedDist, ...] = ()
    reason: str = ""  # why it is unresolved

    def as_dict(self) -> dict[str, Any]:
        return {**self._asdict(), "dists": [d.as_dict() for d in self.dists]}


def plan(
    layout: Layout, env: str, options: InstallOptions, wanted: Sequence[Requested], path_of: Callable[[Requested], str]
) -> list[Planned]:
    """What ensuring ``wanted`` would do; ``path_of`` is the installed tree's path (:class:`NotInstalled` if none)."""
    planned = []
    for requested in wanted:
        if not requested.marker_applies():
            planned.append(Planned(requested.text, "skipped"))
            continue
        try:
            planned.append(Planned(requested.text, "present", path_of(requested)))
            continue
        except NotInstalled:
            pass
        # Resolved with its requirements file's index lines, as its install would be.
        pins = list(requested.locked) or _resolved(for_file(options, requested.file_index) or options, requested)
        if pins is None:
            reason = f"{options.installer} could not resolve it (run without --dry-run to see why)"
            planned.append(Planned(requested.text, "unresolved", reason=reason))
            continue
        planned.append(Planned(requested.text, "install", dists=tuple(_dist(layout, env, pin) for pin in pins)))
    return planned


def _resolved(options: InstallOptions, requested: Requested) -> list[Pin] | None:
    from .._install.resolve import resolve

    with tempfile.TemporaryDirectory(prefix="repoinstall-plan-") as scratch:  # outside the repo, gone after
        return resolve(options, [requested.text], scratch, requested.text)


def _dist(layout: Layout, env: str, pin: Pin) -> PlannedDist:
    from .._store import store as _store
    from .._store.identity import DistId

    if pin.sha256 is None:  # ``name==version --hash ... --hash ...``: one of several files
        return PlannedDist(pin.name, pin.version, None, "", False, True)
    stored = _store.present(layout, DistId.of(env, pin.name, pin.version, pin.sha256))
    local = pin.url.startswith("file:")
    return PlannedDist(pin.name, pin.version, pin.sha256, pin.public().url, stored, not stored and not local)
