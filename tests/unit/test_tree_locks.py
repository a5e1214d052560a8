"""``TreeLocks.hold`` reports what happened instead of calling back: taken, a peer finished while we waited,
or going on without a lock (one path for every reason, each reason warned once). Real lock files."""

from __future__ import annotations

import contextlib
import logging
import threading
from pathlib import Path

import pytest
from filelock import SoftReadWriteLock
from helpers import wait_until
from packaging.version import Version

from repoinstall._disk.identity import TreeId
from repoinstall._disk.layout import OWNER_SUFFIX, Layout
from repoinstall._lock.filelock_rw import HOLDERS, lock_name, state_name
from repoinstall._lock.key import tree_key
from repoinstall._lock.locks import TreeLocks, take_and_run
from repoinstall._lock.taken import HELD, NOT_TAKEN, PEER_FINISHED, Taken
from repoinstall._options import LockSettings

TID = TreeId("cp311-test", "demo-pkg", Version("1.0"))
FAST = LockSettings(stale_after=4.0, heartbeat=1.0, wait_timeout=30.0)


def test_a_free_lock_is_held_for_the_block(layout: Layout) -> None:
    with TreeLocks(layout, FAST).hold(tree_key(TID)) as held:
        assert not held.peer_finished and held.without is None and not held.lease_lost
        assert list(Path(layout.path(*layout.lock_dir(TID))).glob("*.owner")), "the owner note says who holds it"
    assert not list(Path(layout.path(*layout.lock_dir(TID))).glob("*.owner"))


def test_a_peers_publish_ends_the_wait_without_the_lock(layout: Layout) -> None:
    holding, done = threading.Event(), threading.Event()

    def peer() -> None:
        with TreeLocks(layout, FAST).hold(tree_key(TID)):
            holding.set()
            done.wait(30)

    thread = threading.Thread(target=peer)
    thread.start()
    try:
        assert holding.wait(10)
        published = threading.Event()
        published.set()  # the tree is there already: the waiter notices at its first look
        with TreeLocks(layout, FAST).hold(tree_key(TID), ready=published.is_set) as held:
            assert held.peer_finished
            assert held.without is None
    finally:
        done.set()
        thread.join(10)


