"""A stored distribution: (environment tag, canonical name, version, sha256 of what repoinstall verified it from).

Two kinds, whose names never meet (see docs/concepts/oci.md):

- **wheel-verified**: installed from a wheel whose bytes repoinstall hashed itself (an installer run over an
  artifact it checked, or a lock's hash): named by that wheel's sha256, ``<version>-<sha16>``;
- **registry-sourced**: unpacked from an OCI layer: named by the layer's uncompressed digest (its diff_id) as
  repoinstall recomputed it while unpacking, ``<version>-layer-<sha16>``. What the registry said the wheel's sha256
  was is only a claim, kept in the trees' records, never a name: a request from the index or a lock looks up
  wheel names only, so a registry's layer can never become what a wheel is.
"""

from __future__ import annotations

import re
from typing import NamedTuple

from packaging.version import InvalidVersion, Version

from .._disk.identity import TreeId, canonical_name, canonical_version
from .._disk.layout import STORE, STORE_LOCKS
from .._errors import InstallError, InvalidRequirement
from .._lock.key import LockKey

_SHA256 = re.compile(r"^[0-9a-f]{64}$")
#: How much of the artifact's hash names its directory: 64 bits, so two artifacts of one version never meet.
_SHOWN = 16
#: What a registry-sourced distribution's directory name holds between its version and its diff_id.
_LAYER = "layer-"


class DistId(NamedTuple):
    """One distribution as installed from one artifact for one environment: immutable, stored once per repo."""

    env: str
    name: str
    version: Version
    sha256: str
    #: Registry-sourced: ``sha256`` is its layer's diff_id (see the module's docstring), not a wheel's.
    layer: bool = False

    @classmethod
    def of(cls, env: str, name: str, version: str, sha256: str) -> DistId:
        """Checked as a tree's identity is (no path can be smuggled in through a name or version)."""
        if not _SHA256.match(sha256):
            raise InvalidRequirement(f"{name} {version}: {sha256!r} is not a sha256 hex digest")
        # The same checks as a tree's: a canonical name, a version usable as a directory name.
        tid = TreeId(env, canonical_name(name), Version(version))
        return cls(tid.env, tid.name, tid.version, sha256)

    @classmethod
    def of_layer(cls, env: str, name: str, version: str, diff_id: str) -> DistId:
        """A registry-sourced distribution: named by its layer's diff_id (``sha256:<hex>``), checked as :meth:`of`."""
        return cls.of(env, name, version, diff_id.removeprefix("sha256:"))._replace(layer=True)

    @property
    def leaf(self) -> str:
        """Its directory's name: ``<canonical version>-<16 hex of the wheel's sha256>``, or for a registry-sourced
        one ``<canonical version>-layer-<16 hex of its diff_id>`` (no canonical version holds a ``-``)."""
        return f"{canonical_version(self.version)}-{_LAYER if self.layer else ''}{self.sha256[:_SHOWN]}"

    @property
    def provenance(self) -> str:
        """``wheel`` or ``registry``: what its name was verified from."""
        return "registry" if self.layer else "wheel"

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
        return f"{self.name}=={self.version} ({'layer ' if self.layer else ''}sha256:{self.sha256[:12]}...)"


def split_leaf(leaf: str) -> tuple[str, str] | None:
    """``(canonical version, 16 hex of the sha256)`` of a stored distribution's directory name (either kind), or
    ``None`` if ``leaf`` is not one (a name the store never makes: left alone by whoever walks the store)."""
    version, dash, shown = leaf.rpartition("-")
    version = version.removesuffix("-layer")
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


def of_row(env: str, row: dict[str, str]) -> DistId | None:
    """The stored distribution a tree record's ``dists`` row names: registry-sourced by its ``diff_id``, else
    wheel-verified by its ``sha256``; ``None`` if it names neither (or not validly)."""
    name, version = row.get("name", ""), row.get("version", "")
    try:
        if diff_id := row.get("diff_id", ""):
            return DistId.of_layer(env, name, version, diff_id)
        if sha256 := row.get("sha256", ""):
            return DistId.of(env, name, version, sha256)
    except (InvalidRequirement, InstallError, InvalidVersion, ValueError):
        return None
    return None


def is_layer_leaf(leaf: str) -> bool:
    """Whether a stored distribution's directory name is a registry-sourced one's."""
    return f"-{_LAYER}" in leaf
