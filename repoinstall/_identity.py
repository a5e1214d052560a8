"""The identity of an install tree, and the only place that turns user input into repo paths."""

from __future__ import annotations

import functools
import re
from dataclasses import dataclass, field

from packaging.utils import canonicalize_name
from packaging.version import InvalidVersion, Version

from ._errors import InvalidRequirement

# Canonical names and extras (PEP 503 / PEP 685) are lowercase letters, digits and single dashes: no '/', no
# '..', nothing a path could escape with. Checked again here so no caller can smuggle another shape in.
_CANONICAL = re.compile(r"^[a-z0-9](?:[a-z0-9-]*[a-z0-9])?$")
_VERSION_SAFE = re.compile(r"^[A-Za-z0-9.+!_-]+$")
_ENV_SAFE = re.compile(r"^[A-Za-z0-9._-]+$")


@functools.cache
def environment_tag() -> str:
    """interpreter-abi-platform of this Python, its most specific ``packaging.tags`` tag.

    A tree is built by and for one such tag, so a tree built in one container image is never imported by an
    image with another interpreter, ABI or platform (glibc level included).
    """
    from packaging.tags import sys_tags

    tag = next(iter(sys_tags()))
    return f"{tag.interpreter}-{tag.abi}-{tag.platform}"


@dataclass(frozen=True, slots=True)
class TreeId:
    """(environment tag, canonical name, version, extras): one immutable install tree."""

    env: str
    name: str
    version: Version
    extras: tuple[str, ...] = ()
    #: The tree's own directory name: the version, with the extras when there are any.
    leaf: str = field(init=False, compare=False, repr=False)
    #: The exact requirement that builds this tree.
    pin: str = field(init=False, compare=False, repr=False)
    version_text: str = field(init=False, compare=False, repr=False)

    def __post_init__(self) -> None:
        # Computed once: Version.__str__ is slow enough to show on the warm path.
        version = str(self.version)
        extras = f"[{','.join(self.extras)}]" if self.extras else ""
        object.__setattr__(self, "version_text", version)
        object.__setattr__(self, "leaf", version + extras)
        object.__setattr__(self, "pin", f"{self.name}{extras}=={version}")
        if not _ENV_SAFE.match(self.env) or self.env in (".", ".."):
            raise InvalidRequirement(f"environment tag {self.env!r} is not usable as a directory name")
        if not _CANONICAL.match(self.name):
            raise InvalidRequirement(f"project name {self.name!r} is not a canonical name")
        if not _VERSION_SAFE.match(version):
            raise InvalidRequirement(f"version {self.version!s} is not usable as a directory name")
        for extra in self.extras:
            if not _CANONICAL.match(extra):
                raise InvalidRequirement(f"extra {extra!r} is not a canonical name")

    def is_named(self, name: str, version: str) -> bool:
        """Whether a dist-info's (Name, Version) are this tree's project and version."""
        try:
            return canonicalize_name(name) == self.name and Version(version) == self.version
        except InvalidVersion:
            return False

    def __str__(self) -> str:
        return self.pin
