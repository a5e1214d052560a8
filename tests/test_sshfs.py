"""sshfs over 127.0.0.1: no usable locks (a hard link is a separate file there), rename onto a taken dir is EPERM.

repoinstall must still leave exactly one whole tree when several pods race there, and say why it goes on
without locks.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from pathlib import Path

import pytest
from helpers import actions, document, ensure_args, finish, import_version, run, start
from indexserver import IndexServer
from sshmount import sshfs_missing, sshfs_mounted


@pytest.fixture
def sshfs_repo(tmp_path: Path) -> Iterator[Path]:
    if (reason := sshfs_missing()) is not None:
        if os.environ.get("REPOINSTALL_REQUIRE_FUSE") == "1":
            pytest.fail(f"sshfs tests are required here but cannot run: {reason}")
        pytest.skip(reason)
    backing = tmp_path / "backing"
    backing.mkdir()
    with sshfs_mounted(tmp_path, backing, tmp_path / "sshfs") as mount:
        yield mount / "repo"


def test_racing_pods_on_sshfs_leave_one_whole_tree(sshfs_repo: Path, index: IndexServer) -> None:
    index.delays["adaptor_a-1.0"] = 1.0  # all of them reach the rename
    pods = [start(*ensure_args(sshfs_repo, index.url, "adaptor-a==1.0")) for _ in range(4)]
    outcomes = [finish(pod) for pod in pods]
    assert all(code == 0 for code, _, _ in outcomes), [err for _, _, err in outcomes]
    assert sorted(actions(out)[0] for _, out, _ in outcomes).count("installed") == 1
    assert all("install locks cannot work here" in err for _, _, err in outcomes)
    tree = Path(document(outcomes[0][1])["packages"][0]["path"])
    assert [p.name for p in tree.parent.iterdir()] == ["1"]
    assert import_version(tree, "adaptor_a") == "1.0"
    verified = run("verify", "--repo", sshfs_repo, "--json")
    assert verified.returncode == 0, verified.stdout
    assert not list(sshfs_repo.glob("staging/*/*")), "staging left behind"


def test_doctor_on_sshfs_names_the_problem(sshfs_repo: Path) -> None:
    sshfs_repo.mkdir(exist_ok=True)
    done = run("doctor", "--repo", sshfs_repo, "--json")
    assert done.returncode == 1
    findings = {f["check"]: f for f in json.loads(done.stdout)["findings"]}
    assert findings["hard links"]["result"] == "linked, but inodes differ"
    assert findings["rename dir onto a taken name"]["result"] == "refused with EPERM"


def test_trees_sharing_a_stored_distribution_work_on_sshfs(
    sshfs_repo: Path, index: IndexServer, request: pytest.FixtureRequest
) -> None:
    # adaptor-b and adaptor-x[fast] both need dep-c: stored once, composed into both trees. Whether sshfs made
    # hard links (the server's files share an inode, though sshfs shows each link as its own) or copies, both
    # trees work and verify; which it was is printed.
    from storecheck import assert_store_whole, files

    trees = []
    for spec, module in (("adaptor-b==1.0", "adaptor_b"), ("adaptor-x[fast]==1.0", "adaptor_x")):
        done = run(*ensure_args(sshfs_repo, index.url, spec))
        assert done.returncode == 0, done.stderr
        tree = Path(document(done.stdout)["packages"][0]["path"])
        assert import_version(tree, module) == "1.0" and import_version(tree, "dep_c") == "1.0"
        trees.append(tree)
    found = assert_store_whole(sshfs_repo)
    assert sorted(key.split("/")[0] for key in found) == ["adaptor-b", "adaptor-x", "dep-c"]
    verified = run("verify", "--repo", sshfs_repo)
    assert verified.returncode == 0, verified.stdout + verified.stderr
    # On the server's own disk (the backing dir): does the tree's dep-c share the stored file's inode?
    backing = sshfs_repo.parent.parent / "backing" / "repo"
    dep_c = backing / next(path for key, path in found.items() if key.startswith("dep-c/")).relative_to(sshfs_repo)
    stored_files = files(dep_c)
    how = set()
    for tree in trees:
        held = files(backing / tree.relative_to(sshfs_repo))
        for relative, info in stored_files.items():
            how.add("linked" if held[relative].st_ino == info.st_ino else "copied")
    assert len(how) == 1, how  # one way for the whole mount
    request.node.user_properties.append(("sshfs trees", how.pop()))
    print(f"\nsshfs: trees' files are {request.node.user_properties[-1][1]} from the store", end="")
