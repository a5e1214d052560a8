"""Resolving an unpinned spec to one version, as pip would choose it for this interpreter.

Candidates are every file the configured sources list for the project. A file counts when it is not yanked
(PEP 592: a yanked file is only for ``==`` pins, which never come here), its wheel tags fit this interpreter
(or it is an sdist), and its ``Requires-Python`` admits this Python. Versions are filtered by the spec and
pip's constraints with pip's own pre-release rule, and the highest wins.
"""

from __future__ import annotations

import functools
import platform
import threading
from collections.abc import Awaitable, Iterable, Mapping, Sequence
from functools import partial
from typing import TYPE_CHECKING, NamedTuple

from packaging.specifiers import SpecifierSet
from packaging.version import Version

from .. import _log
from .._disk.identity import canonical_name
from .._errors import NotOnIndex, RequirementsFileError, ResolutionError
from .._redact import redact
from .._requirements import choose
from .._textfile import read_text
from . import http as _http
from .files import admits, parse_file
from .http import Plan
from .sources import find_links_listing, index_listing
from .wheelmeta import requires_python

if TYPE_CHECKING:
    import httpx
    from packaging.tags import Tag

    from .._disk.pin import Pin
    from .._formats import Formats
    from .._pipconfig import IndexConfig
    from .._requirements import Requested
    from .cache import IndexCache
    from .http import Offload
    from .simple import Link

#: How many versions in a row may turn out (from their wheel's metadata) to exclude this Python before we stop.
_METADATA_CHECKS = 10


class Target(NamedTuple):
    """The interpreter pip installs for: its tags and its Python version."""

    tags: frozenset[Tag]
    python: Version


@functools.lru_cache(maxsize=1)
def this_interpreter() -> Target:
    from packaging.tags import sys_tags

    return Target(frozenset(sys_tags()), Version(platform.python_version()))


def constraint_specifier(paths: Sequence[str], project: str) -> SpecifierSet:
    """What pip's constraints files say about ``project`` (lines for other projects are ignored)."""
    from packaging.requirements import InvalidRequirement, Requirement

    combined = SpecifierSet()
    for path in paths:
        try:
            lines = read_text(path, "constraints file").splitlines()
        except RequirementsFileError:
            continue  # pip itself reports an unusable constraints file when it installs
        for line in lines:
            text = line.split(" #", 1)[0].strip()
            if not text or text.startswith(("#", "-")):
                continue
            try:
                requirement = Requirement(text)
            except InvalidRequirement:
                continue
            if canonical_name(requirement.name) != project:
                continue
            if requirement.marker is None or requirement.marker.evaluate({"extra": ""}):
                combined &= requirement.specifier
    return combined


class _Pool(NamedTuple):
    """Installable files by version, and what was left out and why (for the error message)."""

    files: dict[Version, list[Link]]
    yanked: set[Version]
    other_pythons: set[Version]


def _pool(links: Iterable[Link], project: str, target: Target, formats: Formats) -> _Pool:
    files: dict[Version, list[Link]] = {}
    yanked: set[Version] = set()
    other: set[Version] = set()
    for link in links:
        parsed = parse_file(link, project)
        if parsed is None:
            continue
        version, tags = parsed
        if not formats.allows(project, wheel=tags is not None):
            continue  # --only-binary, --no-binary: not a file the installer may take
        if link.yanked:
            yanked.add(version)
        elif (tags is not None and tags.isdisjoint(target.tags)) or not admits(link.requires_python, target.python):
            other.add(version)
        else:
            files.setdefault(version, []).append(link)
    for candidates in files.values():
        # Wheels first: pip prefers them, and their metadata can be read without building anything.
        candidates.sort(key=lambda link: not link.filename.endswith(".whl"))
    return _Pool(files, yanked - files.keys(), other - files.keys())


