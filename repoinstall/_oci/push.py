"""A tree pushed as an image: one layer per stored distribution (the small ones grouped in a tree of more than
:data:`.groups.CAP`), its config and manifest, and an index at its tag that holds one manifest per platform of
the tree's interpreter.

Every stored distribution of the tree is first hashed against its RECORD (:func:`check`, verify's own audit):
a damaged one stops the push before any blob is sent, since every pull of the tag would fail on it.

Every blob is HEADed first and sent only when the registry lacks it, so a second tree that shares libraries
uploads only its own distributions. The manifest goes up by digest and under this platform's own tag
(``<tag>--<platform>``), then the tag is pointed at an index rebuilt from every platform tag of the tree
(x86_64 and aarch64 clusters share one reference), checked after each write: see :func:`_point_tag`.
"""

from __future__ import annotations

import os
import tempfile
from typing import Any, NamedTuple

from .._disk import fs as _fs
from .._disk.identity import TreeId, has_bytecode
from .._disk.layout import Layout
from .._disk.manifest import TreeEntry, recorded_dists
from .._errors import InstallError
from .._store import audit as _audit
from .._store import store as _store
from .._store.identity import DistId, of_row
from .._store.inventory import Stored
from . import image as _image
from .client import Registry
from .groups import CAP, grouped
from .layer import Layer, build, size_of
from .reference import platform_of, platform_prefix, platform_tag, tag_for

#: Rounds of rebuild, write and check of a tree's index before a push gives up on a tag others keep rewriting.
_ROUNDS = 8


class Pushed(NamedTuple):
    """One tree's image as pushed: where (by tag and by digest), and what it took."""

    tree: str
    env: str
    tag: str
    reference: str
    #: The index's digest (what the tag names) and the manifest's for this platform.
    digest: str
    manifest: str
    layers: int
    #: Layers uploaded (the others the registry had: HEAD said so), and their bytes.
    uploaded: int
    uploaded_bytes: int
    #: The wheels its wheels manifest lists beside it (0 for a tree pulled as layers), and how many of them were
    #: uploaded, with their bytes.
    wheels: int = 0
    wheels_uploaded: int = 0
    wheels_uploaded_bytes: int = 0

    def as_dict(self) -> dict[str, object]:
        return self._asdict()


def dists_of(tid: TreeId, record: TreeEntry) -> list[tuple[DistId, DistId]]:
    """The stored distributions a tree's record names, in a fixed order, each with what its layer's annotations
    say (a wheel-verified one's own name; a registry-sourced one's name with the wheel sha256 it was claimed to be,
    a claim carried on as a claim: the puller names it by the layer's diff_id again). :class:`InstallError` if a
    row has no artifact hash (a tree the store did not compose: it has no layers to push)."""
    found = []
    for row in recorded_dists(record):
        name, version = row.get("name", ""), row.get("version", "")
        dist = of_row(tid.env, row)
        claim = of_row(tid.env, {"name": name, "version": version, "sha256": row.get("claimed", "")})
        if dist is None or (dist.layer and claim is None):
            raise InstallError(f"{tid}: {name} {version} has no artifact hash in its record: it cannot be pushed")
        found.append((dist, dist if claim is None else claim))
    return sorted(found)


def check(layout: Layout, tid: TreeId, record: TreeEntry, seen: set[DistId] | None = None) -> None:
    """Hash every file of each stored distribution of the tree ``tid`` against its RECORD, as ``verify`` does
    (:func:`repoinstall._store.audit.check`); :class:`InstallError`, one line naming the first that is missing or
    damaged and one damaged file by its path in the tree, if one is. Called for every tree of a push before any
    blob is sent, so a damaged store uploads nothing. ``seen``: distributions checked already (added to)."""
    for dist, _ in dists_of(tid, record):
        if seen is not None and dist in seen:
            continue
        stored = Stored.of(dist)
        try:
            found = _audit.check(layout, stored)
        except FileNotFoundError:
            found = None  # set aside or collected since the tree's record was read
        except PermissionError as error:
            raise _fs.denied(layout.root, error, stored.parts()) from None
        if found is None:
            raise InstallError(f"{tid}: {dist} is not in the store: `repoinstall verify --repair` puts it back")
        if not found.whole:
            raise InstallError(
                f"{tid}: {dist} is damaged in the store ({_damage(found)}): nothing was pushed; "
                "`repoinstall verify --repair` installs it afresh"
            )
        if seen is not None:
            seen.add(dist)


