"""Pods with different UIDs sharing one group (a Kubernetes fsGroup) use one repo."""

from __future__ import annotations

import json
import os
import shutil
import stat
import subprocess
import sys
from pathlib import Path

import pytest
from helpers import actions, cli, ensure_args, import_version, isolated_env
from indexserver import IndexServer

GROUP = 2000
pytestmark = pytest.mark.skipif(os.geteuid() != 0 or not shutil.which("setpriv"), reason="needs root and setpriv")


def as_user(uid: int, *args: str | Path) -> subprocess.CompletedProcess[str]:
    # The UID of a pod in the fsGroup; it may read (not write) the interpreter under /root, like an image's.
    prefix = [
        "setpriv",
        f"--reuid={uid}",
        f"--regid={GROUP}",
        f"--groups={GROUP}",
        "--inh-caps=+dac_read_search",
        "--ambient-caps=+dac_read_search",
    ]
    return subprocess.run(
        [*prefix, *cli(*args)], env=isolated_env(HOME="/tmp"), capture_output=True, text=True, timeout=180, check=False
    )


def test_two_uids_share_a_repo(tmp_path: Path, index: IndexServer) -> None:
    repo = tmp_path / "shared"
    repo.mkdir()
    os.chown(repo, 0, GROUP)
    os.chmod(repo, 0o2775)

    first = as_user(1001, *ensure_args(repo, index.url, "adaptor-a==1.0"))
    assert first.returncode == 0, first.stderr
    record = next((repo / "records").rglob("adaptor-a/1.json"))
    assert stat.S_IMODE(record.stat().st_mode) & 0o060 == 0o060, "records are group-writable"
    for directory in (record.parent, next((repo / "staging").iterdir()), next((repo / "trees").rglob("adaptor-a"))):
        mode = directory.stat().st_mode
        assert mode & stat.S_IWGRP and mode & stat.S_ISGID and directory.stat().st_gid == GROUP, directory
    tree = next((repo / "trees").rglob("adaptor-a/1"))
    assert all(p.stat().st_mode & stat.S_IRGRP for p in tree.rglob("*")), "trees are group-readable"

    second = as_user(1002, *ensure_args(repo, index.url, "adaptor-a==1.0", "adaptor-d==1.0"))
    assert second.returncode == 0, second.stderr
    assert actions(second.stdout) == ["present", "installed"]

    # The lock of adaptor-a belongs to uid 1001 (filelock keeps it 0700): 1002 warns once and goes on without.
    shutil.rmtree(tree)
    record.unlink()
    third = as_user(1002, *ensure_args(repo, index.url, "adaptor-a==1.0"))
    assert third.returncode == 0, third.stderr
    assert actions(third.stdout) == ["installed"]
    warnings = [line for line in third.stderr.splitlines() if "belongs to uid 1001" in line]
    assert len(warnings) == 1 and "runAsUser" in warnings[0]
    assert "Traceback" not in third.stderr

    doctor = as_user(1002, "doctor", "--repo", repo)
    assert doctor.returncode == 1
    assert "locks owned by uid 1001" in doctor.stdout and "runAsUser" in doctor.stdout
    verify = as_user(1001, "verify", "--repo", repo)
    assert verify.returncode == 0, verify.stdout + verify.stderr


def _shared_repo(tmp_path: Path) -> Path:
    repo = tmp_path / "shared"
    repo.mkdir()
    os.chown(repo, 0, GROUP)
    os.chmod(repo, 0o2775)
    return repo


