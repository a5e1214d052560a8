"""The install protocol on the real Linux NFS client: pods on two client mounts of one export (each with its own
attribute cache), real processes, SIGKILL and SIGSTOP. Runs inside the guest (see tests/test_nfs.py)."""

from __future__ import annotations

import json
import signal
import threading
import time
from collections.abc import Callable
from pathlib import Path

from chaos import PACKAGES, make_wheels, run_chaos
from fusemount import as_pod
from helpers import (
    actions,
    document,
    finish,
    import_version,
    isolated_env,
    run,
    signal_group,
    start,
    wait_for_stderr,
    wait_until,
)
from indexserver import IndexServer
from nfsrepo import EMULATED, Nfs

#: Lock timings for the guest (an emulated CPU): the production ratio, scaled down.
STALE, HEARTBEAT = 6.0, 1.0
LOCK = ["--stale-after", str(STALE), "--heartbeat", str(HEARTBEAT)]
#: Minutes pass in the guest before every pod of a test is where the test wants it: downloads are held back
#: (IndexServer.holds) until then, and the installers' read timeouts outlast that.
PATIENT = {"UV_HTTP_TIMEOUT": "600", "PIP_TIMEOUT": "600"}


def ensure(repo: Path, index: IndexServer, *specs: str) -> list[str]:
    return ["ensure", *specs, "--repo", str(repo), "--no-index", "--find-links", index.url, "--json", *LOCK]


def verify_clean(*repos: Path) -> None:
    for repo in repos:
        done = run("verify", "--all", "--repo", repo, "--json")
        assert done.returncode == 0, done.stdout + done.stderr
        assert all(tree["status"] == "ok" for tree in json.loads(done.stdout)["trees"]), done.stdout


#: Pods racing for one tree: four in an emulated guest, where each is a process that takes seconds to start.
PODS = 4 if EMULATED else 8


def test_pods_over_two_clients_run_one_installer(nfs: Nfs, index: IndexServer) -> None:
    # The one download is held until every other pod waits for its tree: all of them race for real.
    held = index.holds["adaptor_a-1.0"] = threading.Event()
    env = isolated_env(**PATIENT)
    pods = [
        start(*ensure(nfs.a if i % 2 else nfs.b, index, "adaptor-a==1.0"), env=env, prefix=as_pod(f"pod-{i}"))
        for i in range(PODS)
    ]
    wait_until(
        lambda: (
            sum("waiting for" in "".join(pod.err) for pod in pods) == PODS - 1 and index.downloading("adaptor_a") == 1
        ),
        timeout=600,
        what="one pod downloading and the others waiting",
    )
    held.set()
    outcomes = [finish(pod, timeout=600) for pod in pods]
    assert [code for code, _, _ in outcomes] == [0] * PODS, [err for _, _, err in outcomes]
    done = sorted(actions(out)[0] for _, out, _ in outcomes)
    assert done == ["installed"] + ["waited"] * (PODS - 1), done
    assert index.downloads("adaptor_a-1.0") == 1
    paths = {
        Path(document(out)["packages"][0]["path"]).relative_to(nfs.a if i % 2 else nfs.b)
        for i, (_, out, _) in enumerate(outcomes)
    }
    assert len(paths) == 1
    verify_clean(nfs.a, nfs.b)


def test_a_sigkilled_holder_on_one_client_is_taken_over_from_the_other(
    nfs: Nfs, index: IndexServer, report: Callable[[str], None]
) -> None:
    install = 4.0
    index.delays["slow_pkg"] = install
    held = index.holds["slow_pkg"] = threading.Event()  # the holder's download, until it is killed
    holder = start(*ensure(nfs.a, index, "slow-pkg==1.0"), env=isolated_env(**PATIENT), prefix=as_pod("pod-a"))
    index.wait_for_download("slow_pkg", timeout=600)
    # The bound the issue sets, as the waiter's own deadline: stale + heartbeat + one install (+ the guest's
    # slow interpreter and pip start). A takeover that took longer would end in exit 3.
    budget = STALE + HEARTBEAT + install + 30
    waiter = start(*ensure(nfs.b, index, "slow-pkg==1.0"), "--wait-timeout", str(budget), prefix=as_pod("pod-b"))
    wait_for_stderr(waiter, "held by pod-a", timeout=600)
    killed = time.monotonic()
    signal_group(holder, signal.SIGKILL)
    holder.wait()
    held.set()
    # The waiter's staging dir appears on the server's disk as soon as it holds the lock.
    wait_until(lambda: any((nfs.backing / "staging").rglob("slow-pkg-1.pod-b.*")), timeout=120, what="takeover")
    locked = time.monotonic() - killed
    index.wait_for_download("slow_pkg", count=2, timeout=120)  # the waiter took over and its installer began
    taken = time.monotonic() - killed
    code, out, err = finish(waiter, timeout=600)
    took = time.monotonic() - killed
    assert code == 0, err
    assert actions(out) == ["installed"]
    report(
        f"takeover after SIGKILL, holder on NFSv4.2, waiter on NFSv3 (stale {STALE:g} s, heartbeat "
        f"{HEARTBEAT:g} s): the waiter held the lock {locked:.1f} s after the kill, its download began "
        f"{taken:.1f} s after it, its tree was published "
        f"{took:.1f} s after it (download held {install:g} s)"
    )
    tree = Path(document(out)["packages"][0]["path"])
    assert import_version(tree, "slow_pkg") == "1.0"
    # The holder's client sees the tree at once too, though it looked it up as missing a moment before.
    seen_from_a = run("path", "slow-pkg==1.0", "--repo", nfs.a)
    assert seen_from_a.stdout.strip() == str(nfs.a / tree.relative_to(nfs.b)), seen_from_a.stderr
    assert import_version(seen_from_a.stdout.strip(), "slow_pkg") == "1.0"
    assert index.downloads("slow_pkg") == 2
    verify_clean(nfs.a, nfs.b)