def _damage(found: _audit.Audit) -> str:
    """What is wrong with a stored distribution, as the first damaged file by its path in the tree."""
    problems = found.problems
    for label, files in (
        ("changed", problems.changed),
        ("missing", problems.missing),
        ("not in its RECORD", problems.extra),
    ):
        if files:
            more = len(problems.changed) + len(problems.missing) + len(problems.extra) - 1
            return f"{files[0]} {label}" + (f", and {more} more file(s)" if more else "")
    return found.why()


def push(layout: Layout, registry: Registry, tid: TreeId, record: TreeEntry) -> Pushed:
    """Push the tree ``tid`` (installed, its ``record`` read, its stored distributions :func:`check`-ed) to
    ``registry``."""
    dists = dists_of(tid, record)
    before, before_bytes = registry.uploaded, registry.uploaded_bytes
    for dist, _ in dists:
        if not _store.present(layout, dist):
            raise InstallError(f"{tid}: {dist} is not in the store: `repoinstall verify --repair` puts it back")
    # Which distributions share a layer: by their names and sizes alone (the tree's, whatever the repo), and only
    # past the cap (a tree within it keeps one layer per distribution). Names are unique within a tree.
    by_name = {dist.name: (dist, annotated) for dist, annotated in dists}
    if len(by_name) != len(dists):
        raise InstallError(f"{tid}: its record names a distribution twice: it cannot be pushed")
    if len(dists) > CAP:
        units = grouped({name: size_of(_store.path(layout, dist)) for name, (dist, _) in by_name.items()})
    else:  # no file read to weigh them: each has its own layer
        units = [(dist.name,) for dist, _ in dists]
    layers: list[tuple[tuple[DistId, ...], Layer]] = []
    with tempfile.TemporaryDirectory(prefix="repoinstall-push-") as scratch:
        for number, names in enumerate(units):
            held = [by_name[name] for name in names]
            layer = build([_store.path(layout, dist) for dist, _ in held], os.path.join(scratch, f"{number}.tar.gz"))
            registry.push_blob(layer.digest, layer.size, path=layer.path)
            os.unlink(layer.path)
            layers.append((tuple(annotated for _, annotated in held), layer))
    uploaded, uploaded_bytes = registry.uploaded - before, registry.uploaded_bytes - before_bytes
    platform = platform_of(tid.env)
    config = _image.config(tid.env, tid.pin, platform, [layer for _, layer in layers])
    registry.push_blob(config.digest, len(config.data), data=config.data)
    manifest = _image.manifest(tid.env, tid.pin, config, layers)
    registry.put_manifest(manifest.digest, manifest)
    # This platform's tag first: the index's writers (ours below, and any other platform's) rebuild from it.
    registry.put_manifest(platform_tag(tid), manifest)
    tag = tag_for(tid)
    index = _point_tag(registry, tid, tag, _image.entry(tid.env, platform, manifest))
    return Pushed(
        tid.pin,
        tid.env,
        registry.reference.tagged(tag),
        registry.reference.pinned(index.digest),
        index.digest,
        manifest.digest,
        len(layers),
        uploaded,
        uploaded_bytes,
    )


