"""Cold install of a lock, bytecode included: repoinstall beside the bare installers, pip and uv.

    python bench/bytecode.py [--quick] [--rounds N] [--installer pip|uv] [PACKAGE ...]

Locks PACKAGE... (default: numpy pandas) with ``pip lock`` from this machine's local package sources only: the
``file:`` indexes and find-links directories its pip configuration names (``--index-url``/``--find-links`` to
choose others), so every artifact is a local file and no download is timed; then, round after round, interleaved,
each into a new directory with an empty cache, after a ``sync`` (odd rounds run each pair's bare installer first):

* ``repoinstall ensure -r pylock.toml`` with pip, then bare ``pip install --target --compile`` of the same pins;
* ``repoinstall ensure -r pylock.toml`` with uv, then bare ``uv pip install --target --compile-bytecode``.

The bare installers take the lock's pins as a hashed requirements file (``--no-deps --require-hashes``), as
repoinstall gives them to the installer. Wall and CPU seconds, medians, and each ratio beside its target:
repoinstall with pip at most 1.0x bare pip (pip compiles on one core); with uv at most 1.2x bare uv.
``--installer`` (repeatable): only that pair, so more rounds fit the same time. ``--quick`` (for CI): one round of
the small fleet set's wheels, built here (no pip configuration needed).
"""

from __future__ import annotations

import argparse
import hashlib
import os
import statistics
import subprocess
import sys
import tempfile
import tomllib
from pathlib import Path

from common import build as build_wheels
from common import local_sources, machine, pip_env, pod_env, run_together
from helpers import cli

from repoinstall import Repo
from repoinstall._install.backends.uv import _binary as uv_binary

TARGETS = {"pip": 1.0, "uv": 1.2}


def lock_packages(packages: list[str], lock: Path, indexes: list[str], links: list[str]) -> None:
    """``pip lock`` of ``packages`` from ``indexes`` and ``links`` only (no other pip configuration)."""
    if not indexes and not links:
        sys.exit("no local index or find-links directory: give --index-url file:///... or --find-links DIR")
    command = [sys.executable, "-m", "pip", "lock", "--quiet", "--disable-pip-version-check", "-o", str(lock)]
    command += ["--index-url", indexes[0]] if indexes else ["--no-index"]
    command += [arg for url in indexes[1:] for arg in ("--extra-index-url", url)]
    command += [arg for place in links for arg in ("--find-links", place)]
    done = subprocess.run([*command, *packages], capture_output=True, text=True, check=False, env=pip_env())
    if done.returncode != 0:
        sys.exit(f"pip lock {' '.join(packages)} failed: {done.stderr.strip()[-500:]}")


def lock_wheels(wheels: Path, lock: Path) -> None:
    """A pylock.toml of every wheel in ``wheels`` (the quick mode's set), each by its file URL and sha256."""
    lines = ['lock-version = "1.0"', 'created-by = "bench"', ""]
    for wheel in sorted(wheels.glob("*.whl")):
        name, version = wheel.name.split("-")[:2]
        if name == "fleet_a" and version != "1.0":
            continue  # one version of each project: the set's newer adaptor stays out
        digest = hashlib.sha256(wheel.read_bytes()).hexdigest()
        lines += ["[[packages]]", f'name = "{name.replace("_", "-")}"', f'version = "{version}"']
        lines += [f'wheels = [{{ url = "{wheel.as_uri()}", hashes = {{ sha256 = "{digest}" }} }}]', ""]
    lock.write_text("\n".join(lines))


def pins(lock: Path, requirements: Path) -> list[str]:
    """The lock's artifacts as a hashed requirements file for the bare installers; the local directories they
    are in (repoinstall takes a lock's local files from there only: its --find-links)."""
    packages = tomllib.loads(lock.read_text())["packages"]
    lines = []
    for package in packages:
        (wheel,) = [w for w in package.get("wheels", []) if _fits(w)] or package.get("wheels", [])[:1]
        lines.append(f"{package['name']} @ {wheel['url']} --hash=sha256:{wheel['hashes']['sha256']}")
    requirements.write_text("\n".join(lines) + "\n")
    urls = [line.split(" @ ")[1].split(" --hash=")[0] for line in lines]
    return sorted({str(Path(url.removeprefix("file://")).parent) for url in urls if url.startswith("file://")})


def _fits(wheel: dict[str, object]) -> bool:
    from packaging.tags import sys_tags
    from packaging.utils import parse_wheel_filename

    name = str(wheel.get("name") or str(wheel["url"]).rsplit("/", 1)[-1])
    return bool(set(parse_wheel_filename(name)[3]) & set(sys_tags()))


def repoinstall_once(lock: Path, places: list[str], work: Path, installer: str) -> tuple[float, float]:
    repo = work / "repo"
    command = cli("ensure", "-r", lock, "--repo", repo, "--installer", installer, "--no-index", "--json")
    command += [arg for place in places for arg in ("--find-links", place)]
    ran = run_together([command], [pod_env(work / "cache")])
    if ran.codes != [0]:
        sys.exit(f"repoinstall with {installer} failed: {ran.errors[0].strip()[-800:]}")
    with Repo(repo) as opened:
        reports = opened.verify()
        assert len(reports) == 1 and reports[0].ok, reports
    return ran.seconds, ran.cpu


