"""ESTALE on the real Linux NFS client: the other client replaces or removes a directory this client holds (the
repo root, a tree, a record's directory, a lock's directory, a staging dir), and what this client does next
succeeds, from a fresh lookup, instead of failing with "Stale file handle". Runs inside the guest.

Each case first shows the handle really went stale (the repo's debug log says it looked the repo up again, or the
install ran again), so none of them can pass by never meeting ESTALE.
"""

from __future__ import annotations

import logging
import os
import shutil
import signal
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest
from fusemount import as_pod
from helpers import actions, finish, isolated_env, signal_group, start, wait_for_stderr, wait_until
from indexserver import IndexServer
from nfsrepo import INSTALLER, Nfs

from repoinstall import InstallOptions, Repo

STALE, HEARTBEAT = 6.0, 1.0
LOOKED_AGAIN = "a handle went stale"
#: Downloads are held back (IndexServer.holds) until the other client has done its part, which takes a while in
#: the emulated guest: the installers' read timeouts outlast that.
PATIENT = {"UV_HTTP_TIMEOUT": "600", "PIP_TIMEOUT": "600"}


@pytest.fixture(autouse=True)
def _no_pip_cache(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PIP_NO_CACHE_DIR", "1")  # the index sees every download
    monkeypatch.setenv("UV_NO_CACHE", "1")
    for key, value in PATIENT.items():
        monkeypatch.setenv(key, value)


@pytest.fixture
def debug_log(caplog: pytest.LogCaptureFixture) -> Iterator[pytest.LogCaptureFixture]:
    caplog.set_level(logging.DEBUG, logger="repoinstall")
    yield caplog


def repo_on_b(nfs: Nfs, index: IndexServer) -> Repo:
    options = InstallOptions(no_index=True, find_links=(index.url,), installer=INSTALLER)
    return Repo(nfs.b, install=options, stale_after=STALE, heartbeat=HEARTBEAT)


def replace_with_copy(path: Path) -> None:
    """What the other client does: copy a directory, swap the copy in by rename, delete the original. Same names
    and bytes, new inodes: every handle of the old ones is stale on the server."""
    copy, old = path.with_name(path.name + ".copy"), path.with_name(path.name + ".old")
    shutil.copytree(path, copy, symlinks=True)
    path.rename(old)
    copy.rename(path)
    for directory, _, _ in os.walk(old):  # a published tree's directories are read-only: its owner's gc does this
        os.chmod(directory, 0o755)
    shutil.rmtree(old)


def revalidated(path: Path) -> None:
    """Open each directory down to ``path`` on this client: close-to-open drops what it cached as missing."""
    for level in [*reversed(path.parents[: len(path.relative_to(path.anchor).parts) - 1]), path]:
        if level.is_dir():
            os.listdir(level)


def looked_again(log: pytest.LogCaptureFixture) -> bool:
    return any(LOOKED_AGAIN in record.getMessage() for record in log.records)


def test_the_repo_root_replaced_by_the_other_client(
    nfs: Nfs, index: IndexServer, debug_log: pytest.LogCaptureFixture
) -> None:
    with repo_on_b(nfs, index) as repo:
        assert repo.ensure("adaptor-a==1.0").action == "installed"
        assert repo.ensure("adaptor-a==1.0").action == "present"  # the root and env handles are kept now
        replace_with_copy(nfs.a)
        debug_log.clear()
        assert repo.ensure("adaptor-a==1.0").action == "present"
        assert looked_again(debug_log), "the kept root handle never went stale: the case proves nothing"
        assert repo.tree_path("adaptor-a==1.0") == str(nfs.b / "trees" / repo.env / "adaptor-a" / "1")
        assert [entry.name for entry, _ in repo.list()] == ["adaptor-a"]
        assert all(report.ok for report in repo.verify())
        replace_with_copy(nfs.a)
        # An install writes through the new root: a lock, a staging dir, a tree and a record, all below it.
        assert repo.ensure("adaptor-a==1.1").action == "installed"
        replace_with_copy(nfs.a)
        # gc after the swap: it may clear idle lock state, never a tree.
        assert {removal.kind for removal in repo.gc(older_than=0)} <= {"lock"}
        replace_with_copy(nfs.a)
        assert [lock.tid for lock in repo.locks()] == []
    assert index.downloads("adaptor_a-1.0") == 1
    assert (nfs.backing / "trees" / repo.env / "adaptor-a" / "1.1").is_dir()


def test_a_tree_replaced_by_the_other_client(nfs: Nfs, index: IndexServer, debug_log: pytest.LogCaptureFixture) -> None:
    with repo_on_b(nfs, index) as repo:
        assert repo.ensure("adaptor-a==1.0").action == "installed"
        tree = Path(repo.tree_path("adaptor-a==1.0"))
        assert repo.ensure("adaptor-a==1.0").action == "present"  # this client has the tree's handles cached
        replace_with_copy(nfs.a / tree.relative_to(nfs.b))
        # Its files are links of the store's: replaced there too, the inodes this client has cached are gone.
        for stored in list((nfs.a / "store" / repo.env / "adaptor-a").iterdir()):
            replace_with_copy(stored)
        debug_log.clear()
        assert repo.ensure("adaptor-a==1.0").action == "present"
        assert looked_again(debug_log), "the tree's cached handle never went stale: the case proves nothing"
        assert repo.tree_path("adaptor-a==1.0") == str(tree)
        assert [report.ok for report in repo.verify(["adaptor-a==1.0"])] == [True]
    assert index.downloads("adaptor_a-1.0") == 1


def test_a_record_directory_replaced_by_the_other_client(
    nfs: Nfs, index: IndexServer, debug_log: pytest.LogCaptureFixture
) -> None:
    with repo_on_b(nfs, index) as repo:
        assert repo.ensure("adaptor-a==1.0").action == "installed"
        records = nfs.a / "records" / repo.env
        replace_with_copy(records / "adaptor-a")
        # A name looked up below a replaced directory may read as missing once before the client drops it: then
        # the fresh look inside the lock finds the tree ("waited"); never an error, never a second install.
        assert repo.ensure("adaptor-a==1.0").action in ("present", "waited")
        replace_with_copy(records)  # the records/<env> handle this process keeps
        debug_log.clear()
        assert repo.ensure("adaptor-a==1.0").action in ("present", "waited")
        assert looked_again(debug_log), "the kept records/<env> handle never went stale: the case proves nothing"
        assert [entry.version for entry, _ in repo.list()] == ["1.0"]
    assert index.downloads("adaptor_a-1.0") == 1


def test_a_lock_directory_removed_by_the_other_client_while_this_one_waits(nfs: Nfs, index: IndexServer) -> None:
    held = index.holds["slow_pkg"] = threading.Event()  # the holder's download, until it is killed
    lock_args = ["--stale-after", str(STALE), "--heartbeat", str(HEARTBEAT), "--json"]
    common = ["--no-index", "--find-links", index.url, *lock_args]
    env = isolated_env(**PATIENT)
    holder = start("ensure", "slow-pkg==1.0", "--repo", nfs.a, *common, env=env, prefix=as_pod("pod-a"))
    index.wait_for_download("slow_pkg", timeout=600)
    waiter = start("ensure", "slow-pkg==1.0", "--repo", nfs.b, "-v", *common, env=env, prefix=as_pod("pod-b"))
    wait_for_stderr(waiter, "held by pod-a", timeout=600)  # the waiter holds the lock directory's handle
    signal_group(holder, signal.SIGKILL)
    holder.wait()
    held.set()
    # The other client clears the dead holder's lock away, directory and all (as gc does with debris).
    locks = nfs.a / "locks"
    env = next(locks.iterdir()).name
    replace_with_copy(locks / env)
    shutil.rmtree(locks / env / "slow-pkg")
    code, out, err = finish(waiter, timeout=600)
    assert code == 0, err
    assert actions(out) == ["installed"]
    # The waiter met the removed directory: the lock looked it up again itself, or a stale handle reran the step.
    assert LOOKED_AGAIN in err or "its directory was removed (or its handle went stale)" in err, err
    assert "error" not in err, err
    assert index.downloads("slow_pkg") == 2


def test_a_staging_dir_replaced_by_the_other_client_while_installing(
    nfs: Nfs, index: IndexServer, debug_log: pytest.LogCaptureFixture
) -> None:
    held = index.holds["slow_pkg"] = threading.Event()  # the download, until the staging dir is replaced
    with repo_on_b(nfs, index) as repo:
        outcome: list[object] = []
        worker = threading.Thread(target=lambda: outcome.append(repo.ensure("slow-pkg==1.0")), daemon=True)
        worker.start()
        on_server = nfs.backing / "staging" / repo.env
        wait_until(lambda: on_server.is_dir() and any(on_server.iterdir()), timeout=600, what="a staging dir")
        index.wait_for_download("slow_pkg", timeout=600)
        staging = nfs.a / "staging" / repo.env
        revalidated(staging)
        replace_with_copy(staging / next(on_server.iterdir()).name)  # while the installer downloads into it
        held.set()
        worker.join(600)
        assert not worker.is_alive()
    [result] = outcome
    assert getattr(result, "action", result) == "installed", result
    # The install ran again in a new staging dir: it downloads again, unless the lost run had already stored the
    # distribution (checked against its RECORD before that rename), which the new run then composes the tree from.
    composed = "every distribution is in the store" in debug_log.text
    assert index.downloads("slow_pkg") == (1 if composed else 2)
    assert looked_again(debug_log)
    assert [p.name for p in staging.iterdir()] == []
    assert os.listdir(nfs.backing / "trees" / repo.env / "slow-pkg") == ["1"]
