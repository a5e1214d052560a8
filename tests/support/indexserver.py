"""A real package server on 127.0.0.1 for tests: a find-links page over a wheel directory, and a Simple
Repository API (``/simple/<project>/``, PEP 503 HTML or PEP 691 JSON) with yanked files and Requires-Python.

It can delay a wheel's download (to catch an installer mid-install) and counts downloads per file, which is
how tests count installer runs. Project pages can be made to fail (``page_faults``: "500", "garbage",
"slow", "binary", taken one per request) and are counted (``pages``), which is how tests count index requests.
"""

from __future__ import annotations

import hashlib
import html
import json
import ssl
import threading
import time
from collections import Counter
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

_IMMUTABLE = "max-age=31536000, immutable"


def _byte_range(header: str | None, size: int) -> tuple[int, int] | None:
    """The one range of ``bytes=a-b``, ``bytes=a-`` or ``bytes=-n`` within ``size``, else ``None`` (whole file)."""
    if not header or not header.startswith("bytes=") or "," in header:
        return None
    start, _, end = header.removeprefix("bytes=").partition("-")
    try:
        if not start:
            return max(0, size - int(end)), size - 1
        return int(start), min(int(end), size - 1) if end else size - 1
    except ValueError:
        return None


class IndexServer:
    def __init__(self, directory: Path, *, tls: ssl.SSLContext | None = None) -> None:
        """``tls``: serve https with this server context (one that asks for client certificates, say)."""
        self.directory = directory
        self.delays: dict[str, float] = {}  # wheel-name prefix -> seconds before the body is sent
        #: Wheel-name prefix -> an event the body waits for: a download held back until the test lets it go, as
        #: long as that takes (set every event, or ``stop``, before the clients give up).
        self.holds: dict[str, threading.Event] = {}
        #: Called on the serving thread before a listing page (the find-links page, a project's /simple/ page) or a
        #: download is answered, with the page's project ("" for the find-links page) or the file's name: a test
        #: holds answers back until something it waits for happens (tests/test_async_loop.py: a loop ticking).
        self.before_page: Callable[[str], None] | None = None
        self.before_download: Callable[[str], None] | None = None
        self.started: Counter[str] = Counter()
        self.completed: Counter[str] = Counter()
        #: Downloads being sent right now, and the most there were at once.
        self.sending = 0
        self.peak_sending = 0
        #: Downloads per (file, client): the first word of the User-Agent (``pip``, ``uv``, ``repoinstall``).
        self.clients: Counter[tuple[str, str]] = Counter()
        self.slow_in_flight = 0  # slow page answers being held back right now
        self.pages: Counter[str] = Counter()  # project -> requests for its /simple/ page
        self.requests = 0  # every request, of any path: a client that asked nothing leaves it at 0
        self.page_faults: list[str] = []
        self.always: str | None = None  # a fault for every page request
        self.slow_seconds = 3.0
        self.yanked: set[str] = set()  # file names listed as yanked
        self.json = True  # answer JSON to clients that ask for it
        #: Give each file's sha256 in the pages, as PyPI, pypiserver and devpi do (``#sha256=`` in HTML, ``hashes``
        #: in JSON). Off: a plain find-links page, where an installer must download a file to learn its hash.
        self.hashes = True
        #: Answer byte ranges (``Range``), as PyPI's file host does. Off: a plain static server, which sends the
        #: whole file for any GET (a download) and says nothing of ranges.
        self.ranges = True
        self._lock = threading.Lock()
        server = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: object) -> None:
                return

            def do_GET(self) -> None:
                with server._lock:
                    server.requests += 1
                name = self.path.strip("/").split("?")[0]
                if name == "simple":
                    projects = sorted({p.name.split("-")[0].replace("_", "-") for p in server.directory.glob("*.whl")})
                    body = "".join(f'<a href="{n}/">{n}</a>\n' for n in projects)
                    self._send(200, f"<html><body>\n{body}</body></html>\n".encode(), "text/html")
                    return
                if name.startswith("simple/"):
                    self._project(name.removeprefix("simple/"))
                    return
                if name == "":
                    if server.before_page is not None:
                        server.before_page("")
                    links = "".join(
                        f'<a href="/{html.escape(p.name)}{server.fragment(p)}"{server.core_metadata(p)}>'
                        f"{html.escape(p.name)}</a>\n"
                        for p in sorted(server.directory.glob("*.whl"))
                    )
                    body = f"<html><body>\n{links}</body></html>\n".encode()
                    self._send(200, body, "text/html")
                    return
                if name.endswith(".whl.metadata") and server.hashes and (meta := server.metadata(name)) is not None:
                    # PEP 658: a wheel's METADATA on its own, so a resolver learns its requirements without
                    # downloading it (as from PyPI); not a download of the wheel.
                    self._send(200, meta, "application/octet-stream")
                    return
                path = server.directory / name
                if "/" in name or not path.is_file():
                    self._send(404, b"not found\n", "text/plain")
                    return
                body = path.read_bytes()
                # Like a real file host: immutable files with an ETag, so installers' HTTP caches keep them.
                etag = f'"{hashlib.sha256(body).hexdigest()[:32]}"'
                if self.headers.get("If-None-Match") == etag:
                    self._send(304, b"", "application/octet-stream", ETag=etag)
                    return
                wanted = _byte_range(self.headers.get("Range"), len(body)) if server.ranges else None
                if wanted is not None:
                    # A part (uv reads a wheel's METADATA this way before it downloads it): not a download.
                    first, last = wanted
                    extra = {"Content-Range": f"bytes {first}-{last}/{len(body)}", "ETag": etag}
                    self._send(206, body[first : last + 1], "application/octet-stream", **extra)
                    return
                with server._lock:
                    server.started[name] += 1
                    server.sending += 1
                    server.peak_sending = max(server.peak_sending, server.sending)
                    server.clients[(name, (self.headers.get("User-Agent") or "").split("/")[0].split(" ")[0])] += 1
                try:
                    for prefix, delay in server.delays.items():
                        if name.startswith(prefix):
                            time.sleep(delay)
                    for prefix, hold in server.holds.items():
                        if name.startswith(prefix):
                            hold.wait()
                    if server.before_download is not None:
                        server.before_download(name)
                    self._send(200, body, "application/octet-stream", ETag=etag, **{"Cache-Control": _IMMUTABLE})
                finally:
                    with server._lock:
                        server.sending -= 1
                with server._lock:
                    server.completed[name] += 1

            def do_HEAD(self) -> None:
                # uv asks first whether a wheel can be read in ranges. Not counted as a download.
                with server._lock:
                    server.requests += 1
                path = server.directory / self.path.strip("/").split("?")[0]
                if "/" in path.relative_to(server.directory).as_posix() or not path.is_file():
                    self.send_response(404)
                    self.send_header("Content-Length", "0")
                else:
                    self.send_response(200)
                    self.send_header("Content-Type", "application/octet-stream")
                    self.send_header("Content-Length", str(path.stat().st_size))
                    if server.ranges:
                        self.send_header("Accept-Ranges", "bytes")
                self.end_headers()

            def _project(self, project: str) -> None:
                with server._lock:
                    # pip asks for the page too when it installs the pin; only resolution requests count here.
                    if not (self.headers.get("User-Agent") or "").startswith("pip/"):
                        server.pages[project] += 1
                    fault = server.page_faults.pop(0) if server.page_faults else server.always
                if server.before_page is not None:
                    server.before_page(project)
                if fault == "429":  # too many requests: come back in one second
                    self._send(429, b"slow down\n", "text/plain", **{"Retry-After": "1"})
                    return
                if fault == "500":
                    self._send(500, b"internal error\n", "text/plain")
                    return
                if fault == "garbage":
                    self._send(200, b'{"files": [oops', "application/vnd.pypi.simple.v1+json")
                    return
                if fault == "binary":
                    self._send(200, bytes(range(256)) * 4, "application/octet-stream")
                    return
                if fault == "slow":
                    with server._lock:
                        server.slow_in_flight += 1
                    try:
                        time.sleep(server.slow_seconds)
                    finally:
                        with server._lock:
                            server.slow_in_flight -= 1
                files = server.files(project)
                if not files:
                    self._send(404, b"not found\n", "text/plain")
                    return
                if server.json and "application/vnd.pypi.simple.v1+json" in (self.headers.get("Accept") or ""):
                    document = {
                        "meta": {"api-version": "1.0"},
                        "name": project,
                        "files": [
                            {
                                "filename": p.name,
                                "url": f"../../{p.name}",
                                "hashes": {"sha256": server.sha256(p)} if server.hashes else {},
                                "yanked": p.name in server.yanked,
                                **server.core_metadata_json(p),
                            }
                            for p in files
                        ],
                    }
                    self._send(200, json.dumps(document).encode(), "application/vnd.pypi.simple.v1+json")
                    return
                links = "".join(
                    f'<a href="../../{html.escape(p.name)}{server.fragment(p)}"{server.core_metadata(p)}'
                    f"{' data-yanked' if p.name in server.yanked else ''}>{html.escape(p.name)}</a>\n"
                    for p in files
                )
                self._send(200, f"<html><body>\n{links}</body></html>\n".encode(), "text/html")

            def _send(self, code: int, body: bytes, kind: str, **headers: str) -> None:
                try:
                    self.send_response(code)
                    self.send_header("Content-Type", kind)
                    self.send_header("Content-Length", str(len(body)))
                    for header, value in headers.items():
                        self.send_header(header, value)
                    self.end_headers()
                    self.wfile.write(body)
                except (BrokenPipeError, ConnectionResetError):
                    pass

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.httpd.daemon_threads = True
        if tls is not None:
            # The handshake runs at accept: a client the context refuses (no certificate) never gets a request
            # in; socketserver drops the failed accept and serves the next one.
            self.httpd.socket = tls.wrap_socket(self.httpd.socket, server_side=True)
        scheme = "https" if tls is not None else "http"
        self.url = f"{scheme}://127.0.0.1:{self.httpd.server_address[1]}/"
        self._thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)

    def sha256(self, path: Path) -> str:
        return hashlib.sha256(path.read_bytes()).hexdigest()

    def fragment(self, path: Path) -> str:
        """``#sha256=<hex>`` for a link to ``path`` when the pages give hashes, else nothing."""
        return f"#sha256={self.sha256(path)}" if self.hashes else ""

    def metadata(self, name: str) -> bytes | None:
        """The METADATA of the wheel ``name`` minus ``.metadata`` (PEP 658), or ``None``."""
        import zipfile

        path = self.directory / name.removesuffix(".metadata")
        if "/" in name or not path.is_file():
            return None
        try:
            with zipfile.ZipFile(path) as wheel:
                found = [n for n in wheel.namelist() if n.count("/") == 1 and n.endswith(".dist-info/METADATA")]
                return wheel.read(found[0]) if len(found) == 1 else None
        except (OSError, zipfile.BadZipFile):
            return None  # not a wheel at all (a broken one, on purpose): no METADATA to give

    def core_metadata(self, path: Path) -> str:
        """The attributes that say a wheel's METADATA is served beside it (PEP 658/714), when the pages give
        hashes, as PyPI's do."""
        meta = self.metadata(path.name + ".metadata") if self.hashes else None
        if meta is None:
            return ""
        digest = hashlib.sha256(meta).hexdigest()
        return f' data-core-metadata="sha256={digest}" data-dist-info-metadata="sha256={digest}"'

    def core_metadata_json(self, path: Path) -> dict[str, object]:
        meta = self.metadata(path.name + ".metadata") if self.hashes else None
        if meta is None:
            return {}
        digest = {"sha256": hashlib.sha256(meta).hexdigest()}
        return {"core-metadata": digest, "dist-info-metadata": digest}

    @property
    def simple(self) -> str:
        return self.url + "simple"

    def files(self, project: str) -> list[Path]:
        prefix = project.strip("/").replace("-", "_") + "-"
        return sorted(p for p in self.directory.glob("*.whl") if p.name.startswith(prefix))

    def start(self) -> IndexServer:
        self._thread.start()
        return self

    def stop(self) -> None:
        for hold in self.holds.values():
            hold.set()
        self.httpd.shutdown()
        self.httpd.server_close()

    def downloading(self, prefix: str) -> int:
        """Downloads of files named ``prefix``... started and not yet finished (held back by a delay)."""
        with self._lock:
            started = sum(n for name, n in self.started.items() if name.startswith(prefix))
            return started - sum(n for name, n in self.completed.items() if name.startswith(prefix))

    def downloads(self, prefix: str) -> int:
        with self._lock:
            return sum(n for name, n in self.started.items() if name.startswith(prefix))

    def wait_for_download(self, prefix: str, count: int = 1, timeout: float = 30.0) -> None:
        deadline = time.monotonic() + timeout
        while self.downloads(prefix) < count:
            if time.monotonic() > deadline:
                raise AssertionError(f"no download of {prefix} within {timeout}s")
            time.sleep(0.02)
