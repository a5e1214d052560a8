"""How registries are reached, and how much of what one sends is taken: a plain value, cheap to import (no HTTP
client)."""

from __future__ import annotations

import os
from typing import NamedTuple

from .._options import (
    REGISTRY_MAX_BYTES,
    REGISTRY_MAX_FILES,
    REGISTRY_MAX_LAYER_BYTES,
    REGISTRY_MAX_LAYER_FILES,
    REGISTRY_MAX_LAYERS,
    REGISTRY_MIN_RATE,
    REGISTRY_RATE_WINDOW,
)


class RegistrySettings(NamedTuple):
    """How to reach registries: plain HTTP or TLS (a CA bundle, a client certificate), and a timeout; and the
    bounds on what one sends: layers per image, bytes and files per layer and per image, a minimum rate."""

    plain_http: bool = False
    ca: str | None = None
    client_cert: str | None = None
    timeout: float = 60.0
    max_layers: int = REGISTRY_MAX_LAYERS
    max_layer_bytes: int = REGISTRY_MAX_LAYER_BYTES
    max_layer_files: int = REGISTRY_MAX_LAYER_FILES
    max_bytes: int = REGISTRY_MAX_BYTES
    max_files: int = REGISTRY_MAX_FILES
    min_rate: int = REGISTRY_MIN_RATE
    rate_window: float = REGISTRY_RATE_WINDOW

    def validate(self) -> str | None:
        for label, path in (("--registry-ca", self.ca), ("--registry-client-cert", self.client_cert)):
            if path is not None and not os.path.isfile(path):
                return f"{label} {path}: no such file"
        if not self.timeout > 0:
            return f"--registry-timeout must be a positive number of seconds, got {self.timeout}"
        counts = (
            ("--registry-max-layers", self.max_layers),
            ("--registry-max-layer-bytes", self.max_layer_bytes),
            ("--registry-max-layer-files", self.max_layer_files),
            ("--registry-max-bytes", self.max_bytes),
            ("--registry-max-files", self.max_files),
            ("--registry-min-rate", self.min_rate),
        )
        for label, count in counts:
            if isinstance(count, bool) or not isinstance(count, int) or count < 1:
                return f"{label} must be a positive whole number, got {count!r}"
        if not self.rate_window > 0:
            return f"--registry-rate-window must be a positive number of seconds, got {self.rate_window}"
        return None


#: The name the package uses inside (``RegistrySettings`` is the public one).
Settings = RegistrySettings
