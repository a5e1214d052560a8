"""Trees without bytecode (``--no-compile``): a cold ensure beside bare uv, and what an import then costs.

    python bench/nocompile.py [--quick] [--rounds N] [--compiled] [--imports N]

numpy + pandas (the pinned real wheels of bench/realwheels.py, served from 127.0.0.1 as a PEP 658 index), in
alternating pairs, each into a new directory with an empty cache, after a ``sync`` (odd rounds run the bare
installer first):

* ``repoinstall ensure numpy==... pandas==... --installer uv --no-compile`` (cold: a new repo);
* bare ``uv pip install --target`` of the same specs, which compiles nothing either (uv's default).

Wall and CPU seconds, medians with min-max, each round's own ratio, and the median ratio beside its target:
at most 3x bare uv. ``--compiled``: each round also times the ensure with bytecode (the default), for what the
compile costs. Then ``import pandas`` from a tree with bytecode and from one without, as from a read-only volume
(``PYTHONDONTWRITEBYTECODE=1``: nothing is written, as on a read-only mount), and from the one without with
``PYTHONPYCACHEPREFIX`` (a per-pod writable directory: its first import compiles and writes, the next ones read):
the files each import opens from the tree (``strace``), and its CPU seconds (median of ``--imports`` runs).
``--quick`` (for CI): the small fleet set's wheels, built here, one round, two imports.
"""

from __future__ import annotations

import argparse
import os
import re
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from common import LIBRARIES, machine, pod_env, run_together
from common import SPECS as FLEET_SPECS
from common import build as build_wheels
from helpers import cli
from indexserver import IndexServer

from repoinstall import InstallOptions, Repo
from repoinstall._install.backends.uv import _binary as uv_binary

TARGET = 3.0


@contextmanager
def served(quick: bool, tmp: Path) -> Iterator[tuple[IndexServer, list[str], str]]:
    """The index, the specs and the module an import measures."""
    if quick:
        build_wheels(tmp / "wheels")
        server = IndexServer(tmp / "wheels").start()
        try:
            yield server, FLEET_SPECS[:2], LIBRARIES[0].replace("-", "_")
        finally:
            server.stop()
        return
    from realwheels import SPECS, serve

    with serve("pep658") as server:
        yield server, SPECS, "pandas"


def ensure_once(index: str, specs: list[str], work: Path, *more: str) -> tuple[float, float]:
    command = cli("ensure", *specs, "--repo", work / "repo", "--installer", "uv", "--index-url", index, "--json")
    ran = run_together([[*command, *more]], [pod_env(work / "cache")])
    if ran.codes != [0]:
        sys.exit(f"repoinstall ensure {' '.join(more)} failed: {ran.errors[0].strip()[-800:]}")
    return ran.seconds, ran.cpu


def bare_once(index: str, specs: list[str], work: Path) -> tuple[float, float]:
    command = [uv_binary(), "pip", "install", "--target", str(work / "target"), "--python", sys.executable]
    command += ["--no-config", "--link-mode", "copy", "--index-url", index, "--quiet", *specs]
    ran = run_together([command], [pod_env(work / "cache")])
    if ran.codes != [0]:
        sys.exit(f"bare uv failed: {ran.errors[0].strip()[-800:]}")
    return ran.seconds, ran.cpu


def spread(values: list[float]) -> str:
    return f"{statistics.median(values):.2f} ({min(values):.2f}-{max(values):.2f})"


def import_cost(trees: list[str], module: str, runs: int, **extra: str) -> tuple[float, dict[str, int]]:
    """CPU seconds of ``import module`` (median of ``runs``) from ``trees``, and what one import opens of them:
    sources (``.py``), pycs and every file, and what it writes. Run in that order: a cache prefix is warm after
    the first one (whose cost the strace'd run, made first, shows apart: see :func:`first_import`)."""
    env = _env(trees, extra)
    seconds = []
    for _ in range(runs):
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        subprocess.run([sys.executable, "-c", f"import {module}"], env=env, check=True, timeout=300)
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        seconds.append(after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime)
    return statistics.median(seconds), opened(trees, module, env)


