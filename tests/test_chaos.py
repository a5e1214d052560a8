"""The chaos suite, bounded for CI: 8 pods over two FUSE clients, SIGKILLs and pauses, invariants per round.

The long run is ``python tests/support/chaos.py --rounds 30`` (README, "Chaos").
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest
from chaos import PACKAGES, REPORTS, make_wheels, run_chaos
from fusemount import fuse_missing, mounted
from indexserver import IndexServer

ROUNDS = int(os.environ.get("REPOINSTALL_CHAOS_ROUNDS", "3"))


@pytest.fixture
def clients(tmp_path: Path) -> Iterator[list[Path]]:
    if (reason := fuse_missing()) is not None:
        if os.environ.get("REPOINSTALL_REQUIRE_FUSE") == "1":
            pytest.fail(f"the chaos suite is required here but cannot run: {reason}")
        pytest.skip(reason)
    with mounted(tmp_path, ["client-a", "client-b"]) as mounts:
        yield mounts


def test_chaos_across_pods(tmp_path: Path, clients: list[Path]) -> None:
    wheels = tmp_path / "wheels"
    wheels.mkdir()
    make_wheels(wheels, ROUNDS)
    server = IndexServer(wheels).start()
    for package in PACKAGES:
        server.delays[package.replace("-", "_") + "-"] = 1.0
    try:
        result = run_chaos(tmp_path, clients, server, rounds=ROUNDS, pods=8, seed=7, say=lambda _: None)
    finally:
        server.stop()
    REPORTS.append(result.table())
    assert result.killed >= ROUNDS * 2 and result.stopped >= 1
    assert not result.survivors_failed, result.survivors_failed
    assert not result.bad_trees, result.bad_trees
    assert result.final_ok
    assert not result.over_budget, result.table()
    assert len(result.installs) == ROUNDS * len(PACKAGES)
