"""repoinstall: install Python packages once into a repo directory that many pods share.

The public API is :class:`Repo`, its result and event types, and the exceptions; everything else is private.
"""

from __future__ import annotations

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
)
from ._options import InstallOptions, LockSettings
from ._repo import Repo
from ._results import EnsureResult, Event

__all__ = [
    "ActivationConflict",
    "EnsureResult",
    "Event",
    "InstallError",
    "InstallOptions",
    "InvalidInput",
    "InvalidRequirement",
    "IsolatedCallError",
    "LockSettings",
    "LockTimeout",
    "NotInstalled",
    "Repo",
    "RepoUnusable",
    "RepoinstallError",
    "RequirementsFileError",
    "ResolutionError",
]
