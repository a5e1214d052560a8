"""A mixed fleet on one repo, as a rolling update makes it: pods running the lowest and the newest filelock the
project allows, and pods running the previous release of repoinstall beside this one.

The filelock wheels are what ``.ci/requirements-fleet.txt`` pins (``.ci/run`` downloads them, hash-checked, to
``REPOINSTALL_FLEET_WHEELS``); a pure-Python wheel is importable as it is, first on ``PYTHONPATH``. The previous
release is this repository's own history (``git archive``), so it needs a clone, not a download.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
WHEELS = Path(os.environ.get("REPOINSTALL_FLEET_WHEELS", "/var/tmp/repoinstall-fleet"))
#: The last release before repoinstall stated its repo's format (the commit before this work began).
PREVIOUS = "5f20b39c8982e9223de431c8bf787f79e5ce131a"
#: CI: a missing piece fails the test instead of skipping it (a skip would hide a missing install step).
REQUIRED = os.environ.get("REPOINSTALL_REQUIRE_FUSE") == "1"


def _missing(reason: str) -> None:
    if REQUIRED:
        pytest.fail(f"the mixed-fleet tests are required here but cannot run: {reason}")
    pytest.skip(reason)


def filelock_versions() -> tuple[str, str]:
    """(lowest, newest) filelock the project allows, as .ci/requirements-fleet.txt pins them."""
    text = (ROOT / ".ci" / "requirements-fleet.txt").read_text()
    lowest, newest = re.findall(r"^filelock==(\S+)", text, re.M)
    return lowest, newest


def filelock_wheel(version: str) -> Path:
    found = sorted(WHEELS.glob(f"filelock-{version}-*.whl"))
    if not found:
        _missing(f"no filelock {version} wheel in {WHEELS} (.ci/run downloads it)")
    return found[0]


def previous_release(into: Path) -> Path:
    """The previous release's ``repoinstall`` package, unpacked under ``into``: the directory to put on the path."""
    has = subprocess.run(["git", "-C", str(ROOT), "cat-file", "-e", f"{PREVIOUS}^{{commit}}"], check=False)
    if has.returncode != 0:
        _missing(f"commit {PREVIOUS[:12]} is not in this clone (a shallow clone?)")
    into.mkdir(parents=True, exist_ok=True)
    archive = subprocess.run(
        ["git", "-C", str(ROOT), "archive", "--format=tar", PREVIOUS, "repoinstall"], check=True, capture_output=True
    )
    subprocess.run(["tar", "-x", "-C", str(into)], input=archive.stdout, check=True)
    return into


def command(*args: str | Path) -> list[str]:
    """repoinstall's CLI as a pod of the fleet runs it: ``-P`` keeps the working directory (this checkout) off
    the path, so the code a pod runs is what its PYTHONPATH puts first."""
    return [sys.executable, "-P", "-m", "repoinstall", *map(str, args)]
