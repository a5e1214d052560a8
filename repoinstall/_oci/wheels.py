"""A tree's wheels beside its image: pushed by ``push``, and what a hashed lock installs with ``ensure --from``.

A wheel's sha256 is its OCI blob digest (``sha256:<hex>``), so a lock's own hash names the blob, and the registry
cannot give other bytes: each blob is checked against its digest as it arrives (:meth:`Registry.fetch_blob`). A
layer cannot be checked against a wheel's sha256 (the hash covers the whole zip), so a hashed lock never installs
a layer: it installs the wheels themselves, through the installer's own ``--require-hashes`` run, and what it
stores is wheel-verified, as from an index.

- **Pushed** (:func:`push_wheels`): each wheel-verified distribution of the tree (its record row has ``sha256``)
  goes up as a blob of the image's repository (HEAD first), its bytes read from the row's URL (a ``file:`` URL's
  file, or an http(s) URL downloaded with the index's client and credentials) and checked against the row's
  sha256 before upload. An OCI artifact manifest (``artifactType`` :data:`ARTIFACT_TYPE`, the empty config, one
  descriptor per wheel titled with its filename, as oras writes them) references them, so the registry's garbage
  collection keeps them; it is tagged :func:`~.reference.wheels_tag` for the tree and platform.
- **Installed** (:func:`fill_locked`): each pin of the lock the store lacks is fetched by its own hash from the
  registry (bounded by the listed size, into the install's private scratch dir), named by the listed filename
  once it names the pin's project and version, and handed to the installer as the pin's URL. A pin the registry
  has no wheel of is installed as without ``--from`` (its URL, or the index), with one line saying so.
"""

from __future__ import annotations

import hashlib
import os
import re
import urllib.parse
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, NamedTuple

from .. import _log
from .._disk.manifest import Artifact, TreeEntry, recorded_dists
from .._errors import InstallError, RepoinstallError
from .._store import store as _store
from .._store.identity import DistId, of_row
from .._urls import file_path, without_credentials
from . import image as _image
from .layer import Refused
from .reference import DIGEST, wheels_tag

if TYPE_CHECKING:
    import httpx

    from .._disk.identity import TreeId
    from .._disk.layout import Layout
    from .._disk.pin import Pin
    from .._install.backends.run import Built
    from .._install.staging import Staging
    from .._lock.locks import TreeLocks
    from .._options import InstallOptions
    from .._requirements import Requested
    from .client import Registry
    from .pull import Source

#: The wheels manifest's artifact type, its config (OCI's empty descriptor: ``{}``), each wheel's media type and
#: the annotation naming its file (oras's).
ARTIFACT_TYPE = "application/vnd.repoinstall.wheels.v1"
EMPTY = _image.Blob(b"{}", "application/vnd.oci.empty.v1+json")
WHEEL = "application/vnd.repoinstall.wheel.v1+zip"
TITLE = "org.opencontainers.image.title"
_CHUNK = 1 << 20
#: What a wheel's filename may hold (PEP 427's escaped name and version, tags, a build tag): nothing else reaches a
#: path, a log line or an installer.
_FILENAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._+!-]*\.whl$")


class Listed(NamedTuple):
    """One wheel a wheels manifest lists: its blob (the wheel's sha256 as a digest), size and filename."""

    digest: str
    size: int
    filename: str


class Sent(NamedTuple):
    """A tree's wheels as pushed: how many its wheels manifest lists, how many were uploaded, their bytes."""

    wheels: int = 0
    uploaded: int = 0
    uploaded_bytes: int = 0


def manifest(env: str, tree: str, wheels: list[Listed]) -> _image.Blob:
    """The wheels manifest of the tree ``tree`` for ``env``, listing ``wheels`` (sorted by filename)."""
    document = {
        "schemaVersion": 2,
        "mediaType": _image.MANIFEST,
        "artifactType": ARTIFACT_TYPE,
        "config": EMPTY.descriptor(),
        "layers": [
            {"mediaType": WHEEL, "digest": one.digest, "size": one.size, "annotations": {TITLE: one.filename}}
            for one in sorted(wheels, key=lambda one: one.filename)
        ],
        "annotations": {_image.ENV: env, _image.TREE: tree},
    }
    return _image.Blob(_image.canonical(document), _image.MANIFEST)


def listing(registry: Registry, tid: TreeId) -> dict[str, Listed]:
    """The wheels the registry lists for ``tid`` in this environment, by digest; none if it has no wheels
    manifest. :class:`Refused` for one that is not a wheels manifest of this tree and environment. Its sizes and
    filenames are the registry's word: a size only bounds a download, a filename is used once it names the pin."""
    where = registry.reference.tagged(wheels_tag(tid))
    got = registry.get_manifest(wheels_tag(tid))
    if got is None:
        return {}
    document = _image.parse_json(got[0], where)
    notes = document.get("annotations")
    if (
        document.get("mediaType") != _image.MANIFEST
        or document.get("artifactType") != ARTIFACT_TYPE
        or not isinstance(notes, dict)
        or notes.get(_image.ENV) != tid.env
        or not isinstance(document.get("layers"), list)
    ):
        raise Refused(f"{where}: not a wheels manifest of {tid} for {tid.env}: refused")
    found = {}
    for each in document["layers"]:
        item: dict[str, object] = each if isinstance(each, dict) else {}
        notes = item.get("annotations")
        title = notes.get(TITLE) if isinstance(notes, dict) else None
        digest, size = item.get("digest"), item.get("size")
        if (
            item.get("mediaType") != WHEEL
            or not isinstance(digest, str)
            or not DIGEST.match(digest)
            or not isinstance(size, int)
            or isinstance(size, bool)
            or size < 0
            or not isinstance(title, str)
        ):
            raise Refused(f"{where}: lists a wheel that is not a digest, size and filename: refused")
        found[digest] = Listed(digest, size, title)
    return found


