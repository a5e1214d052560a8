"""The documents of a tree's image: config, manifest and index, written canonically and read strictly.

Written: JSON with sorted keys and no spaces, so the same tree gives the same bytes and digests from any repo.
The config is image-shaped (``os``, ``architecture``, ``rootfs.diff_ids``), which container runtimes need to
mount it as an image volume; each layer's descriptor names its distribution in annotations.

Read: only the media types written here (and their Docker equivalents for an index), every digest and size in
the form the spec gives, one diff_id per layer, sizes within bounds; anything else is :class:`Refused`.
"""

from __future__ import annotations

import hashlib
import json
from typing import Any, NamedTuple

from .._errors import InstallError, InvalidRequirement
from .._redact import shown
from .._store.identity import DistId
from .layer import MEDIA_TYPE as LAYER
from .layer import Layer, Refused
from .reference import DIGEST, Platform
from .settings import Settings

MANIFEST = "application/vnd.oci.image.manifest.v1+json"
INDEX = "application/vnd.oci.image.index.v1+json"
CONFIG = "application/vnd.oci.image.config.v1+json"
_DOCKER_MANIFEST = "application/vnd.docker.distribution.manifest.v2+json"
_DOCKER_INDEX = "application/vnd.docker.distribution.manifest.list.v2+json"
ACCEPT = ", ".join([INDEX, MANIFEST, _DOCKER_INDEX, _DOCKER_MANIFEST])
#: Annotations of ours: the environment and tree of an image, and each layer's distribution.
ENV = "org.repoinstall.env"
TREE = "org.repoinstall.tree"
NAME = "org.repoinstall.dist.name"
VERSION = "org.repoinstall.dist.version"
SHA256 = "org.repoinstall.dist.sha256"
#: The largest manifest, index or config read: a tree of thousands of distributions is well below.
DOCUMENT_LIMIT = 4 << 20


def canonical(document: dict[str, Any]) -> bytes:
    return json.dumps(document, sort_keys=True, separators=(",", ":"), ensure_ascii=False).encode("utf-8")


def digest_of(data: bytes) -> str:
    return f"sha256:{hashlib.sha256(data).hexdigest()}"


class Blob(NamedTuple):
    """A document as pushed: its bytes, digest and media type."""

    data: bytes
    media_type: str

    @property
    def digest(self) -> str:
        return digest_of(self.data)

    def descriptor(self, **extra: Any) -> dict[str, Any]:
        return {"mediaType": self.media_type, "digest": self.digest, "size": len(self.data), **extra}


def config(env: str, tree: str, platform: Platform, layers: list[Layer]) -> Blob:
    """The image config: the platform, one diff_id per layer, and the environment and tree as labels."""
    document = {
        **platform.as_dict(),
        "config": {"Labels": {ENV: env, TREE: tree}},
        "rootfs": {"type": "layers", "diff_ids": [layer.diff_id for layer in layers]},
    }
    return Blob(canonical(document), CONFIG)


def manifest(env: str, tree: str, config_blob: Blob, layers: list[tuple[DistId, Layer]]) -> Blob:
    """The image manifest: its config, and each layer with the distribution it holds."""
    document = {
        "schemaVersion": 2,
        "mediaType": MANIFEST,
        "config": config_blob.descriptor(),
        "layers": [
            {
                "mediaType": LAYER,
                "digest": layer.digest,
                "size": layer.size,
                "annotations": {NAME: dist.name, VERSION: str(dist.version), SHA256: dist.sha256},
            }
            for dist, layer in layers
        ],
        "annotations": {ENV: env, TREE: tree},
    }
    return Blob(canonical(document), MANIFEST)


def index(entries: list[dict[str, Any]]) -> Blob:
    """An image index of ``entries`` (manifest descriptors with a platform), sorted by their environment."""
    ordered = sorted(entries, key=lambda entry: str(entry.get("annotations", {}).get(ENV, "")))
    return Blob(canonical({"schemaVersion": 2, "mediaType": INDEX, "manifests": ordered}), INDEX)


def entry(env: str, platform: Platform, manifest_blob: Blob) -> dict[str, Any]:
    return manifest_blob.descriptor(platform=platform.as_dict(), annotations={ENV: env})


# ---- reading --------------------------------------------------------------------------------------------------


class LayerRef(NamedTuple):
    """One layer of a pulled image: the distribution its annotations claim it holds (name, version and the sha256
    of the wheel it was made from: a claim, never a name in the store), its digest, size and diff_id."""

    claim: DistId
    digest: str
    size: int
    diff_id: str

    @property
    def dist(self) -> DistId:
        """The registry-sourced distribution it becomes: named by its diff_id, which its unpack recomputes (a
        layer whose uncompressed bytes are not its diff_id is refused before anything is stored)."""
        return DistId.of_layer(self.claim.env, self.claim.name, str(self.claim.version), self.diff_id)


class Image(NamedTuple):
    """A tree's image as its manifest and config say: the manifest's digest, its layers, its config's digest."""

    digest: str
    layers: tuple[LayerRef, ...]
    config_digest: str
    config_size: int


def parse_json(data: bytes, what: str) -> dict[str, Any]:
    try:
        document = json.loads(data)
    except (ValueError, UnicodeDecodeError):
        raise Refused(f"{what}: not JSON: refused") from None
    if not isinstance(document, dict):
        raise Refused(f"{what}: not a JSON object: refused")
    return document