def test_a_paused_holder_resumes_and_never_overwrites_the_peers_tree(nfs: Nfs, index: IndexServer) -> None:
    index.delays["slow_pkg"] = 4.0
    first = start(*ensure(nfs.a, index, "slow-pkg==1.0"), env=isolated_env(**PATIENT), prefix=as_pod("pod-a"))
    index.wait_for_download("slow_pkg", timeout=600)
    signal_group(first, signal.SIGSTOP)  # the pod freezes with the lock, past its lease
    second = start(*ensure(nfs.b, index, "slow-pkg==1.0"), prefix=as_pod("pod-b"))
    code, out, err = finish(second, timeout=600)
    assert code == 0, err
    assert actions(out) == ["installed"]
    tree = nfs.backing / Path(document(out)["packages"][0]["path"]).relative_to(nfs.b)
    record = next((nfs.backing / "records").rglob("1.json"))
    before = (tree.stat().st_ino, record.read_bytes(), sorted(p.name for p in tree.rglob("*")))
    signal_group(first, signal.SIGCONT)
    code, out, err = finish(first, timeout=600)
    assert code == 0, err
    assert actions(out) == ["waited"]
    assert "lost the lock" in err or "published it first" in err, err
    assert (tree.stat().st_ino, record.read_bytes(), sorted(p.name for p in tree.rglob("*"))) == before
    verify_clean(nfs.a, nfs.b)


def test_no_lock_pods_on_both_clients_leave_one_whole_tree(nfs: Nfs, index: IndexServer) -> None:
    held = index.holds["adaptor_a-1.0"] = threading.Event()  # every pod reaches its installer before any publishes
    env = isolated_env(**PATIENT)
    pods = [
        start(
            *ensure(nfs.a if i % 2 else nfs.b, index, "adaptor-a==1.0"), "--no-lock", env=env, prefix=as_pod(f"pod-{i}")
        )
        for i in range(4)
    ]
    wait_until(lambda: index.downloading("adaptor_a") == 4, timeout=600, what="four installers downloading")
    held.set()
    outcomes = [finish(pod, timeout=600) for pod in pods]
    assert [code for code, _, _ in outcomes] == [0] * 4, [err for _, _, err in outcomes]
    assert sorted(actions(out)[0] for _, out, _ in outcomes).count("installed") == 1
    assert not (nfs.backing / "locks").exists()
    assert [p.name for p in (nfs.backing / "trees").rglob("adaptor-a/*")] == ["1"]
    verify_clean(nfs.a, nfs.b)


def test_chaos_round_with_pods_split_over_both_clients(nfs: Nfs, tmp_path: Path, report: Callable[[str], None]) -> None:
    wheels = tmp_path / "wheels"
    wheels.mkdir()
    make_wheels(wheels, 1)
    server = IndexServer(wheels).start()
    for package in PACKAGES:
        server.delays[package.replace("-", "_") + "-"] = 1.0
    mounts = [nfs.a.parent, nfs.b.parent]
    try:
        # Six pods over half the packages: fewer installs for the guest, more pods per tree. An emulated guest
        # races four over four packages, with the lease scaled as its interpreter is slower (the 6:1 ratio kept).
        pods, packages, lease = (4, PACKAGES[:4], (12.0, 2.0)) if EMULATED else (6, PACKAGES[:5], None)
        result = run_chaos(tmp_path, mounts, server, 1, pods, 11, lambda _: None, nfs.backing, packages, lease)
    finally:
        server.stop()
    report(f"chaos on NFS: {result.table().splitlines()[-1]}")
    assert result.killed >= 1
    assert not result.survivors_failed, result.survivors_failed
    assert not result.bad_trees, result.bad_trees
    assert result.final_ok
    assert not result.over_budget, result.table()
    verify_clean(nfs.a, nfs.b)


def test_doctor_on_nfs_reports_the_rename_flags_and_the_attribute_cache(
    nfs: Nfs, index: IndexServer, report: Callable[[str], None]
) -> None:
    assert run(*ensure(nfs.a, index, "adaptor-a==1.0")).returncode == 0
    for repo in (nfs.a, nfs.b):
        done = run("doctor", "--repo", repo, "--json")
        findings = {f["check"]: f for f in json.loads(done.stdout)["findings"]}
        assert "EINVAL" in findings["renameat2 flags"]["result"], findings["renameat2 flags"]
        cache = findings["attribute cache"]
        assert "nfs" in cache["result"] and "acregmax 60" in cache["result"], cache
        assert cache["ok"], cache  # the default mount options are safe with the default lock timings
        report(f"doctor on {repo.parent.parent.name}: attribute cache: {cache['result']}")