def _names(filename: str, name: str, version: str) -> bool:
    """Whether ``filename`` is a wheel's, of project ``name`` at ``version`` (and no path)."""
    from packaging.utils import InvalidWheelFilename, canonicalize_name, parse_wheel_filename
    from packaging.version import InvalidVersion, Version

    if not _FILENAME.match(filename):
        return False  # a path, a control character, anything no wheel's name holds
    try:
        found_name, found_version, _, _ = parse_wheel_filename(filename)
        return found_name == canonicalize_name(name) and found_version == Version(version)
    except (InvalidWheelFilename, InvalidVersion):
        return False


# ---- pushed ------------------------------------------------------------------------------------------------


class Fetcher:
    """A wheel's bytes from the URL a tree's record names: a ``file:`` URL's file, or an http(s) download with
    the index's client (its TLS settings, and the credentials users give their index: URL userinfo, netrc)."""

    def __init__(self, options: InstallOptions | None) -> None:
        self._options = options
        self._client: httpx.Client | None = None

    def close(self) -> None:
        if self._client is not None:
            self._client.close()

    def __call__(self, url: str, out: str) -> bool:
        """The file at ``url`` copied to the new file ``out``; ``False`` if it is not there any more (a file
        gone, an HTTP 404 or 410). :class:`InstallError` (one line, no credentials) if it cannot be read."""
        parts = urllib.parse.urlsplit(url)
        if parts.scheme == "file":
            try:
                with open(file_path(url), "rb") as source, open(out, "xb") as sink:
                    while chunk := source.read(_CHUNK):
                        sink.write(chunk)
            except FileNotFoundError:
                return False
            except OSError as error:
                raise InstallError(f"{without_credentials(url)}: cannot be read: {error.strerror}") from None
            return True
        if parts.scheme not in ("http", "https"):
            return False
        return self._download(url, out)

    def _download(self, url: str, out: str) -> bool:
        import httpx

        from .._index.http import client_settings
        from .._pipconfig import index_config

        shown = without_credentials(url)
        if self._client is None:
            self._client = httpx.Client(**client_settings(index_config(self._options)))  # type: ignore[arg-type]
        try:
            with self._client.stream("GET", url) as response:
                if response.status_code in (404, 410):
                    return False
                if response.status_code != 200:
                    raise InstallError(f"{shown}: HTTP {response.status_code}")
                with open(out, "xb") as sink:
                    for chunk in response.iter_bytes(_CHUNK):
                        sink.write(chunk)
        except httpx.HTTPError as error:
            raise InstallError(f"{shown}: cannot be downloaded ({type(error).__name__})") from None
        return True


def push_wheels(
    registry: Registry, tid: TreeId, record: TreeEntry, fetch: Callable[[str, str], bool], scratch: str
) -> Sent:
    """Push the wheels of the tree ``tid`` (``record`` read) beside its image, and its wheels manifest.

    Each wheel-verified distribution's wheel goes up unless the registry has it (HEAD), its bytes got by
    ``fetch`` from its row's URL into ``scratch`` and checked against its sha256 first: a mismatch is
    :class:`InstallError`, one line, and nothing more is uploaded. Left out: registry-sourced distributions (no
    wheel: their rows name a layer), the tree's own metapackage (every installer of the lock makes the same bytes),
    what was not installed from a wheel, and a wheel neither the registry nor its URL has any more (one line
    each). A wheel the registry has already, with no URL to name it, keeps the filename its wheels manifest gave.
    """
    wanted: list[tuple[DistId, str]] = []
    for row in recorded_dists(record):
        dist = of_row(tid.env, row)
        if dist is None or dist.layer or (tid.kind.own_metapackage and tid.is_named(row["name"], row["version"])):
            continue
        wanted.append((dist, row.get("url", "")))
    if not wanted:
        return Sent()
    try:
        there = listing(registry, tid)
    except Refused:
        there = {}  # not one of ours: ours replaces it
    before, before_bytes = registry.uploaded, registry.uploaded_bytes
    listed = []
    for number, (dist, url) in enumerate(sorted(wanted)):
        digest = f"sha256:{dist.sha256}"
        filename = urllib.parse.unquote(urllib.parse.urlsplit(url).path.rsplit("/", 1)[-1]) if url else ""
        if not _names(filename, dist.name, str(dist.version)):
            known = there.get(digest)
            filename = known.filename if known is not None else ""
            if not _names(filename, dist.name, str(dist.version)):
                _log.logger().info("%s: %s was not installed from a wheel it can name: not pushed", tid, dist)
                continue
        size = registry.blob_size(digest)
        if size is None or size < 0:
            path = os.path.join(scratch, f"wheel-{number}")
            try:
                still_there = bool(url) and fetch(url, path)
            except InstallError as error:
                wheel = f"{dist.name} {dist.version}"
                raise InstallError(f"{tid}: the wheel of {wheel}: {error}: nothing more was pushed") from None
            if not still_there:
                _log.logger().warning("%s: the wheel of %s is not at its URL any more: not pushed", tid, dist)
                continue
            with open(path, "rb") as handle:
                got = hashlib.file_digest(handle, "sha256").hexdigest()
            if got != dist.sha256:
                raise InstallError(
                    f"{tid}: {without_credentials(url)} is not the wheel {dist.name} {dist.version} was installed "
                    f"from (sha256 {got[:12]}..., not {dist.sha256[:12]}...): nothing more was pushed"
                )
            size = os.path.getsize(path)
            registry.push_blob(digest, size, path=path)
            os.unlink(path)
        listed.append(Listed(digest, size, filename))
    sent = Sent(len(listed), registry.uploaded - before, registry.uploaded_bytes - before_bytes)
    if listed:
        registry.push_blob(EMPTY.digest, len(EMPTY.data), data=EMPTY.data)
        registry.put_manifest(wheels_tag(tid), manifest(tid.env, tid.pin, listed))
    return sent


