"""A tree pushed as an image: one layer per stored distribution, its config and manifest, and an index at its
tag that holds one manifest per platform of the tree's interpreter.

Every blob is HEADed first and sent only when the registry lacks it, so a second tree that shares libraries
uploads only its own distributions. The manifest goes up by digest, then the tag is pointed at an index that
keeps the entries other platforms pushed there (x86_64 and aarch64 clusters share one reference): two pushes
of different platforms at one instant can lose one entry, which the next push of that platform puts back.
"""

from __future__ import annotations

import os
import tempfile
from typing import Any, NamedTuple

from .._dstore import store as _store
from .._dstore.identity import DistId
from .._errors import InstallError, InvalidRequirement
from .._store.identity import TreeId
from .._store.layout import Layout
from .._store.manifest import TreeEntry, recorded_dists
from . import image as _image
from .client import Registry
from .layer import Layer, build
from .reference import platform_of, tag_for


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

    def as_dict(self) -> dict[str, object]:
        return self._asdict()


def dists_of(tid: TreeId, record: TreeEntry) -> list[DistId]:
    """The stored distributions a tree's record names, in a fixed order; :class:`InstallError` if one row has no
    artifact hash (a tree the store did not compose: it has no layers to push)."""
    found = []
    for row in recorded_dists(record):
        name, version, sha256 = row.get("name", ""), row.get("version", ""), row.get("sha256", "")
        if not sha256:
            raise InstallError(f"{tid}: {name} {version} has no artifact hash in its record: it cannot be pushed")
        try:
            found.append(DistId.of(tid.env, name, version, sha256))
        except InvalidRequirement as error:
            raise InstallError(f"{tid}: {error}") from None
    return sorted(found)


def push(layout: Layout, registry: Registry, tid: TreeId, record: TreeEntry) -> Pushed:
    """Push the tree ``tid`` (installed, its ``record`` read) to ``registry``."""
    dists = dists_of(tid, record)
    before, before_bytes = registry.uploaded, registry.uploaded_bytes
    layers: list[tuple[DistId, Layer]] = []
    with tempfile.TemporaryDirectory(prefix="repoinstall-push-") as scratch:
        for number, dist in enumerate(dists):
            if not _store.present(layout, dist):
                raise InstallError(f"{tid}: {dist} is not in the store: `repoinstall verify --repair` puts it back")
            layer = build(_store.path(layout, dist), os.path.join(scratch, f"{number}.tar.gz"))
            registry.push_blob(layer.digest, layer.size, path=layer.path)
            os.unlink(layer.path)
            layers.append((dist, layer))
    uploaded, uploaded_bytes = registry.uploaded - before, registry.uploaded_bytes - before_bytes
    platform = platform_of(tid.env)
    config = _image.config(tid.env, tid.pin, platform, [layer for _, layer in layers])
    registry.push_blob(config.digest, len(config.data), data=config.data)
    manifest = _image.manifest(tid.env, tid.pin, config, layers)
    registry.put_manifest(manifest.digest, manifest)
    tag = tag_for(tid)
    index = _image.index([*_others(registry, tag, tid.env), _image.entry(tid.env, platform, manifest)])
    registry.put_manifest(tag, index)
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


def _others(registry: Registry, tag: str, env: str) -> list[dict[str, Any]]:
    """The entries of the index at ``tag`` that other environments pushed (none if it is not an index of ours)."""
    got = registry.get_manifest(tag)
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
        if isinstance(notes, dict) and isinstance(notes.get(_image.ENV), str) and notes[_image.ENV] != env:
            kept.append(item)
    return kept