def test_no_lock_asked_is_no_lock_and_no_warning(layout: Layout, caplog: pytest.LogCaptureFixture) -> None:
    with (
        caplog.at_level(logging.WARNING, "repoinstall"),
        TreeLocks(layout, FAST._replace(enabled=False)).hold(tree_key(TID)) as held,
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
            with locks.hold(tree_key(TID)) as held:
                assert held.without is not None and held.without.kind == "replaced"
                assert not held.peer_finished
    assert len([r for r in caplog.records if "going on without the lock" in r.getMessage()]) == 1


# ---- a failing holder takes its lock's state away, unless someone else is in it --------------------------------


class _Failed(Exception):
    """The block's install failed: nothing was published."""


def _lock_dir(layout: Layout) -> Path:
    return Path(layout.path(*layout.lock_dir(TID)))


def test_a_holder_that_fails_alone_leaves_no_lock_behind(layout: Layout, caplog: pytest.LogCaptureFixture) -> None:
    with (
        caplog.at_level(logging.WARNING, "repoinstall"),
        pytest.raises(_Failed),
        TreeLocks(layout, FAST).hold(tree_key(TID), gone=lambda: True),
    ):
        assert (_lock_dir(layout) / state_name(TID.leaf)).is_dir()
        raise _Failed
    assert not _lock_dir(layout).exists()  # its state, its owner note and its directory
    assert not any(Path(layout.path("trash")).iterdir())  # set aside into trash/, deleted there
    assert caplog.records == []  # no "lost the lock": taking the state away was the holder's own doing
    with TreeLocks(layout, FAST).hold(tree_key(TID)) as held:  # and the next one takes a fresh lock at once
        assert held.without is None and not held.peer_finished


def test_a_holder_whose_tree_exists_keeps_its_lock_state(layout: Layout) -> None:
    with TreeLocks(layout, FAST).hold(tree_key(TID), gone=lambda: False):
        pass
    assert (_lock_dir(layout) / state_name(TID.leaf)).is_dir()


def test_a_participant_queued_in_the_lock_keeps_its_state(layout: Layout) -> None:
    # A real filelock participant waiting in the lock's own log: it must find the log where it is, and get the lock.
    state = _lock_dir(layout) / state_name(TID.leaf)
    queued = SoftReadWriteLock(
        str(_lock_dir(layout) / lock_name(TID.leaf)), heartbeat_interval=1.0, stale_threshold=4.0, is_singleton=False
    )
    taken = threading.Event()

    def wait_in_the_log() -> None:
        queued.acquire_write(timeout=30)
        taken.set()

    thread = threading.Thread(target=wait_in_the_log)
    with pytest.raises(_Failed), TreeLocks(layout, FAST).hold(tree_key(TID), gone=lambda: True):
        thread.start()
        wait_until(lambda: len(list((state / HOLDERS).iterdir())) == 2, what="a second participant in the lock")
        raise _Failed
    thread.join(30)
    try:
        assert taken.is_set()  # it took the lock we left
        assert state.is_dir()  # in the state it waited in: not taken away from under it
    finally:
        queued.close()


def test_a_waiter_takes_the_lock_after_a_failing_holder_took_it_away(layout: Layout) -> None:
    # A waiter that watches the holder's note (never joining filelock's log) opened the lock's directory before the
    # failing holder removed it: it takes a fresh lock, and its own note is where every peer looks for it.
    waiting, held_by_waiter = threading.Event(), threading.Event()
    noted: list[bool] = []

    class _SeesWaiting(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            if record.getMessage().startswith("waiting for"):
                waiting.set()

    def waiter() -> None:
        with TreeLocks(layout, FAST).hold(tree_key(TID)) as held:
            noted.append(held.without is None and (_lock_dir(layout) / (TID.leaf + OWNER_SUFFIX)).is_file())
            held_by_waiter.set()

    logger = logging.getLogger("repoinstall")
    handler, level = _SeesWaiting(), logger.level
    logger.addHandler(handler)
    logger.setLevel(logging.INFO)
    thread = threading.Thread(target=waiter)
    try:
        with contextlib.suppress(_Failed), TreeLocks(layout, FAST).hold(tree_key(TID), gone=lambda: True):
            thread.start()
            assert waiting.wait(30)
            raise _Failed
        assert held_by_waiter.wait(30)
    finally:
        thread.join(30)
        logger.removeHandler(handler)
        logger.setLevel(level)
    assert noted == [True]


# ---- gc's take-and-run: never waits, runs its step holding the lock, and says why not otherwise -------------------


def test_take_and_run_runs_the_step_holding_the_lock_and_forgets_what_is_gone(layout: Layout) -> None:
    meanwhile: list[Taken] = []  # what a peer's take-and-run gets while the step runs

    def step() -> None:
        meanwhile.append(take_and_run(layout, tree_key(TID), FAST, lambda: pytest.fail("both ran"), lambda: True))

    assert take_and_run(layout, tree_key(TID), FAST, step, gone=lambda: True) == HELD
    assert [taken.held or taken.without is not None for taken in meanwhile] == [False]  # a peer held it: not taken
    assert not _lock_dir(layout).exists()  # what it guarded is gone: so is the lock's state


def test_take_and_run_keeps_the_lock_state_of_what_still_exists(layout: Layout) -> None:
    assert take_and_run(layout, tree_key(TID), FAST, lambda: None, gone=lambda: False).held
    assert (_lock_dir(layout) / state_name(TID.leaf)).is_dir()


def test_take_and_run_never_waits_for_a_peer_and_names_it(layout: Layout) -> None:
    ran: list[bool] = []
    with TreeLocks(layout, FAST).hold(tree_key(TID)) as held:
        assert held.taken == HELD
        taken = take_and_run(layout, tree_key(TID), FAST, lambda: ran.append(True), gone=lambda: True)
    assert not taken.held and not taken.peer_finished and taken.without is None
    assert taken.holder.startswith("held by ") and ran == []
    assert (_lock_dir(layout) / state_name(TID.leaf)).is_dir()  # the peer's lock is left as it was


def test_take_and_run_says_why_no_lock_can_be_had(layout: Layout) -> None:
    _lock_dir(layout).mkdir(parents=True)
    (_lock_dir(layout) / state_name(TID.leaf)).write_text("planted")
    taken = take_and_run(layout, tree_key(TID), FAST, lambda: pytest.fail("ran without the lock"), gone=lambda: True)
    assert taken.without is not None and taken.without.kind == "replaced" and not taken.held


def test_take_and_run_with_locking_off_just_runs(layout: Layout) -> None:
    ran: list[bool] = []
    assert take_and_run(
        layout, tree_key(TID), FAST._replace(enabled=False), lambda: ran.append(True), lambda: True
    ).held
    assert ran == [True] and not Path(layout.path("locks")).exists()


def test_a_taken_is_one_of_three() -> None:
    assert [HELD.held, PEER_FINISHED.peer_finished, NOT_TAKEN.held or NOT_TAKEN.peer_finished] == [True, True, False]
    with pytest.raises(AssertionError):
        Taken(held=True, peer_finished=True)
