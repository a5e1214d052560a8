"""How registries are reached: a plain value, cheap to import (no HTTP client)."""

from __future__ import annotations

import os
from typing import NamedTuple


class Settings(NamedTuple):
    """How to reach registries: plain HTTP or TLS (a CA bundle, a client certificate), and a timeout."""

    plain_http: bool = False
    ca: str | None = None
    client_cert: str | None = None
    timeout: float = 60.0

    def validate(self) -> str | None:
        for label, path in (("--registry-ca", self.ca), ("--registry-client-cert", self.client_cert)):
            if path is not None and not os.path.isfile(path):
                return f"{label} {path}: no such file"
        if not self.timeout > 0:
            return f"--registry-timeout must be a positive number of seconds, got {self.timeout}"
        return None
