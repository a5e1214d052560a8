"""A real package server on 127.0.0.1 for tests: a find-links page over a wheel directory.

It can delay a wheel's download (to catch an installer mid-install) and counts downloads per file, which is
how tests count installer runs.
"""

from __future__ import annotations

import html
import threading
import time
from collections import Counter
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path


class IndexServer:
    def __init__(self, directory: Path) -> None:
        self.directory = directory
        self.delays: dict[str, float] = {}  # wheel-name prefix -> seconds before the body is sent
        self.started: Counter[str] = Counter()
        self.completed: Counter[str] = Counter()
        self._lock = threading.Lock()
        server = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: object) -> None:
                return

            def do_GET(self) -> None:
                name = self.path.strip("/").split("?")[0]
                if name == "":
                    links = "".join(
                        f'<a href="/{html.escape(p.name)}">{html.escape(p.name)}</a>\n'
                        for p in sorted(server.directory.glob("*.whl"))
                    )
                    body = f"<html><body>\n{links}</body></html>\n".encode()
                    self._send(200, body, "text/html")
                    return
                path = server.directory / name
                if "/" in name or not path.is_file():
                    self._send(404, b"not found\n", "text/plain")
                    return
                with server._lock:
                    server.started[name] += 1
                for prefix, delay in server.delays.items():
                    if name.startswith(prefix):
                        time.sleep(delay)
                self._send(200, path.read_bytes(), "application/octet-stream")
                with server._lock:
                    server.completed[name] += 1

            def _send(self, code: int, body: bytes, kind: str) -> None:
                try:
                    self.send_response(code)
                    self.send_header("Content-Type", kind)
                    self.send_header("Content-Length", str(len(body)))
                    self.end_headers()
                    self.wfile.write(body)
                except (BrokenPipeError, ConnectionResetError):
                    pass

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.httpd.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}/"
        self._thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)

    def start(self) -> IndexServer:
        self._thread.start()
        return self

    def stop(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()

    def downloads(self, prefix: str) -> int:
        with self._lock:
            return sum(n for name, n in self.started.items() if name.startswith(prefix))

    def wait_for_download(self, prefix: str, count: int = 1, timeout: float = 30.0) -> None:
        deadline = time.monotonic() + timeout
        while self.downloads(prefix) < count:
            if time.monotonic() > deadline:
                raise AssertionError(f"no download of {prefix} within {timeout}s")
            time.sleep(0.02)
