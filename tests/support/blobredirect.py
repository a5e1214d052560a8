"""A registry whose blobs live in "blob storage" on another host, as S3- or GCS-backed registries serve them:
a front on 127.0.0.1 passes the distribution API through to a real registry, but answers a blob GET with a
``307`` to a presigned URL on a second port (another host: host and port differ). The storage serves the blob,
which it reads from the registry with credentials of its own, and records the headers of every request it got,
so a test can tell whether the registry's credentials followed the redirect."""

from __future__ import annotations

import contextlib
import re
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import httpx

_BLOB = re.compile(r"^/v2/(?P<repository>.+)/blobs/(?P<digest>sha256:[0-9a-f]{64})$")
_HOP = {"connection", "transfer-encoding", "keep-alive", "host", "content-length"}


class Served:
    """A threaded HTTP server on a free port of 127.0.0.1, serving from the moment it is made."""

    def __init__(self, handler: type[BaseHTTPRequestHandler]) -> None:
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
        self._server.daemon_threads = True
        self.host = f"127.0.0.1:{self._server.server_address[1]}"
        threading.Thread(target=self._server.serve_forever, daemon=True).start()

    def stop(self) -> None:
        self._server.shutdown()
        self._server.server_close()


def _send(handler: BaseHTTPRequestHandler, status: int, headers: dict[str, str], body: bytes, *, head: bool) -> None:
    handler.send_response(status)
    for key, value in headers.items():
        if key.lower() not in _HOP:
            handler.send_header(key, value)
    handler.send_header("Content-Length", str(len(body)))
    handler.end_headers()
    if not head:
        with contextlib.suppress(BrokenPipeError, ConnectionResetError):
            handler.wfile.write(body)


class BlobRedirect:
    """Reach the registry at ``backend`` (``127.0.0.1:PORT``) through :attr:`host`; blobs from :attr:`storage`,
    which fetches them from the registry as ``user``/``password``."""

    def __init__(self, backend: str, user: str, password: str) -> None:
        #: The headers (lower-cased names) of every request blob storage got.
        self.storage_saw: list[dict[str, str]] = []
        #: How many requests reached the front with an Authorization header.
        self.front_authorized = 0
        outer = self

        class Storage(BaseHTTPRequestHandler):
            def log_message(self, *args: object) -> None:
                return

            def do_GET(self) -> None:
                outer.storage_saw.append({k.lower(): v for k, v in self.headers.items()})
                repository, _, digest = self.path.split("?")[0].removeprefix("/bucket/").rpartition("/")
                answer = httpx.get(f"http://{backend}/v2/{repository}/blobs/{digest}", auth=(user, password),
                                   follow_redirects=False, timeout=60)  # fmt: skip
                _send(self, answer.status_code, {"Content-Type": "application/octet-stream"}, answer.content,
                      head=False)  # fmt: skip

        self._storage = Served(Storage)
        storage = self._storage.host

        class Front(BaseHTTPRequestHandler):
            def log_message(self, *args: object) -> None:
                return

            def do_GET(self) -> None:
                self._pass(head=False)

            def do_HEAD(self) -> None:
                self._pass(head=True)

            def _pass(self, *, head: bool) -> None:
                headers = {k: v for k, v in self.headers.items() if k.lower() not in _HOP}
                if "Authorization" in headers:
                    outer.front_authorized += 1
                path = self.path.split("?")[0]
                blob = _BLOB.match(path)
                if blob and not head:
                    # Checked here as the registry would check it, then sent to storage with a presigned URL.
                    probe = httpx.head(f"http://{backend}{path}", headers=headers, timeout=60)
                    if probe.status_code == 200:
                        location = f"http://{storage}/bucket/{blob['repository']}/{blob['digest']}?X-Signature=abc"
                        return _send(self, 307, {"Location": location}, b"", head=False)
                    return _send(self, probe.status_code, dict(probe.headers), b"", head=False)
                answer = httpx.request(self.command, f"http://{backend}{self.path}", headers=headers, timeout=60)
                _send(self, answer.status_code, dict(answer.headers), answer.content, head=head)

        self._front = Served(Front)
        #: Where clients reach the registry.
        self.host = self._front.host
        self.storage = storage

    def stop(self) -> None:
        self._front.stop()
        self._storage.stop()
