"""Where images go: ``HOST[:PORT]/REPOSITORY``, and the tag a tree's image gets there.

A tag is predictable from the tree alone: ``<name>[.<extra>...]-<version>-<interpreter>-<abi>``, e.g.
``pandas-2.2.3-cp311-cp311``. The platform part of the environment tag is left out: the tag holds an image
index with one manifest per platform (x86_64 and aarch64 of one interpreter), so one reference serves a
mixed-architecture fleet. A version's ``+`` (a local version) becomes ``_`` and its epoch's ``!`` ``__``: neither
is in a tag's alphabet, and canonical versions hold no ``_``.
"""

from __future__ import annotations

import hashlib
import re
from typing import NamedTuple

from .._disk.identity import NO_BYTECODE, TreeId, canonical_version, env_tag, has_bytecode
from .._errors import InvalidInput

#: The distribution spec's rules: a repository path component, a tag, a digest.
_COMPONENT = re.compile(r"^[a-z0-9]+(?:(?:\.|_|__|-+)[a-z0-9]+)*$")
#: (``\Z``, not ``$``, which also matches before a final newline: these check what registries send.)
TAG = re.compile(r"^[a-zA-Z0-9_][a-zA-Z0-9._-]{0,127}\Z")
DIGEST = re.compile(r"^sha256:[0-9a-f]{64}\Z")
_HOST = re.compile(r"^(?:[A-Za-z0-9](?:[A-Za-z0-9-]*[A-Za-z0-9])?(?:\.[A-Za-z0-9](?:[A-Za-z0-9-]*[A-Za-z0-9])?)*"
                   r"|\[[0-9A-Fa-f:.]+\])(?::[0-9]{1,5})?$")  # fmt: skip
_TAG_MAX = 128
#: A platform part longer than this is hashed in a platform tag (manylinux_2_36_x86_64 is 21 characters).
_PLATFORM_MAX = 40


class Reference(NamedTuple):
    """A registry host (with its port) and a repository on it."""

    host: str
    repository: str

    @classmethod
    def parse(cls, text: str) -> Reference:
        """``HOST[:PORT]/REPOSITORY``; :class:`InvalidInput` (exit 2) naming what is wrong."""
        host, slash, repository = text.strip().partition("/")
        if "://" in text:
            raise InvalidInput(f"{text}: give HOST[:PORT]/REPOSITORY without a scheme (--plain-http for http)")
        if not slash or not host or not repository:
            raise InvalidInput(f"{text}: not a registry reference: give HOST[:PORT]/REPOSITORY")
        if "@" in host:
            raise InvalidInput("the registry reference holds credentials: give them in an auth file or netrc")
        if not _HOST.match(host):
            raise InvalidInput(f"{text}: {host!r} is not a registry host[:port]")
        if ":" in repository or "@" in repository:
            raise InvalidInput(f"{text}: give the repository without a tag or digest: tags are derived per tree")
        if len(repository) > 255 or not all(_COMPONENT.match(part) for part in repository.split("/")):
            raise InvalidInput(
                f"{text}: {repository!r} is not a repository name (lowercase letters, digits, and . _ - between them)"
            )
        return cls(host, repository)

    def __str__(self) -> str:
        return f"{self.host}/{self.repository}"

    def tagged(self, tag: str) -> str:
        return f"{self}:{tag}"

    def pinned(self, digest: str) -> str:
        return f"{self}@{digest}"


def tag_for(tid: TreeId) -> str:
    """The tag of ``tid``'s image: its name, extras, version and interpreter-abi (the platform is the index's),
    and ``.nopyc`` for a tree without bytecode: another tree, so another image (no ABI tag holds a ``.``)."""
    interpreter, abi, _ = env_tag(tid.env).split("-", 2)
    name = ".".join([tid.name, *tid.extras])
    version = canonical_version(tid.version).replace("!", "__").replace("+", "_")
    tag = f"{name}-{version}-{interpreter}-{abi}{'' if has_bytecode(tid.env) else NO_BYTECODE}"
    if len(tag) > _TAG_MAX:
        # Too long for a tag: its head, and a hash of the whole that keeps it one tree's.
        digest = hashlib.sha256(tag.encode()).hexdigest()[:16]
        tag = f"{tag[: _TAG_MAX - 17]}-{digest}"
    assert TAG.match(tag), tag
    return tag


