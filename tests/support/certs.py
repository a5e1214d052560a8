"""A throwaway certificate authority for TLS tests, made with the openssl command: a server certificate for
127.0.0.1 and a client certificate, both signed by it."""

from __future__ import annotations

import ssl
import subprocess
from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class Certificates:
    ca: Path  #: the authority's certificate: what clients trust (pip's ``cert``)
    server: Path  #: the server's certificate and key, one PEM file
    client: Path  #: the client's certificate and key, one PEM file (pip's ``client-cert``)

    def server_context(self, *, require_client: bool) -> ssl.SSLContext:
        context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        context.load_cert_chain(self.server)
        if require_client:
            context.verify_mode = ssl.CERT_REQUIRED
            context.load_verify_locations(self.ca)
        return context


def _openssl(*args: str | Path, cwd: Path) -> None:
    subprocess.run(["openssl", *map(str, args)], cwd=cwd, check=True, capture_output=True)


def make_certificates(directory: Path) -> Certificates:
    directory.mkdir(parents=True, exist_ok=True)
    _openssl("req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "2", "-subj", "/CN=test authority",
             "-keyout", "ca.key", "-out", "ca.pem", cwd=directory)  # fmt: skip
    for name, extension in (("server", "subjectAltName=IP:127.0.0.1"), ("client", "extendedKeyUsage=clientAuth")):
        _openssl("req", "-newkey", "rsa:2048", "-nodes", "-subj", f"/CN=test {name}",
                 "-keyout", f"{name}.key", "-out", f"{name}.csr", cwd=directory)  # fmt: skip
        (directory / f"{name}.ext").write_text(extension + "\n")
        _openssl("x509", "-req", "-in", f"{name}.csr", "-CA", "ca.pem", "-CAkey", "ca.key", "-CAcreateserial",
                 "-days", "2", "-extfile", f"{name}.ext", "-out", f"{name}.crt", cwd=directory)  # fmt: skip
        pem = (directory / f"{name}.crt").read_text() + (directory / f"{name}.key").read_text()
        (directory / f"{name}.pem").write_text(pem)
    return Certificates(directory / "ca.pem", directory / "server.pem", directory / "client.pem")
