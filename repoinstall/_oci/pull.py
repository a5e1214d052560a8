"""A tree's image found in a registry, and the tree made from it: only the layers the store lacks are fetched.

:meth:`Source.find` resolves the tree's tag once (HEAD), then reads everything by digest, each document checked
against the digest it was asked by: a tag moved meanwhile cannot mix two images. :meth:`Source.fill` is step 5
of the install protocol for such a tree: each distribution the store lacks is stored as an installer run would
store it (its lock, a re-check, its blob fetched and checked against its digest, unpacked under bounds into a
private dir, every file checked against its RECORD, published by a rename that never replaces), then the tree is
composed from the store, and goes on through the protocol (verified, published, recorded with the image's digest).

A registry is a source, not an authority: each distribution pulled is stored as registry-sourced, named by its
layer's diff_id as recomputed while unpacking; the wheel sha256 its annotation names is recorded as a claim only
(see :mod:`repoinstall._store.identity`), so no request from an index or a lock ever composes it. Every layer the
store lacks is staged and checked before any is published, and the image must hold exactly its tree's
distributions, each in one layer: a pull that fails leaves nothing in the store. A grouped layer (several
distributions: see :mod:`.groups`) is unpacked once and split by RECORD into one dir per distribution, each
named by the group's diff_id and checked as any.
"""

from __future__ import annotations

import contextlib
import itertools
import os
import threading
import time
from collections.abc import Iterator, Mapping, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from functools import partial
from typing import TYPE_CHECKING, NamedTuple

from .. import _log
from .._disk.manifest import Artifact
from .._errors import InstallError
from .._install.fill.publish import publish
from .._redact import shown
from .._store import store as _store
from .._store.audit import fit
from .._store.split import split
from . import image as _image
from .auth import lookup
from .client import Registry
from .layer import Budget, Refused, unpack
from .reference import Reference, platform_of, platform_tag, tag_for
from .settings import Settings

if TYPE_CHECKING:
    from collections.abc import Callable

    from packaging.requirements import Requirement

    from .._disk.dists import Hashed
    from .._disk.identity import TreeId
    from .._disk.layout import Layout
    from .._install.backends.run import Built
    from .._install.staging import Staging
    from .._lock.locks import TreeLocks
    from .._requirements import Requested
    from .._store.identity import DistId

#: What a tree made from an image records as its installer.
INSTALLER = "oci-image"
#: The most layers of one image fetched and unpacked at once: one core's fewer than the machine has (the process's
#: other threads, and its peers, need one), so on two cores one layer at a time, overlapping only the wait for the
#: next layer's lock. More unpacking threads than cores lose time: each file's create and write lets go of the GIL,
#: and a thread that gets it back only after another's switch interval (5 ms) waits more than it writes.
_WORKERS = 4


class Found(NamedTuple):
    """A tree's image in the registry: its manifest (with diff_ids) and where it was found."""

    image: _image.Image
    reference: str


