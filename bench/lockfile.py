"""Reading a lock file on the warm path: ``read_lock`` of a 50-package pylock.toml as uv writes one (an sdist and
21 wheels per package), repeated in one process.

    python bench/lockfile.py

Prints the first read in a fresh process (imports, this interpreter's wheel tags, tomllib, selection), then
microseconds per package for repeated reads of the unchanged file (answered from memory after one stat) and for
reads of a changed file (parsed again). Target: <= 50 us per package for the repeated read.
"""

from __future__ import annotations

import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests" / "support"))

from locks import uv_like_pylock  # noqa: E402

PACKAGES = 50

_FIRST = """
import sys, time
start = time.perf_counter()
from repoinstall._lockfile.read import read_lock
lock = read_lock(sys.argv[1])
print((time.perf_counter() - start) * 1e3, len(lock.packages))
"""


def main() -> None:
    from repoinstall._lockfile.read import forget, read_lock

    with tempfile.TemporaryDirectory() as scratch:
        path = str(Path(scratch, "pylock.toml"))
        Path(path).write_text(uv_like_pylock(PACKAGES))
        done = subprocess.run([sys.executable, "-c", _FIRST, path], capture_output=True, text=True, check=True)
        first_ms, count = done.stdout.split()
        print(f"first read in a fresh process: {float(first_ms):.1f} ms ({count} packages selected)")
        read_lock(path)
        rounds = 5000
        start = time.perf_counter()
        for _ in range(rounds):
            read_lock(path)
        warm = (time.perf_counter() - start) / rounds
        print(
            f"repeated read, unchanged file: {warm * 1e6:.1f} us per lock, {warm * 1e6 / PACKAGES:.2f} us per package"
        )
        rounds = 20
        start = time.perf_counter()
        for _ in range(rounds):
            forget()
            read_lock(path)
        cold = (time.perf_counter() - start) / rounds
        print(f"changed file (parsed again): {cold * 1e3:.1f} ms per lock, {cold * 1e6 / PACKAGES:.0f} us per package")


if __name__ == "__main__":
    main()
