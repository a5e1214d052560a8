"""The environment a lock is read for: this interpreter unless told otherwise.

Three things decide what a lock installs here: its markers (PEP 508, with PEP 751's ``extras`` and
``dependency_groups`` sets), the Python version (``requires-python``) and the wheel tags this interpreter takes,
best first (``packaging.tags.sys_tags()``). Each is computed once per process and environment; packaging's
markers and tags modules are imported only when a lock needs them, never on repoinstall's warm path.
"""

from __future__ import annotations

import functools
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, cast

from .._errors import RequirementsFileError

if TYPE_CHECKING:
    from packaging.markers import Marker
    from packaging.specifiers import SpecifierSet
    from packaging.tags import Tag
    from packaging.version import Version


@dataclass(frozen=True, slots=True)
class Environment:
    """Another interpreter than this one, for tests and tools: marker values that replace this interpreter's
    (``{"python_full_version": "3.12.1", "sys_platform": "win32", ...}``) and wheel tags best first
    (``"cp312-cp312-win_amd64"``). ``Environment()`` is this interpreter."""

    markers: tuple[tuple[str, str], ...] = ()
    #: ``None``: this interpreter's tags (``packaging.tags.sys_tags()``).
    tags: tuple[str, ...] | None = None

    @classmethod
    def of(cls, markers: Mapping[str, str] | None = None, tags: Iterable[str] | None = None) -> Environment:
        return cls(tuple(sorted((markers or {}).items())), None if tags is None else tuple(tags))


THIS = Environment()


@functools.cache
def marker_values(environment: Environment) -> dict[str, str]:
    """PEP 508's marker variables for ``environment``."""
    from packaging.markers import default_environment

    values = {name: str(value) for name, value in default_environment().items()}
    values.update(environment.markers)
    return values


@functools.cache
def python_version(environment: Environment) -> Version:
    """The Python version ``requires-python`` is checked against (``python_full_version``; a trailing ``+``,
    which a CPython built from a source checkout reports, made a local version as packaging does)."""
    from packaging.version import InvalidVersion, Version

    text = marker_values(environment)["python_full_version"]
    try:
        return Version(text + "local" if text.endswith("+") else text)
    except InvalidVersion:
        raise RequirementsFileError(f"python_full_version {text!r} is not a PEP 440 version") from None


@functools.cache
def tag_ranks(environment: Environment) -> dict[str, int]:
    """``interpreter-abi-platform`` -> rank (0 is best) for every wheel tag ``environment`` takes."""
    if environment.tags is not None:
        tags: Iterable[str] = (t.lower() for t in environment.tags)
    else:
        from packaging.tags import sys_tags

        tags = map(str, sys_tags())
    ranks: dict[str, int] = {}
    for rank, tag in enumerate(tags):
        ranks.setdefault(tag, rank)
    return ranks


@functools.cache
def wheel_tags(environment: Environment) -> tuple[Tag, ...]:
    """The wheel tags ``environment`` takes, best first, as packaging's ``Pylock.select`` takes them."""
    from packaging.tags import Tag, sys_tags

    if environment.tags is None:
        return tuple(sys_tags())
    return tuple(Tag(*tag.split("-", 2)) for tag in environment.tags)


def describe(environment: Environment) -> str:
    """This environment in an error message: its best wheel tag, or the repo's environment tag."""
    if environment.tags is not None:
        return environment.tags[0] if environment.tags else "no wheel tags"
    from .._disk.envtag import environment_tag

    return environment_tag()


@functools.lru_cache(maxsize=4096)
def marker(text: str) -> Marker:
    """A parsed PEP 508 marker; :class:`ValueError` with packaging's first line if it is not one."""
    from packaging.markers import InvalidMarker, Marker

    try:
        return Marker(text)
    except InvalidMarker as error:
        raise ValueError(str(error).splitlines()[0]) from None


@functools.lru_cache(maxsize=4096)
def specifier(text: str) -> SpecifierSet:
    """A parsed version specifier set (``requires-python``); :class:`ValueError` if it is not one."""
    from packaging.specifiers import InvalidSpecifier, SpecifierSet

    try:
        return SpecifierSet(text)
    except InvalidSpecifier as error:
        raise ValueError(str(error).splitlines()[0]) from None


def evaluate(
    parsed: Marker,
    environment: Environment,
    *,
    extras: frozenset[str] = frozenset(),
    groups: frozenset[str] = frozenset(),
    lock_file: bool = True,
) -> bool:
    """Whether ``parsed`` holds in ``environment``: in a lock file (``extras`` and ``dependency_groups`` are the
    sets PEP 751 adds), or as a requirement's marker (``extra`` is empty). :class:`ValueError` if it cannot be
    evaluated (a comparison PEP 508 leaves undefined, an unknown variable)."""
    from packaging.markers import UndefinedComparison, UndefinedEnvironmentName

    values: dict[str, str | frozenset[str]] = dict(marker_values(environment))
    try:
        if lock_file:
            values.update(extras=extras, dependency_groups=groups)
            # packaging 25 evaluates these two sets (PEP 751) but declares the environment dict[str, str]; 26
            # declares what it takes. The cast keeps one spelling checked against both.
            return parsed.evaluate(cast("dict[str, str]", values), context="lock_file")
        values["extra"] = ""  # as Requested.marker_applies, and pip, evaluate a requirement's marker
        return parsed.evaluate(cast("dict[str, str]", values))
    except (UndefinedComparison, UndefinedEnvironmentName) as error:
        raise ValueError(f"cannot be evaluated: {error}") from None