def platform_tag(tid: TreeId) -> str:
    """This environment's own tag for the tree's image: ``<tag>--<platform>``, e.g.
    ``pandas-2.2.3-cp311-cp311--manylinux_2_36_x86_64``. Only a pusher of that platform writes it, so no other
    platform's push can lose it; the index at :func:`tag_for`'s tag is rebuilt from these. No tag of
    :func:`tag_for` holds ``--`` (canonical names and versions hold no run of ``-``), so :func:`platform_prefix`
    lists one tree's platform tags (and a pusher still reads each one's tree annotation before it trusts it)."""
    tag, platform = tag_for(tid), env_tag(tid.env).split("-", 2)[2]
    if len(platform) > _PLATFORM_MAX:
        platform = hashlib.sha256(platform.encode()).hexdigest()[:16]
    room = _TAG_MAX - 2 - _PLATFORM_MAX  # the same for every platform: one prefix lists them all
    if len(tag) > room:
        tag = f"{tag[: room - 17]}-{hashlib.sha256(tag.encode()).hexdigest()[:16]}"
    found = f"{tag}--{platform}"
    assert TAG.match(found), found
    return found


#: What a tree's wheels tag holds between its tree's tag and its platform (see :func:`wheels_tag`).
WHEELS = ".wheels"


def wheels_tag(tid: TreeId) -> str:
    """The tag of the manifest that lists this environment's wheels of the tree (see :mod:`.wheels`):
    ``<tag>.wheels--<platform>``, e.g. ``pandas-2.2.3-cp311-cp311.wheels--manylinux_2_36_x86_64``. Not below
    :func:`platform_prefix` (a push lists those as the index's platforms), and never a :func:`tag_for` or a
    :func:`platform_tag` (their tag part ends with an ABI, which holds no ``.``); within 128 characters."""
    head, platform = platform_tag(tid).rsplit("--", 1)
    room = _TAG_MAX - 2 - _PLATFORM_MAX - len(WHEELS)
    if len(head) > room:
        head = f"{head[: room - 17]}-{hashlib.sha256(head.encode()).hexdigest()[:16]}"
    found = f"{head}{WHEELS}--{platform}"
    assert TAG.match(found), found
    return found


def platform_prefix(tid: TreeId) -> str:
    """What every platform tag of ``tid``'s image starts with."""
    return platform_tag(tid).rsplit("--", 1)[0] + "--"


#: Python's machine names -> OCI's architectures (GOARCH) and variants.
_ARCHITECTURES = {
    "x86_64": ("amd64", ""),
    "amd64": ("amd64", ""),
    "aarch64": ("arm64", ""),
    "arm64": ("arm64", ""),
    "i686": ("386", ""),
    "i386": ("386", ""),
    "armv7l": ("arm", "v7"),
    "armv6l": ("arm", "v6"),
    "ppc64le": ("ppc64le", ""),
    "s390x": ("s390x", ""),
    "riscv64": ("riscv64", ""),
}
_PLATFORM = re.compile(r"^(?:(?:many|musl)linux_\d+_\d+|manylinux\d+|linux)_(?P<arch>.+)$")


class Platform(NamedTuple):
    os: str
    architecture: str
    variant: str = ""

    def as_dict(self) -> dict[str, str]:
        found = {"os": self.os, "architecture": self.architecture}
        return {**found, "variant": self.variant} if self.variant else found


def platform_of(env: str) -> Platform:
    """The OCI platform of an environment tag's platform part (``manylinux_2_36_x86_64`` -> linux/amd64)."""
    platform = env_tag(env).split("-", 2)[2]
    if (match := _PLATFORM.match(platform)) is not None:
        arch, variant = _ARCHITECTURES.get(match["arch"], (match["arch"], ""))
        return Platform("linux", arch, variant)
    if platform.startswith("macosx_"):
        return Platform("darwin", _ARCHITECTURES.get(platform.rsplit("_", 1)[1], ("unknown", ""))[0])
    if platform.startswith("win"):
        return Platform("windows", "amd64" if platform.endswith("amd64") else "386")
    return Platform("unknown", "unknown")