def media_type(document: dict[str, Any], content_type: str) -> str:
    """A manifest's or index's media type, from the document or else the response's Content-Type."""
    found = document.get("mediaType") or content_type.split(";", maxsplit=1)[0].strip()
    return str(found)


def is_index(kind: str) -> bool:
    return kind in (INDEX, _DOCKER_INDEX)


def pick(document: dict[str, Any], env: str, what: str) -> dict[str, Any] | None:
    """The entry of an index for ``env`` (by our annotation), or ``None`` if it has none."""
    manifests = document.get("manifests")
    if not isinstance(manifests, list):
        raise Refused(f"{what}: an index without a manifests list: refused")
    for item in manifests:
        if isinstance(item, dict) and isinstance(item.get("annotations"), dict) and item["annotations"].get(ENV) == env:
            _descriptor(item, what, (MANIFEST,))
            return item
    return None


def _descriptor(item: Any, what: str, kinds: tuple[str, ...]) -> tuple[str, int]:
    if not isinstance(item, dict):
        raise Refused(f"{what}: a descriptor that is not an object: refused")
    kind, digest, size = item.get("mediaType"), item.get("digest"), item.get("size")
    if kind not in kinds:
        raise Refused(f"{what}: names the unknown media type {kind!r} (expected {' or '.join(kinds)}): refused")
    if not isinstance(digest, str) or not DIGEST.match(digest):
        raise Refused(f"{what}: {digest!r} is not a sha256 digest: refused")
    if not isinstance(size, int) or isinstance(size, bool) or size < 0:
        raise Refused(f"{what}: {size!r} is not a size: refused")
    return digest, size


def read_manifest(data: bytes, digest: str, env: str, what: str, settings: Settings | None = None) -> Image:
    """The manifest ``data`` (fetched by ``digest``, already verified) of an image for ``env``, within the
    bounds of ``settings`` (its number of layers, and the bytes they claim in all): refused before any blob is
    fetched."""
    settings = settings or Settings()
    document = parse_json(data, what)
    if document.get("schemaVersion") != 2 or document.get("mediaType") != MANIFEST:
        raise Refused(f"{what}: names the unknown media type {document.get('mediaType')!r}: refused")
    annotations = document.get("annotations")
    if not isinstance(annotations, dict) or annotations.get(ENV) != env:
        found = annotations.get(ENV) if isinstance(annotations, dict) else None
        raise Refused(f"{what}: an image for {found!r}, not {env}: refused")
    config_digest, config_size = _descriptor(document.get("config"), what, (CONFIG,))
    layers = document.get("layers")
    if not isinstance(layers, list) or not layers:
        raise Refused(f"{what}: an image without layers: refused")
    if len(layers) > settings.max_layers:
        raise Refused(f"{what}: an image of {len(layers)} layers, more than {settings.max_layers} "
                      "(--registry-max-layers): refused")  # fmt: skip
    found_layers = []
    for item in layers:
        layer_digest, size = _descriptor(item, what, (LAYER,))
        notes = item.get("annotations")
        if not isinstance(notes, dict) or not all(isinstance(notes.get(k), str) for k in (NAME, VERSION, SHA256)):
            raise Refused(f"{what}: layer {layer_digest} does not name its distribution: refused")
        if not all(notes[k].isprintable() for k in (NAME, VERSION, SHA256)):
            named = " ".join(shown(notes[k]) for k in (NAME, VERSION, SHA256))
            raise Refused(f"{what}: layer {layer_digest} names its distribution with control characters ({named}): "
                          "refused")  # fmt: skip
        try:
            dist = DistId.of(env, notes[NAME], notes[VERSION], notes[SHA256])
        except (InvalidRequirement, InstallError, ValueError) as error:
            raise Refused(f"{what}: layer {layer_digest}: {shown(error)}: refused") from None
        found_layers.append(LayerRef(dist, layer_digest, size, ""))
    if (claimed := sum(layer.size for layer in found_layers)) > settings.max_bytes:
        raise Refused(f"{what}: its layers claim {claimed} bytes, more than {settings.max_bytes} "
                      "(--registry-max-bytes): refused")  # fmt: skip
    return Image(digest, tuple(found_layers), config_digest, config_size)


def with_config(image: Image, data: bytes, env: str, platform: Platform, what: str) -> Image:
    """``image`` with each layer's diff_id from its config ``data`` (verified by digest already)."""
    document = parse_json(data, what)
    rootfs = document.get("rootfs")
    diff_ids = rootfs.get("diff_ids") if isinstance(rootfs, dict) else None
    if not isinstance(diff_ids, list) or len(diff_ids) != len(image.layers):
        raise Refused(f"{what}: its config does not name one diff_id per layer: refused")
    if not all(isinstance(d, str) and DIGEST.match(d) for d in diff_ids):
        raise Refused(f"{what}: its config names a diff_id that is not a sha256 digest: refused")
    if (document.get("os"), document.get("architecture")) != (platform.os, platform.architecture):
        found = f"{shown(document.get('os'))}/{shown(document.get('architecture'))}"
        raise Refused(f"{what}: its config is for {found}, not {platform.os}/{platform.architecture}: refused")
    layers = tuple(layer._replace(diff_id=diff_id) for layer, diff_id in zip(image.layers, diff_ids, strict=True))
    # Each distribution in exactly one layer: two layers of one name would make the tree's files depend on which
    # is linked last.
    names = [layer.claim.name for layer in layers]
    if twice := sorted({name for name in names if names.count(name) > 1}):
        raise Refused(f"{what}: {twice[0]} is in more than one layer: refused")
    return image._replace(layers=layers)