class Source:
    """A registry repository that trees are pulled from (one client, shared by an ensure's worker threads)."""

    def __init__(self, reference: Reference, settings: Settings) -> None:
        self.reference = reference
        self.settings = settings
        self._registry: Registry | None = None
        self._guard = threading.Lock()
        #: The distributions a tree of this ensure has claimed to store (before taking their locks), each with the
        #: event set once it let them go (stored, or failed). Invariant: changed only under ``_guard``, one claim
        #: per distribution, and an event is set only after its entry is gone. A claim is taken just before its
        #: lock, in the same DistId order, and let go after every lock (so never a circle): another tree of the
        #: same ensure waits on it and wakes at once, instead of polling the lock's note.
        self._storing: dict[DistId, threading.Event] = {}

    def registry(self) -> Registry:
        with self._guard:
            if self._registry is None:
                self._registry = Registry(self.reference, self.settings, lookup(self.reference.host), push=False)
            return self._registry

    def close(self) -> None:
        if self._registry is not None:
            self._registry.close()

    def _claim(self, dist: DistId, events: dict[DistId, threading.Event]) -> bool:
        """Claim ``dist`` for this tree, in ``events``, once no other tree of this ensure has it claimed; whether
        one had (then it may be stored now)."""
        waited = False
        while True:
            with self._guard:
                event = self._storing.get(dist)
                if event is None:
                    events[dist] = self._storing[dist] = threading.Event()
                    return waited
            event.wait()
            waited = True

    def _let_go(self, events: dict[DistId, threading.Event]) -> None:
        with self._guard:
            for dist, event in events.items():
                if self._storing.get(dist) is event:
                    del self._storing[dist]
        for event in events.values():
            event.set()

    def find(self, tid: TreeId) -> Found | None:
        """The image of ``tid`` for its environment, or ``None`` if the registry has none."""
        registry = self.registry()
        tag = tag_for(tid)
        where = self.reference.tagged(tag)
        digest = registry.manifest_digest(tag)
        if digest is None:
            return None
        got = registry.get_manifest(digest)
        if got is None:
            return None
        document = _image.parse_json(got[0], where)
        kind = _image.media_type(document, got[1])
        if _image.is_index(kind):
            chosen = _image.pick(document, tid.env, where)
            if chosen is None:
                # Not in the index: this platform's own tag, which its pusher writes before the index (a pusher
                # that died in between, or an entry a racing push dropped, is still found).
                digest = registry.manifest_digest(platform_tag(tid)) or ""
                if not digest:
                    return None  # pushed for other platforms only
            else:
                digest = str(chosen["digest"])
            got = registry.get_manifest(digest)
            if got is None:
                raise Refused(f"{where}: its index names {digest}, which the registry does not have: refused")
        elif kind != _image.MANIFEST:
            raise Refused(f"{where}: names the unknown media type {kind!r}: refused")
        image = _image.read_manifest(got[0], digest, tid.env, where, self.settings)
        config = registry.fetch_document(image.config_digest, image.config_size, where)
        image = _image.with_config(image, config, tid.env, platform_of(tid.env), where)
        return Found(image, self.reference.pinned(image.digest))

    def _fetch(
        self, found: Found, layer: _image.LayerRef, scratch: str, budget: Budget, hashed: Hashed
    ) -> dict[DistId, str]:
        """``layer``'s distributions fetched, unpacked and checked into private dirs under ``scratch``: their
        paths there. Nothing is published: a layer's files reach the store only once every layer is checked.
        One pass over its bytes as they arrive: the blob's digest, its decompression, the diff_id, the files
        written and hashed; its digest is confirmed as its last byte is read, and only then is it checked and
        later published (a blob that is not its digest leaves a dir in this private staging, nothing more)."""
        os.makedirs(scratch)
        what = f"{found.reference}: layer {layer.digest} ({layer.held})"
        attempts = itertools.count()

        def unpacked(chunks: Iterator[bytes]) -> str:
            staged = os.path.join(scratch, f"dist-{next(attempts)}")  # a GET asked again starts afresh
            os.mkdir(staged)
            unpack(chunks, layer.size, layer.diff_id, staged, what, budget, hashed)  # its diff_id recomputed
            return staged

        staged = self.registry().stream_blob(layer.digest, layer.size, what, unpacked, scratch)
        assert staged  # never False: a missing blob is an error
        return _checked(layer.dists, staged, os.path.join(scratch, "split"), what, hashed)

    def fill(
        self,
        found: Found,
        layout: Layout,
        locks: TreeLocks,
        tid: TreeId,
        requested: Requested,
        staging: Staging,
        *,
        environment: Mapping[str, str] | None = None,
    ) -> tuple[Built, int]:
        """Step 5 of the protocol from an image: store what the store lacks, compose the tree in ``staging``.
        ``environment``: the tree's interpreter's marker values, to check that the image holds exactly the tree's
        distributions (what its root's requirements reach)."""
        from .._install.backends.run import Built
        from .._install.fill.compose import compose_stored

        # A lock's tree never comes here: it installs the lock's wheels instead (see .wheels.fill_locked).
        image = found.image
        started = time.monotonic()
        by_dist = {dist: layer for layer in image.layers for dist in layer.dists}
        budget = Budget(self.settings)  # what this image's layers may write, in all

        hashed = staging.hashed  # each file's digest as it was unpacked: checked against its RECORD, not re-read

        def fetch(layer: _image.LayerRef, scratch: str) -> dict[DistId, str]:
            return self._fetch(found, layer, scratch, budget, hashed)

        # Stage every layer the store lacks, each checked, holding each one's lock (taken in DistId order, as
        # every holder of several: never a circle) so that a peer pulling another tree that shares it fetches it
        # once. Then publish them all: a pull that fails anywhere leaves nothing in the store. The rename is the
        # commit point (it never replaces: a peer's copy there is the same diff_id's bytes); the locks only save
        # duplicate work. Each layer is fetched on a small pool as soon as its lock is held, so layers download,
        # decompress and hash beside each other and beside the wait for the next lock (zlib and hashlib release
        # the GIL); every fetch has ended, done or failed, before any lock is let go or anything is published.
        staged: list[tuple[DistId, Future[dict[DistId, str]]]] = []
        # A grouped layer is fetched once, under the lock of the first of its distributions the store lacks; each
        # of the others is staged from it, and published, only under its own lock, taken in its turn.
        fetched: dict[str, Future[dict[DistId, str]]] = {}  # a layer's digest -> its distributions staged
        lacking = [dist for dist in sorted(by_dist) if not fit(layout, dist)]
        workers = max(1, min(len({by_dist[dist].digest for dist in lacking}), (os.cpu_count() or 1) - 1, _WORKERS))
        pool = ThreadPoolExecutor(max_workers=workers, thread_name_prefix="repoinstall-layer")
        events: dict[DistId, threading.Event] = {}  # what this tree has claimed, for the others of its ensure
        with contextlib.ExitStack() as held_locks:
            held_locks.callback(self._let_go, events)  # the first entered, so the last done: after every release
            try:
                for number, dist in enumerate(lacking):
                    if self._claim(dist, events) and _store.present(layout, dist):
                        continue  # another tree of this ensure stored it
                    ready = partial(_store.present, layout, dist)
                    held = held_locks.enter_context(locks.hold(dist.lock_key(), ready=ready))
                    if held.peer_finished or _store.present(layout, dist):
                        continue  # a peer stored it while we waited
                    layer = by_dist[dist]
                    if layer.digest not in fetched:
                        scratch = os.path.join(staging.tmp, f"layer-{number}")
                        fetched[layer.digest] = pool.submit(fetch, layer, scratch)
                    staged.append((dist, fetched[layer.digest]))
                paths = {dist: future.result()[dist] for dist, future in staged}
            finally:
                pool.shutdown(wait=True, cancel_futures=True)

            def refetch(dist: DistId) -> str:
                return fetch(by_dist[dist], os.path.join(staging.tmp, f"again-{dist.name}-{dist.leaf}"))[dist]

            _holds_its_tree(layout, tid, found.reference, by_dist, paths, environment, refetch)
            for dist, path in paths.items():
                publish(layout, dist, path, checked=True)
        pulled = sum(layer.size for layer in {by_dist[dist] for dist, _ in staged})
        _log.logger().info(
            "%s: %d of %d layers stored from %s (%d bytes, %.1fs)",
            tid,
            len(staged),
            len(image.layers),
            found.reference,
            pulled,
            time.monotonic() - started,
        )

        def restore(gone: Sequence[DistId], where: str) -> None:
            again: dict[str, dict[DistId, str]] = {}
            for number, dist in enumerate(gone):
                layer = by_dist[dist]
                if layer.digest not in again:
                    again[layer.digest] = fetch(layer, os.path.join(where, str(number)))
                publish(layout, dist, again[layer.digest][dist], checked=True)

        # gc may take a stored distribution no tree holds between the loop above and the links: composed again
        # holding every distribution's lock, after fetching what was taken (see _install.fill.compose).
        _, restored = compose_stored(layout, locks, list(by_dist), staging.target, staging.tmp, restore, str(tid))
        artifacts = tuple(
            Artifact(claim.name, str(claim.version), diff_id=layer.diff_id, claimed=claim.sha256)
            for layer in image.layers
            for claim in layer.claims
        )
        return Built(INSTALLER, found.reference, artifacts), len(staged) + restored


