"""A file an index lists, as a candidate: its version and wheel tags, and whether its Requires-Python admits a
Python."""

from __future__ import annotations

from typing import TYPE_CHECKING

from packaging.specifiers import InvalidSpecifier, SpecifierSet
from packaging.version import InvalidVersion, Version

if TYPE_CHECKING:
    from packaging.tags import Tag

    from .simple import Link


def parse_file(link: Link, project: str) -> tuple[Version, frozenset[Tag] | None] | None:
    """The file's version and wheel tags (``None`` for an sdist), or ``None`` if it is not this project's."""
    from packaging.utils import (
        InvalidSdistFilename,
        InvalidWheelFilename,
        parse_sdist_filename,
        parse_wheel_filename,
    )

    try:
        if link.filename.endswith(".whl"):
            name, version, _, tags = parse_wheel_filename(link.filename)
            return (version, tags) if name == project else None
        name, version = parse_sdist_filename(link.filename)
        return (version, None) if name == project else None
    except (InvalidWheelFilename, InvalidSdistFilename, InvalidVersion):
        return None


def admits(requires: str | None, python: Version) -> bool:
    if not requires:
        return True
    try:
        return SpecifierSet(requires).contains(python, prereleases=True)
    except InvalidSpecifier:
        return True  # pip ignores a malformed Requires-Python too
