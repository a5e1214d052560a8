"""gc racing lockless installs: `--no-lock` pods and a `gc --older-than 0` loop on one repo, at once.

    python bench/gcrace.py [--quick] [--rounds N] [--pods-per-tree N]

Each round: eight trees, several `--no-lock` pods per tree (as after "another UID owns the lock", or on sshfs),
from an index on 127.0.0.1 that holds every download for half a second, and a loop of `gc --older-than 0`
running until the last pod exits. A sentinel directory beside the repo holds files gc must never touch.
One more pod per tree is SIGKILLed mid-install, leaving a dead staging dir for gc to find among the live ones.
Printed per round: installs, installs that failed, pods killed, gc runs, staging dirs gc removed (the killed
pods'), dead pods' dirs left after the last gc (in staging/ or trash/), published trees left empty or failing
`verify`, and files deleted outside the repo.
Target: 0 failed, 0 dead left, 0 trees not ok, 0 deleted outside. Staging removed is at most killed: a pod killed
just as it set its dir aside into trash/ leaves it there, and gc empties trash/ as trash.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
import tempfile
import time
from pathlib import Path

from common import machine
from helpers import cli, isolated_env
from indexserver import IndexServer
from wheels import make_wheel

TREES = [f"race-{letter}==1.0" for letter in "abcdefgh"]


def one_round(work: Path, index: IndexServer, pods_per_tree: int) -> dict[str, int]:
    repo = work / "repo"
    outside = work / "outside"
    outside.mkdir()
    for n in range(20):
        (outside / f"keep-{n}").write_text("outside the repo")
    (repo / "trash").mkdir(parents=True)
    (repo / "trash" / "escape").symlink_to(outside, target_is_directory=True)  # a planted link gc must not follow
    env = isolated_env()
    pods = [
        subprocess.Popen(
            cli("ensure", spec, "--repo", repo, "--no-index", "--find-links", index.url, "--no-lock", "--json"),
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            start_new_session=True,
        )
        for spec in TREES
        for _ in range(pods_per_tree + 1)
    ]
    # One extra pod per tree is SIGKILLed mid-install: its staging dir is what gc may (and must) remove.
    doomed = pods[:: pods_per_tree + 1]
    killed: list[subprocess.Popen[str]] = []

    def kill_those_installing() -> None:
        # A doomed pod is killed once its staging dir exists (named with its pid), so that each kill leaves a
        # dead staging dir for gc to find; one that ended before that is not counted as killed.
        for pod in doomed:
            if pod not in killed and pod.poll() is None and any((repo / "staging").glob(f"*/*.{pod.pid}.*")):
                os.killpg(pod.pid, signal.SIGKILL)
                killed.append(pod)

    gc_runs = removed_staging = 0
    command = cli("gc", "--repo", repo, "--older-than", "0", "--json")
    while any(pod.poll() is None for pod in pods):
        kill_those_installing()
        done = subprocess.run(command, env=env, capture_output=True, text=True, check=False)
        kill_those_installing()
        gc_runs += 1
        if done.stdout.strip():
            removed = json.loads(done.stdout)["removed"]
            removed_staging += sum(1 for r in removed if r["kind"] == "staging" and r["done"])
    for pod in pods:
        pod.communicate()
    codes = [pod.returncode for pod in pods if pod not in doomed]
    done = subprocess.run(command, env=env, capture_output=True, text=True, check=False)  # after the last pod
    if done.stdout.strip():
        removed_staging += sum(1 for r in json.loads(done.stdout)["removed"] if r["kind"] == "staging" and r["done"])
    verified = subprocess.run(
        cli("verify", "--all", "--repo", repo, "--json"), env=env, capture_output=True, text=True, check=False
    )
    trees = json.loads(verified.stdout)["trees"] if verified.stdout.strip() else []
    emptied = sum(1 for t in trees if t["status"] != "ok") + (len(TREES) - len(trees))
    left_outside = len(list(outside.iterdir()))
    # What the last gc left of dead pods: their staging dirs, or what a pod killed as it set its dir aside left in
    # trash/ (gc reports that one as trash, not as staging).
    dead_left = sum(1 for _ in (repo / "staging").glob("*/*")) + sum(1 for _ in (repo / "trash").iterdir())
    return {
        "installs": len(codes),
        "failed": sum(1 for code in codes if code != 0),
        "killed": len(killed),
        "gc runs": gc_runs,
        "staging removed": removed_staging,
        "dead left": dead_left,
        "trees not ok": emptied,
        "deleted outside": 20 - left_outside,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="one round, two pods per tree")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--pods-per-tree", type=int, default=3)
    args = parser.parse_args()
    rounds, pods = (1, 2) if args.quick else (args.rounds, args.pods_per_tree)
    print(f"gc race: {machine()}")
    with tempfile.TemporaryDirectory() as tmp:
        wheels = Path(tmp, "wheels")
        wheels.mkdir()
        for spec in TREES:
            make_wheel(wheels, spec.split("==")[0], "1.0", modules=20)
        index = IndexServer(wheels).start()
        index.delays.update({spec.split("==")[0].replace("-", "_") + "-": 0.5 for spec in TREES})
        try:
            header = None
            for number in range(1, rounds + 1):
                work = Path(tmp, f"round-{number}")
                work.mkdir()
                started = time.perf_counter()
                row = one_round(work, index, pods)
                if header is None:
                    header = ["round", *row, "seconds"]
                    print(" | ".join(header))
                cells = [str(number), *(str(v) for v in row.values()), f"{time.perf_counter() - started:.1f}"]
                print(" | ".join(cells))
        finally:
            index.stop()


if __name__ == "__main__":
    main()
