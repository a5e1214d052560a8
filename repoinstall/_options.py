"""Settings values: how to lock and how to install. Plain immutable data (NamedTuples: cheap to import)."""

from __future__ import annotations

import math
import sys
from typing import NamedTuple


class LockSettings(NamedTuple):
    """Defaults fit NFS attribute caching: a peer may see a heartbeat only seconds after it was written."""

    stale_after: float = 120.0
    heartbeat: float = 20.0
    wait_timeout: float = 1800.0
    enabled: bool = True

    def validate(self) -> str | None:
        """A one-line reason these settings cannot work, or ``None``."""
        for label, value in (("stale-after", self.stale_after), ("heartbeat", self.heartbeat)):
            if not math.isfinite(value) or value <= 0:
                return f"--{label} must be a positive number of seconds, got {value}"
        if not math.isfinite(self.wait_timeout) or self.wait_timeout < 0:
            return f"--wait-timeout must be zero or a positive number of seconds, got {self.wait_timeout}"
        if self.heartbeat >= self.stale_after:
            return f"--heartbeat ({self.heartbeat}s) must be shorter than --stale-after ({self.stale_after}s)"
        return None


class InstallOptions(NamedTuple):
    """Index and resolution options passed through to the installer unchanged.

    pip's own configuration (pip.conf, ``PIP_*``) stays in force underneath these.
    """

    index_url: str | None = None
    extra_index_urls: tuple[str, ...] = ()
    find_links: tuple[str, ...] = ()
    no_index: bool = False
    constraints: tuple[str, ...] = ()
    timeout: float = 900.0
    python: str = sys.executable
