"""What a waiting fleet costs an NFS server, and how soon the waiters notice a publish.

    python bench/nfsops.py [--quick] [--pods 8]

On the host (root, a prepared QEMU_DIR: tests/support/qemu/setup.sh) it boots the qemu guest and runs itself
there, on the real kernel NFS client. One pod holds a tree's lock with the default lock timings while its
install is held back; the waiting pods each have their own NFS client mount (their own caches, as pods on
different nodes). Prints, from ``/proc/self/mountstats`` of the waiters' mounts: NFS operations per waiting pod
per second after the first seconds, the seconds from the publish (seen on the server's own disk) to each
waiter's exit, and the NFS operations per package of a warm ``ensure`` of 10 installed packages (``--quick``:
4 waiting pods unless ``--pods`` says otherwise, 4 packages, a shorter window). The guest emulates its CPU, so
the seconds are the guest's (a slower machine); the operation counts are not.
Targets: <= 1 op per waiting pod per second; every waiter done within ~2 s of the publish; <= 6 ops per package.
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests" / "support"))

import helpers  # noqa: E402
from helpers import finish, isolated_env, start, wait_for_stderr, wait_until  # noqa: E402
from indexserver import IndexServer  # noqa: E402
from nfsrepo import INSTALLER  # noqa: E402
from wheels import make_wheel  # noqa: E402

QEMU_DIR = Path(os.environ.get("QEMU_DIR", "/var/tmp/repoinstall-qemu"))


def op_counts(mount: Path) -> Counter[str]:
    """The NFS operations this client mount has sent so far, by kind (the per-op counts of ``mountstats``)."""
    text = Path("/proc/self/mountstats").read_text()
    block = text.split(f" mounted on {mount} with fstype nfs", 1)[1].split("\ndevice ", 1)[0]
    ops = block.split("per-op statistics", 1)[1]
    return Counter({op: int(count) for op, count in re.findall(r"^\s+([A-Z_]+):\s+(\d+)", ops, re.M)})


def nfs_ops(mount: Path) -> int:
    return sum(op_counts(mount).values())


def mount_client(export: str, where: Path, version: str = "4.2") -> None:
    where.mkdir(parents=True, exist_ok=True)
    subprocess.run(["mount", "-t", "nfs", "-o", f"vers={version},nosharecache", export, str(where)], check=True)


def in_guest(quick: bool, pods: int) -> None:
    a, _b, export = (Path(p) for p in os.environ["REPOINSTALL_NFS"].split(":"))
    helpers.INSTALLER = INSTALLER  # as tests/nfs: the installers' own start-up is slow in the emulated guest
    work = Path(tempfile.mkdtemp(prefix="nfsops-"))
    wheels = work / "wheels"
    wheels.mkdir()
    warm = [f"warm-{i:02d}" for i in range(4 if quick else 10)]
    make_wheel(wheels, "slow-pkg", "1.0")
    for name in warm:
        make_wheel(wheels, name, "1.0")
    index = IndexServer(wheels).start()
    held = index.holds["slow_pkg"] = threading.Event()  # the holder's download, until the waiting is measured
    clients = [QEMU_DIR / "mnt" / f"w{i}" for i in range(pods)]
    for client in clients:
        mount_client("127.0.0.1:/", client)
    try:
        name = f"bench-{os.getpid()}"
        (a / name).mkdir()
        args = ["--no-index", "--find-links", index.url, "--json"]  # the default lock timings (120 s, 20 s)
        # The installers' read timeouts outlast the held-back download.
        slow = {**isolated_env(), "PIP_TIMEOUT": "600", "UV_HTTP_TIMEOUT": "600"}
        holder = start("ensure", "slow-pkg==1.0", "--repo", a / name / "repo", *args, env=slow)
        index.wait_for_download("slow_pkg", timeout=600)
        waiters = [start("ensure", "slow-pkg==1.0", "--repo", c / name / "repo", *args) for c in clients]
        for waiter in waiters:
            wait_for_stderr(waiter, "waiting for", timeout=600)
        waiting_cost(clients, quick)
        held.set()
        notice_latency(waiters, export / name / "repo" / "trees")
        finish(holder, timeout=600)
        warm_cost(a / name / "repo", clients[0] / name / "repo", clients[0], args, warm)
    finally:
        index.stop()
        for client in clients:
            subprocess.run(["umount", "-l", str(client)], check=False)
        shutil.rmtree(work, ignore_errors=True)  # the guest's /tmp is the host's


def waiting_cost(clients: list[Path], quick: bool) -> None:
    settle, window = (4.0, 8.0) if quick else (15.0, 30.0)
    time.sleep(settle)  # "after the first seconds": the backoff has settled
    before = sum((op_counts(c) for c in clients), Counter())
    time.sleep(window)
    spent = sum((op_counts(c) for c in clients), Counter()) - before
    ops = sum(spent.values())
    print(f"waiting pods: {len(clients)}, each on its own NFS client; {window:g} s window after {settle:g} s")
    print(f"NFS ops per waiting pod per second: {ops / len(clients) / window:.2f} (target <= 1)")
    print("  by kind: " + ", ".join(f"{op} {n / len(clients) / window:.2f}" for op, n in spent.most_common(6)))


def notice_latency(waiters: list[subprocess.Popen[str]], trees: Path) -> None:
    noticed: dict[int, float] = {}

    def watch(index_: int, proc: subprocess.Popen[str]) -> None:
        proc.wait()
        noticed[index_] = time.monotonic()

    for i, waiter in enumerate(waiters):
        threading.Thread(target=watch, args=(i, waiter), daemon=True).start()
    # The publish, seen on the server's own disk (no client cache): the tree's directory appears.
    wait_until(lambda: any(trees.glob("*/slow-pkg/1")), timeout=600)
    published = time.monotonic()
    wait_until(lambda: len(noticed) == len(waiters), timeout=600)
    lags = sorted(at - published for at in noticed.values())
    print(
        f"publish to waiter done (s): min {lags[0]:.2f}, median {lags[len(lags) // 2]:.2f}, max {lags[-1]:.2f} "
        "(target ~2; includes each waiter's own exit)"
    )
    for code, _, err in (finish(w, timeout=60) for w in waiters):  # type: ignore[arg-type]
        assert code == 0, err[-300:]


def warm_cost(installed_via: Path, repo: Path, client: Path, args: list[str], warm: list[str]) -> None:
    specs = [f"{w}==1.0" for w in warm]
    assert finish(start("ensure", *specs, "--repo", installed_via, *args), timeout=1200)[0] == 0
    cold = op_counts(client)
    assert finish(start("ensure", *specs, "--repo", repo, *args))[0] == 0  # this client's first look at them
    first = sum((op_counts(client) - cold).values()) / len(specs)
    print(f"first ensure of the {len(specs)} installed packages from a new client: {first:.1f} NFS ops per package")
    spent = {}
    for count in (1, len(specs)):
        before = op_counts(client)
        code, _, err = finish(start("ensure", *specs[:count], "--repo", repo, *args))
        assert code == 0, err
        spent[count] = op_counts(client) - before
    one, many = sum(spent[1].values()), sum(spent[len(specs)].values())
    per_package = (many - one) / (len(specs) - 1)
    print(
        f"warm ensure of {len(specs)} packages again: {many / len(specs):.1f} NFS ops per package in all; "
        f"{per_package:.1f} per package beyond the run's fixed {one - per_package:.0f} (target <= 6)"
    )
    print("  by kind: " + ", ".join(f"{op} {n / len(specs):.1f}" for op, n in spent[len(specs)].most_common(6)))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--pods", type=int, help="waiting pods (default 8, --quick 4)")
    options = parser.parse_args()
    pods = options.pods or (4 if options.quick else 8)
    if os.environ.get("REPOINSTALL_NFS"):
        in_guest(options.quick, pods)
        return
    if os.geteuid() != 0 or not (QEMU_DIR / "ready").exists():
        sys.exit(f"nfsops: needs root and a prepared {QEMU_DIR} (tests/support/qemu/setup.sh {QEMU_DIR})")
    with tempfile.TemporaryDirectory() as tmp:
        job, log = Path(tmp) / "job.sh", Path(tmp) / "out.log"
        mounts = f"{QEMU_DIR}/mnt/a:{QEMU_DIR}/mnt/b:{QEMU_DIR}/mnt/export"
        flags = " ".join(["--quick"] * options.quick + ["--pods", str(pods)])
        # PYTHONPATH passes through: PYTHONPATH=/path/to/an/older/checkout measures that version's waiters.
        path = f"export PYTHONPATH='{os.environ['PYTHONPATH']}'\n" if os.environ.get("PYTHONPATH") else ""
        job.write_text(
            f"cd '{ROOT}'\n{path}export HOME=/root PYTHONUNBUFFERED=1 REPOINSTALL_NFS='{mounts}'\n"
            f"'{sys.executable}' bench/nfsops.py {flags} > '{log}' 2>&1\n"
        )
        env = {**isolated_env(), "QEMU_DIR": str(QEMU_DIR)}
        guest = ROOT / "tests" / "support" / "qemu.sh"
        done = subprocess.run([str(guest), str(job)], env=env, capture_output=True, text=True, check=False)
        print(log.read_text() if log.exists() else done.stdout[-2000:], end="")
        sys.exit(done.returncode)


if __name__ == "__main__":
    main()