def bare_once(requirements: Path, work: Path, installer: str) -> tuple[float, float]:
    target = str(work / "target")
    if installer == "pip":
        command = [sys.executable, "-m", "pip", "install", "--target", target, "--compile", "--no-input"]
        command += ["--disable-pip-version-check", "--no-index"]
    else:
        command = [uv_binary(), "pip", "install", "--target", target, "--python", sys.executable, "--no-config"]
        command += ["--compile-bytecode", "--link-mode", "copy", "--no-index"]
    ran = run_together([[*command, "--no-deps", "--require-hashes", "-r", str(requirements)]], [pod_env(work / "c")])
    if ran.codes != [0]:
        sys.exit(f"bare {installer} failed: {ran.errors[0].strip()[-800:]}")
    return ran.seconds, ran.cpu


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="one round of the small fleet set (for CI)")
    parser.add_argument("--rounds", type=int, default=6)
    parser.add_argument("--installer", action="append", choices=sorted(TARGETS), help="only this pair (repeatable)")
    parser.add_argument("--index-url", action="append", default=[], help="a local index (repeatable)")
    parser.add_argument("--find-links", action="append", default=[], help="a local directory (repeatable)")
    parser.add_argument("packages", nargs="*", default=["numpy", "pandas"])
    args = parser.parse_args()
    rounds = 1 if args.quick else args.rounds
    installers = [name for name in TARGETS if name in (args.installer or TARGETS)]
    runs: dict[tuple[str, str], list[tuple[float, float]]] = {}
    with tempfile.TemporaryDirectory() as tmp:
        lock = Path(tmp, "pylock.toml")
        if args.quick:
            build_wheels(Path(tmp, "wheels"))
            lock_wheels(Path(tmp, "wheels"), lock)
            what = "the small fleet set's wheels"
        else:
            indexes, links = (args.index_url, args.find_links) if args.index_url or args.find_links else local_sources()
            lock_packages(args.packages, lock, indexes, links)
            what = " + ".join(args.packages)
        places = pins(lock, Path(tmp, "requirements.txt"))
        lines = Path(tmp, "requirements.txt").read_text().splitlines()
        if remote := [line.split(" @ ")[0] for line in lines if " @ file:" not in line]:
            sys.exit(f"not local files: {', '.join(remote)} (every artifact must be local: no download is timed)")
        count = len(lines)
        order = "interleaved, each side first in every other round"
        print(f"{machine()}; {rounds} round(s), {order}, medians; {what} from a lock: {count} distributions, cold")
        print("the lock: " + ", ".join(line.split(" --hash=")[0].rsplit("/", 1)[1] for line in lines))
        for round_ in range(rounds):
            for installer in installers:
                work = Path(tmp, f"{round_}-{installer}")
                # Odd rounds run the bare installer first: a machine that speeds up or slows down over the rounds
                # favours neither side (each side runs first and second equally often).
                for side in ("bare", "repoinstall") if round_ % 2 else ("repoinstall", "bare"):
                    os.sync()  # the last command's writes on disk first: none of it is written back on our time
                    ran = (
                        repoinstall_once(lock, places, work / "r", installer)
                        if side == "repoinstall"
                        else bare_once(Path(tmp, "requirements.txt"), work / "b", installer)
                    )
                    runs.setdefault((side, installer), []).append(ran)
    median = {
        key: (statistics.median(s for s, _ in found), statistics.median(c for _, c in found))
        for key, found in runs.items()
    }
    print(f"\n{'command':<52} | {'wall s':>7} {'cpu s':>6}")
    for installer in installers:
        bare = "pip install --target --compile" if installer == "pip" else "uv pip install --target --compile-bytecode"
        for key, label in (
            (("repoinstall", installer), f"repoinstall with {installer}"),
            (("bare", installer), f"bare {bare}"),
        ):
            wall, cpu = median[key]
            print(f"{label:<52} | {wall:>7.2f} {cpu:>6.1f}")
    for installer in installers:
        target = TARGETS[installer]
        ratio = median[("repoinstall", installer)][0] / median[("bare", installer)][0]
        verdict = "ok" if ratio <= target else "MISSED"
        print(f"repoinstall with {installer} / bare {installer}: {ratio:.2f}x (target <= {target:.1f}: {verdict})")
        # Each round's pair ran back to back: their ratios show how far the machine's drift moves the verdict's.
        ours, theirs = runs[("repoinstall", installer)], runs[("bare", installer)]
        pairs = [r / b for (r, _), (b, _) in zip(ours, theirs, strict=True)]
        shown = " ".join(f"{pair:.2f}" for pair in pairs)
        print(f"  each round's own ratio: {shown} (median {statistics.median(pairs):.2f})")


if __name__ == "__main__":
    main()
