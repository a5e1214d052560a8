"""A registry front on 127.0.0.1 that makes two pushers race for one tag: it passes the distribution API
through to a real registry, but holds every write of the tag ``tag`` until ``readers`` reads of that tag have
been seen (or a few seconds pass). Two pushers then both read the tag before either writes it, which is the
order in which a read-modify-write without compare-and-swap loses one of the writes."""

from __future__ import annotations

import contextlib
import threading
from http.server import BaseHTTPRequestHandler

import httpx
from blobredirect import Served

_HOP = {"connection", "transfer-encoding", "keep-alive", "content-length"}


class HeldTag:
    def __init__(self, backend: str, repository: str, tag: str, *, readers: int = 2, hold: float = 60.0) -> None:
        self.reads = 0
        self.writes = 0
        self._seen = threading.Condition()
        watched = f"/v2/{repository}/manifests/{tag}"
        outer = self

        class Front(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args: object) -> None:
                return

            def do_GET(self) -> None:
                self._pass()

            def do_HEAD(self) -> None:
                self._pass()

            def do_PUT(self) -> None:
                self._pass()

            def do_POST(self) -> None:
                self._pass()

            def do_PATCH(self) -> None:
                self._pass()

            def _pass(self) -> None:
                path = self.path.split("?")[0]
                length = int(self.headers.get("Content-Length") or 0)
                body = self.rfile.read(length) if length else b""
                if path == watched and self.command == "GET":
                    with outer._seen:
                        outer.reads += 1
                        outer._seen.notify_all()
                if path == watched and self.command == "PUT":
                    with outer._seen:
                        outer.writes += 1
                        outer._seen.wait_for(lambda: outer.reads >= readers, timeout=hold)
                headers = {k: v for k, v in self.headers.items() if k.lower() not in _HOP}
                answer = httpx.request(self.command, f"http://{backend}{self.path}", headers=headers, content=body,
                                       timeout=60)  # fmt: skip
                self.send_response(answer.status_code)
                for key, value in answer.headers.items():
                    if key.lower() not in _HOP:
                        self.send_header(key, value)
                content = b"" if self.command == "HEAD" else answer.content
                self.send_header("Content-Length", str(len(content)) if self.command != "HEAD" else
                                 answer.headers.get("content-length", "0"))  # fmt: skip
                self.end_headers()
                with contextlib.suppress(BrokenPipeError, ConnectionResetError):
                    self.wfile.write(content)

        self._server = Served(Front)
        self.host = self._server.host

    def stop(self) -> None:
        self._server.stop()
