"""The identity of an install tree, and the only place that turns user input into repo paths."""

from __future__ import annotations

import enum
import re
from collections.abc import Sequence
from typing import NamedTuple

from packaging.version import InvalidVersion, Version

from .._errors import InvalidRequirement
from .envtag import environment_tag

__all__ = [
    "NO_BYTECODE",
    "TreeId",
    "TreeKind",
    "canonical_name",
    "canonical_version",
    "env_tag",
    "environment_tag",
    "has_bytecode",
    "kind_of",
    "tree_env",
]

# Canonical names and extras (PEP 503 / PEP 685) are lowercase letters, digits and single dashes: no '/', no
# '..', nothing a path could escape with. Checked again here so no caller can smuggle another shape in.
_CANONICAL = re.compile(r"^[a-z0-9](?:[a-z0-9-]*[a-z0-9])?$")
_VERSION_SAFE = re.compile(r"^[A-Za-z0-9.+!_-]+$")
_ENV_SAFE = re.compile(r"^[A-Za-z0-9._-]+$")


_SEPARATORS = re.compile(r"[-_.]+")

#: What a tree's environment adds to the environment tag when the tree holds no bytecode (``--no-compile``):
#: ``cp311-cp311-manylinux_2_36_x86_64.nopyc``. Every path of a tree and of its stored distributions is below its
#: environment (``trees/<env>/``, ``store/<env>/``, their locks, records, closures, digests, staging), so a tree
#: with pycs and one without are two trees, and their distributions two stored ones, never one replacing the
#: other. No environment tag holds a ``.`` (packaging writes ``_`` for one in a platform tag), so the two never
#: meet; a release before this one sees one more environment, whose trees hold what it stores.
NO_BYTECODE = ".nopyc"


def tree_env(tag: str, bytecode: bool = True) -> str:
    """The environment of trees made for the interpreter of environment tag ``tag``, with pycs or without."""
    return tag if bytecode else tag + NO_BYTECODE


def has_bytecode(env: str) -> bool:
    """Whether the trees (and stored distributions) of environment ``env`` hold compiled bytecode."""
    return not env.endswith(NO_BYTECODE)


def env_tag(env: str) -> str:
    """The environment tag of a tree's environment ``env``: the interpreter, ABI and platform it is made for."""
    return env.removesuffix(NO_BYTECODE)


#: The longest file name a tree needs is its staging dir, ``<name>-<leaf>.<host, at most 40>.<pid, at most 7
#: digits>.<8 hex>``: 59 bytes besides the project name and the leaf. Linux filesystems and NFS allow 255 bytes
#: in one name, so name + leaf may have 196 (canonical names and leaves are ASCII: characters are bytes). The
#: others are shorter: a record's temporary ``.<leaf>.json.<12 hex>.tmp`` is leaf + 23, a lock's state
#: ``<leaf>.lock.rw`` leaf + 8, trash names are cut to 120. Longer is refused before anything is written.
MAX_NAME_AND_LEAF = 196


#: Project names of trees that hold a set installed together (see ``_install.together``): the prefix and 16 hex
#: digits of the set's digest. Only that exact shape counts, so a real project named ``together-...`` is not one.
SET_PREFIX = "together-"
_SET_NAME = re.compile(rf"^{SET_PREFIX}[0-9a-f]{{16}}$")


#: Project names of trees that hold a lock file's packages (see ``_install.locked``): the prefix, the names of the
#: distributions the lock installs here (as many as fit) and 10 hex digits of its closure's key for this
#: environment (the set of name, version and artifact hash it installs here): ``locked-numpy-pandas-3f9a2c1d0e``.
#: Trees recorded before are named by the prefix and 16 hex digits of that key alone, and stay so.
LOCK_PREFIX = "locked-"
_LOCK_NAME = re.compile(rf"^{LOCK_PREFIX}(?:[0-9a-f]{{16}}|[a-z0-9][a-z0-9-]*-[0-9a-f]{{10}})$")
#: How many characters of distribution names a lock tree's name holds before the rest are counted instead.
_NAMES_WIDTH = 48


