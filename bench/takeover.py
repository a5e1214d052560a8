"""Crash takeover: SIGKILL an installing holder on one "pod"; time until a waiting pod has published the tree.

    python bench/takeover.py [--quick] [--rounds N]

Two pods with their own hostnames (``unshare --uts``, as root; plain processes otherwise) ensure one package
from an index server on 127.0.0.1 that holds the holder's download open. Once the waiter waits, the holder
and its pip are SIGKILLed, the download is let through, and the clock runs until the waiter's tree is
published (its directory appears). For several stale thresholds (heartbeat a quarter of it), the table
shows that time beside its bound: stale threshold + one heartbeat + the install itself (an uncontended
ensure of the same package, measured here too). Target: every takeover within its bound.
"""

from __future__ import annotations

import argparse
import os
import shutil
import signal
import statistics
import subprocess
import tempfile
import time
from pathlib import Path

from common import machine, pod_env
from helpers import cli
from indexserver import IndexServer
from wheels import make_wheel

SPEC = "crash-pkg==1.0"


def as_pod(hostname: str) -> tuple[str, ...]:
    if os.geteuid() != 0 or not shutil.which("unshare"):
        return ()
    return ("unshare", "--uts", "sh", "-c", 'hostname "$0" && exec "$@"', hostname)


def ensure(repo: Path, index: IndexServer, stale: float, heartbeat: float) -> list[str]:
    return cli("ensure", SPEC, "--repo", repo, "--no-index", "--find-links", index.url, "--json",
               "--stale-after", str(stale), "--heartbeat", str(heartbeat))  # fmt: skip


def wait_for(predicate: object, timeout: float) -> float:
    """Poll every 5 ms; the monotonic time it came true."""
    deadline = time.monotonic() + timeout
    while not predicate():  # type: ignore[operator]
        if time.monotonic() > deadline:
            raise SystemExit("timed out")
        time.sleep(0.005)
    return time.monotonic()


def install_alone(index: IndexServer, work: Path, stale: float, heartbeat: float) -> float:
    repo = work / "alone"
    started = time.monotonic()
    env = pod_env(work / "cache-alone")
    done = subprocess.run(ensure(repo, index, stale, heartbeat), env=env, capture_output=True, check=False)
    assert done.returncode == 0, done.stderr
    return time.monotonic() - started


def takeover(index: IndexServer, work: Path, stale: float, heartbeat: float) -> float:
    repo = work / "repo"
    index.delays["crash_pkg"] = 3600.0  # the holder's download hangs: it is mid-install when killed
    before = index.downloads("crash_pkg")

    def pod(name: str) -> subprocess.Popen[str]:
        """A pod: its own hostname and session (a SIGKILL to the session takes its pip too)."""
        command = [*as_pod(f"pod-{name}"), *ensure(repo, index, stale, heartbeat)]
        env = pod_env(work / f"cache-{name}")
        pipe = subprocess.PIPE
        return subprocess.Popen(command, env=env, stdout=pipe, stderr=pipe, text=True, start_new_session=True)

    holder = pod("holder")
    index.wait_for_download("crash_pkg", before + 1, timeout=60)
    waiter = pod("waiter")
    time.sleep(min(1.0, heartbeat))  # the waiter is waiting
    killed = time.monotonic()
    os.killpg(holder.pid, signal.SIGKILL)
    holder.wait()
    index.delays.clear()  # the waiter's download goes through (the holder's stays hung; its pip is dead)
    published = wait_for(lambda: any((repo / "trees").glob("*/crash-pkg/1")), stale * 3 + 120)
    out, err = waiter.communicate(timeout=300)
    if waiter.returncode != 0 or '"installed"' not in out:
        raise SystemExit(f"the waiter did not install it ({waiter.returncode}): {err.strip()[-500:]}")
    return published - killed


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="one round, stale 1 s (for CI)")
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    thresholds = (1.0,) if args.quick else (2.0, 5.0, 10.0)
    rounds = 1 if args.quick else args.rounds
    pods = "own hostnames (unshare --uts)" if as_pod("x") else "plain processes"
    print(f"{machine()}; pods: {pods}; {rounds} round(s), worst and median shown")
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        wheels = Path(tmp, "wheels")
        wheels.mkdir()
        make_wheel(wheels, "crash-pkg", "1.0", modules=60)
        index = IndexServer(wheels).start()
        try:
            for stale in thresholds:
                heartbeat = stale / 4
                alone = statistics.median(
                    install_alone(index, Path(tmp, f"alone-{stale}-{n}"), stale, heartbeat) for n in range(rounds)
                )
                times = [takeover(index, Path(tmp, f"takeover-{stale}-{n}"), stale, heartbeat) for n in range(rounds)]
                rows.append((stale, heartbeat, alone, statistics.median(times), max(times)))
        finally:
            index.stop()
    print(f"\n{'stale s':>7} {'heartbeat s':>11} {'install s':>9} | {'takeover s':>10} {'worst s':>7} {'bound s':>7}")
    within = True
    for stale, heartbeat, alone, median_time, worst in rows:
        bound = stale + heartbeat + alone
        within &= worst <= bound
        print(f"{stale:>7.1f} {heartbeat:>11.2f} {alone:>9.2f} | {median_time:>10.2f} {worst:>7.2f} {bound:>7.2f}")
    print(f"every takeover within stale + heartbeat + install: {'ok' if within else 'MISSED'}")


if __name__ == "__main__":
    main()
