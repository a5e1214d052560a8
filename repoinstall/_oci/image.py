"""The documents of a tree's image: config, manifest and index, written canonically and read strictly.

Written: JSON with sorted keys and no spaces, so the same tree gives the same bytes and digests from any repo.
The config is image-shaped (``os``, ``architecture``, ``rootfs.diff_ids``), which container runtimes need to
mount it as an image volume; each layer's descriptor names its distribution in annotations, or, for a layer that
holds several (see :mod:`.groups`), all of them in one annotation.

Read: only the media types written here (and their Docker equivalents for an index), every digest and size in
the form the spec gives, one diff_id per layer, sizes within bounds, each layer's distributions named in one of
the two forms written; anything else is :class:`Refused`.
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
#: A grouped layer's distributions, instead of the three above: a canonical JSON list of objects with ``name``,
#: ``version`` and ``sha256``, sorted by name.
DISTS = "org.repoinstall.dists"
#: The longest :data:`DISTS` read: some 150 bytes a distribution, so a group of thousands.
DISTS_LIMIT = 1 << 20
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


def manifest(env: str, tree: str, config_blob: Blob, layers: list[tuple[tuple[DistId, ...], Layer]]) -> Blob:
    """The image manifest: its config, and each layer with the distributions it holds (one, or a group)."""
    document = {
        "schemaVersion": 2,
        "mediaType": MANIFEST,
        "config": config_blob.descriptor(),
        "layers": [
            {
                "mediaType": LAYER,
                "digest": layer.digest,
                "size": layer.size,
                "annotations": naming(dists),
            }
            for dists, layer in layers
        ],
        "annotations": {ENV: env, TREE: tree},
    }
    return Blob(canonical(document), MANIFEST)


def naming(dists: tuple[DistId, ...]) -> dict[str, str]:
    """A layer's annotations naming the distributions it holds: the three of one, or :data:`DISTS` of a group."""
    if len(dists) == 1:
        return {NAME: dists[0].name, VERSION: str(dists[0].version), SHA256: dists[0].sha256}
    held = [{"name": d.name, "version": str(d.version), "sha256": d.sha256} for d in sorted(dists)]  # by name
    return {DISTS: json.dumps(held, sort_keys=True, separators=(",", ":"), ensure_ascii=False)}


def index(entries: list[dict[str, Any]]) -> Blob:
    """An image index of ``entries`` (manifest descriptors with a platform), sorted by their environment."""
    ordered = sorted(entries, key=lambda entry: str(entry.get("annotations", {}).get(ENV, "")))
    return Blob(canonical({"schemaVersion": 2, "mediaType": INDEX, "manifests": ordered}), INDEX)


def entry(env: str, platform: Platform, manifest_blob: Blob) -> dict[str, Any]:
    return manifest_blob.descriptor(platform=platform.as_dict(), annotations={ENV: env})


# ---- reading --------------------------------------------------------------------------------------------------


class LayerRef(NamedTuple):
    """One layer of a pulled image: the distributions its annotations claim it holds (one, or a group sorted by
    name; each by name, version and the sha256 of the wheel it was made from: a claim, never a name in the
    store), its digest, size and diff_id."""

    claims: tuple[DistId, ...]
    digest: str
    size: int
    diff_id: str

    @property
    def dists(self) -> tuple[DistId, ...]:
        """The registry-sourced distributions it becomes: each named by the layer's diff_id, which its unpack
        recomputes (a layer whose uncompressed bytes are not its diff_id is refused before anything is stored);
        a group's by the same diff_id, told apart by name and version."""
        return tuple(DistId.of_layer(c.env, c.name, str(c.version), self.diff_id) for c in self.claims)

    @property
    def held(self) -> str:
        """What it holds, for a message: ``name version``, or the first and last of a group."""
        first, last = self.claims[0], self.claims[-1]
        if len(self.claims) == 1:
            return f"{first.name} {first.version}"
        return f"{len(self.claims)} distributions, {first.name} {first.version} to {last.name} {last.version}"


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
        claims = _claims(item.get("annotations"), env, f"{what}: layer {layer_digest}")
        found_layers.append(LayerRef(claims, layer_digest, size, ""))
    if (claimed := sum(layer.size for layer in found_layers)) > settings.max_bytes:
        raise Refused(f"{what}: its layers claim {claimed} bytes, more than {settings.max_bytes} "
                      "(--registry-max-bytes): refused")  # fmt: skip
    return Image(digest, tuple(found_layers), config_digest, config_size)


def _claims(notes: Any, env: str, what: str) -> tuple[DistId, ...]:
    """The distributions a layer's annotations ``notes`` name: the three annotations of one, or :data:`DISTS`
    of a group (never both); :class:`Refused`, one line with nothing of the registry's unescaped, otherwise."""
    single = isinstance(notes, dict) and any(key in notes for key in (NAME, VERSION, SHA256))
    if not isinstance(notes, dict) or not (single or DISTS in notes):
        raise Refused(f"{what} does not name its distribution: refused")
    if single and DISTS in notes:
        raise Refused(f"{what} names its distributions both as one and as a group ({DISTS}): refused")
    if single:
        if not all(isinstance(notes.get(key), str) for key in (NAME, VERSION, SHA256)):
            raise Refused(f"{what} does not name its distribution: refused")
        return (_claim(env, notes[NAME], notes[VERSION], notes[SHA256], what),)
    text = notes[DISTS]
    if not isinstance(text, str) or len(text) > DISTS_LIMIT:
        raise Refused(f"{what}: its {DISTS} is not a string of at most {DISTS_LIMIT} characters: refused")
    try:
        held = json.loads(text)
    except (ValueError, RecursionError):
        raise Refused(f"{what}: its {DISTS} is not JSON: refused") from None
    if not isinstance(held, list) or len(held) < 2:
        raise Refused(f"{what}: its {DISTS} is not a list of two distributions or more: refused")
    claims = []
    for one in held:
        if not isinstance(one, dict) or sorted(one) != ["name", "sha256", "version"]:
            raise Refused(f"{what}: its {DISTS} holds other than objects of name, version and sha256: refused")
        if not all(isinstance(value, str) for value in one.values()):
            raise Refused(f"{what}: its {DISTS} holds a name, version or sha256 that is not a string: refused")
        claims.append(_claim(env, one["name"], one["version"], one["sha256"], what))
    names = [claim.name for claim in claims]
    if names != sorted(set(names)):
        raise Refused(f"{what}: its {DISTS} is not sorted by name, each name once: refused")
    return tuple(claims)


def _claim(env: str, name: str, version: str, sha256: str, what: str) -> DistId:
    if not all(text.isprintable() for text in (name, version, sha256)):
        named = " ".join(shown(text) for text in (name, version, sha256))
        raise Refused(f"{what} names its distribution with control characters ({named}): refused")
    try:
        return DistId.of(env, name, version, sha256)
    except (InvalidRequirement, InstallError, ValueError):
        # The error would name what the registry sent as it was sent: shown escaped instead, and cut short.
        raise Refused(f"{what}: name {shown(name)}, version {shown(version)}, sha256 {shown(sha256)}: not a "
                      "distribution's name, version and sha256 hex digest: refused") from None  # fmt: skip


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
    names = [claim.name for layer in layers for claim in layer.claims]
    if twice := sorted({name for name in names if names.count(name) > 1}):
        raise Refused(f"{what}: {twice[0]} is in more than one layer: refused")
    return image._replace(layers=layers)
