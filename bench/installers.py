"""pip versus uv backend: one pod installs the same 5 trees (9 distinct dists) from a local index, cold and warm.

    python bench/installers.py [--quick] [--rounds N]

For each installer, with --jobs 1 and 4: ``repoinstall ensure`` of the 5 into a new repo with an empty
download cache (cold), then into another new repo with the cache the first run filled (warm cache: nothing
to download, everything to install), and beside them the bare installer: ONE ``--target`` run of the same 5
specs, cold, which is what repoinstall adds its resolution, store, checks, locks, verification and publish to.
Wall and CPU seconds, medians.
Targets: one cold pod at most 1.2x the bare installer, for pip and for uv; uv at least 2.5x faster than pip, cold.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
from pathlib import Path

from common import SPECS, ensure_command, machine, pod_env, run_together
from common import build as build_wheels
from servers import PypiServer

from repoinstall import Repo
from repoinstall._install.backends.uv import _binary as uv_binary


def ensure_once(index: str, repo: Path, cache: Path, installer: str, jobs: int) -> tuple[float, float]:
    command = [*ensure_command(repo, index, *SPECS, installer=installer), "--jobs", str(jobs)]
    ran = run_together([command], [pod_env(cache)])
    if ran.codes != [0]:
        sys.exit(f"{installer}: ensure failed: {ran.errors[0].strip()[-500:]}")
    with Repo(repo) as opened:
        assert len(opened.verify()) == len(SPECS) and all(r.ok for r in opened.verify())
    return ran.seconds, ran.cpu


def bare_once(index: str, work: Path, installer: str) -> tuple[float, float]:
    """The installer alone: one ``--target`` run of the 5 specs, bytecode compiled, cold cache."""
    target = str(work / "target")
    if installer == "pip":
        command = [sys.executable, "-m", "pip", "install", "--target", target, "--index-url", index, "--compile"]
        command += ["--disable-pip-version-check", "--no-input", *SPECS]
    else:
        command = [uv_binary(), "pip", "install", "--target", target, "--python", sys.executable]
        command += ["--index-url", index, "--compile-bytecode", "--link-mode", "copy", "--no-config", *SPECS]
    ran = run_together([command], [pod_env(work / "cache")])
    if ran.codes != [0]:
        sys.exit(f"bare {installer} failed: {ran.errors[0].strip()[-500:]}")
    return ran.seconds, ran.cpu


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="one round (for CI)")
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    rounds = 1 if args.quick else args.rounds
    print(f"{machine()}; {rounds} round(s), medians; {len(SPECS)} trees of 3 dists each, 9 distinct")
    figures: dict[tuple[str, int], dict[str, tuple[float, float]]] = {}
    with tempfile.TemporaryDirectory() as tmp:
        wheels = Path(tmp, "wheels")
        build_wheels(wheels)
        server = PypiServer(wheels, Path(tmp))
        try:
            for jobs in (1, 4):
                for installer in ("pip", "uv"):
                    found: dict[str, list[tuple[float, float]]] = {"cold": [], "warm cache": [], "bare": []}
                    for round_ in range(rounds):
                        work = Path(tmp, f"{installer}-{jobs}-{round_}")
                        cache = work / "cache"
                        found["cold"].append(ensure_once(server.simple, work / "cold", cache, installer, jobs))
                        found["warm cache"].append(ensure_once(server.simple, work / "warm", cache, installer, jobs))
                        found["bare"].append(bare_once(server.simple, work / "bare", installer))
                    figures[(installer, jobs)] = {
                        kind: (statistics.median(s for s, _ in runs), statistics.median(c for _, c in runs))
                        for kind, runs in found.items()
                        if runs
                    }
        finally:
            server.stop()
    print(
        f"\n{'installer':>9} {'jobs':>4} | {'cold s':>7} {'cpu s':>6} | {'warm cache s':>12} {'cpu s':>6} | "
        f"{'bare installer s':>16} {'cpu s':>6}"
    )
    for (installer, jobs), row in figures.items():
        (cold, cold_cpu), (warm, warm_cpu) = row["cold"], row["warm cache"]
        bare = f"{row['bare'][0]:>16.2f} {row['bare'][1]:>6.1f}" if "bare" in row else f"{'':>16} {'':>6}"
        print(f"{installer:>9} {jobs:>4} | {cold:>7.2f} {cold_cpu:>6.1f} | {warm:>12.2f} {warm_cpu:>6.1f} | {bare}")
    for (installer, jobs), row in figures.items():
        ratio = row["cold"][0] / row["bare"][0]
        verdict = "ok" if ratio <= 1.2 else "MISSED"
        print(f"one cold pod / bare {installer}, --jobs {jobs}: {ratio:.2f}x (target <= 1.2: {verdict})")
    for jobs in (1, 4):
        speedup = figures[("pip", jobs)]["cold"][0] / figures[("uv", jobs)]["cold"][0]
        warm = figures[("pip", jobs)]["warm cache"][0] / figures[("uv", jobs)]["warm cache"][0]
        verdict = "ok" if speedup >= 2.5 else "MISSED"
        print(f"uv speed-up, --jobs {jobs}: cold {speedup:.1f}x (target >= 2.5: {verdict}), warm cache {warm:.1f}x")
    cpu = figures[("pip", 4)]["cold"][1] / figures[("uv", 4)]["cold"][1]
    print(f"uv CPU saving, cold, --jobs 4: {cpu:.1f}x fewer CPU seconds")


if __name__ == "__main__":
    main()
