"""Registry token auth on 127.0.0.1, as Docker Hub, GHCR and Harbor do it: the registry answers ``401`` with
``WWW-Authenticate: Bearer realm=...,service=...,scope=...``; the client asks this token service, with Basic
credentials, for a token for that scope; the registry (Debian's ``docker-registry`` with ``auth: token``)
checks the token's RS256 signature against the certificate in its ``rootcertbundle``. Signed by the openssl
command. Records every request it answered (whether it had credentials, which scopes) for the tests."""

from __future__ import annotations

import base64
import json
import subprocess
import threading
import time
import urllib.parse
import uuid
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

SERVICE = "tests-registry"
ISSUER = "tests-token-service"


def _b64url(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode("ascii")


@dataclass
class Asked:
    user: str | None  #: the Basic user, None when the request had no credentials
    scopes: list[str]
    service: str


@dataclass
class TokenService:
    directory: Path
    users: dict[str, str]
    asked: list[Asked] = field(default_factory=list)

    def __post_init__(self) -> None:
        self.directory.mkdir(parents=True, exist_ok=True)
        self.key = self.directory / "token.key"
        self.certificate = self.directory / "token.pem"
        subprocess.run(
            ["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "2", "-subj", "/CN=token signer",
             "-keyout", str(self.key), "-out", str(self.certificate)],
            check=True, capture_output=True,
        )  # fmt: skip
        der = subprocess.run(["openssl", "x509", "-in", str(self.certificate), "-outform", "DER"],
                             check=True, capture_output=True).stdout  # fmt: skip
        self._x5c = base64.b64encode(der).decode("ascii")
        service = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: object) -> None:
                return

            def do_GET(self) -> None:
                query = urllib.parse.parse_qs(urllib.parse.urlsplit(self.path).query)
                user = service._user(self.headers.get("Authorization", ""))
                scopes = query.get("scope", [])
                service.asked.append(Asked(user and user[0], scopes, (query.get("service") or [""])[0]))
                if user is None or service.users.get(user[0]) != user[1]:
                    body = b'{"errors":[{"code":"UNAUTHORIZED"}]}'
                    self.send_response(401)
                else:
                    token = service.token(user[0], scopes)
                    body = json.dumps({"token": token, "access_token": token, "expires_in": 300}).encode()
                    self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._server.daemon_threads = True
        self.realm = f"http://127.0.0.1:{self._server.server_address[1]}/token"
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)

    @staticmethod
    def _user(header: str) -> tuple[str, str] | None:
        scheme, _, encoded = header.partition(" ")
        if scheme.lower() != "basic":
            return None
        user, _, password = base64.b64decode(encoded).decode().partition(":")
        return user, password

    def token(self, user: str, scopes: list[str]) -> str:
        """A JWT granting every action asked for each ``repository:NAME:ACTIONS`` scope, signed RS256."""
        access = []
        for scope in scopes:
            kind, name, actions = scope.split(":", 2) if scope.count(":") >= 2 else ("", "", "")
            if kind == "repository":
                access.append({"type": kind, "name": name, "actions": actions.split(",")})
        now = int(time.time())
        claims = {"iss": ISSUER, "sub": user, "aud": SERVICE, "exp": now + 300, "nbf": now - 10, "iat": now,
                  "jti": uuid.uuid4().hex, "access": access}  # fmt: skip
        header = {"typ": "JWT", "alg": "RS256", "x5c": [self._x5c]}
        signed = f"{_b64url(json.dumps(header).encode())}.{_b64url(json.dumps(claims).encode())}"
        signature = subprocess.run(["openssl", "dgst", "-sha256", "-sign", str(self.key)], input=signed.encode(),
                                   check=True, capture_output=True).stdout  # fmt: skip
        return f"{signed}.{_b64url(signature)}"

    def registry_config(self) -> list[str]:
        """The ``auth:`` lines of the registry's config that send clients here."""
        return ["auth:", "  token:", f"    realm: {self.realm}", f"    service: {SERVICE}", f"    issuer: {ISSUER}",
                f"    rootcertbundle: {self.certificate}"]  # fmt: skip

    def start(self) -> TokenService:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._server.shutdown()
        self._server.server_close()
