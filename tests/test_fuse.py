"""Lock takeover on a filesystem that refuses rename flags like NFS and CephFS, across two client mounts."""

from __future__ import annotations

import ctypes
import errno
import json
import os
import signal
from collections.abc import Iterator
from pathlib import Path

import pytest
from fusemount import as_pod, fuse_missing, mounted
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
)
from indexserver import IndexServer

REQUIRED = os.environ.get("REPOINSTALL_REQUIRE_FUSE") == "1"  # CI sets it: there a skip would be a failure


def _mount(tmp_path: Path, names: list[str], *extra: str) -> Iterator[list[Path]]:
    if (reason := fuse_missing()) is not None:
        if REQUIRED:
            pytest.fail(f"FUSE tests are required here but cannot run: {reason}")
        pytest.skip(reason)
    with mounted(tmp_path, names, *extra) as mounts:
        yield mounts


@pytest.fixture
def two_clients(tmp_path: Path) -> Iterator[tuple[Path, Path]]:
    """Two FUSE mounts of one backing directory: two "hosts" sharing a volume."""
    for a, b in _mount(tmp_path, ["client-a", "client-b"]):  # noqa: UP028 (unpacks the pair)
        yield a, b


def test_mount_refuses_rename_flags_like_nfs(two_clients: tuple[Path, Path]) -> None:
    a, _ = two_clients
    (a / "x").mkdir()
    libc = ctypes.CDLL(None, use_errno=True)
    assert libc.renameat2(-100, bytes(a / "x"), -100, bytes(a / "y"), 1) == -1  # RENAME_NOREPLACE
    assert ctypes.get_errno() == errno.EINVAL


def test_sigkilled_holder_on_one_client_is_taken_over_from_another(
    two_clients: tuple[Path, Path], index: IndexServer
) -> None:
    client_a, client_b = two_clients
    index.delays["slow_pkg"] = 3.0
    holder = start(*ensure_args(client_a / "repo", index.url, "slow-pkg==1.0"), prefix=as_pod("pod-a"))
    index.wait_for_download("slow_pkg")
    waiter = start(*ensure_args(client_b / "repo", index.url, "slow-pkg==1.0"), prefix=as_pod("pod-b"))
    wait_for_stderr(waiter, "held by pod-a")  # the waiter has found the lock taken, and says by whom
    signal_group(holder, signal.SIGKILL)
    holder.wait()
    code, out, err = finish(waiter)
    assert code == 0, err
    assert actions(out) == ["installed"]
    assert "held by pod-a" in err, err
    tree = Path(document(out)["packages"][0]["path"])
    assert import_version(tree, "slow_pkg") == "1.0"
    # The other client sees the same, whole tree.
    seen_from_a = client_a / tree.relative_to(client_b)
    assert import_version(seen_from_a, "slow_pkg") == "1.0"
    assert index.downloads("slow_pkg") == 2
    record = json.loads(next((client_a / "repo" / "records").rglob("1.json")).read_text())
    assert record["host"] == "pod-b"


def test_doctor_reports_what_this_filesystem_does(two_clients: tuple[Path, Path]) -> None:
    a, _ = two_clients
    (a / "repo").mkdir(exist_ok=True)  # doctor probes an existing directory; it never creates the repo
    done = run("doctor", "--repo", a / "repo", "--json")
    assert done.returncode == 0, done.stdout + done.stderr
    findings = {f["check"]: f["result"] for f in json.loads(done.stdout)["findings"]}
    assert findings["renameat2 flags"].startswith("refused with EINVAL")
    assert findings["hard links"] == "yes"


def test_doctor_fails_where_hard_links_are_missing(tmp_path: Path) -> None:
    for [mount] in _mount(tmp_path, ["nolinks"], "--no-links"):
        (mount / "repo").mkdir()
        done = run("doctor", "--repo", mount / "repo")
        assert done.returncode == 1
        assert "FAIL  hard links: refused (EPERM): trees are copies of the store" in done.stdout
        assert done.stderr.startswith("repoinstall: error: ") and "hard links" in done.stderr


