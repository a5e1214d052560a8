"""Each distribution once: repo bytes and install seconds with the store, beside what each tree alone costs.

    python bench/store.py [--quick] [--pypi]

1. Many adaptors in several versions over one shared library set (built here, served by pypiserver on
   127.0.0.1): ``repoinstall ensure`` of every adaptor version in one command, into a new repo. Beside it, the
   naive figure: every tree holding its whole closure (the sum of each tree's file sizes, which is what the repo
   held before the store), and, for seconds, one ``pip install --target`` per tree (what a tree-per-closure
   installer runs). Default 20 adaptors x 3 versions over 6 libraries (--quick: 4 x 3).
2. With --pypi (needs the network): numpy + pandas from PyPI as two trees, against one ``pip install --target``
   of both. Target: repo bytes at most 1.05x.
Bytes are disk blocks (``st_blocks``), each inode once, as ``du`` counts them.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from pathlib import Path

from common import ensure_command, machine, pod_env, run_together
from servers import PypiServer
from wheels import make_wheel

LIBRARIES = 6
VERSIONS = 3


def disk_bytes(*tops: Path) -> int:
    """Bytes on disk below ``tops``, each inode counted once (hard links are one file)."""
    seen: set[tuple[int, int]] = set()
    total = 0
    for top in tops:
        for directory, dirs, files in os.walk(top):
            for name in dirs + files:
                info = os.lstat(os.path.join(directory, name))
                if (info.st_dev, info.st_ino) not in seen:
                    seen.add((info.st_dev, info.st_ino))
                    total += info.st_blocks * 512
    return total


def trees_bytes(repo: Path) -> int:
    """What the trees would hold as separate bytes: each tree's files counted as if no tree shared one."""
    total = 0
    for tree in (repo / "trees").glob("*/*/*"):
        total += disk_bytes(tree)
    return total


def build(directory: Path, adaptors: int) -> list[str]:
    directory.mkdir(parents=True)
    libraries = [f"shared-lib-{n}" for n in range(LIBRARIES)]
    for name in libraries:
        make_wheel(directory, name, "1.0", modules=20)
    specs = []
    for number in range(adaptors):
        needs = tuple(f"{libraries[(number + k) % LIBRARIES]}>=1" for k in range(3))
        for version in range(1, VERSIONS + 1):
            make_wheel(directory, f"adaptor-{number}", f"{version}.0", requires=needs, modules=4)
            specs.append(f"adaptor-{number}=={version}.0")
    return specs


def many_adaptors(tmp: Path, adaptors: int) -> None:
    wheels = tmp / "many-wheels"
    specs = build(wheels, adaptors)
    server = PypiServer(wheels, tmp)
    try:
        repo = tmp / "many-repo"
        ran = run_together([ensure_command(repo, server.simple, *specs)], [pod_env(tmp / "many-cache")])
        if ran.codes != [0]:
            sys.exit(f"ensure failed: {ran.errors[0].strip()[-800:]}")
        packages = json.loads(ran.outputs[0])["packages"]
        # A repoinstall before the store has no "stored": every distribution of each tree it installed.
        stored = sum(
            int(p["stored"]) if "stored" in p else len(list(Path(p["path"]).glob("*.dist-info"))) for p in packages
        )
        ours = disk_bytes(repo / "trees", repo / "store")
        naive = trees_bytes(repo)
        started = time.perf_counter()
        for spec in specs:
            target = tmp / "naive" / spec
            command = [sys.executable, "-m", "pip", "install", "--target", str(target), "--index-url",
                       server.simple, "--compile", "--disable-pip-version-check", "--no-input", spec]  # fmt: skip
            done = run_together([command], [pod_env(tmp / "naive-cache")])
            if done.codes != [0]:
                sys.exit(f"naive pip failed: {done.errors[0].strip()[-500:]}")
        naive_seconds = time.perf_counter() - started
    finally:
        server.stop()
    print(f"\n{adaptors} adaptors x {VERSIONS} versions over {LIBRARIES} shared libraries: {len(specs)} trees")
    print(f"  distributions installed: {stored} (distinct: {adaptors * VERSIONS + LIBRARIES}; naive: "
          f"{len(specs) * 4})")  # fmt: skip
    print(f"  repo bytes: {ours / 1e6:.1f} MB with the store, {naive / 1e6:.1f} MB as separate trees "
          f"({naive / ours:.1f}x more)")  # fmt: skip
    print(f"  seconds: {ran.seconds:.1f} for one ensure of all, {naive_seconds:.1f} for one pip run per tree "
          f"({naive_seconds / ran.seconds:.1f}x more)")  # fmt: skip


def numpy_pandas(tmp: Path) -> None:
    from helpers import isolated_env

    specs = ["numpy==2.4.6", "pandas==3.1.1"]
    env = {k: v for k, v in isolated_env().items() if not k.startswith("PIP_")}
    env.update(PIP_CONFIG_FILE=os.devnull, PIP_CACHE_DIR=str(tmp / "pypi-cache"))
    target = tmp / "pypi-target"
    command = [sys.executable, "-m", "pip", "install", "--target", str(target), "--compile",
               "--disable-pip-version-check", "--no-input", *specs]  # fmt: skip
    done = run_together([command], [env])
    if done.codes != [0]:
        sys.exit(f"pip failed: {done.errors[0].strip()[-500:]}")
    repo = tmp / "pypi-repo"
    from helpers import cli

    ran = run_together([cli("ensure", *specs, "--repo", str(repo), "--json")], [env])
    if ran.codes != [0]:
        sys.exit(f"ensure failed: {ran.errors[0].strip()[-800:]}")
    baseline = disk_bytes(target)
    ours = disk_bytes(repo / "trees", repo / "store")
    naive = trees_bytes(repo)
    ratio = ours / baseline
    print(f"\nnumpy + pandas from PyPI ({', '.join(specs)}), two trees")
    print(f"  one pip install --target of both: {baseline / 1e6:.1f} MB")
    print(f"  repo (trees + store): {ours / 1e6:.1f} MB; as separate trees it would be {naive / 1e6:.1f} MB "
          f"({naive / baseline:.2f}x)")  # fmt: skip
    print(f"  repo bytes / pip install --target: {ratio:.2f}x (target <= 1.05): {'ok' if ratio <= 1.05 else 'MISSED'}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="4 adaptors x 3 versions (for CI)")
    parser.add_argument("--pypi", action="store_true", help="also numpy + pandas from PyPI (needs the network)")
    parser.add_argument("--only-pypi", action="store_true", help="numpy + pandas alone")
    args = parser.parse_args()
    print(machine())
    with tempfile.TemporaryDirectory() as tmp:
        if not args.only_pypi:
            many_adaptors(Path(tmp), 4 if args.quick else 20)
        if args.pypi or args.only_pypi:
            numpy_pandas(Path(tmp))


if __name__ == "__main__":
    main()