def resolve_plan(
    requested: Requested,
    config: IndexConfig,
    cache: IndexCache,
    target: Target,
    known: Mapping[tuple[str, str], str | None] | None = None,
) -> Plan[Version]:
    """Ask every source, then pick the best version for ``target``; :class:`ResolutionError` if none fits.
    ``known``: the Requires-Python of versions at hand (stored), by (name, version): not fetched."""
    project = requested.name
    if not config.sources:
        raise ResolutionError(f"{requested.text}: nothing installed matches and there is no index to ask (--no-index)")
    links: list[Link] = []
    for index_url in config.index_urls:
        listing = yield from index_listing(index_url, project, cache, config.retries)
        links += listing.links
    for location in config.find_links:
        listing = yield from find_links_listing(location, project, cache, config.retries)
        links += listing.links
    specifier = requested.specifier() & constraint_specifier(config.constraints, project)
    pool = _pool(links, project, target, config.formats)
    checked = 0
    for version in choose(pool.files, specifier, pre=config.pre):
        best = pool.files[version][0]
        if best.requires_python is None and best.filename.endswith(".whl") and checked < _METADATA_CHECKS:
            # The index did not say (pypiserver never does): the wheel's own METADATA decides, as it does for pip.
            checked += 1
            kept = None
            if known is not None and (project, str(version)) in known:
                requires = known[(project, str(version))]
            else:
                requires, kept = yield from _remembered_requires_python(best, config.retries, cache)
            if not admits(requires, target.python):
                _log.logger().info("skipping %s %s: Requires-Python %s", project, version, requires)
                pool.other_pythons.add(version)
                continue
            if kept is not None and sum(link.filename.endswith(".whl") for link in pool.files[version]) == 1:
                # Read whole to learn its Requires-Python (a host without metadata or ranges): the installer is
                # given these bytes, not fetching them again. Only where this version has no other wheel for this
                # interpreter: the file handed is then the one the installer would take.
                from .._disk.wheelcache import Kept, remember

                found = Kept(best.url, best.filename, kept, best.sha256)
                remember(cache.layout, config.sources, project, str(version), found)
        return version
    if any(specifier.contains(version, prereleases=True) for version in pool.yanked):
        raise ResolutionError(_no_match(requested, specifier, pool, config))  # pip takes a yanked file for a pin
    raise NotOnIndex(_no_match(requested, specifier, pool, config))


def _remembered_requires_python(link: Link, retries: int, facts: IndexCache) -> Plan[tuple[str | None, str | None]]:
    """The file's Requires-Python, learnt once per repo: one pod reads it while the others wait for its answer
    (see :meth:`IndexCache.shared`); and the sha256 of the whole wheel that read kept in the repo's wheel cache, if
    it downloaded the whole wheel (see :mod:`repoinstall._disk.wheelcache`)."""
    from .._disk.wheelcache import keep
    from .cache import key_for

    def fetch() -> Plan[dict[str, object]]:
        kept: list[str] = []

        def whole(body: bytes) -> None:
            if (sha256 := keep(facts.layout, body)) is not None:
                kept.append(sha256)

        requires = yield from requires_python(link, retries, whole)
        # The wheel is stored before this fact is written: whoever reads the fact finds the wheel.
        return {"requires_python": requires, **({"wheel": kept[0]} if kept else {})}

    key = key_for("requires-python", link.url)
    entry = yield from facts.shared(key, f"metadata of {redact(link.url)}", fetch, _a_fact, forever=True)
    requires, kept = entry["requires_python"], entry.get("wheel")
    assert requires is None or isinstance(requires, str)  # _a_fact, or fetch, made it so
    return requires, kept if isinstance(kept, str) else None


def _a_fact(entry: dict[str, object]) -> bool:
    """Whether a cached entry is a Requires-Python fact as :func:`_remembered_requires_python` writes it. One of
    another type is garbled: asked again (and rewritten), never read as "no Requires-Python"."""
    kept = entry.get("wheel")
    return (
        "requires_python" in entry
        and isinstance(entry["requires_python"], str | None)
        and (kept is None or (isinstance(kept, str) and len(kept) == 64))
    )


def _no_match(requested: Requested, specifier: SpecifierSet, pool: _Pool, config: IndexConfig) -> str:
    where = ", ".join(redact(s) for s in config.sources)
    wanted = f"{requested.name}{specifier}" if str(specifier) else requested.name
    notes = []
    if pool.files:
        shown = sorted(pool.files, reverse=True)
        notes.append("available: " + ", ".join(str(v) for v in shown[:8]) + (" ..." if len(shown) > 8 else ""))
        pres = [v for v in shown if v.is_prerelease and specifier.contains(v, prereleases=True)]
        if pres and not config.pre:
            notes.append(f"pre-releases match ({', '.join(map(str, pres[:3]))}): add --pre")
    if pool.yanked:
        notes.append("yanked (only for == pins): " + ", ".join(str(v) for v in sorted(pool.yanked)))
    if pool.other_pythons:
        notes.append("only for other Pythons or platforms: " + ", ".join(str(v) for v in sorted(pool.other_pythons)))
    detail = f" ({'; '.join(notes)})" if notes else " (the project is not there)"
    return f"no version of {wanted} for this Python on {where}{detail}"


