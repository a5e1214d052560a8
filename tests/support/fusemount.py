"""Mount the test FUSE passthrough (fusefs.py): several "clients" of one backing directory."""

from __future__ import annotations

import contextlib
import os
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

from helpers import wait_until

HERE = Path(__file__).parent


def fuse_missing() -> str | None:
    """Why FUSE mounts cannot be made here, or ``None`` when they can."""
    if os.geteuid() != 0:
        return "needs root"
    if not os.path.exists("/dev/fuse") or not shutil.which("fusermount") or not shutil.which("unshare"):
        return "needs /dev/fuse, fusermount and unshare"
    try:
        import fuse  # noqa: F401
    except (ImportError, OSError) as error:
        return f"needs fusepy and libfuse2: {error}"
    return None


@contextlib.contextmanager
def mounted(base: Path, names: list[str], *extra: str) -> Iterator[list[Path]]:
    """``base/backing`` mounted at ``base/<name>`` for each name; unmounted on exit."""
    backing = base / "backing"
    backing.mkdir(exist_ok=True)
    mounts = [base / name for name in names]
    servers = []
    for mount in mounts:
        mount.mkdir(exist_ok=True)
        command = [sys.executable, str(HERE / "fusefs.py"), str(backing), str(mount), *extra]
        servers.append(subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE))
    try:
        for mount, server in zip(mounts, servers, strict=True):
            wait_until(lambda m=mount, s=server: os.path.ismount(m) or s.poll() is not None, what=f"mount {mount}")
            assert os.path.ismount(mount), server.stderr.read() if server.stderr else ""
        yield mounts
    finally:
        for mount in mounts:
            subprocess.run(["fusermount", "-u", "-z", str(mount)], capture_output=True, check=False)
        for server in servers:
            try:
                server.wait(timeout=10)
            except subprocess.TimeoutExpired:
                server.kill()


def as_pod(hostname: str) -> tuple[str, ...]:
    """A command prefix giving the process its own UTS namespace and hostname, as a Kubernetes pod has."""
    return ("unshare", "--uts", "sh", "-c", 'hostname "$0" && exec "$@"', hostname)
