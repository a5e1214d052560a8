"""repoinstall: install Python packages once into a repo directory that many pods share.

The public API is :class:`Repo`, its result and event types, and the exceptions; everything else is private.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ._errors import (
    ActivationConflict,
    InstallError,
    InvalidInput,
    InvalidRequirement,
    IsolatedCallError,
    LockTimeout,
    NotInstalled,
    RepoinstallError,
    RepoUnusable,
    RequirementsFileError,
    ResolutionError,
    SourceRefused,
    TreesConflict,
)
from ._options import InstallOptions, LockSettings
from ._repo import Repo
from ._results import EnsureResult, Event
from ._version import __version__

if TYPE_CHECKING:
    from ._disk.dists import RecordProblems
    from ._disk.identity import TreeId, TreeKind
    from ._disk.inway import Obstacle
    from ._disk.manifest import TreeEntry
    from ._disk.pin import Pin
    from ._disk.things import Thing
    from ._oci.push import Pushed
    from ._oci.reference import Reference
    from ._oci.settings import RegistrySettings
    from ._ops.checkup import Repaired, Verification
    from ._ops.doctor import Finding
    from ._ops.gc import Removal
    from ._ops.lockinfo import LockInfo
    from ._ops.plan import Planned, PlannedDist
    from ._ops.remove import Removed
    from ._ops.storeverify import DistReport
    from ._ops.verify import TreeReport
    from ._options import FileIndex
    from ._requirements import Requested
    from ._store.inventory import Stored
    from ._store.usage import StoreUsage

#: What verify, gc, remove, locks, doctor, list, plan and store_usage return, and every other type a public signature
#: names: importable from here, loaded on first use (the warm path never needs them).
_LAZY = {
    "DistReport": "._ops.storeverify",
    "FileIndex": "._options",
    "Finding": "._ops.doctor",
    "LockInfo": "._ops.lockinfo",
    "Obstacle": "._disk.inway",
    "Pin": "._disk.pin",
    "Planned": "._ops.plan",
    "PlannedDist": "._ops.plan",
    "Pushed": "._oci.push",
    "RecordProblems": "._disk.dists",
    "Reference": "._oci.reference",
    "RegistrySettings": "._oci.settings",
    "Removal": "._ops.gc",
    "Removed": "._ops.remove",
    "Repaired": "._ops.checkup",
    "Requested": "._requirements",
    "StoreUsage": "._store.usage",
    "Stored": "._store.inventory",
    "Thing": "._disk.things",
    "TreeEntry": "._disk.manifest",
    "TreeId": "._disk.identity",
    "TreeKind": "._disk.identity",
    "TreeReport": "._ops.verify",
    "Verification": "._ops.checkup",
}


def __getattr__(name: str) -> object:
    if name in _LAZY:
        from importlib import import_module

        return getattr(import_module(_LAZY[name], __name__), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


__all__ = [
    "ActivationConflict",
    "DistReport",
    "EnsureResult",
    "Event",
    "FileIndex",
    "Finding",
    "InstallError",
    "InstallOptions",
    "InvalidInput",
    "InvalidRequirement",
    "IsolatedCallError",
    "LockInfo",
    "LockSettings",
    "LockTimeout",
    "NotInstalled",
    "Obstacle",
    "Pin",
    "Planned",
    "PlannedDist",
    "Pushed",
    "RecordProblems",
    "Reference",
    "RegistrySettings",
    "Removal",
    "Removed",
    "Repaired",
    "Repo",
    "RepoUnusable",
    "RepoinstallError",
    "Requested",
    "RequirementsFileError",
    "ResolutionError",
    "SourceRefused",
    "StoreUsage",
    "Stored",
    "Thing",
    "TreeEntry",
    "TreeId",
    "TreeKind",
    "TreeReport",
    "TreesConflict",
    "Verification",
    "__version__",
]
