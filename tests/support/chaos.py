"""Chaos across "pods": many installers on two clients of one volume, some SIGKILLed, some paused past their lease.

    python tests/support/chaos.py --rounds 30 [--pods 8] [--seed 1]      # the long run (needs root, FUSE, unshare)

Each round starts ``pods`` processes with their own hostnames (``unshare --uts``), split over two FUSE mounts
of one backing directory that refuse rename flags as NFS and CephFS do. Each ensures an overlapping random
set of the 10 packages while the driver SIGKILLs about a third of them mid-install and SIGSTOPs some past the
stale threshold before SIGCONT. Every round asks for a new version of each package, so every round races
for fresh trees. After every round: every published tree verifies (RECORD hashes, no extra
files, so none is half-written), and every pod that was not killed exited 0. At the end one ``ensure`` of
everything must succeed, and each tree must have been installed at most once plus once per kill or pause
that hit its holder. The counts are printed.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import re
import signal
import subprocess
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from packaging.utils import canonicalize_version

sys.path.insert(0, str(Path(__file__).parent))

from fusemount import as_pod, mounted
from helpers import cli, isolated_env, run, wait_until
from indexserver import IndexServer
from wheels import make_wheel

PACKAGES = [f"chaos-p{i}" for i in range(10)]
#: Tables of the runs in this process, printed at the end of a pytest session (conftest.py).
REPORTS: list[str] = []
STALE, HEARTBEAT = 5.0, 1.0  # production keeps the same 6:1 ratio (120 s, 20 s)


@dataclass
class ChaosResult:
    rounds: int = 0
    pods: int = 0
    killed: int = 0
    stopped: int = 0
    survivors_failed: list[str] = field(default_factory=list)
    bad_trees: list[str] = field(default_factory=list)
    installs: Counter[str] = field(default_factory=Counter)
    kill_hits: Counter[str] = field(default_factory=Counter)
    stop_hits: Counter[str] = field(default_factory=Counter)
    #: Leases lost by holders nobody paused (a starved machine whose heartbeat came too late): a peer takes over,
    #: as from a paused one, so each may cost one more install of that tree.
    starve_hits: Counter[str] = field(default_factory=Counter)
    #: The trees each paused pod held (host -> trees), as counted in stop_hits.
    paused_holding: dict[str, list[str]] = field(default_factory=dict)
    over_budget: list[str] = field(default_factory=list)
    #: Holders whose heartbeat a peer found stale although nobody paused them (a starved machine).
    lost_leases: list[str] = field(default_factory=list)
    log: list[str] = field(default_factory=list)
    final_ok: bool = False

    def table(self) -> str:
        lines = [f"{'tree':<16} {'installs':>8} {'kill hits':>9} {'stop hits':>9} {'starved':>7} {'allowed':>7}"]
        for tree in sorted(self.installs):
            lines.append(
                f"{tree:<16} {self.installs[tree]:>8} {self.kill_hits[tree]:>9} {self.stop_hits[tree]:>9} "
                f"{self.starve_hits[tree]:>7} {self.allowed(tree):>7}"
            )
        lines.append(
            f"trees {len(self.installs)}, installs {sum(self.installs.values())}, kill hits "
            f"{sum(self.kill_hits.values())}, stop hits {sum(self.stop_hits.values())}"
        )
        lines.append(
            f"rounds {self.rounds}, pods {self.pods}, SIGKILLed {self.killed}, paused {self.stopped}; "
            f"survivor failures {len(self.survivors_failed)}, bad trees {len(self.bad_trees)}, "
            f"over budget {len(self.over_budget)}, leases lost {len(self.lost_leases)}, "
            f"final ensure {'ok' if self.final_ok else 'FAILED'}"
        )
        return "\n".join(lines)

    def allowed(self, tree: str) -> int:
        """Installs a tree may take: one, plus one per holder of it that was killed, paused or starved."""
        return 1 + self.kill_hits[tree] + self.stop_hits[tree] + self.starve_hits[tree]

    @property
    def ok(self) -> bool:
        return self.final_ok and not (self.survivors_failed or self.bad_trees or self.over_budget)


def version(round_: int) -> str:
    return f"1.{round_}"


#: The tree a "lost the lock <repo>/locks/<env>/<name>/<leaf>.lock" line is about.
_LOCK_PATH = re.compile(r"/locks/[^/]+/([^/]+)/([^/\s]+)\.lock\b")


def _tree(name: str, version_text: str) -> str:
    # One key per tree whatever the spelling: lock files carry the canonical version ("1"), specs "1.0".
    return f"{name}=={canonicalize_version(version_text, strip_trailing_zero=True)}"


def make_wheels(directory: Path, rounds: int) -> None:
    for round_ in range(rounds):
        for package in PACKAGES:
            make_wheel(directory, package, version(round_), payload=64 << 10)


def _choose_targets(
    backing_repo: Path, procs: list[tuple[str, subprocess.Popen[str]]], rng: random.Random
) -> tuple[list[int], list[int]]:
    """Once the fleet is in its installs (some pod holds a lock), at a random moment after: a third of the pods
    still running to SIGKILL and one to pause. A pod that already finished is no target (poll() reaped it)."""
    wait_until(
        lambda: any(p.poll() is not None or _holding(backing_repo, h, p) for h, p in procs),
        timeout=300,
        what="a pod to hold a lock",
    )
    time.sleep(rng.uniform(0.0, 1.0))
    alive = [i for i, (_, proc) in enumerate(procs) if proc.poll() is None]
    victims = rng.sample(alive, min(len(alive), max(1, len(procs) // 3)))
    rest = [i for i in alive if i not in victims]
    return victims, rng.sample(rest, min(1, len(rest)))


def _glob(root: Path, pattern: str) -> list[Path]:
    """``root.glob(pattern)`` on a repo the pods are changing: a directory removed while it is scanned (a lock's
    directory cleaned up after its publish) is passed over, where ``Path.glob`` raises FileNotFoundError."""
    found = [root]
    for part in pattern.split("/"):
        matched: list[Path] = []
        for directory in found:
            try:
                matched += directory.glob(part)
            except OSError:
                continue
        found = matched
    return found


def _heartbeat_age(backing_repo: Path, host: str, pid: int | subprocess.Popen[str]) -> float:
    """Seconds since the pod (host, pid) last refreshed any lock record of its (inf if it has none)."""
    pid = pid if isinstance(pid, int) else pid.pid
    mine = f"host={host}\n"
    ages = []
    for record in _glob(backing_repo, "locks/*/*/*.lock.rw/holders/*"):
        try:
            text = record.read_text()
            if mine in text and f"pid={pid}\n" in text:
                ages.append(time.time() - record.stat().st_mtime)
        except OSError:
            continue
    return min(ages, default=float("inf"))


def _holding(backing_repo: Path, host: str, pid: int | subprocess.Popen[str], wanted: Sequence[str] = ()) -> list[str]:
    """The trees ("name==version") whose lock the pod (host, pid) holds now, from the owner notes beside locks; and
    every tree it ``wanted`` if it holds a lock of the store (a distribution's, or its batch's): what it was
    installing there, for any of them, is lost with it."""
    pid = pid if isinstance(pid, int) else pid.pid
    held = []
    for note in [*_glob(backing_repo, "locks/*/*/*.owner"), *_glob(backing_repo, "store-locks/*/*/*.owner")]:
        try:
            owner = json.loads(note.read_text())
        except (OSError, ValueError):
            continue
        if owner.get("host") != host or owner.get("pid") != pid:
            continue
        if note.parts[-4] == "store-locks":
            held += [_tree(*spec.split("==")) for spec in wanted]
        else:
            held.append(_tree(note.parent.name, note.name.removesuffix(".owner")))
    return sorted(set(held))


def _check_trees(backing_repo: Path, result: ChaosResult) -> None:
    if not (backing_repo / "trees").exists():
        return
    done = run("verify", "--all", "--repo", backing_repo, "--json")
    for tree in json.loads(done.stdout)["trees"]:
        # "unrecorded" is a whole tree whose installer died between publish and record: ensure re-records it.
        whole = tree["status"] in ("ok", "unrecorded") and not (tree["missing"] or tree["changed"] or tree["extra"])
        if not whole:
            result.bad_trees.append(f"{tree['tree']}: {tree['status']} {tree['missing'] + tree['changed']}")
    # The store the trees are composed of, after the same kills and pauses: every stored distribution whole.
    for stored in json.loads(done.stdout).get("store", []):
        if stored["status"] != "ok":
            result.bad_trees.append(
                f"store {stored['dist']}: {stored['status']} {stored['missing'] + stored['changed']}"
            )


def _strike(
    backing_repo: Path,
    procs: list[tuple[str, subprocess.Popen[str]]],
    wanted_by: dict[str, list[str]],
    victims: list[int],
    paused: list[int],
    result: ChaosResult,
) -> None:
    """SIGKILL the ``victims`` and SIGSTOP the ``paused``, counting what each held against its trees' budgets.
    Each is looked at once it is stopped or dead: what it holds then is what it holds for good (a live pod could
    take a lock between the look and the signal)."""
    for i in victims:
        host, proc = procs[i]
        os.killpg(proc.pid, signal.SIGKILL)
        holding = _holding(backing_repo, host, proc.pid, wanted_by[host])
        for package in holding:
            result.kill_hits[package] += 1
        result.log.append(f"{host} killed holding {holding}")
        result.killed += 1
    for i in paused:
        host, proc = procs[i]
        os.killpg(proc.pid, signal.SIGSTOP)
        holding = _holding(backing_repo, host, proc.pid, wanted_by[host])
        for package in holding:
            result.stop_hits[package] += 1
        result.paused_holding[host] = holding
        result.log.append(f"{host} paused holding {holding}")
        result.stopped += 1


def run_chaos(
    work: Path,
    mounts: list[Path],
    index: IndexServer,
    rounds: int,
    pods: int,
    seed: int,
    say: Callable[[str], None] = print,
    backing: Path | None = None,
    packages: Sequence[str] = PACKAGES,
    lease: tuple[float, float] | None = None,
) -> ChaosResult:
    """``mounts``: client views of one directory (each holds ``repo``); ``backing``: that repo on the server's own
    disk (default: ``work/backing/repo``, the FUSE passthrough's); ``packages``: what the pods ask for, 3 to 5 of
    them each (at least 3); ``lease``: the pods' ``--stale-after`` and ``--heartbeat`` (default ``STALE``,
    ``HEARTBEAT``)."""
    stale, heartbeat = lease or (STALE, HEARTBEAT)
    rng = random.Random(seed)
    result = ChaosResult(rounds=rounds, pods=rounds * pods)
    backing_repo = backing or work / "backing" / "repo"
    env = isolated_env()
    wanted_by: dict[str, list[str]] = {}
    for number in range(rounds):
        procs = []
        for index_ in range(pods):
            host = f"pod-{number}-{index_}"
            wanted = [f"{p}=={version(number)}" for p in rng.sample(packages, rng.randint(3, min(5, len(packages))))]
            repo = mounts[index_ % len(mounts)] / "repo"
            args = [
                "ensure",
                *wanted,
                "--repo",
                repo,
                "--no-index",
                "--find-links",
                index.url,
                "--json",
                "--stale-after",
                str(stale),
                "--heartbeat",
                str(heartbeat),
                "--jobs",
                "2",
            ]
            proc = subprocess.Popen(
                [*as_pod(host), *cli(*args)],
                env=env,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                text=True,
                start_new_session=True,
            )
            procs.append((host, proc))
            wanted_by[host] = wanted
        victims, paused = _choose_targets(backing_repo, procs, rng)
        _strike(backing_repo, procs, wanted_by, victims, paused, result)
        if paused:
            # Past the lease: every heartbeat record of the paused pods is older than the stale threshold, so
            # peers that want their trees take over.
            wait_until(
                lambda stopped=[procs[i] for i in paused]: all(
                    _heartbeat_age(backing_repo, h, p) > stale + 1.0 for h, p in stopped
                ),
                timeout=stale + 60,
                what="the paused pods' leases to lapse",
            )
            for i in paused:
                os.killpg(procs[i][1].pid, signal.SIGCONT)
        for i, (host, proc) in enumerate(procs):
            out, err = proc.communicate(timeout=300)
            try:
                for package in json.loads(out)["packages"]:
                    result.log.append(f"{host} {_tree(package['name'], package['version'])} {package['action']}")
            except (ValueError, KeyError):
                result.log.append(f"{host} exit {proc.returncode}{' (killed)' if i in victims else ''}")
            for line in err.splitlines():
                if "lost the lock" in line:
                    result.lost_leases.append(f"round {number} {host}{' (paused)' if i in paused else ''}: {line}")
                    if (lock := _LOCK_PATH.search(line)) is None:
                        continue
                    tree = _tree(lock.group(1), lock.group(2))
                    if i not in paused:
                        result.starve_hits[tree] += 1
                    elif tree not in result.paused_holding.setdefault(host, []):
                        # It held that lock when paused (its owner note not written yet when the harness looked):
                        # the pause hit that tree too. One more install allowed, as for a starved holder.
                        result.stop_hits[tree] += 1
                        result.paused_holding[host].append(tree)
            if i not in victims and proc.returncode != 0:
                result.survivors_failed.append(f"round {number} {host}: exit {proc.returncode}: {err.strip()[-300:]}")
        _check_trees(backing_repo, result)
        say(
            f"round {number + 1}/{rounds}: killed {len(victims)}, paused {len(paused)}, "
            f"bad trees so far {len(result.bad_trees)}, survivor failures so far {len(result.survivors_failed)}"
        )
    everything = [f"{p}=={version(r)}" for r in range(rounds) for p in packages]
    final = run(
        "ensure",
        *everything,
        "--repo",
        mounts[0] / "repo",
        "--no-index",
        "--find-links",
        index.url,
        "--stale-after",
        str(stale),
        "--heartbeat",
        str(heartbeat),
        env=env,
    )
    result.final_ok = final.returncode == 0
    if not result.final_ok:
        result.survivors_failed.append(f"final ensure: {final.stderr.strip()[-300:]}")
    _check_trees(backing_repo, result)
    for spec in everything:
        name, number = spec.split("==")
        tree = _tree(name, number)
        result.installs[tree] = index.downloads(f"{name.replace('-', '_')}-{number}-")
        if result.installs[tree] > result.allowed(tree):
            result.over_budget.append(tree)
    return result


def main() -> int:
    parser = argparse.ArgumentParser(description="Chaos run of repoinstall across pods (root, FUSE, unshare).")
    parser.add_argument("--rounds", type=int, default=30)
    parser.add_argument("--pods", type=int, default=8)
    parser.add_argument("--seed", type=int, default=1)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        (work / "wheels").mkdir()
        make_wheels(work / "wheels", args.rounds)
        server = IndexServer(work / "wheels").start()
        for prefix in PACKAGES:
            server.delays[prefix.replace("-", "_") + "-"] = 1.0  # long enough to be caught mid-install
        try:
            with mounted(work, ["client-a", "client-b"]) as mounts:
                result = run_chaos(work, mounts, server, args.rounds, args.pods, args.seed)
        finally:
            server.stop()
    print(result.table())
    for line in result.survivors_failed + result.bad_trees + [f"over budget: {t}" for t in result.over_budget]:
        print("FAILED:", line)
    for line in result.lost_leases:
        print("lease lost:", line)
    for tree in result.over_budget:
        print(f"-- {tree}:", *[line for line in result.log if tree in line or "killed" in line], sep="\n  ")
    return 0 if result.ok else 1


if __name__ == "__main__":
    sys.exit(main())