def test_a_file_removed_between_open_and_read_reads_as_missing(tmp_path: Path) -> None:
    # A peer on another client removes the file between our open and our read: this client answers the read on
    # the descriptor by its path, which is gone (ENOENT, with no file name). It reads as "not there".
    from repoinstall._disk import fs

    for [mount] in _mount(tmp_path, ["vanishing"], "--vanish=.owner"):
        (tmp_path / "backing" / "x.owner").write_text("{}")
        (tmp_path / "backing" / "kept").write_text("kept")
        fd = os.open(mount, os.O_RDONLY | os.O_DIRECTORY)
        try:
            assert fs.read_file(fd, ("kept",)) == b"kept"
            assert fs.read_file(fd, ("x.owner",)) is None
        finally:
            os.close(fd)
        assert not (tmp_path / "backing" / "x.owner").exists()  # it was opened, and went


def test_a_waiter_whose_holders_note_goes_while_read_keeps_waiting(tmp_path: Path, index: IndexServer) -> None:
    # The holder works on the server's own disk; the waiter's client loses the holder's note between opening and
    # reading it each time it looks (a holder on another client releasing at that instant). A live pod must not
    # fail for it: it waits, and uses the holder's tree.
    for [mount] in _mount(tmp_path, ["waiter"], "--vanish=.owner"):
        index.delays["slow_pkg"] = 3.0
        backing_repo = tmp_path / "backing" / "repo"
        holder = start(*ensure_args(backing_repo, index.url, "slow-pkg==1.0"), prefix=as_pod("pod-a"))
        index.wait_for_download("slow_pkg")
        waiter = start(*ensure_args(mount / "repo", index.url, "slow-pkg==1.0"), prefix=as_pod("pod-b"))
        code, out, err = finish(waiter)
        assert code == 0, err
        assert actions(out) == ["waited"]
        assert "waiting for" in err, err
        assert finish(holder)[0] == 0
        assert index.downloads("slow_pkg") == 1


def _shared_pair(repo: Path, index: IndexServer) -> tuple[Path, Path]:
    """adaptor-b and adaptor-x[fast], two trees needing the same dep-c: both installed, both import it."""
    trees = []
    for spec, module in (("adaptor-b==1.0", "adaptor_b"), ("adaptor-x[fast]==1.0", "adaptor_x")):
        done = run(*ensure_args(repo, index.url, spec))
        assert done.returncode == 0, done.stderr
        assert actions(done.stdout) == ["installed"]
        tree = Path(document(done.stdout)["packages"][0]["path"])
        assert import_version(tree, module) == "1.0" and import_version(tree, "dep_c") == "1.0"
        trees.append(tree)
    return trees[0], trees[1]


def test_where_hard_links_are_refused_trees_are_copies_of_the_store(tmp_path: Path, index: IndexServer) -> None:
    # The mount refuses link() (EPERM): each tree is composed of copies of the stored files. The store still holds
    # dep-c once; both trees work and verify.
    from storecheck import assert_store_whole, files, shares

    for [mount] in _mount(tmp_path, ["nolinks"], "--no-links"):
        repo = mount / "repo"
        tree_b, tree_x = _shared_pair(repo, index)
        found = assert_store_whole(repo)
        assert sorted(key.split("/")[0] for key in found) == ["adaptor-b", "adaptor-x", "dep-c"]
        dep_c = next(path for key, path in found.items() if key.startswith("dep-c/"))
        count = len(files(dep_c))
        assert shares(tree_b, dep_c) == shares(tree_x, dep_c) == (0, count)  # copies, each tree its own
        assert all(info.st_nlink == 1 for info in files(tree_b).values())
        verified = run("verify", "--repo", repo)
        assert verified.returncode == 0, verified.stdout + verified.stderr