def opened(trees: list[str], module: str, env: dict[str, str]) -> dict[str, int]:
    """What one ``import module`` opens from ``trees`` (and a cache prefix), by kind, under strace."""
    if shutil.which("strace") is None:
        return {}
    with tempfile.TemporaryDirectory() as scratch:
        trace = Path(scratch, "trace")
        command = ["strace", "-f", "-qq", "-e", "trace=openat,mkdir", "-o", str(trace)]
        subprocess.run([*command, sys.executable, "-c", f"import {module}"], env=env, check=True, timeout=300)
        places = [*trees, *filter(None, [env.get("PYTHONPYCACHEPREFIX")])]
        calls = [line for line in trace.read_text().splitlines() if any(p in line for p in places)]
    ok = [line for line in calls if not re.search(r"= -1 E", line)]
    return {
        "opens": len(ok),
        "sources": sum(1 for line in ok if re.search(r'\.py", O_RDONLY', line)),
        "pycs": sum(1 for line in ok if re.search(r'\.pyc", O_RDONLY', line)),
        "writes": sum(1 for line in ok if re.search(r"O_WRONLY|O_RDWR|O_CREAT|mkdir\(", line)),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="one round of the small fleet set (for CI)")
    parser.add_argument("--rounds", type=int, default=10)
    parser.add_argument("--compiled", action="store_true", help="also time the ensure with bytecode each round")
    parser.add_argument("--imports", type=int, default=10, help="import runs per case (median)")
    args = parser.parse_args()
    rounds, imports = (1, 2) if args.quick else (args.rounds, args.imports)
    sides = ["nocompile", "bare", *(["compiled"] if args.compiled else [])]
    runs: dict[str, list[tuple[float, float]]] = {side: [] for side in sides}
    with tempfile.TemporaryDirectory() as scratch, served(args.quick, Path(scratch)) as (server, specs, module):
        tmp = Path(scratch)
        index = server.url + "simple"
        print(f"{machine()}; {rounds} round(s), alternating, each side first in every other round")
        print(f"cold, an empty cache each: {' '.join(specs)} from 127.0.0.1 (PEP 658 index), with uv")
        for round_ in range(rounds):
            order = sides if round_ % 2 == 0 else list(reversed(sides))
            for side in order:
                os.sync()  # the last command's writes on disk first: none is written back on our time
                work = tmp / f"{round_}-{side}"
                if side == "bare":
                    runs[side].append(bare_once(index, specs, work))
                else:
                    runs[side].append(
                        ensure_once(index, specs, work, *(["--no-compile"] if side == "nocompile" else []))
                    )
            shutil.rmtree(tmp / f"{round_}-bare", ignore_errors=True)
        labels = {
            "nocompile": "repoinstall ensure --installer uv --no-compile",
            "bare": "bare uv pip install --target (no bytecode)",
            "compiled": "repoinstall ensure --installer uv (with bytecode)",
        }
        print(f"\n{'command':<52} | {'wall s, median (min-max)':>26} | {'cpu s, median (min-max)':>26}")
        for side in sides:
            walls, cpus = [w for w, _ in runs[side]], [c for _, c in runs[side]]
            print(f"{labels[side]:<52} | {spread(walls):>26} | {spread(cpus):>26}")
        pairs = [n / b for (n, _), (b, _) in zip(runs["nocompile"], runs["bare"], strict=True)]
        ratio = statistics.median(pairs)
        verdict = "ok" if ratio <= TARGET else "MISSED"
        print(f"--no-compile / bare uv, each round's own ratio: {' '.join(f'{p:.2f}' for p in pairs)}")
        print(f"  median {ratio:.2f}x, min-max {min(pairs):.2f}-{max(pairs):.2f} (target <= {TARGET:.1f}: {verdict})")
        if args.compiled:
            more = [c / n for (c, _), (n, _) in zip(runs["compiled"], runs["nocompile"], strict=True)]
            print(f"with bytecode / --no-compile, per round: median {statistics.median(more):.2f}x")

        import_table(tmp / "imports", index, specs, module, imports)


def import_table(repo: Path, index: str, specs: list[str], module: str, imports: int) -> None:
    """``import module`` from a tree with bytecode and from one without (both in ``repo``): CPU and files."""
    trees = {}
    for bytecode in (True, False):
        options = InstallOptions(index_url=index, installer="uv", bytecode=bytecode)
        with Repo(repo, install=options) as opened_repo:
            trees[bytecode] = [opened_repo.ensure(spec).path or "" for spec in specs]
    prefix = tempfile.mkdtemp(prefix="nocompile-pycache-")
    cases = [
        ("with bytecode, read-only", trees[True], {"PYTHONDONTWRITEBYTECODE": "1"}),
        ("--no-compile, read-only", trees[False], {"PYTHONDONTWRITEBYTECODE": "1"}),
    ]
    print(f"\nimport {module}, {imports} run(s) each, CPU s median; what one import opens from the trees (and from")
    print("the cache prefix, where Python then looks for every pyc, the standard library's too) and writes there:")
    print(f"{'case':<52} | {'cpu s':>6} | {'opens':>6} {'.py':>6} {'.pyc':>6} {'writes':>6}")
    for label, where, extra in cases:
        cpu, found = import_cost(where, module, imports, **extra)
        print(f"{label:<52} | {cpu:>6.3f} | {_counts(found)}")
    # A per-pod cache prefix: the first import compiles and writes, every later one reads what it wrote.
    env_extra = {"PYTHONPYCACHEPREFIX": prefix}
    first = first_import(trees[False], module, env_extra)
    cpu, found = import_cost(trees[False], module, imports, **env_extra)
    print(f"{'--no-compile, PYTHONPYCACHEPREFIX: first import':<52} | {first[0]:>6.3f} | {_counts(first[1])}")
    print(f"{'--no-compile, PYTHONPYCACHEPREFIX: later imports':<52} | {cpu:>6.3f} | {_counts(found)}")
    shutil.rmtree(prefix, ignore_errors=True)


def first_import(trees: list[str], module: str, extra: dict[str, str]) -> tuple[float, dict[str, int]]:
    """The first import into an empty cache prefix (strace'd alone: its CPU seconds are the untraced second one's
    twin, so it is timed on a fresh prefix of its own first)."""
    fresh = tempfile.mkdtemp(prefix="nocompile-first-")
    try:
        cpu, _ = import_cost(trees, module, 1, PYTHONPYCACHEPREFIX=fresh)
    finally:
        shutil.rmtree(fresh, ignore_errors=True)
    return cpu, opened(trees, module, _env(trees, extra))


def _env(trees: list[str], extra: dict[str, str]) -> dict[str, str]:
    """A pod's environment with ``trees`` on its path (pod_env drops PYTHONDONTWRITEBYTECODE; ``extra`` may set it)."""
    env = pod_env(Path(tempfile.mkdtemp(prefix="nocompile-cache-")), PYTHONPATH=os.pathsep.join(trees))
    env.update(extra)
    return env


def _counts(found: dict[str, int]) -> str:
    return " ".join(f"{found.get(key, 0):>6}" for key in ("opens", "sources", "pycs", "writes"))


if __name__ == "__main__":
    main()
