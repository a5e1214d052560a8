"""``TreeLocks.hold`` reports what happened instead of calling back: taken, a peer finished while we waited,
or going on without a lock (one path for every reason, each reason warned once). Real lock files."""

from __future__ import annotations

import logging
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest
from packaging.version import Version

from repoinstall._options import LockSettings
from repoinstall._store.identity import TreeId
from repoinstall._store.layout import Layout
from repoinstall._store.lock import TreeLocks
from repoinstall._store.lockformat import state_name

TID = TreeId("cp311-test", "demo-pkg", Version("1.0"))
FAST = LockSettings(stale_after=4.0, heartbeat=1.0, wait_timeout=30.0)


@pytest.fixture
def layout(tmp_path: Path) -> Iterator[Layout]:
    layout = Layout(tmp_path / "repo")
    layout.writable_fd()
    yield layout
    layout.close()


def test_a_free_lock_is_held_for_the_block(layout: Layout) -> None:
    with TreeLocks(layout, FAST).hold(TID) as held:
        assert not held.peer_finished and held.without is None and not held.lease_lost
        assert list(Path(layout.path(*layout.lock_dir(TID))).glob("*.owner")), "the owner note says who holds it"
    assert not list(Path(layout.path(*layout.lock_dir(TID))).glob("*.owner"))


def test_a_peers_publish_ends_the_wait_without_the_lock(layout: Layout) -> None:
    holding, done = threading.Event(), threading.Event()

    def peer() -> None:
        with TreeLocks(layout, FAST).hold(TID):
            holding.set()
            done.wait(30)

    thread = threading.Thread(target=peer)
    thread.start()
    try:
        assert holding.wait(10)
        published = threading.Event()
        published.set()  # the tree is there already: the waiter notices at its first look
        with TreeLocks(layout, FAST).hold(TID, ready=published.is_set) as held:
            assert held.peer_finished
            assert held.without is None
    finally:
        done.set()
        thread.join(10)


def test_no_lock_asked_is_no_lock_and_no_warning(layout: Layout, caplog: pytest.LogCaptureFixture) -> None:
    with (
        caplog.at_level(logging.WARNING, "repoinstall"),
        TreeLocks(layout, FAST._replace(enabled=False)).hold(TID) as held,
    ):
        assert not held.peer_finished and held.without is None
    assert not Path(layout.path("locks")).exists() or not list(Path(layout.path("locks")).rglob("*.owner"))
    assert caplog.records == []


def test_a_lock_state_replaced_by_a_file_goes_on_without_and_warns_once(
    layout: Layout, caplog: pytest.LogCaptureFixture
) -> None:
    lock_dir = Path(layout.path(*layout.lock_dir(TID)))
    lock_dir.mkdir(parents=True)
    (lock_dir / state_name(TID.leaf)).write_text("planted")
    locks = TreeLocks(layout, FAST)
    with caplog.at_level(logging.WARNING, "repoinstall"):
        for _ in range(3):
            with locks.hold(TID) as held:
                assert held.without is not None and held.without.kind == "replaced"
                assert not held.peer_finished
    assert len([r for r in caplog.records if "going on without the lock" in r.getMessage()]) == 1
