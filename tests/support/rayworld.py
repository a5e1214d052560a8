"""A local Ray cluster's world of its own, for tests/test_ray.py and bench/engine_ray.py: a fresh temp dir and the
environment of every Ray process (this driver's too), so the cluster needs nothing an earlier Ray left on the
machine and leaves nothing behind.

Ray's default temp dir is ``$RAY_TMPDIR/ray``, else ``$TMPDIR/ray`` (Linux), else ``/tmp/ray``, read when it is
needed. ``ray.cluster_utils.Cluster`` writes its address file (``ray_current_cluster``) there even when the head
is given ``temp_dir=``, and fails where that directory does not exist (a machine on which Ray never ran): with
``RAY_TMPDIR`` set to :func:`temp_dir`'s directory and the head's ``temp_dir`` its ``ray`` subdirectory
(:func:`head_temp_dir`), both are one directory, which the head creates first.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from helpers import isolated_env

ROOT = Path(__file__).resolve().parent.parent.parent

#: The longest AF_UNIX socket path Linux takes (``sun_path`` is 108 bytes with the terminating NUL).
UNIX_PATH_MAX = 107
#: The longest path Ray puts under its temp dir for a socket: a session dir (date, time, microseconds and pid),
#: then a raylet's or a plasma store's socket, numbered for every node after the head.
RAY_SOCKET = "/ray/session_2026-01-01_00-00-00_000000_4194304/sockets/plasma_store.99"
#: What ``tempfile.mkdtemp`` adds to its parent: a slash and 8 random characters after the prefix.
_MKDTEMP = 1 + 8


def _parent(prefix: str) -> str:
    """The system's temp dir when Ray's socket paths fit under a new directory there, else ``/tmp``."""
    room = UNIX_PATH_MAX - len(RAY_SOCKET) - _MKDTEMP - len(prefix)
    for parent in (tempfile.gettempdir(), "/tmp"):
        if len(os.fsencode(parent)) <= room:
            return parent
    raise AssertionError(f"no temp dir short enough for Ray's socket paths (at most {room} bytes)")


@contextmanager
def temp_dir(prefix: str = "ray") -> Iterator[Path]:
    """A new empty directory, short enough that Ray's socket paths under it fit, removed afterwards."""
    path = Path(tempfile.mkdtemp(prefix=prefix, dir=_parent(prefix)))
    try:
        yield path
    finally:
        shutil.rmtree(path, ignore_errors=True)


def head_temp_dir(temp: Path) -> Path:
    """The head node's ``temp_dir`` under :func:`temp_dir`'s directory: Ray's default one there."""
    return temp / "ray"


def head_args(temp: Path) -> dict[str, Any]:
    """The head node's arguments beside its resources: no dashboard, :func:`head_temp_dir`, and a free port for its
    dashboard agent (Ray's default for a head is the fixed 52365, which another local cluster may hold; the nodes
    ``Cluster.add_node`` adds later get a free one already)."""
    return {"include_dashboard": False, "temp_dir": str(head_temp_dir(temp)), "dashboard_agent_listen_port": 0}


def environment(temp: Path, plugins: str) -> dict[str, str]:
    """Every Ray process's environment: this machine's pip configuration off and no pip cache (the tests' index
    sees every download), token auth off (a local cluster), no usage stats, ``temp`` as Ray's and every other
    temp dir, this checkout of repoinstall importable and ``plugins`` as ``RAY_RUNTIME_ENV_PLUGINS``."""
    return isolated_env(
        RAY_AUTH_MODE="disabled",
        RAY_USAGE_STATS_ENABLED="0",
        RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER="0",
        RAY_RUNTIME_ENV_PLUGINS=plugins,
        RAY_TMPDIR=str(temp),
        TMPDIR=str(temp),
        PYTHONPATH=os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH", "")])),
    )