def _checked(
    dists: tuple[DistId, ...], unpacked: str, destination: str, what: str, hashed: Hashed
) -> dict[DistId, str]:
    """A layer of ``dists`` unpacked at ``unpacked``, each distribution's files checked against its RECORD (and
    sealed): one's where it was unpacked, a group's split into one dir each under ``destination``. ``hashed``:
    each file's digest as the unpack wrote it."""
    parts = {dists[0]: unpacked} if len(dists) == 1 else _split(dists, unpacked, destination, what)
    for dist, part in parts.items():
        if (problem := _store.check(part, dist, hashed, seal=True)) is not None:
            raise Refused(f"{what}: not what its RECORD says: {shown(problem)}: refused")
    return parts


def _split(dists: tuple[DistId, ...], unpacked: str, destination: str, what: str) -> dict[DistId, str]:
    """A grouped layer unpacked at ``unpacked``, split by RECORD (as an installer's run is) into one dir per
    distribution under ``destination``: each of ``dists``'s. :class:`Refused`, one line, for a file no RECORD (or
    two) lists, a distribution the layer holds that its annotations do not name, or one they name that it lacks."""
    try:
        made = split(unpacked, destination)
    except InstallError as error:
        raise Refused(f"{what}: {shown(error)}: refused") from None  # it names the layer's paths
    parts: dict[DistId, str] = {}
    for dist_info, part in made.items():
        name, _, version = dist_info.removesuffix(".dist-info").rpartition("-")
        dist = next((dist for dist in dists if dist.names(name, version)), None)
        if dist is None or dist in parts:
            raise Refused(
                f"{what}: holds {shown(dist_info)}, which its annotations do not name (or name once): refused"
            )
        parts[dist] = part
    if missing := [dist for dist in dists if dist not in parts]:
        raise Refused(f"{what}: holds no {missing[0].name} {missing[0].version}, which its annotations name: refused")
    return parts


