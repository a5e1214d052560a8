"""A repo on a nearly full filesystem: a clear error, exit 1, nothing half-visible, earlier trees intact."""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest
from helpers import actions, document, ensure_args, import_version, run, tmpfs
from indexserver import IndexServer
from storecheck import assert_store_whole


@pytest.fixture
def tiny_repo(tmp_path: Path) -> Iterator[Path]:
    with tmpfs(tmp_path / "tiny", "2m") as mountpoint:
        yield mountpoint / "repo"


def test_disk_full_fails_cleanly(tiny_repo: Path, index: IndexServer) -> None:
    small = run(*ensure_args(tiny_repo, index.url, "adaptor-a==1.0"))
    assert small.returncode == 0, small.stderr
    kept = document(small.stdout)["packages"][0]["path"]

    full = run(*ensure_args(tiny_repo, index.url, "big-pkg==1.0"))
    assert full.returncode == 1, full.stderr
    assert "filesystem is full (pip exited with" in full.stderr and "Traceback" not in full.stderr
    assert "(exit " not in full.stderr  # pip's own exit code is not shown as if it were ours
    env = document(small.stdout)["env"]
    assert not (tiny_repo / "trees" / env / "big-pkg").exists() or not any(
        (tiny_repo / "trees" / env / "big-pkg").iterdir()
    )
    assert not list((tiny_repo / "records").rglob("big-pkg*"))
    assert not any((tiny_repo / "staging" / env).iterdir()), "staging was not cleaned"
    assert import_version(kept, "adaptor_a") == "1.0"
    again = run(*ensure_args(tiny_repo, index.url, "adaptor-a==1.0"))
    assert actions(again.stdout) == ["present"]


def verify_ok(repo: Path) -> bool:
    done = run("verify", "--repo", repo)
    assert done.returncode == 0, done.stdout + done.stderr
    return True


def _leave_free_inodes(mountpoint: Path, free: int) -> Path:
    """Files that use up the filesystem's inodes until ``free`` are left; their dir (remove it to free them)."""
    filler = mountpoint / "filler"
    filler.mkdir()
    number = 0
    while os.statvfs(mountpoint).f_ffree > free:
        (filler / str(number)).touch()
        number += 1
    return filler


def test_a_full_disk_while_storing_or_composing_leaves_every_stored_dir_whole(
    tmp_path: Path, index: IndexServer
) -> None:
    # Inodes run out at each moment after the installer finished (a sweep of how many are left): splitting its
    # dir by RECORD, making store/<env>/<name>/, composing the tree (on tmpfs a hard link takes an inode too).
    # Each failure is one line, exit 1; every dir under store/ is a whole stored distribution; no tree is half
    # there; once space is freed the same ensure succeeds and the repo verifies.
    with tmpfs(tmp_path / "inodes", "20m,nr_inodes=3000") as mountpoint:
        repo = mountpoint / "repo"
        spec = "adaptor-b==1.0"  # adaptor-b and dep-c: two stored distributions

        def fresh() -> None:
            shutil.rmtree(repo, ignore_errors=True)
            shutil.rmtree(mountpoint / "filler", ignore_errors=True)

        before = os.statvfs(mountpoint).f_ffree
        assert run(*ensure_args(repo, index.url, spec)).returncode == 0
        used = before - os.statvfs(mountpoint).f_ffree  # by a whole repo holding the tree and its store
        fresh()
        stored_when_failing = []
        for free in range(used + 3, used - 40, -4):
            fresh()
            filler = _leave_free_inodes(mountpoint, free)
            done = run(*ensure_args(repo, index.url, spec))
            if done.returncode == 0:
                continue
            if "(pip exited with" in done.stderr:
                break  # the installer itself ran out: below here nothing of the store is reached
            assert done.returncode == 1, done.stderr
            errors = [line for line in done.stderr.splitlines() if line.startswith("repoinstall: error:")]
            assert errors == [
                f"repoinstall: error: {spec}: the repo's filesystem is full ({repo}): No space left on device"
            ]
            assert "Traceback" not in done.stderr
            stored_when_failing.append(len(assert_store_whole(repo)))
            # No tree, or (ran out after its publish, writing its record) a whole one, which the next ensure
            # re-records.
            assert not list((repo / "trees").glob("*/adaptor-b/1")) or verify_ok(repo)
            shutil.rmtree(filler)
            again = run(*ensure_args(repo, index.url, spec))
            assert again.returncode == 0, again.stderr
            assert actions(again.stdout) in (["installed"], ["repaired"])
            assert len(assert_store_whole(repo)) == 2
            assert verify_ok(repo)
        else:
            raise AssertionError("the sweep never reached the installer's own failure")
        # The sweep did run out while distributions were being stored or composed, not only before.
        assert any(count > 0 for count in stored_when_failing), stored_when_failing
