"""A real OCI registry on 127.0.0.1 for the tests: Debian's ``docker-registry`` (the CNCF distribution registry),
with its storage in a temporary dir, plain HTTP, or htpasswd auth and TLS for the credentials cases."""

from __future__ import annotations

import contextlib
import os
import shutil
import socket
import subprocess
import time
import warnings
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import httpx

BINARY = shutil.which("docker-registry") or "/usr/bin/docker-registry"


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def htpasswd_line(user: str, password: str) -> str:
    """One htpasswd line with a bcrypt hash (the registry takes no other), made by the C library's crypt."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        import crypt

        return f"{user}:{crypt.crypt(password, crypt.mksalt(crypt.METHOD_BLOWFISH))}"


@dataclass
class Registry:
    host: str  #: 127.0.0.1:PORT
    root: Path  #: its storage
    process: subprocess.Popen[bytes]
    scheme: str

    def url(self, path: str) -> str:
        return f"{self.scheme}://{self.host}{path}"

    def stop(self) -> None:
        self.process.terminate()
        with contextlib.suppress(subprocess.TimeoutExpired):
            self.process.wait(10)
        if self.process.poll() is None:
            self.process.kill()
            self.process.wait(10)


@contextlib.contextmanager
def registry(
    directory: Path,
    *,
    users: dict[str, str] | None = None,
    certificate: Path | None = None,
    client_ca: Path | None = None,
    auth: list[str] | None = None,
) -> Iterator[Registry]:
    """A registry serving from ``directory``; ``users``: htpasswd auth; ``certificate``: TLS with this PEM (its
    certificate and key); ``client_ca``: client certificates signed by it required; ``auth``: the config's
    ``auth:`` lines instead (a token service's, :mod:`tokenauth`)."""
    directory.mkdir(parents=True, exist_ok=True)
    port = free_port()
    lines = ["version: 0.1", "log:", "  level: error", "storage:", "  filesystem:",
             f"    rootdirectory: {directory / 'data'}", "  delete:", "    enabled: true",
             "http:", f"  addr: 127.0.0.1:{port}", "  secret: tests-only"]  # fmt: skip
    if certificate is not None:
        lines += ["  tls:", f"    certificate: {certificate}", f"    key: {certificate}"]
        if client_ca is not None:
            lines += ["    clientcas:", f"      - {client_ca}"]
    if users:
        (directory / "htpasswd").write_text("".join(htpasswd_line(u, p) + "\n" for u, p in users.items()))
        lines += ["auth:", "  htpasswd:", "    realm: tests", f"    path: {directory / 'htpasswd'}"]
    elif auth:
        lines += auth
    (directory / "config.yml").write_text("\n".join(lines) + "\n")
    log = open(directory / "registry.log", "wb")  # noqa: SIM115
    process = subprocess.Popen(
        [BINARY, "serve", str(directory / "config.yml")], stdout=log, stderr=subprocess.STDOUT,
        stdin=subprocess.DEVNULL, env={"PATH": os.environ.get("PATH", "")},
    )  # fmt: skip
    found = Registry(f"127.0.0.1:{port}", directory / "data", process, "https" if certificate else "http")
    try:
        deadline = time.monotonic() + 30
        while True:
            if process.poll() is not None:
                raise RuntimeError(f"the registry exited: {(directory / 'registry.log').read_text()[-2000:]}")
            try:
                with socket.create_connection(("127.0.0.1", port), timeout=1):
                    break
            except OSError:
                if time.monotonic() > deadline:
                    raise RuntimeError("the registry did not start listening") from None
                time.sleep(0.05)
        yield found
    finally:
        found.stop()
        log.close()


def tags(found: Registry, repository: str, **client: object) -> list[str]:
    response = httpx.get(found.url(f"/v2/{repository}/tags/list"), **client)  # type: ignore[arg-type]
    return sorted(response.json().get("tags") or []) if response.status_code == 200 else []