def _holds_its_tree(
    layout: Layout,
    tid: TreeId,
    reference: str,
    by_dist: Mapping[DistId, _image.LayerRef],
    staged: Mapping[DistId, str],
    environment: Mapping[str, str] | None,
    refetch: Callable[[DistId], str],
) -> None:
    """Refuse an image that holds other than exactly its tree's distributions: every layer's distribution is one
    its root's ``Requires-Dist`` reaches (markers evaluated for the tree's interpreter), and every requirement
    reached has its layer. ``staged``: where the ones not yet stored are; ``refetch``: a stored one's layer fetched
    again (checked, into private staging), where gc took it since it was found stored."""
    from .._store.requires import closure, requirements

    def read(dist: DistId) -> tuple[list[Requirement], str | None] | None:
        if dist in staged:
            return requirements(staged[dist])
        stored = _store.path(layout, dist)
        try:
            found = requirements(stored)
        except FileNotFoundError:
            found = None
        if found is None and not os.path.isdir(stored):
            # gc took it (no tree held it; its removal renames it away whole) after the loop found it stored: its
            # layer's metadata is read again from the registry. The compose that follows stores it again.
            return requirements(refetch(dist))
        return found

    needs = {}
    for dist in by_dist:
        found = read(dist)
        if found is None:
            raise Refused(f"{reference}: the metadata of {dist.name} {dist.version} cannot be read: refused")
        needs[dist.name] = found[0]
    if environment is None:
        return  # no interpreter to evaluate markers for: the tree's verify still checks its own dist-info
    reached = closure(tid.name, tid.extras, needs, environment)
    if reached is None:
        raise Refused(f"{reference}: a requirement of {tid} names a distribution the image does not hold: refused")
    versions = {dist.name: dist.version for dist in by_dist}
    if extra := sorted(set(needs) - set(reached)):
        raise Refused(f"{reference}: holds {extra[0]}, which {tid} does not require: refused")
    for name, specifier in reached.items():
        if not specifier.contains(versions[name], prereleases=True):
            raise Refused(f"{reference}: holds {name} {versions[name]}, which {tid} requires as {specifier}: refused")
