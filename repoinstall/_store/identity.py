"""A stored distribution: (environment tag, canonical name, version, sha256 of the artifact installed)."""

from __future__ import annotations

import re
from typing import NamedTuple

from packaging.version import InvalidVersion, Version

from .._disk.identity import TreeId, canonical_name, canonical_version
from .._disk.layout import STORE, STORE_LOCKS
from .._errors import InvalidRequirement
from .._lock.key import LockKey

_SHA256 = re.compile(r"^[0-9a-f]{64}$")
#: How much of the artifact's hash names its directory: 64 bits, so two artifacts of one version never meet.
_SHOWN = 16


class DistId(NamedTuple):
    """One distribution as installed from one artifact for one environment: immutable, stored once per repo."""

    env: str
    name: str
    version: Version
    sha256: str

    @classmethod
    def of(cls, env: str, name: str, version: str, sha256: str) -> DistId:
        """Checked as a tree's identity is (no path can be smuggled in through a name or version)."""
        if not _SHA256.match(sha256):
            raise InvalidRequirement(f"{name} {version}: {sha256!r} is not a sha256 hex digest")
        # The same checks as a tree's: a canonical name, a version usable as a directory name.
        tid = TreeId(env, canonical_name(name), Version(version))
        return cls(tid.env, tid.name, tid.version, sha256)

    @property
    def leaf(self) -> str:
        """Its directory's name: ``<canonical version>-<16 hex of the artifact's sha256>``."""
        return f"{canonical_version(self.version)}-{self.sha256[:_SHOWN]}"

    def parts(self) -> tuple[str, str, str, str]:
        """Its path below the repo: ``store/<env>/<name>/<leaf>``."""
        return (STORE, self.env, self.name, self.leaf)

    def lock_parts(self) -> tuple[str, str, str]:
        """Its lock's directory below the repo: ``store-locks/<env>/<name>`` (the lock is ``<leaf>.lock``)."""
        return (STORE_LOCKS, self.env, self.name)

    def names(self, name: str, version: str) -> bool:
        """Whether a dist-info's ``name`` and ``version`` are this distribution's."""
        from packaging.version import InvalidVersion

        try:
            return canonical_name(name) == self.name and Version(version) == self.version
        except InvalidVersion:
            return False

    def lock_key(self) -> LockKey:
        """Its lock's key: the same lock as trees', under ``store-locks/``."""
        return LockKey(self.lock_parts(), self.leaf, str(self))

    def __str__(self) -> str:
        return f"{self.name}=={self.version} (sha256:{self.sha256[:12]}...)"


def split_leaf(leaf: str) -> tuple[str, str] | None:
    """``(canonical version, 16 hex of the sha256)`` of a stored distribution's directory name, or ``None`` if
    ``leaf`` is not one (a name the store never makes: left alone by whoever walks the store)."""
    version, dash, shown = leaf.rpartition("-")
    if not dash or len(shown) != _SHOWN or not _SHA256.match(shown + "0" * (64 - _SHOWN)):
        return None
    try:
        if canonical_version(Version(version)) != version:
            return None
    except InvalidVersion:
        return None
    return version, shown


def stored_lock_key(env: str, name: str, leaf: str) -> LockKey:
    """The lock of the stored distribution ``store/<env>/<name>/<leaf>``, known by its path alone (a directory
    name keeps only 16 hex of the sha256): ``store-locks/<env>/<name>/<leaf>.lock``."""
    return LockKey((STORE_LOCKS, env, name), leaf, f"{name} {leaf} (stored)")
