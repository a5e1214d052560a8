"""The identity of an install tree, and the only place that turns user input into repo paths."""

from __future__ import annotations

import functools
import re
import sys
from typing import NamedTuple

from packaging.utils import canonicalize_name, canonicalize_version
from packaging.version import InvalidVersion, Version

from ._errors import InvalidRequirement

# Canonical names and extras (PEP 503 / PEP 685) are lowercase letters, digits and single dashes: no '/', no
# '..', nothing a path could escape with. Checked again here so no caller can smuggle another shape in.
_CANONICAL = re.compile(r"^[a-z0-9](?:[a-z0-9-]*[a-z0-9])?$")
_VERSION_SAFE = re.compile(r"^[A-Za-z0-9.+!_-]+$")
_ENV_SAFE = re.compile(r"^[A-Za-z0-9._-]+$")


@functools.cache
def environment_tag() -> str:
    """interpreter-abi-platform of this Python: the first (most specific) tag ``packaging.tags.sys_tags()`` gives.

    A tree is built by and for one such tag, so a tree built in one container image is never imported by an
    image with another interpreter, ABI or platform (glibc level included).
    """
    from packaging import tags

    # sys_tags() lists every platform (all glibc levels) before its first tag; only the first is needed, and
    # it is the same tag (a test compares them).
    platforms = [next(iter(tags.platform_tags()))]
    if tags.interpreter_name() == "cp":
        # CPython's ABI tag is cp<version><abiflags>; deriving it from sys.abiflags spares loading all of
        # sysconfig's build data, which is what packaging reads it from (a test checks they agree).
        major, minor = sys.version_info[:2]
        abis = [f"cp{major}{minor}{sys.abiflags}"] if hasattr(sys, "abiflags") else None
        tag = next(iter(tags.cpython_tags(abis=abis, platforms=platforms)))
    else:
        tag = next(iter(tags.generic_tags(platforms=platforms)))
    return f"{tag.interpreter}-{tag.abi}-{tag.platform}"


class _Fields(NamedTuple):
    env: str
    name: str
    version: Version
    extras: tuple[str, ...]
    #: The tree's own directory name: the canonical version (PEP 440: 1.0 and 1.0.0 are one version, so one
    #: tree, named "1"), with the extras when there are any.
    leaf: str
    #: The exact requirement that builds this tree.
    pin: str
    version_text: str


class TreeId(_Fields):
    """(environment tag, canonical name, version, extras): one immutable install tree.

    ``leaf``, ``pin`` and ``version_text`` are derived once here: ``Version.__str__`` is slow enough to show
    on the warm path.
    """

    __slots__ = ()

    def __new__(cls, env: str, name: str, version: Version, extras: tuple[str, ...] = ()) -> TreeId:
        text = str(version)
        canonical = canonicalize_version(version, strip_trailing_zero=True)
        if not _ENV_SAFE.match(env) or env in (".", ".."):
            raise InvalidRequirement(f"environment tag {env!r} is not usable as a directory name")
        if not _CANONICAL.match(name):
            raise InvalidRequirement(f"project name {name!r} is not a canonical name")
        if not _VERSION_SAFE.match(canonical):
            raise InvalidRequirement(f"version {text} is not usable as a directory name")
        for extra in extras:
            if not _CANONICAL.match(extra):
                raise InvalidRequirement(f"extra {extra!r} is not a canonical name")
        shown = f"[{','.join(extras)}]" if extras else ""
        return super().__new__(cls, env, name, version, extras, canonical + shown, f"{name}{shown}=={text}", text)

    @classmethod
    def from_leaf(cls, env: str, name: str, leaf: str) -> TreeId | None:
        """The tree a directory or file name found in the repo stands for; ``None`` if it is not one of ours."""
        version, bracket, rest = leaf.partition("[")
        if bracket and not rest.endswith("]"):
            return None
        extras = tuple(e for e in rest[:-1].split(",") if e) if bracket else ()
        try:
            tid = cls(env, name, Version(version), extras)
        except (InvalidVersion, InvalidRequirement):
            return None
        return tid if tid.leaf == leaf else None

    def is_named(self, name: str, version: str) -> bool:
        """Whether a dist-info's (Name, Version) are this tree's project and version."""
        try:
            return canonicalize_name(name) == self.name and Version(version) == self.version
        except InvalidVersion:
            return False

    def __str__(self) -> str:
        return self.pin
