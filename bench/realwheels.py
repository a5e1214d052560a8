"""Real wheels for the benchmarks: numpy + pandas (and pandas' dependencies), served from 127.0.0.1.

The wheels are the ones ``.ci/requirements-realwheels.txt`` pins (hash-checked). ``.ci/run`` downloads them once to
``REPOINSTALL_REAL_WHEELS``; :func:`wheels` downloads whatever is missing there (the one step that needs the
network), so every later run, and every server :func:`serve` starts, works offline.

Two kinds of host, as a fleet meets them (tests/support/indexserver.py, which counts downloads per file):

- ``"pep658"``: a Simple Repository API with each file's sha256 and its METADATA on its own (PEP 658), answering
  byte ranges, as PyPI does;
- ``"links"``: a plain find-links page that serves whole files only (no hashes, no ranges, no metadata), as
  ``python -m http.server`` does.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests" / "support"))

from indexserver import IndexServer  # noqa: E402

LOCK = ROOT / ".ci" / "requirements-realwheels.txt"
#: The set the benchmarks install: numpy + pandas, and pandas' dependencies on Linux.
NUMPY_PANDAS = ("numpy", "pandas", "python-dateutil", "six")
PINS: dict[str, str] = dict(re.findall(r"^([a-z0-9-]+)==(\S+)", LOCK.read_text(), re.M))
#: The top-level specs of the set, pinned as the lock pins them.
SPECS = [f"numpy=={PINS['numpy']}", f"pandas=={PINS['pandas']}"]


def _cache() -> Path:
    return Path(os.environ.get("REPOINSTALL_REAL_WHEELS", "/var/tmp/repoinstall-realwheels"))


def _project(wheel: Path) -> str:
    return wheel.name.split("-")[0].replace("_", "-").lower()


def wheels(projects: tuple[str, ...] = NUMPY_PANDAS) -> list[Path]:
    """The pinned wheels of ``projects`` in the cache, downloaded (hash-checked, PyPI only) if any is missing."""
    cache = _cache()
    have = {_project(w): w for w in cache.glob("*.whl")} if cache.is_dir() else {}
    if any(p not in have for p in projects):
        cache.mkdir(parents=True, exist_ok=True)
        env = {k: v for k, v in os.environ.items() if not k.startswith("PIP_")} | {"PIP_CONFIG_FILE": os.devnull}
        command = [sys.executable, "-m", "pip", "download", "-q", "--disable-pip-version-check", "--require-hashes"]
        command += ["--no-deps", "--only-binary=:all:", "-d", str(cache), "-r", str(LOCK)]
        subprocess.run(command, env=env, check=True)
        have = {_project(w): w for w in cache.glob("*.whl")}
    return [have[p] for p in projects]


def total_bytes(projects: tuple[str, ...] = NUMPY_PANDAS) -> int:
    return sum(w.stat().st_size for w in wheels(projects))


@contextmanager
def serve(kind: str = "pep658", projects: tuple[str, ...] = NUMPY_PANDAS) -> Iterator[IndexServer]:
    """An index server on 127.0.0.1 over the pinned wheels of ``projects`` (hard links into a private directory).

    Its ``url`` (with a trailing slash) is the find-links page; ``url + "simple"`` is the index.
    ``downloads(prefix)`` counts whole-file GETs of a wheel (not ranges, not PEP 658 metadata)."""
    if kind not in ("pep658", "links"):
        raise ValueError(f"unknown kind of host: {kind}")
    with tempfile.TemporaryDirectory(prefix="realwheels-") as scratch:
        directory = Path(scratch)
        for wheel in wheels(projects):
            try:
                os.link(wheel, directory / wheel.name)
            except OSError:
                shutil.copyfile(wheel, directory / wheel.name)
        server = IndexServer(directory)
        if kind == "links":
            server.hashes = False
            server.ranges = False
            server.json = False
        server.start()
        try:
            yield server
        finally:
            server.stop()


if __name__ == "__main__":
    for wheel in wheels():
        print(f"{wheel.stat().st_size / 1e6:7.1f} MB  {wheel.name}")
