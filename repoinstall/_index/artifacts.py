"""A hashed requirement's artifact: which of the files it allows this interpreter takes, found by sha256.

A requirements file pinned and hashed (pip-compile, ``uv pip compile --generate-hashes``, ``uv export``) names a
version and the hashes of some of its files (every platform's wheels, or only some), not which file an installer
takes here. That one is found as pip would pick it: among the files every configured source lists for the
project (index pages, which give each file's sha256; find-links, a local directory's files hashed here) those of
that version whose sha256 the requirement names, the wheel whose best tag ranks highest for this interpreter
(and whose Requires-Python admits it), else an sdist. The pin then names that one artifact by URL and sha256,
as a ``pylock.toml`` of the same resolution does, so both are one tree and go through the store alike.

What was found is kept in the repo's index cache as a fact (the files a sha256 names never change), so the next
ensure of the same file asks no index.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from typing import TYPE_CHECKING

from packaging.version import InvalidVersion, Version

from .._disk.pin import Pin, closure_key
from .._urls import file_path
from .cache import key_for
from .files import admits, parse_file
from .http import Plan
from .sources import find_links_listing, index_listing

if TYPE_CHECKING:
    from .._pipconfig import IndexConfig
    from .cache import IndexCache
    from .simple import Link


def kept(pins: Sequence[Pin], env: str, cache: IndexCache) -> tuple[Pin, ...] | None:
    """The artifacts found for ``pins`` in ``env`` before, from the repo's index cache; ``None`` if none were."""
    entry = cache.read(_key(pins, env), forever=True)
    rows = entry.get("pins") if entry is not None else None
    if not isinstance(rows, list) or len(rows) != len(pins):
        return None
    found = []
    for row in rows:
        if not (isinstance(row, list) and len(row) == 4 and all(isinstance(v, str) for v in row)):
            return None
        found.append(Pin(row[0], row[1], row[2], (row[3],)))
    return tuple(found)


def keep(pins: Sequence[Pin], env: str, cache: IndexCache, found: Sequence[Pin]) -> None:
    """Remember ``found`` as the artifacts of ``pins`` in ``env`` (see :func:`kept`)."""
    cache.write(_key(pins, env), {"pins": [[p.name, p.version, p.url, p.hashes[0]] for p in found]})


def _key(pins: Sequence[Pin], env: str) -> str:
    return key_for("artifacts", env, closure_key(pins))


def artifact_plan(
    pin: Pin, config: IndexConfig, cache: IndexCache, python: Version, ranks: dict[str, int]
) -> Plan[Pin | None]:
    """``pin`` resolved to the one file this interpreter (``python``, its tags best first in ``ranks``) takes
    among those its hashes name (see above); ``None`` where no source lists such a file with its sha256."""
    links: list[Link] = []
    for index_url in config.index_urls:
        listing = yield from index_listing(index_url, pin.name, cache, config.retries)
        links += listing.links
    for location in config.find_links:
        listing = yield from find_links_listing(location, pin.name, cache, config.retries)
        links += listing.links
    try:
        version = Version(pin.version)
    except InvalidVersion:
        return None
    wanted = {h.removeprefix("sha256:") for h in pin.hashes if h.startswith("sha256:")}
    best: tuple[int, str, str] | None = None
    for link in links:
        parsed = parse_file(link, pin.name)
        if parsed is None or parsed[0] != version or not admits(link.requires_python, python):
            continue
        tags = parsed[1]
        # A wheel by its best tag for this interpreter (one that fits none is not for here); an sdist after them.
        rank = len(ranks) if tags is None else min((ranks[str(t)] for t in tags if str(t) in ranks), default=-1)
        if rank < 0 or (best is not None and rank >= best[0]):
            continue
        sha256 = link.sha256 or _local_sha256(link.url)
        if sha256 in wanted:
            best = (rank, link.url, sha256)
    return None if best is None else Pin(pin.name, pin.version, best[1], (f"sha256:{best[2]}",))


def _local_sha256(url: str) -> str | None:
    """A local file's sha256 (a find-links directory lists no hashes); ``None`` for a remote one."""
    if not url.startswith("file:"):
        return None
    digest = hashlib.sha256()
    try:
        with open(file_path(url), "rb") as handle:
            while chunk := handle.read(1 << 20):
                digest.update(chunk)
    except OSError:
        return None
    return digest.hexdigest()
