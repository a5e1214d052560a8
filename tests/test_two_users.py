"""Pods with different UIDs sharing one group (a Kubernetes fsGroup) use one repo."""

from __future__ import annotations

import os
import shutil
import stat
import subprocess
from pathlib import Path

import pytest
from helpers import actions, cli, ensure_args, isolated_env
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
