"""Tests that run inside the qemu guest on the real kernel NFS client (started by tests/test_nfs.py).

``REPOINSTALL_NFS`` names ``A:B:EXPORT``: two kernel NFS client mounts of one export (NFSv4.2 and NFSv3, each
with its own caches) and the export's own directory on the server's disk.
"""

from __future__ import annotations

import itertools
import os
from collections.abc import Callable, Iterator
from pathlib import Path

import helpers
import pytest
from nfsrepo import INSTALLER, Nfs

_counter = itertools.count()


#: Read once at import: the tests' autouse fixture clears REPOINSTALL_* from the environment of each test.
_MOUNTS = os.environ["REPOINSTALL_NFS"].split(":")
REPORT = os.environ["REPOINSTALL_NFS_REPORT"]


@pytest.fixture(autouse=True)
def _installer() -> Iterator[None]:
    """The CLI processes the tests start get ``REPOINSTALL_INSTALLER``; in-process repos take ``INSTALLER``."""
    helpers.INSTALLER = INSTALLER
    yield
    helpers.INSTALLER = None


def _mounts() -> tuple[Path, Path, Path]:
    a, b, export = _MOUNTS
    return Path(a), Path(b), Path(export)


@pytest.fixture
def report() -> Callable[[str], None]:
    """Note a figure for the closing report: the host test prints these after the guest run."""

    def note(line: str) -> None:
        with open(REPORT, "a") as out:
            out.write(line + "\n")

    return note


@pytest.fixture
def nfs(request: pytest.FixtureRequest) -> Iterator[Nfs]:
    a, b, export = _mounts()
    name = f"t{next(_counter)}-{request.node.name[:40]}".replace("[", "-").replace("]", "")
    (a / name).mkdir()
    yield Nfs(a / name / "repo", b / name / "repo", export / name / "repo")
