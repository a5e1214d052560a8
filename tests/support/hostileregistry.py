"""A registry that lies, on 127.0.0.1: it serves the distribution API's few GETs and HEADs for one image, built
here as a test asks (a layer with ``../`` in it, a blob that is not its digest, a tag that moves...), and can
serve its blobs badly: as a trickle, answering 500 once, or dropping the connection halfway once."""

from __future__ import annotations

import contextlib
import gzip
import hashlib
import io
import json
import socket
import tarfile
import threading
import time
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from repoinstall._oci.reference import platform_of

LAYER = "application/vnd.oci.image.layer.v1.tar+gzip"


def digest(data: bytes) -> str:
    return f"sha256:{hashlib.sha256(data).hexdigest()}"


def canonical(document: dict[str, Any]) -> bytes:
    return json.dumps(document, sort_keys=True, separators=(",", ":")).encode()


def tar_of(add: Callable[[tarfile.TarFile], None]) -> bytes:
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w", format=tarfile.PAX_FORMAT) as tar:
        add(tar)
    return buffer.getvalue()


def regular(tar: tarfile.TarFile, name: str, data: bytes) -> None:
    info = tarfile.TarInfo(name)
    info.size = len(data)
    tar.addfile(info, io.BytesIO(data))


class HostileRegistry:
    """Serves ``repository`` with the image of one tree (``tag``), for ``env``; ``blobs`` and ``manifests`` by
    digest, which a test may overwrite after :meth:`image` built them to make the registry lie."""

    def __init__(self, repository: str = "evil") -> None:
        self.repository = repository
        self.blobs: dict[str, bytes] = {}
        self.manifests: dict[str, tuple[bytes, str]] = {}
        self.head_digest: dict[str, str] = {}  # tag -> what HEAD says
        self.delay = 0.0
        #: Blob digest -> seconds between its bytes: sent a byte at a time.
        self.trickle: dict[str, float] = {}
        #: Blob digests answered 500 once / cut halfway by a dropped connection once (each taken when served).
        self.fail_once: set[str] = set()
        self.drop_once: set[str] = set()
        #: Every request's method and path, in order.
        self.requests: list[str] = []
        #: Every path asked (HEAD or GET), in order: what a client fetched, and what it did not.
        self.asked: list[str] = []
        server = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: object) -> None:
                return

            def do_HEAD(self) -> None:
                self._answer(head=True)

            def do_GET(self) -> None:
                self._answer(head=False)

            def _answer(self, *, head: bool) -> None:
                server.requests.append(f"{self.command} {self.path}")
                time.sleep(server.delay)
                prefix = f"/v2/{server.repository}/"
                path = self.path.split("?")[0]
                server.asked.append(path)
                if path.startswith(prefix + "manifests/"):
                    name = path[len(prefix + "manifests/") :]
                    key = server.head_digest.get(name, name) if not name.startswith("sha256:") else name
                    found = server.manifests.get(key)
                    if found is None:
                        return self._send(404, b"{}", "application/json")
                    said = server.head_digest.get(name, digest(found[0]))
                    return self._send(200, found[0], found[1], {"Docker-Content-Digest": said}, head=head)
                if path.startswith(prefix + "blobs/"):
                    name = path[len(prefix + "blobs/") :]
                    blob = server.blobs.get(name)
                    if blob is None:
                        return self._send(404, b"{}", "application/json")
                    if not head and name in server.fail_once:
                        server.fail_once.discard(name)
                        return self._send(500, b"{}", "application/json")
                    if not head and name in server.drop_once:
                        server.drop_once.discard(name)
                        return self._send(200, blob, "application/octet-stream", cut=len(blob) // 2)
                    return self._send(
                        200, blob, "application/octet-stream", head=head, pace=server.trickle.get(name, 0.0)
                    )
                self._send(404, b"{}", "application/json")

            def _send(
                self,
                status: int,
                body: bytes,
                kind: str,
                extra: dict[str, str] | None = None,
                *,
                head: bool = False,
                pace: float = 0.0,
                cut: int | None = None,
            ) -> None:
                """Answer ``body`` whole, or a byte every ``pace`` seconds, or its first ``cut`` bytes and then
                the connection closed."""
                self.send_response(status)
                self.send_header("Content-Type", kind)
                self.send_header("Content-Length", str(len(body)))
                for key, value in (extra or {}).items():
                    self.send_header(key, value)
                self.end_headers()
                if head:
                    return
                with contextlib.suppress(BrokenPipeError, ConnectionResetError):
                    if cut is not None:
                        self.wfile.write(body[:cut])
                        self.wfile.flush()
                        self.close_connection = True
                        self.connection.shutdown(socket.SHUT_RDWR)
                    elif pace:
                        for offset in range(len(body)):
                            self.wfile.write(body[offset : offset + 1])
                            self.wfile.flush()
                            time.sleep(pace)
                    else:
                        self.wfile.write(body)

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._server.daemon_threads = True
        self.host = f"127.0.0.1:{self._server.server_address[1]}"
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)

    def start(self) -> HostileRegistry:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._server.shutdown()
        self._server.server_close()

    def image(
        self,
        tag: str,
        env: str,
        layers: list[tuple[bytes, dict[str, str]]],
        *,
        layer_type: str = LAYER,
        tree: str = "evil-pkg==1.0",
        claimed: int | None = None,
        config: dict[str, Any] | None = None,
    ) -> dict[str, Any]:
        """Put an image at ``tag``: each layer's tar (gzipped here) with its annotations; the manifest returned.
        ``claimed``: the size every layer's descriptor says (else its own); ``config``: fields of the config
        document set over the platform's."""
        descriptors, diff_ids = [], []
        for plain, notes in layers:
            blob = gzip.compress(plain, mtime=0)
            self.blobs[digest(blob)] = blob
            diff_ids.append(digest(plain))
            descriptors.append(
                {
                    "mediaType": layer_type,
                    "digest": digest(blob),
                    "size": len(blob) if claimed is None else claimed,
                    "annotations": notes,
                }
            )
        platform = platform_of(env).as_dict()
        config_data = canonical({**platform, **(config or {}), "rootfs": {"type": "layers", "diff_ids": diff_ids}})
        self.blobs[digest(config_data)] = config_data
        manifest = {
            "schemaVersion": 2,
            "mediaType": "application/vnd.oci.image.manifest.v1+json",
            "config": {"mediaType": "application/vnd.oci.image.config.v1+json", "digest": digest(config_data),
                       "size": len(config_data)},
            "layers": descriptors,
            "annotations": {"org.repoinstall.env": env, "org.repoinstall.tree": tree},
        }  # fmt: skip
        data = canonical(manifest)
        self.manifests[digest(data)] = (data, manifest["mediaType"])
        index = canonical({"schemaVersion": 2, "mediaType": "application/vnd.oci.image.index.v1+json", "manifests": [
            {"mediaType": manifest["mediaType"], "digest": digest(data), "size": len(data), "platform": platform,
             "annotations": {"org.repoinstall.env": env}}]})  # fmt: skip
        self.manifests[digest(index)] = (index, "application/vnd.oci.image.index.v1+json")
        self.head_digest[tag] = digest(index)
        return manifest
