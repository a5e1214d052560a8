"""A test's repo on NFS: the same directory through two kernel NFS client mounts and on the server's disk."""

from __future__ import annotations

import os
from pathlib import Path
from typing import NamedTuple

#: The installer every install in tests/nfs uses: uv. The guest emulates its CPU, where pip's own start-up (twice
#: per install) costs half a minute; the protocol under test is the same for both.
INSTALLER = os.environ.get("REPOINSTALL_NFS_INSTALLER", "uv")
#: The guest emulates its CPU (qemu, TCG: Python runs about 17 times slower than on the host) rather than running
#: on it (User-Mode-Linux): the tests then race fewer pods, each a guest process that starts slowly.
EMULATED = os.environ.get("REPOINSTALL_NFS_GUEST_KIND") == "qemu"


class Nfs(NamedTuple):
    """One test's repo seen through both clients (``a``: NFSv4.2, ``b``: NFSv3), and on the server's disk."""

    a: Path
    b: Path
    backing: Path
