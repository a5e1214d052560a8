"""A forward HTTP proxy on 127.0.0.1 that records what went through it (plain http only: the test index)."""

from __future__ import annotations

import http.server
import threading
import urllib.request
from typing import Any


class Proxy:
    def __init__(self) -> None:
        self.seen: list[tuple[str, str]] = []  # (User-Agent, absolute URL) of every request
        proxy = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                proxy.seen.append((self.headers.get("User-Agent") or "", self.path))
                request = urllib.request.Request(self.path, headers={k: v for k, v in self.headers.items()})
                opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))  # straight to the origin
                try:
                    with opener.open(request, timeout=60) as answer:
                        body = answer.read()
                        self.send_response(answer.status)
                        for key, value in answer.headers.items():
                            if key.lower() not in ("transfer-encoding", "connection", "content-length"):
                                self.send_header(key, value)
                except urllib.error.HTTPError as error:
                    body = error.read()
                    self.send_response(error.code)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *args: Any) -> None:
                pass

        self.httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.httpd.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}"
        self._thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)

    def start(self) -> Proxy:
        self._thread.start()
        return self

    def stop(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()
