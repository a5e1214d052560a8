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
    from ._disk.manifest import TreeEntry
    from ._ops.checkup import Repaired, Verification
    from ._ops.doctor import Finding
    from ._ops.gc import Removal
    from ._ops.lockinfo import LockInfo
    from ._ops.plan import Planned, PlannedDist
    from ._ops.remove import Removed
    from ._ops.storeverify import DistReport
    from ._ops.verify import TreeReport
    from ._store.usage import StoreUsage

#: What verify, gc, remove, locks, doctor, list, plan and store_usage return: importable from here, loaded on first use
#: (the warm path never needs them).
_LAZY = {
    "DistReport": "._ops.storeverify",
    "Finding": "._ops.doctor",
    "LockInfo": "._ops.lockinfo",
    "Planned": "._ops.plan",
    "PlannedDist": "._ops.plan",
    "Removal": "._ops.gc",
    "Removed": "._ops.remove",
    "Repaired": "._ops.checkup",
    "StoreUsage": "._store.usage",
    "TreeEntry": "._disk.manifest",
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
    "Planned",
    "PlannedDist",
    "Removal",
    "Removed",
    "Repaired",
    "Repo",
    "RepoUnusable",
    "RepoinstallError",
    "RequirementsFileError",
    "ResolutionError",
    "SourceRefused",
    "StoreUsage",
    "TreeEntry",
    "TreeReport",
    "TreesConflict",
    "Verification",
    "__version__",
]
