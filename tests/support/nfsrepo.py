"""A test's repo on NFS: the same directory through two kernel NFS client mounts and on the server's disk."""

from __future__ import annotations

from pathlib import Path
from typing import NamedTuple


class Nfs(NamedTuple):
    """One test's repo seen through both clients (``a``: NFSv4.2, ``b``: NFSv3), and on the server's disk."""

    a: Path
    b: Path
    backing: Path
