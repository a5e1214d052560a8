"""Two machines on kernel NFS, and the faults a network filesystem brings: two qemu guests (tests/support/vm.py),
each with its own kernel and caches and two vCPUs, race for one tree as two nodes of a cluster do; node 1's knfsd
serves the export, node 2 mounts it over the cluster's network. The index server runs here on the host.

Each fault is proven the same way: no tree half-visible (``verify --all`` clean from both nodes, one tree
directory), no record lost (the tree is listed), the survivors finish, and the tree, installed exactly once in the
end, imports on every node still up. Needs root, qemu and a prepared QEMU_DIR (tests/support/qemu/setup.sh, which
.ci/run runs).
"""

from __future__ import annotations

import json
import os
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from helpers import wait_until
from indexserver import IndexServer
from vm import HOST, QEMU_DIR, Cluster, Node, note, unavailable
from wheels import make_wheel

REQUIRED = os.environ.get("REPOINSTALL_REQUIRE_FUSE") == "1"  # CI: a skip here would hide a missing install step
#: The export's NFSv4 lease (qemu/init.sh: ``rpc.nfsd -L 10``): a node cut off for longer has lost it.
LEASE = 10.0
#: Lock timings for emulated CPUs: the production ratio (120 s / 20 s), scaled down so that expiry takes seconds.
LOCK = "--stale-after 6 --heartbeat 1"
VENV_BIN = Path(sys.executable).parent
#: A plain environment for the pods in the guests: pip and uv isolated as tests/support/helpers.py does, uv as the
#: installer (pip's own start-up costs half a minute on an emulated CPU), read timeouts that outlast a held download.
POD_ENV = (
    f"env -i PATH={VENV_BIN}:/usr/sbin:/usr/bin:/sbin:/bin HOME=/root LANG=C.UTF-8 PYTHONUNBUFFERED=1 "
    "PIP_CONFIG_FILE=/dev/null PIP_NO_CACHE_DIR=1 UV_NO_CACHE=1 NETRC=/dev/null REPOINSTALL_INSTALLER=uv "
    "UV_HTTP_TIMEOUT=600 PIP_TIMEOUT=600"
)
PACKAGE = "slow-pkg==1.0"