@pytest.mark.skipif(
    Path("/proc/sys/fs/protected_hardlinks").read_text().strip() != "1", reason="needs fs.protected_hardlinks = 1"
)
def test_a_second_uid_copies_the_stored_files_it_may_not_link(tmp_path: Path, index: IndexServer) -> None:
    # uid 1001 installs adaptor-b: dep-c goes into the store, its files read-only and 1001's. uid 1002 then makes
    # two trees that need the same stored dep-c: with fs.protected_hardlinks the kernel refuses 1002 a link to a
    # file it does not own and may not write (EPERM), so the file is copied; 1002's own files are linked.
    from storecheck import assert_store_whole, ownership, shares, stored

    repo = _shared_repo(tmp_path)
    lock = tmp_path / "pylock.toml"
    subprocess.run(
        [sys.executable, "-m", "pip", "lock", "adaptor-b==1.0", "--no-index", "-f", index.url, "-o", str(lock)],
        env=isolated_env(),
        check=True,
        capture_output=True,
    )
    first = as_user(1001, *ensure_args(repo, index.url, "adaptor-b==1.0"))
    assert first.returncode == 0, first.stderr
    dep = stored(repo)
    dep_c = next(d for key, d in dep.items() if key.startswith("dep-c/"))
    assert {p.stat().st_uid for p in dep_c.rglob("*")} == {1001}
    tree_b = Path(json.loads(first.stdout)["packages"][0]["path"])
    assert shares(tree_b, dep_c) == (len([p for p in dep_c.rglob("*") if p.is_file()]), 0)  # 1001's own: linked
    before = {"store": ownership(dep_c), "tree": ownership(tree_b)}
    downloads = index.downloads("dep_c")
    assert index.downloads("adaptor_b") == downloads

    # Resolved first (the store holds distributions): only adaptor-x is installed; dep-c comes from the store.
    second = as_user(1002, *ensure_args(repo, index.url, "adaptor-x[fast]==1.0"))
    assert second.returncode == 0, second.stderr
    assert actions(second.stdout) == ["installed"]
    assert "Traceback" not in second.stderr
    tree_x = Path(json.loads(second.stdout)["packages"][0]["path"])
    linked, copied = shares(tree_x, dep_c)
    assert (linked, copied) == (0, len([p for p in dep_c.rglob("*") if p.is_file()]))
    assert {p.stat().st_uid for p in tree_x.rglob("*") if p.is_file()} == {1002}
    adaptor_x = next(d for key, d in stored(repo).items() if key.startswith("adaptor-x/"))
    assert shares(tree_x, adaptor_x)[1] == 0  # 1002's own stored files: linked
    assert set(stored(repo)) == set(dep) | {f"adaptor-x/{adaptor_x.name}"}  # dep-c stored once

    # A pinned install (the lock of adaptor-b: its tree is another tree): nothing downloaded, 1001's files copied.
    third = as_user(1002, "ensure", "-r", lock, "--repo", repo, "--json")
    assert third.returncode == 0, third.stderr
    assert actions(third.stdout) == ["installed"]
    # Only the lock's own metapackage was stored (unpacked, no installer): dep-c and adaptor-b came from the store.
    assert index.downloads("dep_c") == downloads and index.downloads("adaptor_b") == downloads
    assert "files copied where the filesystem refused hard links" in third.stderr
    tree_lock = Path(json.loads(third.stdout)["packages"][0]["path"])
    assert shares(tree_lock, dep_c)[0] == 0

    for tree, module in ((tree_x, "adaptor_x"), (tree_lock, "adaptor_b"), (tree_b, "adaptor_b")):
        assert import_version(tree, module) == "1.0" and import_version(tree, "dep_c") == "1.0"
    assert {"store": ownership(dep_c), "tree": ownership(tree_b)} == before  # nothing of 1001's changed

    # Another version of a project 1001 stored first: 1002 stores it beside 1001's, in 1001's project dir.
    for uid, version in ((1001, "1.0"), (1002, "1.1")):
        done = as_user(uid, *ensure_args(repo, index.url, f"adaptor-a=={version}"))
        assert done.returncode == 0, done.stderr
        assert import_version(json.loads(done.stdout)["packages"][0]["path"], "adaptor_a") == version
    versions = sorted(key.split("/")[1].rsplit("-", 1)[0] for key in stored(repo) if key.startswith("adaptor-a/"))
    assert versions == ["1", "1.1"]  # canonical versions: 1.0 is "1"
    assert_store_whole(repo)
    for uid in (1001, 1002):
        verify = as_user(uid, "verify", "--repo", repo)
        assert verify.returncode == 0, verify.stdout + verify.stderr
