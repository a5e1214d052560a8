"""Many processes at once, killed and paused ones among them: each tree installed once, never half-visible."""

from __future__ import annotations

import json
import os
import signal
import threading
import time
from pathlib import Path

import pytest
from helpers import (
    actions,
    document,
    ensure_args,
    finish,
    import_version,
    run,
    signal_group,
    start,
    wait_for_stderr,
    wait_until,
)
from indexserver import IndexServer

from repoinstall import EnsureResult, InstallOptions, Repo


def test_eight_processes_one_package_one_installer_run(repo: Path, index: IndexServer, installer: str) -> None:
    index.delays["adaptor_a-1.0"] = 1.0  # keep the first install running while the others arrive
    pods = [start(*ensure_args(repo, index.url, "adaptor-a==1.0")) for _ in range(8)]
    outcomes = [finish(pod) for pod in pods]
    assert all(code == 0 for code, _, _ in outcomes), [err for _, _, err in outcomes]
    seen = sorted(actions(out)[0] for _, out, _ in outcomes)
    assert seen.count("installed") == 1
    assert set(seen) <= {"installed", "waited", "present"}
    assert index.downloads("adaptor_a-1.0") == 1
    path = document(outcomes[0][1])["packages"][0]["path"]
    assert import_version(path, "adaptor_a") == "1.0"


def test_two_packages_from_two_processes_both_survive(repo: Path, index: IndexServer) -> None:
    index.delays["adaptor_"] = 0.5
    pods = [start(*ensure_args(repo, index.url, spec)) for spec in ("adaptor-a==1.0", "adaptor-b==1.0")]
    pods += [start(*ensure_args(repo, index.url, spec)) for spec in ("adaptor-b==1.0", "adaptor-a==1.0")]
    assert all(finish(pod)[0] == 0 for pod in pods)
    records = sorted(p.relative_to(repo / "records").parts[1:] for p in (repo / "records").rglob("*.json"))
    assert records == [("adaptor-a", "1.json"), ("adaptor-b", "1.json")]
    assert index.downloads("adaptor_a") == 1 and index.downloads("adaptor_b") == 1


def test_sigkilled_holder_is_taken_over_after_the_stale_threshold(
    repo: Path, index: IndexServer, installer: str
) -> None:
    index.delays["slow_pkg"] = 3.0
    holder = start(*ensure_args(repo, index.url, "slow-pkg==1.0"))
    index.wait_for_download("slow_pkg")  # the holder's pip is mid-download
    waiter = start(*ensure_args(repo, index.url, "slow-pkg==1.0"), "-v")
    wait_until(lambda: any((repo / "locks").rglob("*.owner")), what="owner note")
    signal_group(holder, signal.SIGKILL)  # the holder and its pip, like a pod killed mid-install
    holder.wait()
    code, out, err = finish(waiter)
    assert code == 0, err
    assert actions(out) == ["installed"]
    assert f"pid {holder.pid}" in err, err  # it said who it waited for
    path = document(out)["packages"][0]["path"]
    assert import_version(path, "slow_pkg") == "1.0"
    assert index.downloads("slow_pkg") == 2
    # The dead holder's staging dir is left for gc and broke nothing.
    assert list((repo / "staging").rglob(f"slow-pkg-1.*.{holder.pid}.*"))


def test_paused_holder_resumes_and_keeps_the_peers_tree(repo: Path, index: IndexServer) -> None:
    index.delays["slow_pkg"] = 3.0
    first = start(*ensure_args(repo, index.url, "slow-pkg==1.0"))
    index.wait_for_download("slow_pkg")
    signal_group(first, signal.SIGSTOP)  # the pod freezes with the lock, past its lease
    second = start(*ensure_args(repo, index.url, "slow-pkg==1.0"))
    code, out, err = finish(second)
    assert code == 0, err
    assert actions(out) == ["installed"]
    tree = Path(document(out)["packages"][0]["path"])
    record = next((repo / "records").rglob("1.json"))
    before = (tree.stat().st_ino, record.read_bytes(), sorted(p.name for p in tree.rglob("*")))
    signal_group(first, signal.SIGCONT)
    code, out, err = finish(first)
    assert code == 0, err
    assert actions(out) == ["waited"]
    assert "lost the lock" in err or "published it first" in err, err
    assert (tree.stat().st_ino, record.read_bytes(), sorted(p.name for p in tree.rglob("*"))) == before
    assert import_version(tree, "slow_pkg") == "1.0"


