"""Real package index servers started on 127.0.0.1: pypiserver (PEP 503 HTML only) and devpi-server (PEP 691
JSON), each serving wheels the fixtures built."""

from __future__ import annotations

import base64
import shutil
import socket
import subprocess
import sys
import time
from pathlib import Path

import httpx


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _wait_up(url: str, proc: subprocess.Popen[bytes], log: Path, timeout: float = 60.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"{url}: server exited: {log.read_text()[-2000:]}")
        try:
            httpx.get(url, timeout=1.0)
            return
        except httpx.HTTPError:
            time.sleep(0.1)
    raise RuntimeError(f"{url}: server did not start within {timeout}s: {log.read_text()[-2000:]}")


def _bin(name: str) -> str:
    return str(Path(sys.executable).parent / name) if (Path(sys.executable).parent / name).exists() else name


class PypiServer:
    """``pypi-server run`` over a directory; with ``htpasswd``, listing and downloads need credentials."""

    def __init__(self, packages: Path, workdir: Path, htpasswd: Path | None = None) -> None:
        self.packages = packages
        self.log = workdir / "pypiserver.log"
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.simple = self.url + "/simple"
        auth = ["-a", "download,list", "-P", str(htpasswd)] if htpasswd else ["-a", ".", "-P", "."]
        command = [_bin("pypi-server"), "run", "-p", str(self.port), "-i", "127.0.0.1", *auth, str(packages)]
        with open(self.log, "wb") as out:
            self.proc = subprocess.Popen(command, stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
        _wait_up(self.url + "/", self.proc, self.log)

    def stop(self) -> None:
        self.proc.terminate()
        self.proc.wait(timeout=30)


class DevpiServer:
    """A devpi-server with no PyPI mirror: ``root/dev`` holds uploads (with Requires-Python), and
    ``root/mirror`` mirrors a fixture index whose pages mark a file yanked (devpi keeps yanks only for mirrors)."""

    def __init__(self, workdir: Path) -> None:
        self.serverdir = workdir / "devpi"
        self.log = workdir / "devpi.log"
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        subprocess.run(
            [_bin("devpi-init"), "--serverdir", str(self.serverdir), "--no-root-pypi"],
            check=True,
            capture_output=True,
        )
        command = [
            _bin("devpi-server"),
            "--serverdir", str(self.serverdir),
            "--host", "127.0.0.1",
            "--port", str(self.port),
        ]  # fmt: skip
        with open(self.log, "wb") as out:
            self.proc = subprocess.Popen(command, stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
        _wait_up(self.url + "/", self.proc, self.log)
        reply = httpx.post(
            self.url + "/+login", json={"user": "root", "password": ""}, headers={"Accept": "application/json"}
        )
        token = reply.json()["result"]["password"]
        self.headers = {
            "X-Devpi-Auth": base64.b64encode(f"root:{token}".encode()).decode(),
            "Accept": "application/json",
        }

    def index(self, name: str, **config: object) -> str:
        reply = httpx.put(f"{self.url}/root/{name}", json=config, headers=self.headers)
        reply.raise_for_status()
        return f"{self.url}/root/{name}/+simple"

    def upload(self, index: str, wheel: Path, requires_python: str | None = None) -> None:
        name, version = wheel.name.split("-")[:2]
        fields = {"name": name.replace("_", "-"), "version": version}
        if requires_python:
            fields["requires_python"] = requires_python
        url = f"{self.url}/root/{index}/"
        httpx.post(url, data={":action": "submit", **fields}, headers=self.headers).raise_for_status()
        reply = httpx.post(
            url,
            data={":action": "file_upload", **fields},
            files={"content": (wheel.name, wheel.read_bytes())},
            headers=self.headers,
        )
        reply.raise_for_status()

    def stop(self) -> None:
        self.proc.terminate()
        self.proc.wait(timeout=30)
        shutil.rmtree(self.serverdir, ignore_errors=True)