@pytest.fixture(scope="module")
def booted(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    reason = unavailable()
    if reason is not None:
        if REQUIRED:
            pytest.fail(f"the kernel NFS cluster tests are required here but cannot run: {reason}")
        pytest.skip(reason)
    started = time.monotonic()
    with Cluster(tmp_path_factory.mktemp("cluster")) as cluster:
        boots = ", ".join(
            f"{node.name} {node.boot_seconds:.0f} s (its own clock: {node.guest_uptime:.0f} s)"
            for node in cluster.nodes
        )
        note(f"NFS cluster: power-on to job start: {boots}")
        yield cluster
    note(f"NFS cluster: up for {time.monotonic() - started:.0f} s (boot, every test, power-off)")


@pytest.fixture
def cluster(booted: Cluster) -> Cluster:
    """Two nodes, both up: one a test powered off is powered on again (one boot of the pair for all the tests)."""
    booted.revive()
    return booted


@pytest.fixture
def index(tmp_path: Path) -> Iterator[IndexServer]:
    wheels = tmp_path / "wheels"
    wheels.mkdir()
    make_wheel(wheels, "slow-pkg", "1.0")
    server = IndexServer(wheels).start()
    yield server
    server.stop()


class Scene:
    """One test's repo on the export, the same path on both nodes, and the pods the test starts there."""

    def __init__(self, cluster: Cluster, index: IndexServer, name: str, out: Path) -> None:
        self.cluster, self.index, self.out = cluster, index, out
        self.repo = QEMU_DIR / "mnt" / "a" / name / "repo"
        self.url = index.url.replace("127.0.0.1", HOST)

    def ensure(self, node: Node, pod: str) -> str:
        """Start ``ensure slow-pkg==1.0`` on ``node``; its JSON document goes to ``out/pod.json``."""
        return node.spawn(
            f"{POD_ENV} '{sys.executable}' -m repoinstall ensure {PACKAGE} --repo '{self.repo}' --no-index "
            f"--find-links '{self.url}' --json -v {LOCK} > '{self.out / pod}.json'"
        )

    def outcome(self, node: Node, job: str, pod: str, timeout: float = 600) -> tuple[int, str | None, str]:
        """The pod's exit status, its action (``None`` without a document) and its log."""
        code, log = node.wait(job, timeout)
        try:
            document = json.loads((self.out / f"{pod}.json").read_text())
        except ValueError:
            return code, None, log
        return code, document["packages"][0]["action"], log

    def assert_installed_once(self, *nodes: Node) -> None:
        """One whole tree, recorded, verified and importable from each of ``nodes``; nothing half-visible."""
        python = f"{POD_ENV} '{sys.executable}'"
        jobs = {}
        for node in nodes:  # each node looks for itself, both at once
            out = self.out / node.name
            jobs[node] = node.spawn(
                f"{python} -m repoinstall verify --all --repo '{self.repo}' --json > '{out}-verify.json' "
                f"&& {python} -m repoinstall list --repo '{self.repo}' --json > '{out}-list.json' "
                f"&& ls '{self.repo}'/trees/*/slow-pkg > '{out}-trees.txt' "
                f"&& {POD_ENV} PYTHONPATH=$(echo '{self.repo}'/trees/*/slow-pkg/1) '{sys.executable}' "
                "-c 'import slow_pkg; print(\"imports\", slow_pkg.VERSION)'"
            )
        for node, job in jobs.items():
            out = self.out / node.name
            code, log = node.wait(job)
            assert code == 0, f"{node.name}: {log[-3000:]}"
            verified = json.loads(Path(f"{out}-verify.json").read_text())
            assert [tree["status"] for tree in verified["trees"]] == ["ok"], f"{node.name}: {verified}"
            listed = json.loads(Path(f"{out}-list.json").read_text())
            assert [tree["name"] for tree in listed["trees"]] == ["slow-pkg"], f"{node.name}: {listed}"
            assert Path(f"{out}-trees.txt").read_text().split() == ["1"], node.name
            assert "imports 1.0" in log, log[-3000:]


def test_two_nodes_race_for_one_tree_and_install_it_once(cluster: Cluster, index: IndexServer, tmp_path: Path) -> None:
    scene = Scene(cluster, index, "race", tmp_path)
    held = index.holds["slow_pkg"] = threading.Event()  # the winner's download, until the other node waits
    one = scene.ensure(cluster.server, "one")
    two = scene.ensure(cluster.client, "two")
    index.wait_for_download("slow_pkg", timeout=600)
    wait_until(lambda: "waiting for" in cluster.server.output(one) + cluster.client.output(two), timeout=600)
    held.set()
    results = [scene.outcome(cluster.server, one, "one"), scene.outcome(cluster.client, two, "two")]
    assert [code for code, _, _ in results] == [0, 0], [log[-2000:] for _, _, log in results]
    note(
        f"NFS cluster, two nodes racing: {[action for _, action, _ in results]}; "
        f"downloads {index.downloads('slow_pkg')}"
    )
    assert sorted(str(action) for _, action, _ in results) == ["installed", "waited"]
    assert index.downloads("slow_pkg") == 1
    scene.assert_installed_once(*cluster.nodes)


def test_a_holder_cut_off_longer_than_the_lease_is_taken_over(
    cluster: Cluster, index: IndexServer, tmp_path: Path
) -> None:
    scene = Scene(cluster, index, "cut", tmp_path)
    held = index.holds["slow_pkg"] = threading.Event()  # node 2's download, until its cable is pulled
    holder = scene.ensure(cluster.client, "holder")
    index.wait_for_download("slow_pkg", timeout=600)  # node 2 holds the tree's lock, its install under way
    cluster.client.set_link(False)
    cut = time.monotonic()
    held.set()  # its download ends over the host's network; what it writes to the export waits for the cable
    survivor = scene.ensure(cluster.server, "survivor")
    code, action, log = scene.outcome(cluster.server, survivor, "survivor")
    assert (code, action) == (0, "installed"), log[-3000:]  # it took the silent holder's lock over
    time.sleep(max(0.0, LEASE + 5 - (time.monotonic() - cut)))  # off for longer than the lease, in any case
    cut_for = time.monotonic() - cut
    cluster.client.set_link(True)
    code, action, log = scene.outcome(cluster.client, holder, "holder")
    note(f"NFS cluster, node 2 cut off for {cut_for:.0f} s (lease {LEASE:g} s) holding the lock: exit {code}, {action}")
    assert code == 0 and action in ("waited", "present"), log[-3000:]  # it found the survivor's tree, never its own
    assert "lost the lock" in log, log[-3000:]
    scene.assert_installed_once(*cluster.nodes)


def test_the_server_restarted_mid_install(cluster: Cluster, index: IndexServer, tmp_path: Path) -> None:
    scene = Scene(cluster, index, "restart", tmp_path)
    held = index.holds["slow_pkg"] = threading.Event()  # node 2's download, until the server restarted
    holder = scene.ensure(cluster.client, "holder")
    index.wait_for_download("slow_pkg", timeout=600)
    waiter = scene.ensure(cluster.server, "waiter")
    wait_until(lambda: "waiting for" in cluster.server.output(waiter), timeout=600, what="node 1 to wait")
    nfsd = QEMU_DIR / "debs" / "nfsks" / "usr" / "sbin" / "rpc.nfsd"
    # knfsd stops (every client's state on the server is gone) and starts again in its grace period, where only
    # the clients' reclaims are served.
    code, log = cluster.server.run(f"'{nfsd}' 0 && '{nfsd}' -G 10 -L 10 8 && cat /proc/fs/nfsd/v4_end_grace")
    assert code == 0 and log.split()[-1:] == ["N"], log  # N: in its grace period
    held.set()
    results = [scene.outcome(cluster.client, holder, "holder"), scene.outcome(cluster.server, waiter, "waiter")]
    note(
        f"NFS cluster, knfsd restarted mid-install: holder {results[0][:2]}, waiter {results[1][:2]}, "
        f"downloads {index.downloads('slow_pkg')}"
    )
    assert [code for code, _, _ in results] == [0, 0], [log[-3000:] for _, _, log in results]
    assert [action for _, action, _ in results] == ["installed", "waited"], [log[-3000:] for _, _, log in results]
    assert index.downloads("slow_pkg") == 1
    scene.assert_installed_once(*cluster.nodes)


def test_a_node_powered_off_mid_install_is_taken_over(cluster: Cluster, index: IndexServer, tmp_path: Path) -> None:
    scene = Scene(cluster, index, "poweroff", tmp_path)
    held = index.holds["slow_pkg"] = threading.Event()  # node 2's download, until it is gone
    scene.ensure(cluster.client, "holder")
    index.wait_for_download("slow_pkg", timeout=600)  # node 2 holds the tree's lock, its staging dir made
    cluster.client.power_off()
    held.set()
    survivor = scene.ensure(cluster.server, "survivor")
    code, action, log = scene.outcome(cluster.server, survivor, "survivor")
    note(
        f"NFS cluster, node 2 powered off mid-install: node 1 exit {code}, {action}; "
        f"downloads {index.downloads('slow_pkg')}"
    )
    assert (code, action) == (0, "installed"), log[-3000:]  # it took the dead node's lock over
    assert index.downloads("slow_pkg") == 2
    scene.assert_installed_once(cluster.server)