class Resolver:
    """Resolves specs against the configured sources; sync on one ``httpx.Client`` (made on the first request
    and kept until :meth:`close`), async on an ``httpx.AsyncClient`` per call (clients belong to one loop)."""

    def __init__(self, config: IndexConfig, cache: IndexCache) -> None:
        self.config = config
        self._cache = cache
        self._client: httpx.Client | None = None
        self._guard = threading.Lock()
        #: Each hashed lock's artifacts found in this process (see :meth:`artifacts`): immutable facts.
        self._artifacts: dict[tuple[str, tuple[Pin, ...]], tuple[Pin, ...]] = {}

    def _sync_client(self) -> httpx.Client:
        with self._guard:
            if self._client is None:
                import httpx

                self._client = httpx.Client(**_http.client_settings(self.config))  # type: ignore[arg-type]
            return self._client

    def warm(self) -> None:
        """Make the HTTP client now (httpx's import, its TLS context: about 0.1 s), on a thread while something
        else runs, so that the first question asked later does not wait for it."""
        self._sync_client()

    def close(self) -> None:
        with self._guard:
            if self._client is not None:
                self._client.close()
                self._client = None

    def resolve(
        self, requested: Sequence[Requested], known: Mapping[tuple[str, str], str | None] | None = None
    ) -> list[Version | ResolutionError]:
        """One version per spec (or why not), one after another; ``known``: see :func:`resolve_plan`."""
        target = this_interpreter()
        outcomes: list[Version | ResolutionError] = []
        for one in requested:
            try:
                plan = resolve_plan(one, self.config, self._cache, target, known)
                outcomes.append(_http.run(plan, self._sync_client))
            except ResolutionError as error:
                outcomes.append(error)
        return outcomes

    def artifacts(self, pins: Sequence[Pin], env: str) -> tuple[Pin, ...] | None:
        """Each hashed pin resolved to the one artifact this interpreter takes (see :mod:`.artifacts`), kept in
        the repo's index cache; ``None`` if some has none a source lists with its sha256, or a source failed."""
        from .._lockfile.environment import THIS, tag_ranks
        from .artifacts import artifact_plan, keep, kept

        if (known := self._artifacts.get((env, tuple(pins)))) is not None:
            return known  # asked again in this process (a worker ensures the same file over and over)
        if (known := kept(pins, env, self._cache)) is not None:
            self._artifacts[(env, tuple(pins))] = known
            return known
        target, ranks = this_interpreter(), tag_ranks(THIS)
        found = []
        for pin in pins:
            try:
                plan = artifact_plan(pin, self.config, self._cache, target.python, ranks)
                one = _http.run(plan, self._sync_client)
            except ResolutionError as error:
                _log.logger().debug("%s: its artifact is not known (%s); the installer picks it", pin.member, error)
                return None
            if one is None:
                _log.logger().debug("%s: no source lists a file its hashes name; the installer picks it", pin.member)
                return None
            found.append(one)
        keep(pins, env, self._cache, found)
        self._artifacts[(env, tuple(pins))] = tuple(found)
        return tuple(found)

    async def aresolve(self, requested: Sequence[Requested], offload: Offload) -> list[Version | ResolutionError]:
        """The same from the event loop, all specs at once: the requests on an ``httpx.AsyncClient``, everything
        else (the volume's cache, local find-links directories) through ``offload``, off the loop."""
        import asyncio

        target = await offload(this_interpreter)
        # Made once, on first need, off the loop (TLS contexts and .netrc are files read); the gathered specs share it.
        made: list[asyncio.Future[httpx.AsyncClient]] = []

        def client() -> Awaitable[httpx.AsyncClient]:
            if not made:
                made.append(asyncio.ensure_future(offload(partial(_http.async_client, self.config))))
            return made[0]

        async def one(requested: Requested) -> Version | ResolutionError:
            try:
                plan = resolve_plan(requested, self.config, self._cache, target)
                return await _http.arun(plan, client, offload)
            except ResolutionError as error:
                return error

        try:
            return list(await asyncio.gather(*(one(r) for r in requested)))
        finally:
            if made:
                if made[0].done() and not made[0].cancelled() and made[0].exception() is None:
                    await made[0].result().aclose()
                else:
                    made[0].cancel()
