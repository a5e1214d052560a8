"""What the install benchmarks share: one package set on a real index (pypiserver on 127.0.0.1), pods as real
processes with their own empty caches, and a check of what a shared ``--target`` directory ended up holding.
"""

from __future__ import annotations

import os
import resource
import subprocess
import sys
import time
from pathlib import Path
from typing import NamedTuple

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests" / "support"))

from helpers import cli, isolated_env  # noqa: E402
from wheels import make_wheel  # noqa: E402

from repoinstall._disk.dists import check_tree, scan  # noqa: E402
from repoinstall._disk.identity import environment_tag  # noqa: E402

#: Five adaptors, each needing two of four shared libraries: 15 dists in 5 trees, ~3 MB of Python to unpack
#: and compile. Every wheel is real (RECORD hashes) and built here, so the benchmarks need no network.
PACKAGES = [f"fleet-{letter}" for letter in "abcde"]
LIBRARIES = [f"lib-{n}" for n in range(4)]
SPECS = [f"{name}==1.0" for name in PACKAGES]
MODULES = 60


def build(directory: Path) -> None:
    directory.mkdir(parents=True, exist_ok=True)
    for index, name in enumerate(PACKAGES):
        needs = (f"{LIBRARIES[index % 4]}>=1", f"{LIBRARIES[(index + 1) % 4]}>=1")
        make_wheel(directory, name, "1.0", requires=needs, modules=MODULES)
    for name in LIBRARIES:
        make_wheel(directory, name, "1.0", modules=MODULES)
    # A new version of one adaptor over the same libraries (the fleet benchmark's last line).
    make_wheel(directory, PACKAGES[0], "1.1", requires=(f"{LIBRARIES[0]}>=1", f"{LIBRARIES[1]}>=1"), modules=MODULES)


def machine() -> str:
    """One line on what ran the benchmark (no names: cores, memory, Python, environment tag)."""
    pages = os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
    return f"{os.cpu_count()} cores, {pages / 2**30:.0f} GiB, Python {sys.version.split()[0]}, env {environment_tag()}"


def pod_env(cache: Path, **extra: str) -> dict[str, str]:
    """A pod's environment: this machine's pip and uv configuration switched off, its own cache directory."""
    # Bytecode as an installed repoinstall has it (a checkout under PYTHONDONTWRITEBYTECODE recompiles each run).
    dropped = ("PIP_NO_CACHE_DIR", "UV_NO_CACHE", "PYTHONDONTWRITEBYTECODE")
    env = {k: v for k, v in isolated_env(**extra).items() if k not in dropped}
    env.update(PIP_CACHE_DIR=str(cache / "pip"), UV_CACHE_DIR=str(cache / "uv"))
    return env


def local_sources() -> tuple[list[str], list[str]]:
    """The local indexes (``file:`` URLs) and find-links directories this machine's pip configuration names."""
    listing = subprocess.run(
        [sys.executable, "-m", "pip", "config", "list"], capture_output=True, text=True, check=False
    ).stdout
    indexes: list[str] = []
    links: list[str] = []
    for line in listing.splitlines():
        key, _, value = line.partition("=")
        values = value.strip().strip("'\"").split()
        if key.endswith("index-url"):
            indexes += [v for v in values if v.startswith("file:") and v not in indexes]
        elif key.endswith("find-links"):
            links += [v for v in values if Path(v).is_dir() and v not in links]
    return indexes, links


def pip_env() -> dict[str, str]:
    """This environment for running pip by hand: every ``PIP_*`` setting and pip's configuration files off."""
    return {k: v for k, v in os.environ.items() if not k.startswith("PIP_")} | {"PIP_CONFIG_FILE": os.devnull}


def ensure_command(repo: Path, index: str, *specs: str, installer: str = "pip") -> list[str]:
    return cli("ensure", *specs, "--repo", repo, "--index-url", index, "--installer", installer, "--json")


class Ran(NamedTuple):
    seconds: float
    cpu: float  # user + system seconds of the commands and everything they waited for (pip, uv)
    codes: list[int]
    outputs: list[str]
    errors: list[str]


def run_together(commands: list[list[str]], envs: list[dict[str, str]], timeout: float = 900) -> Ran:
    """Start every command at once (one "pod" each); wall seconds until the last one exits."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    started = time.perf_counter()
    procs = [
        subprocess.Popen(c, env=e, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, stdin=subprocess.DEVNULL)
        for c, e in zip(commands, envs, strict=True)
    ]
    outputs = [proc.communicate(timeout=timeout) for proc in procs]
    seconds = time.perf_counter() - started
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime
    return Ran(seconds, cpu, [p.returncode for p in procs], [o for o, _ in outputs], [e for _, e in outputs])


class TargetCheck(NamedTuple):
    """What one shared ``pip install --target`` directory holds after racing installers."""

    duplicates: int  # projects with more than one dist-info
    missing_files: int
    changed_files: int
    extra_files: int  # files no RECORD lists (e.g. a package moved inside its own directory)
    unimportable: int  # of the five adaptors

    @property
    def broken(self) -> bool:
        return any(self)


def check_target(target: Path, env: dict[str, str]) -> TargetCheck:
    dists = scan(str(target)) if target.is_dir() else []
    names = [d.name for d in dists]
    duplicates = sum(1 for name in set(names) if names.count(name) > 1)
    problems = check_tree(str(target), dists) if dists else None
    unimportable = 0
    for name in PACKAGES:
        module = name.replace("-", "_")
        probe = f"import {module}, {module}.part_000 as p; assert {module}.VERSION == '1.0' and p.step_0_0([1])"
        done = subprocess.run(
            [sys.executable, "-c", probe], env={**env, "PYTHONPATH": str(target)}, capture_output=True, check=False
        )
        unimportable += done.returncode != 0
    return TargetCheck(
        duplicates,
        len(problems.missing) if problems else 0,
        len(problems.changed) if problems else 0,
        len(problems.extra) if problems else 0,
        unimportable,
    )