def test_two_racing_no_lock_runs_leave_one_valid_tree(repo: Path, index: IndexServer) -> None:
    index.delays["adaptor_a-1.0"] = 2.0  # both runs reach pip before either publishes
    pods = [start(*ensure_args(repo, index.url, "adaptor-a==1.0", "--no-lock")) for _ in range(2)]
    outcomes = [finish(pod) for pod in pods]
    assert all(code == 0 for code, _, _ in outcomes), outcomes
    assert not (repo / "locks").exists()
    assert index.downloads("adaptor_a-1.0") == 2  # both did the work: --no-lock only wastes it
    assert sorted(actions(out)[0] for _, out, _ in outcomes) == ["installed", "waited"]
    tree = Path(document(outcomes[0][1])["packages"][0]["path"])
    assert [p.name for p in tree.parent.iterdir()] == ["1"]
    assert import_version(tree, "adaptor_a") == "1.0"
    record = json.loads(next((repo / "records").rglob("1.json")).read_text())
    assert record["version"] == "1.0"


def test_threads_share_one_install_and_different_trees_run_in_parallel(
    repo: Path, index: IndexServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    for key in [k for k in os.environ if k.startswith("PIP_")]:
        monkeypatch.delenv(key)
    monkeypatch.setenv("PIP_CONFIG_FILE", os.devnull)
    monkeypatch.setenv("PIP_NO_CACHE_DIR", "1")
    index.delays["adaptor_"] = 1.0
    options = InstallOptions(find_links=(index.url,), no_index=True)
    events = []
    with Repo(repo, install=options, on_event=events.append, stale_after=2, heartbeat=0.4, jobs=4) as store:
        results: list[EnsureResult] = []
        threads = [threading.Thread(target=lambda: results.append(store.ensure("adaptor-a==1.0"))) for _ in range(6)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        assert sorted(r.action for r in results) == ["installed"] + ["waited"] * 5
        assert index.downloads("adaptor_a-1.0") == 1
        both = store.ensure_all(["adaptor-d==1.0", "adaptor-e==1.0"])
    assert [r.action for r in both if isinstance(r, EnsureResult)] == ["installed", "installed"]
    starts = {e.tree: i for i, e in enumerate(events) if e.kind == "start"}
    dones = {e.tree: i for i, e in enumerate(events) if e.kind == "done"}
    # Parallel: the second install started before the first one finished.
    assert starts["adaptor-e==1.0"] < dones["adaptor-d==1.0"] and starts["adaptor-d==1.0"] < dones["adaptor-e==1.0"]


def test_wait_timeout_exits_3_and_names_the_holder(repo: Path, index: IndexServer) -> None:
    index.delays["slow_pkg"] = 4.0
    holder = start(*ensure_args(repo, index.url, "slow-pkg==1.0"))
    index.wait_for_download("slow_pkg")
    waiter = run(*ensure_args(repo, index.url, "slow-pkg==1.0"), "--wait-timeout", "1")
    assert waiter.returncode == 3, waiter.stderr
    assert "gave up after 1s waiting for" in waiter.stderr
    assert f"pid {holder.pid}" in waiter.stderr
    code, out, err = finish(holder)
    assert code == 0, err
    assert actions(out) == ["installed"]


def test_a_waiter_ends_when_the_tree_is_published_not_when_the_lock_is_released(repo: Path, index: IndexServer) -> None:
    from packaging.version import Version

    from repoinstall._disk.identity import TreeId, environment_tag
    from repoinstall._disk.layout import Layout
    from repoinstall._lock.key import tree_key
    from repoinstall._lock.locks import TreeLocks
    from repoinstall._options import LockSettings

    slow_lock = ["--stale-after", "600", "--heartbeat", "20", "--wait-timeout", "60"]
    layout = Layout(repo)
    # This test holds the tree's lock (heartbeat running) for the whole test and never installs anything.
    tid = TreeId(environment_tag(), "adaptor-a", Version("1.0"))
    with TreeLocks(layout, LockSettings(600, 20)).hold(tree_key(tid)) as held:
        assert held.without is None and not held.peer_finished
        waiter = start(*ensure_args(repo, index.url, "adaptor-a==1.0", fast=False), *slow_lock, "-v")
        wait_for_stderr(waiter, "waiting for")  # the waiter sees the held lock
        # A --no-lock pod publishes the tree while the lock is still held by someone else.
        publisher = run(*ensure_args(repo, index.url, "adaptor-a==1.0"), "--no-lock")
        assert actions(publisher.stdout) == ["installed"], publisher.stderr
        code, out, err = finish(waiter, timeout=60)
        assert code == 0, err  # not exit 3: it stopped waiting when the tree appeared
        assert actions(out) == ["waited"]
        assert "waiting for" in err
    layout.close()
    assert index.downloads("adaptor_a-1.0") == 1


def test_sigterm_releases_the_lock_and_cleans_up_at_once(repo: Path, index: IndexServer) -> None:
    index.delays["slow_pkg"] = 3.0
    slow_lock = ["--stale-after", "600", "--heartbeat", "1"]  # a lock left held would outlast the waiter
    holder = start(*ensure_args(repo, index.url, "slow-pkg==1.0", fast=False), *slow_lock)
    index.wait_for_download("slow_pkg")
    waiter = start(*ensure_args(repo, index.url, "slow-pkg==1.0", fast=False), *slow_lock, "--wait-timeout", "60")
    wait_for_stderr(waiter, "waiting for")
    holder.send_signal(signal.SIGTERM)  # the pod is being deleted: only the main process gets it
    code, _, err = finish(holder)
    assert code == 143, err
    assert "Traceback" not in err
    code, out, err = finish(waiter)
    assert code == 0, err
    assert actions(out) == ["installed"]
    staging = [p for p in (repo / "staging").rglob("*") if p.parent.parent.name == "staging"]
    assert staging == [], staging


def test_sigterm_stops_every_install_of_a_parallel_run(repo: Path, index: IndexServer, installer: str) -> None:
    index.delays["slow_pkg"] = 120.0
    index.delays["adaptor_d"] = 120.0
    slow_lock = ["--stale-after", "600", "--heartbeat", "1"]  # a lock left held would outlast the waiter
    both = ("slow-pkg==1.0", "adaptor-d==1.0")
    holder = start(*ensure_args(repo, index.url, *both, fast=False), *slow_lock, "--jobs", "2")
    # The batch is one installer run (into a cold store: resolved and installed at once); it fetches one file at a
    # time, so the first held download, whichever it is, is where it is stopped.
    deadline = time.monotonic() + 30
    while index.downloads("slow_pkg") + index.downloads("adaptor_d") == 0:
        assert time.monotonic() < deadline, "no download started within 30s"
        time.sleep(0.02)
    holder.send_signal(signal.SIGTERM)
    code, _, err = finish(holder, timeout=60)
    assert code == 143, err
    assert not index.completed  # it stopped both installs mid-download instead of waiting for them to finish
    assert [p for p in (repo / "staging").rglob("*") if p.parent.parent.name == "staging"] == []
    index.delays.clear()
    waiter = run(*ensure_args(repo, index.url, *both, fast=False), *slow_lock, "--wait-timeout", "30")
    assert waiter.returncode == 0, waiter.stderr
    assert actions(waiter.stdout) == ["installed", "installed"]
