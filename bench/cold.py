"""Cold ensure beside the bare installer, on real wheels: numpy + pandas from 127.0.0.1, the installers' cache warm.

    python bench/cold.py [--quick] [--rounds N] [--installer pip|uv ...]

"Cold": an empty repo (no tree, an empty store) and an empty ``--target`` directory; the installer's own cache
warm and the same for both sides (one cache directory per installer, filled by an untimed run of each side first);
the wheels served from 127.0.0.1 (``bench/realwheels.py``: a PEP 503/658 index). uv unpacks each wheel into its
cache once; pip keeps nothing of what this server sends (no cache headers), so with pip both sides download the
wheels again, from 127.0.0.1, each time. Each round runs one pair per installer, back to back, each command after a
``sync`` (neither side pays for the other's writeback), the bare installer first in every other round:

* ``repoinstall ensure numpy==2.4.6 pandas==3.0.6 --installer uv`` against ``uv pip install --target T
  --compile-bytecode --link-mode copy`` of the same specs (repoinstall copies out of uv's cache too);
* the same with ``--installer pip`` against ``pip install --target T`` (which compiles, on one core).

Every figure is a ratio of a pair's two wall times, so the machine's drift between rounds moves neither side alone:
the median of the rounds' ratios, with their spread (min-max), beside its target and the figure measured before
(the median of the medians' ratio is printed too). ``--quick`` (the tests): one round of the small fleet set's
wheels, built here, served the same way (no real wheels needed).
"""

from __future__ import annotations

import argparse
import contextlib
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

import realwheels
from common import SPECS as TOY_SPECS
from common import build as build_wheels
from common import ensure_command, machine, pod_env, run_together
from indexserver import IndexServer

from repoinstall import Repo
from repoinstall._install.backends.uv import _binary as uv_binary

#: At most this times the bare installer (the ratio of each pair's wall seconds, median of the rounds).
TARGETS = {"uv": 1.2, "pip": 1.0}
#: What the same measure gave before (issue 42), on the same kind of 2-core machine: the ratio, and under load.
BEFORE = {"uv": "1.35x (1.44x and 1.77x under load)", "pip": "0.70x (0.99x under load)"}
BARE = {"uv": "uv pip install --target --compile-bytecode", "pip": "pip install --target"}


def bare_command(installer: str, target: Path, index: str, specs: list[str]) -> list[str]:
    if installer == "pip":  # pip compiles by default (--compile)
        command = [sys.executable, "-m", "pip", "install", "--target", str(target), "--index-url", index]
        return [*command, "--disable-pip-version-check", "--no-input", "--quiet", *specs]
    command = [uv_binary(), "pip", "install", "--target", str(target), "--python", sys.executable, "--no-config"]
    return [*command, "--index-url", index, "--compile-bytecode", "--link-mode", "copy", "--quiet", *specs]


def timed(command: list[str], env: dict[str, str], what: str) -> tuple[float, float]:
    os.sync()  # the last command's writes on disk first: none of it is written back on this one's time
    ran = run_together([command], [env])
    if ran.codes != [0]:
        sys.exit(f"{what} failed: {ran.errors[0].strip()[-800:]}")
    return ran.seconds, ran.cpu


def removed(path: Path) -> None:
    """A repo's store and trees are read-only: made writable, then removed (never timed)."""
    if path.exists():
        subprocess.run(["chmod", "-R", "u+w", str(path)], check=True)
        shutil.rmtree(path)


def pair(
    installer: str, index: str, specs: list[str], work: Path, bare_first: bool, *, verify: bool = False
) -> dict[str, tuple[float, float]]:
    """One round's pair for ``installer``, each side into a new, empty place, with the installer's warm cache."""
    env = pod_env(work.parent / f"cache-{installer}")
    found: dict[str, tuple[float, float]] = {}
    for side in ("bare", "repoinstall") if bare_first else ("repoinstall", "bare"):
        place = work / side
        if side == "bare":
            found[side] = timed(bare_command(installer, place, index, specs), env, f"bare {installer}")
        else:
            command = ensure_command(place, index, *specs, installer=installer)
            found[side] = timed(command, env, f"repoinstall with {installer}")
            if verify:
                with Repo(place) as opened:
                    reports = opened.verify()
                    assert len(reports) == len(specs) and all(r.ok for r in reports), reports
        removed(place)
    return found


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="one round of the small fleet set (for CI)")
    parser.add_argument("--rounds", type=int, default=10)
    parser.add_argument("--installer", action="append", choices=sorted(TARGETS), help="only this pair (repeatable)")
    args = parser.parse_args()
    rounds = 1 if args.quick else args.rounds
    installers = [name for name in TARGETS if name in (args.installer or TARGETS)]
    runs: dict[str, list[dict[str, tuple[float, float]]]] = {name: [] for name in installers}
    with tempfile.TemporaryDirectory(prefix="cold-") as tmp, contextlib.ExitStack() as serving:
        if args.quick:
            wheels = Path(tmp, "wheels")
            build_wheels(wheels)
            server = IndexServer(wheels).start()
            serving.callback(server.stop)
            specs, what = list(TOY_SPECS), "the small fleet set's wheels"
        else:
            server = serving.enter_context(realwheels.serve("pep658"))
            specs, what = list(realwheels.SPECS), " + ".join(realwheels.SPECS)
        index = server.url + "simple"
        print(
            f"{machine()}; {rounds} alternating pair(s) per installer; {what} from 127.0.0.1; cold, cache warm",
            flush=True,
        )
        for installer in installers:
            # Untimed: each side fills the cache it then shares (uv's wheels, pip's HTTP cache), and is checked.
            pair(installer, index, specs, Path(tmp, f"warm-{installer}"), False, verify=True)
        for round_ in range(rounds):
            for installer in installers:
                work = Path(tmp, f"{round_}-{installer}")
                found = pair(installer, index, specs, work, bare_first=round_ % 2 == 1)
                runs[installer].append(found)
                (ours, _), (bare, _) = found["repoinstall"], found["bare"]
                print(f"round {round_ + 1}, {installer}: {ours:.2f} s / {bare:.2f} s = {ours / bare:.2f}x", flush=True)
    print(f"\n{'command':<48} | {'wall s':>7} {'cpu s':>6}  (medians)")
    for installer in installers:
        for side, label in (("repoinstall", f"repoinstall ensure --installer {installer}"), ("bare", BARE[installer])):
            wall = statistics.median(found[side][0] for found in runs[installer])
            cpu = statistics.median(found[side][1] for found in runs[installer])
            print(f"{label:<48} | {wall:>7.2f} {cpu:>6.1f}")
    print()
    for installer in installers:
        ratios = [found["repoinstall"][0] / found["bare"][0] for found in runs[installer]]
        cpu = [found["repoinstall"][1] / found["bare"][1] for found in runs[installer]]
        median = statistics.median(ratios)
        verdict = "ok" if median <= TARGETS[installer] else "MISSED"
        print(
            f"repoinstall --installer {installer} / {BARE[installer]}: {median:.2f}x "
            f"(rounds {min(ratios):.2f}-{max(ratios):.2f}; CPU {statistics.median(cpu):.2f}x) "
            f"target <= {TARGETS[installer]:.1f}: {verdict}; before: {BEFORE[installer]}"
        )
        print("  each round's own ratio: " + " ".join(f"{ratio:.2f}" for ratio in ratios))


if __name__ == "__main__":
    main()