# ---- installed ---------------------------------------------------------------------------------------------


def fill_locked(
    source: Source,
    options: InstallOptions,
    layout: Layout,
    locks: TreeLocks,
    tid: TreeId,
    requested: Requested,
    staging: Staging,
) -> tuple[Built, int]:
    """Step 5 of the protocol for a lock's tree with ``--from``: the lock's wheels fetched from the registry by
    their hashes, then installed as any lock is (the installer, ``--require-hashes``, ``--no-deps``), so what is
    stored is wheel-verified. A pin the registry has no wheel of is installed from its URL or the index; if that
    fails too, :class:`InstallError` naming the pin."""
    from .._disk.pin import Pin
    from .._install.fill.tree import fill

    registry = source.registry()  # a client, no request yet
    where = source.reference.tagged(wheels_tag(tid))
    there: dict[str, Listed] | None = None  # read when a pin first needs it: none does if the store has them all
    # Wheels land in this install's own staging dir, which nobody else reads: peers installing trees that share a
    # wheel may each fetch it; what reaches the store goes through store_missing's per-distribution locks and its
    # rename that never replaces, as for any lock.
    folder = os.path.join(staging.tmp, "wheels")
    os.makedirs(folder)
    pins: list[Pin] = []
    fetched: dict[str, Pin] = {}
    lacking: list[Pin] = []
    for pin in requested.locked:
        digests = [h for h in pin.hashes if DIGEST.match(h)]
        kept = next((d for d in digests if _stored(layout, tid.env, pin, d)), None)
        if kept is not None:  # its distribution is in the store: no wheel needed
            pins.append(Pin(pin.name, pin.version, pin.url, (kept,)))
            continue
        if there is None:
            there = listing(registry, tid)
        found = next((there[d] for d in digests if d in there), None)
        if found is not None and _names(found.filename, pin.name, pin.version):
            path = os.path.join(folder, found.filename)
            what = f"{where}: {pin.member}"
            if registry.fetch_blob(found.digest, found.size, path, what, missing_ok=True):
                pins.append(Pin(pin.name, pin.version, Path(path).as_uri(), (found.digest,)))
                fetched[pin.name] = pin
                continue
        lacking.append(pin)
        pins.append(pin)
    for pin in lacking:
        _log.logger().info("%s: %s has no wheel of %s; installing it as without --from", tid, where, pin.member)
    try:
        built, stored = fill(layout, locks, options, tid, requested._replace(locked=tuple(pins)), staging)
    except InstallError as error:
        if not lacking or staging.lost():
            raise
        said = str(error).strip().splitlines()[0] if str(error).strip() else type(error).__name__
        raise InstallError(
            f"{tid}: {lacking[0].member}: {source.reference} has no wheel of it, and installing it without the "
            f"registry failed: {said}"
        ) from None
    # The record names where each wheel came from as the lock gave it, not the scratch file it was installed from.
    return built._replace(artifacts=tuple(_as_locked(a, fetched) for a in built.artifacts)), stored


def _stored(layout: Layout, env: str, pin: Pin, digest: str) -> bool:
    try:
        return _store.present(layout, DistId.of(env, pin.name, pin.version, digest.removeprefix("sha256:")))
    except (RepoinstallError, ValueError):
        return False


def _as_locked(artifact: Artifact, fetched: Mapping[str, Pin]) -> Artifact:
    from packaging.utils import canonicalize_name

    pin = fetched.get(canonicalize_name(artifact.name))
    return artifact if pin is None else artifact._replace(url=pin.public().url)
