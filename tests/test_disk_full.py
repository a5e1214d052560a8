"""A repo on a nearly full filesystem: a clear error, exit 1, nothing half-visible, earlier trees intact."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from helpers import actions, document, ensure_args, import_version, run, tmpfs
from indexserver import IndexServer


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
