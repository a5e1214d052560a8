"""Cold start of a fleet: N pods ensure the same 5 packages from a local index at once, beside a naive baseline.

    python bench/fleet.py [--quick] [--installer pip|uv]
    python bench/fleet.py --real [--quick] [--rounds N] [--registry]

``--real``: numpy + pandas (bench/realwheels.py) from two kinds of host on 127.0.0.1, a PEP 658 index and a plain
find-links page serving whole files only; for N = 1, 4, 8 pods (each its own empty installer cache, one new repo),
unpinned (``numpy pandas``) and pinned: how many times each wheel was fetched whole, wall and CPU seconds, beside
N pods of ``pip install --target`` of the same specs into one shared dir. Target: each wheel fetched once per repo
at every N, from both hosts. ``--registry``: then the pinned tree pushed to a registry (docker-registry on
127.0.0.1) and N pods of a second cluster (a new repo) ``ensure --from`` it: blob GETs per layer at the registry
(from its access log). Target: each layer pulled once per repo.

For N = 1, 4, 8: wall seconds until the last pod is done, installer runs (trees installed, summed over the
pods) and broken results, for repoinstall (every pod: ``repoinstall ensure`` of the 5 into one repo) and for
the baselines (every pod: ``pip install --target`` of the 5 into one shared directory, which is what a fleet
does without repoinstall, and the same with ``--upgrade``, as reruns need to converge). A baseline result is
broken when a pod failed or the shared directory is not exactly the 15 dists, each whole, all importable.
Each pod starts with its own empty download cache.
Targets: installer runs = 5 for every N; wall time for N = 8 within 1.2x of N = 1.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
from pathlib import Path
from typing import NamedTuple

from common import (
    LIBRARIES,
    PACKAGES,
    SPECS,
    check_target,
    ensure_command,
    machine,
    pod_env,
    run_together,
)
from common import build as build_wheels
from servers import PypiServer

from repoinstall import Repo


class Fleet(NamedTuple):
    seconds: float
    cpu: float
    runs: int
    broken: int
    #: Distributions installed (into the store, summed over the pods; for a baseline, each pod's whole closure).
    dists: int = 0


def repoinstall_fleet(index: str, work: Path, pods: int, installer: str) -> Fleet:
    """``pods`` pods ensuring the 5 into one new repo: installer runs are trees installed, summed over pods."""
    repo = work / "repo"
    commands = [ensure_command(repo, index, *SPECS, installer=installer) for _ in range(pods)]
    ran = run_together(commands, [pod_env(work / f"cache-{n}") for n in range(pods)])
    runs = dists = 0
    failed = 0
    for code, out, err in zip(ran.codes, ran.outputs, ran.errors, strict=True):
        if code != 0:
            failed += 1
            print(f"  a pod failed ({code}): {err.strip().splitlines()[-1:]}", file=sys.stderr)
            continue
        runs += sum(p["action"] == "installed" for p in json.loads(out)["packages"])
        dists += sum(_dists_installed(p) for p in json.loads(out)["packages"])
    with Repo(repo) as opened:
        reports = opened.verify()
    broken = failed + sum(not r.ok for r in reports) + (len(reports) != len(SPECS))
    return Fleet(ran.seconds, ran.cpu, runs, broken, dists)


def _dists_installed(package: dict[str, object]) -> int:
    """What one ensure installed: its ``stored`` count, or (a repoinstall before the store) every distribution of
    a tree it installed."""
    if "stored" in package:
        return int(str(package["stored"]))
    if package["action"] != "installed":
        return 0
    return len(list(Path(str(package["path"])).glob("*.dist-info")))


def baseline_fleet(index: str, work: Path, pods: int, upgrade: bool) -> Fleet:
    """``pods`` pods each running ``pip install --target [--upgrade]`` of the 5 into one shared directory."""
    target = work / "shared-target"
    command = [
        sys.executable, "-m", "pip", "install", "--target", str(target), "--index-url", index,
        "--no-input", "--disable-pip-version-check", "--no-warn-script-location", "--compile", *SPECS,
        *(["--upgrade"] if upgrade else []),
    ]  # fmt: skip
    envs = [pod_env(work / f"cache-{n}") for n in range(pods)]
    ran = run_together([command] * pods, envs)
    failed = sum(code != 0 for code in ran.codes)
    found = check_target(target, envs[0])
    for code, err in zip(ran.codes, ran.errors, strict=True):
        if code != 0:
            print(f"  baseline N={pods}: a pod failed ({code}): {err.strip().splitlines()[-1:]}", file=sys.stderr)
    if found.broken:
        print(f"  baseline N={pods}: shared directory {found}", file=sys.stderr)
    return Fleet(ran.seconds, ran.cpu, pods, failed + found.broken, pods * (len(PACKAGES) + len(LIBRARIES)))


def median(fleets: list[Fleet]) -> Fleet:
    return Fleet(
        statistics.median(f.seconds for f in fleets),
        statistics.median(f.cpu for f in fleets),
        max(f.runs for f in fleets),
        sum(f.broken for f in fleets),
        max(f.dists for f in fleets),
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="one round, N = 1 and 4 (for CI)")
    parser.add_argument("--installer", choices=["pip", "uv"], default="pip")
    parser.add_argument("--rounds", type=int, default=3, help="rounds per N (the median is shown)")
    parser.add_argument("--real", action="store_true", help="numpy + pandas from a PEP 658 index and a plain host")
    parser.add_argument("--registry", action="store_true", help="with --real: N pods ensure --from a registry")
    args = parser.parse_args()
    if args.real:
        from fleetreal import main as real

        real((1, 4) if args.quick else (1, 4, 8), 1 if args.quick else args.rounds, args.installer, args.registry)
        return
    sizes = (1, 4) if args.quick else (1, 4, 8)
    rounds = 1 if args.quick else args.rounds
    print(f"{machine()}; installer {args.installer}; {rounds} round(s), medians (broken: summed over rounds)")
    rows: dict[int, tuple[Fleet, Fleet, Fleet]] = {}
    with tempfile.TemporaryDirectory() as tmp:
        wheels = Path(tmp, "wheels")
        build_wheels(wheels)
        server = PypiServer(wheels, Path(tmp))
        try:
            for pods in sizes:
                ours, naive, upgrading = [], [], []
                for round_ in range(rounds):
                    work = Path(tmp, f"{pods}-{round_}")
                    ours.append(repoinstall_fleet(server.simple, work / "ours", pods, args.installer))
                    naive.append(baseline_fleet(server.simple, work / "naive", pods, upgrade=False))
                    upgrading.append(baseline_fleet(server.simple, work / "upgrade", pods, upgrade=True))
                rows[pods] = median(ours), median(naive), median(upgrading)
            upgrade = ensure_command(Path(tmp, "1-0", "ours", "repo"), server.simple, f"{PACKAGES[0]}==1.1",
                                     installer=args.installer)  # fmt: skip
            ran = run_together([upgrade], [pod_env(Path(tmp, "upgrade-cache"))])
            new_version = sum(_dists_installed(p) for p in json.loads(ran.outputs[0])["packages"])
        finally:
            server.stop()
    print(
        f"\n{'':>4} | {'repoinstall ensure':^36} | {'pip install --target':^22} | {'... --upgrade':^22}\n"
        f"{'pods':>4} | {'wall s':>7} {'cpu s':>6} {'trees':>5} {'dists':>5} {'broken':>6} | "
        f"{'wall s':>7} {'cpu s':>6} {'broken':>6} | {'wall s':>7} {'cpu s':>6} {'broken':>6}"
    )
    for pods, (ours_row, naive_row, upgrade_row) in rows.items():
        print(
            f"{pods:>4} | {ours_row.seconds:>7.2f} {ours_row.cpu:>6.1f} {ours_row.runs:>5} {ours_row.dists:>5} "
            f"{ours_row.broken:>6} | "
            f"{naive_row.seconds:>7.2f} {naive_row.cpu:>6.1f} {naive_row.broken:>6} | "
            f"{upgrade_row.seconds:>7.2f} {upgrade_row.cpu:>6.1f} {upgrade_row.broken:>6}"
        )
    distinct = len(PACKAGES) + len(LIBRARIES)
    runs_ok = all(row[0].runs == len(SPECS) and row[0].broken == 0 for row in rows.values())
    print(f"trees installed = {len(SPECS)} for every N, none broken: {'ok' if runs_ok else 'MISSED'}")
    dists_ok = all(row[0].dists == distinct for row in rows.values())
    shown = ", ".join(f"N={pods}: {row[0].dists}" for pods, row in rows.items())
    print(
        f"distributions installed = {distinct} (the distinct ones; 15 before the store) for every N: {shown}: "
        f"{'ok' if dists_ok else 'MISSED'}"
    )
    print(
        f"a new version of one adaptor, its libraries stored: {new_version} distribution(s) installed (target 1): "
        f"{'ok' if new_version == 1 else 'MISSED'}"
    )
    largest = max(rows)
    ratio = rows[largest][0].seconds / rows[1][0].seconds
    print(f"wall N={largest} / N=1: {ratio:.2f} (target <= 1.2 for N=8): {'ok' if ratio <= 1.2 else 'MISSED'}")
    broken = sum(row[1].broken for row in rows.values()), sum(row[2].broken for row in rows.values())
    print(
        f"baseline broken results in {rounds * len(rows)} fleet starts: {broken[0]} (pip install --target), "
        f"{broken[1]} (--upgrade); each baseline pod is one pip run of all 5"
    )
    if not runs_ok:
        sys.exit(1)


if __name__ == "__main__":
    main()
