"""Wheel and sdist file names: the project, version and (for wheels) tags they carry.

The rules are packaging.utils' ``parse_wheel_filename`` and ``parse_sdist_filename`` (a test compares them),
spelled out so that reading a lock needs neither packaging.utils nor packaging.tags for each of its often
thousands of wheels: a tag is kept as its ``interpreter-abi-platform`` string.
"""

from __future__ import annotations

import functools
import re
from typing import NamedTuple

from packaging.version import InvalidVersion, Version

from .._disk.identity import canonical_name

_WHEEL_NAME = re.compile(r"^[A-Za-z0-9](?:[A-Za-z0-9._]*[A-Za-z0-9])?$")
_BUILD = re.compile(r"^(\d+)(.*)$")
_SDIST_SUFFIXES = (".tar.gz", ".zip")


class WheelName(NamedTuple):
    name: str  # canonical
    version: Version
    build: tuple[int, str] | tuple[()]
    #: Every ``interpreter-abi-platform`` tag the wheel fits, compressed tag sets (``py2.py3``) expanded.
    tags: frozenset[str]


@functools.lru_cache(maxsize=8192)
def wheel_name(filename: str) -> WheelName | None:
    """The parts of ``{name}-{version}(-{build})?-{python}-{abi}-{platform}.whl``; ``None`` if it is not one."""
    if not filename.endswith(".whl"):
        return None
    parts = filename[:-4].split("-")
    if len(parts) not in (5, 6) or not _WHEEL_NAME.match(parts[0]) or "__" in parts[0]:
        return None
    try:
        version = Version(parts[1])
    except InvalidVersion:
        return None
    build: tuple[int, str] | tuple[()] = ()
    if len(parts) == 6:
        match = _BUILD.match(parts[2])
        if match is None:
            return None
        build = (int(match.group(1)), match.group(2))
    python, abi, platform = parts[-3:]
    if not (python and abi and platform):
        return None
    tags = frozenset(
        f"{p}-{a}-{pl}"
        for p in python.lower().split(".")
        for a in abi.lower().split(".")
        for pl in platform.lower().split(".")
    )
    return WheelName(canonical_name(parts[0]), version, build, tags)


def sdist_name(filename: str) -> tuple[str, Version] | None:
    """(canonical name, version) of ``{name}-{version}.tar.gz`` or ``.zip``; ``None`` if it is not one."""
    suffix = next((s for s in _SDIST_SUFFIXES if filename.endswith(s)), None)
    if suffix is None:
        return None
    name, dash, version = filename[: -len(suffix)].rpartition("-")
    if not dash or not name:
        return None
    try:
        return canonical_name(name), Version(version)
    except InvalidVersion:
        return None
