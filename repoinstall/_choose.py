"""Which tree satisfies a spec, offline first.

A pinned spec names its tree with no disk access. A range takes the highest installed version that matches,
by pip's pre-release rule, with no network at all; only if none does (or with ``refresh``) is the index asked,
through the answers cached on the volume, as pip would ask it.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Iterable, Sequence
from functools import partial
from typing import TYPE_CHECKING, NamedTuple

from . import _log
from ._disk import fs as _fs
from ._disk.check import State, check
from ._disk.identity import TreeId
from ._disk.layout import RECORDS, Layout
from ._disk.manifest import as_recorded
from ._errors import NotInstalled, RepoinstallError, ResolutionError
from ._requirements import Requested, parse_spec

if TYPE_CHECKING:
    from packaging.version import Version

    from ._index.http import Offload
    from ._index.resolve import Resolver
    from ._options import FileIndex, InstallOptions, LockSettings

#: A spec's tree, ``None`` if its marker is false here, or why it has none (the index could not say, bad input).
Choice = TreeId | RepoinstallError | None


class Offline(NamedTuple):
    """What the repo alone says about a spec: its tree (``None``: marker false, or nothing installed matches)
    and whether the index must be asked (nothing matches, or ``refresh``)."""

    requested: Requested
    tid: TreeId | None
    ask_index: bool


class Chooser:
    """Chooses trees for specs in one repo and environment; owns the index resolver, made on first need."""

    def __init__(
        self,
        layout: Layout,
        env: str,
        settings: LockSettings,
        install: InstallOptions | None,
        *,
        refresh: bool,
        pre: bool,
        index_ttl: float,
        look_up_artifacts: bool = True,
    ) -> None:
        self._layout = layout
        self._env = env
        self._settings = settings
        self._install = install
        self.refresh = refresh
        self.pre = pre
        self.index_ttl = index_ttl
        #: Whether a lock's pins are looked up on the index (off with ``--from``: the registry supplies the lock's
        #: wheels by their hashes, and a hashed lock with ``--from`` asks no index).
        self.look_up_artifacts = look_up_artifacts
        self._resolver: Resolver | None = None
        #: Resolvers for the specs of requirements files with index lines, one per distinct set of lines.
        self._file_resolvers: dict[FileIndex, Resolver] = {}
        #: Threads (--jobs) may ask for a resolver first at once: one resolver per index setting, one HTTP client
        #: each, all closed by close().
        self._guard = threading.Lock()

    def close(self) -> None:
        if self._resolver is not None:
            self._resolver.close()
        for resolver in self._file_resolvers.values():
            resolver.close()

    def pinned(self, requested: Requested) -> Requested:
        """A lock's request as one resolved closure, named for what it holds (its names and the closure's digest:
        :func:`~repoinstall._disk.identity.lock_name`): each pin naming one artifact by URL and sha256 where the
        lock did not (hashed requirements: a version and the hashes of several files; see
        :mod:`repoinstall._index.artifacts`), so the tree is the one a ``pylock.toml`` of the same resolution
        names, and goes through the store; a pin whose artifact cannot be found stays as it is (the installer then
        picks among its hashes), as does every pin with ``--from`` (no index is asked: the registry gives the
        wheels by the lock's hashes). A tree installed under its former name (``locked-<16 hex>``) keeps it."""
        if not requested.locked:
            return requested
        from packaging.version import Version

        from ._disk.check import present
        from ._disk.identity import legacy_lock_name, lock_name
        from ._disk.pin import closure_key
        from ._lockfile.request import request_of

        given = requested.locked
        pins = given
        if self.look_up_artifacts and not all(pin.sha256 and pin.url for pin in pins):
            pins = self._make_resolver(requested.file_index).artifacts(pins, self._env) or pins
        key = closure_key(pins)
        # A tree an earlier release installed from this very file, or from its closure, keeps its name while it is
        # here: found, verified, exported and removed by the files that named it. One stat each where there is none.
        for former, its_pins in ((legacy_lock_name(closure_key(given)), given), (legacy_lock_name(key), pins)):
            tid = TreeId(self._env, former, Version("1"))
            if os.path.lexists(self._layout.tree_path(tid)) and present(self._layout, tid):
                former_request = request_of(its_pins, requested.text, requested.source, former)
                return former_request._replace(file_index=requested.file_index)
        # Of the closure alone, so every pod names it alike whatever it can reach (one with its index down pulls
        # the tree's image by that name). Its file's index lines stay with it: its install asks those indexes.
        named = lock_name(key, sorted(p.name for p in pins))
        return request_of(pins, requested.text, requested.source, named)._replace(file_index=requested.file_index)

    def choose(self, specs: Iterable[Requested]) -> list[Choice]:
        offline = [self.offline(spec) for spec in specs]
        asking = [one.requested for one in offline if one.ask_index]
        answers: dict[int, Version | ResolutionError] = {}
        for index, numbered in _by_index(asking).items():
            resolver = self._make_resolver(index)
            answers.update(zip((n for n, _ in numbered), resolver.resolve([r for _, r in numbered]), strict=True))
        return self._settle(offline, [answers[n] for n in range(len(asking))])

    async def achoose(self, specs: Sequence[Requested], offload: Offload) -> list[Choice]:
        """:meth:`choose` from the event loop: what the repo says (a walk of its records) through ``offload``, off the
        loop; the index asked with ``httpx.AsyncClient`` (its cache, on the volume, read and written off the loop
        too)."""
        return await self.aanswered(await offload(partial(self.offline_all, specs)), offload)

    async def aanswered(self, offline: list[Offline], offload: Offload) -> list[Choice]:
        """:meth:`achoose` once the repo has said what it says: the index asked for those it could not settle."""
        asking = [one.requested for one in offline if one.ask_index]
        answers: dict[int, Version | ResolutionError] = {}
        for index, numbered in _by_index(asking).items():
            resolver = await offload(partial(self._make_resolver, index))
            found = await resolver.aresolve([r for _, r in numbered], offload)
            answers.update(zip((n for n, _ in numbered), found, strict=True))
        return self._settle(offline, [answers[n] for n in range(len(asking))])

    def offline_all(self, specs: Iterable[Requested]) -> list[Offline]:
        return [self.offline(spec) for spec in specs]

    def offline(self, requested: Requested | str) -> Offline:
        """What the repo alone says about a spec, with no network."""
        if isinstance(requested, str):
            requested = parse_spec(requested, source="api")
        if not requested.marker_applies():
            return Offline(requested, None, False)
        version = requested.pinned_version()
        if version is not None:
            return Offline(requested, TreeId(self._env, requested.name, version, requested.extras), False)
        installed = self._installed_match(requested)
        return Offline(requested, installed, installed is None or self.refresh)

    def named_tree(self, requested: Requested) -> TreeId | None:
        """For verify: the tree a spec names even when that tree is missing or broken (a range: an installed one)."""
        offline = self.offline(requested)
        if offline.ask_index and offline.tid is None:
            raise NotInstalled(f"{requested.text}: no installed version matches")
        return offline.tid

    def _installed_match(self, requested: Requested) -> TreeId | None:
        try:
            return self._layout.retrying(self._highest_installed, requested)
        except PermissionError as error:  # the project's records directory is another UID's, and private
            raise _fs.denied(self._layout.root, error, (RECORDS, self._env, requested.name)) from None

    def _highest_installed(self, requested: Requested) -> TreeId | None:
        # The highest installed version the spec admits, by the same rule as the index: pip's pre-release rule.
        found = {
            tid.version: tid
            for tid in self._layout.discover(RECORDS, self._env, requested.name)
            if tid.extras == requested.extras
        }
        for candidate in requested.choose(found, pre=self.pre):
            tid = found[candidate]
            status = check(self._layout, tid)
            if status.state is State.PRESENT:
                return as_recorded(self._layout, tid, status.record)
        return None

    def _settle(self, offline: list[Offline], answers: list[Version | ResolutionError]) -> list[Choice]:
        """Each spec's tree: from the repo alone, or from the index's answer (in order, for those that asked)."""
        pending = iter(answers)
        return [self._merge(one, next(pending)) if one.ask_index else one.tid for one in offline]

    def _merge(self, offline: Offline, answer: Version | ResolutionError) -> TreeId | RepoinstallError:
        requested, installed = offline.requested, offline.tid
        if isinstance(answer, ResolutionError):
            if installed is None:
                return answer
            # --refresh with the index unreachable: what is installed still satisfies the spec.
            _log.logger().warning("%s; keeping installed %s", answer, installed)
            return installed
        if installed is not None and installed.version >= answer:
            return installed
        return TreeId(self._env, requested.name, answer, requested.extras)

    def _make_resolver(self, index: FileIndex | None = None) -> Resolver:
        """The resolver for the run's index settings, or for those with a requirements file's lines ``index``."""
        from ._index.cache import IndexCache
        from ._index.resolve import Resolver
        from ._options import for_file
        from ._pipconfig import index_config

        with self._guard:
            if index is not None:
                if (resolver := self._file_resolvers.get(index)) is None:
                    cache = IndexCache(self._layout, self.index_ttl, self._settings)
                    config = index_config(for_file(self._install, index), pre=self.pre)
                    resolver = self._file_resolvers[index] = Resolver(config, cache)
                return resolver
            if self._resolver is None:
                cache = IndexCache(self._layout, self.index_ttl, self._settings)
                self._resolver = Resolver(index_config(self._install, pre=self.pre), cache)
            return self._resolver


def _by_index(asking: list[Requested]) -> dict[FileIndex | None, list[tuple[int, Requested]]]:
    """The specs to ask an index about, numbered, grouped by their file's index lines (``None``: the run's)."""
    groups: dict[FileIndex | None, list[tuple[int, Requested]]] = {}
    for number, one in enumerate(asking):
        groups.setdefault(one.file_index, []).append((number, one))
    return groups