def _point_tag(registry: Registry, tid: TreeId, tag: str, own: dict[str, Any]) -> _image.Blob:
    """Point ``tag`` at an index of every platform of the tree (``own``, this platform's entry, included):
    rebuilt from the platform tags, written, and checked, until the check finds every platform's manifest in it.

    Invariant, kept by the check after each write: when this returns, the index at ``tag`` as read after our
    last write named our manifest and, for every platform tag of the tree that the registry listed then, that
    tag's manifest.
    Why it holds against a racing pusher of another platform: the registry has no compare-and-swap, so two
    pushers can both read before either writes, and the later write drops the other's entry. But each pusher
    writes its platform tag before its index, so the one whose write dropped an entry lists the other's
    platform tag in its check (after its own write, so after the other's platform tag), misses its entry,
    and writes again; the rebuilds agree once both platform tags are listed, so the writes converge.
    Limits: a registry whose tag listing lags its writes (eventually consistent) can hide a platform tag
    from a check; a pusher that dies between its platform tag and its index leaves its platform out until the
    next push of any platform of the tree puts it in; after ``_ROUNDS`` rounds of interference, exit 1.
    """
    for _ in range(_ROUNDS):
        index = _image.index(_entries(registry, tid, tag, own))
        registry.put_manifest(tag, index)
        got = registry.get_manifest(tag)
        held = _by_env(_index_entries(registry, tag, got))
        wanted = {**_by_env(_platforms(registry, tid)), **_by_env([own])}
        if all(held.get(env, {}).get("digest") == item["digest"] for env, item in wanted.items()):
            return index if got is None or got[0] == index.data else _image.Blob(got[0], _image.INDEX)
    raise InstallError(
        f"{registry.reference.tagged(tag)}: other pushes kept rewriting the tag; push again to add this platform"
    )


def _by_env(entries: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    return {str(item["annotations"][_image.ENV]): item for item in entries}


def _entries(registry: Registry, tid: TreeId, tag: str, own: dict[str, Any]) -> list[dict[str, Any]]:
    """The index's entries: those of the index there now (some pushed before platform tags existed), replaced
    by every platform tag's manifest, and ours (even if the tag listing does not show our platform tag yet)."""
    found = _by_env(_index_entries(registry, tag, registry.get_manifest(tag)))
    found.update(_by_env(_platforms(registry, tid)))
    found.update(_by_env([own]))
    return list(found.values())


def _platforms(registry: Registry, tid: TreeId) -> list[dict[str, Any]]:
    """An index entry for each platform tag of ``tid``'s image that holds a manifest of this very tree for an
    environment of its interpreter (any other is not ours to list, and is left out)."""
    interpreter = "-".join(tid.env.split("-")[:2]) + "-"
    entries = []
    for name in sorted(registry.tags(platform_prefix(tid))):
        got = registry.get_manifest(name)
        if got is None:
            continue  # gone since the listing
        try:
            document = _image.parse_json(got[0], registry.reference.tagged(name))
        except InstallError:
            continue
        notes = document.get("annotations")
        if not isinstance(notes, dict):
            continue
        env = notes.get(_image.ENV)
        if (
            document.get("mediaType") != _image.MANIFEST
            or not isinstance(env, str)
            or notes.get(_image.TREE) != tid.pin
            or not env.startswith(interpreter)
            or env.count("-") != 2
            or has_bytecode(env) != has_bytecode(tid.env)
        ):
            continue
        entries.append(_image.entry(env, platform_of(env), _image.Blob(got[0], _image.MANIFEST)))
    return entries


def _index_entries(registry: Registry, tag: str, got: tuple[bytes, str] | None) -> list[dict[str, Any]]:
    """The entries of ours (each naming its environment) in the index ``got`` at ``tag``; none if it is not an
    index of ours."""
    if got is None:
        return []
    try:
        document = _image.parse_json(got[0], registry.reference.tagged(tag))
    except InstallError:
        return []
    if not _image.is_index(_image.media_type(document, got[1])) or not isinstance(document.get("manifests"), list):
        return []
    kept = []
    for item in document["manifests"]:
        notes = item.get("annotations") if isinstance(item, dict) else None
        if isinstance(notes, dict) and isinstance(notes.get(_image.ENV), str) and isinstance(item.get("digest"), str):
            kept.append(item)
    return kept