class TreeKind(enum.Enum):
    """What a tree holds, read once off its project name (the names on disk are the only place it is kept)."""

    #: A project at a version (with extras), as a spec asked for it: installed by the installer's resolution.
    REQUIREMENT = "requirement"
    #: A set installed together (``together-<16 hex>``): its own metapackage, whose requirements are the set.
    SET = "set"
    #: A lock file's packages (``locked-<names>-<10 hex>``, or ``locked-<16 hex>`` as recorded before): its own
    #: metapackage, pinning each artifact by hash.
    LOCKED = "locked"

    @property
    def own_metapackage(self) -> bool:
        """Whether the tree's project is a metapackage repoinstall made (a set's or a lock's), not one an index
        serves: it is made here and unpacked, and it is no member of the tree."""
        return self is not TreeKind.REQUIREMENT


def kind_of(name: str) -> TreeKind:
    """The kind of tree (or of a tree's own distribution) the canonical project ``name`` stands for. Only the
    exact shapes count, so a real project named ``together-ai`` or ``locked-in`` is a requirement's tree."""
    if _LOCK_NAME.match(name) is not None:
        return TreeKind.LOCKED
    if _SET_NAME.match(name) is not None:
        return TreeKind.SET
    return TreeKind.REQUIREMENT


def legacy_lock_name(key: str) -> str:
    """The name a lock file's tree with closure key ``key`` had before trees were named for what they hold."""
    return LOCK_PREFIX + key[:16]


def lock_name(key: str, names: Sequence[str]) -> str:
    """A lock file's tree's name: the canonical ``names`` it holds (as many as fit, then how many more) and 10 hex
    digits of its closure's ``key``."""
    shown: list[str] = []
    for number, name in enumerate(names):
        if shown and len("-".join([*shown, name])) > _NAMES_WIDTH:
            shown.append(f"and-{len(names) - number}-more")
            break
        shown.append(name[:_NAMES_WIDTH].rstrip("-"))
    return f"{LOCK_PREFIX}{'-'.join(shown or ['nothing'])}-{key[:10]}"


def normal_version(text: str) -> str:
    """``text`` as PEP 440 normalizes it (``1.0`` stays ``1.0``; ``1.0.0-Post1`` is ``1.0.0.post1``); as it is if
    it is no PEP 440 version. How versions from installers' reports and dist-info names are compared."""
    try:
        return str(Version(text))
    except InvalidVersion:
        return text


def canonical_name(name: str) -> str:
    """PEP 503's normalized name (what ``packaging.utils.canonicalize_name`` returns; a test compares them).

    Spelled out here so the warm path need not import packaging.utils, which imports packaging.tags.
    """
    return _SEPARATORS.sub("-", name).lower()


def canonical_version(version: Version) -> str:
    """The version with trailing zeros of its release dropped, so 1.0 and 1.0.0 name one tree
    (``packaging.utils.canonicalize_version(v, strip_trailing_zero=True)``; a test compares them)."""
    release = list(version.release)
    while len(release) > 1 and release[-1] == 0:
        release.pop()
    text = f"{version.epoch}!" if version.epoch else ""
    text += ".".join(map(str, release))
    if version.pre is not None:
        text += f"{version.pre[0]}{version.pre[1]}"
    if version.post is not None:
        text += f".post{version.post}"
    if version.dev is not None:
        text += f".dev{version.dev}"
    if version.local is not None:
        text += f"+{version.local}"
    return text


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
    #: What the tree holds, by its name's shape (see :func:`kind_of`).
    kind: TreeKind


class TreeId(_Fields):
    """(environment tag, canonical name, version, extras): one immutable install tree.

    ``leaf``, ``pin``, ``version_text`` and ``kind`` are derived once here: ``Version.__str__`` is slow enough to show
    on the warm path.
    """

    __slots__ = ()

    def __new__(cls, env: str, name: str, version: Version, extras: tuple[str, ...] = ()) -> TreeId:
        text = str(version)
        canonical = canonical_version(version)
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
        if len(name) + len(canonical) + len(shown) > MAX_NAME_AND_LEAF:
            raise InvalidRequirement(
                f"{name[:60]}{'...' if len(name) > 60 else ''}=={text[:60]}{'...' if len(text) > 60 else ''}: "
                f"project name, version and extras are {len(name) + len(canonical) + len(shown)} characters "
                f"together; at most {MAX_NAME_AND_LEAF} fit in a file name"
            )
        return super().__new__(
            cls, env, name, version, extras, canonical + shown, f"{name}{shown}=={text}", text, kind_of(name)
        )

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
            return canonical_name(name) == self.name and Version(version) == self.version
        except InvalidVersion:
            return False

    def __str__(self) -> str:
        return self.pin
