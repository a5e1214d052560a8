"""The lock's wait strategy, driven by a fake clock and a fake lock: when it tries the lock, when it only looks,
when it gives up, and that a peer's publish ends the wait. No process, no filesystem, no real waiting."""

from __future__ import annotations

import pytest

from repoinstall._errors import LockTimeout
from repoinstall._options import LockSettings
from repoinstall._store.lock import wait_and_take


class FakeClock:
    def __init__(self) -> None:
        self.time = 1000.0
        self.slept: list[float] = []

    def now(self) -> float:
        return self.time

    def sleep(self, seconds: float) -> None:
        self.slept.append(seconds)
        self.time += seconds


class FakeLock:
    """A lock held by a peer until ``free_at`` (clock time); its note is there while it is held."""

    path = "locks/env/demo/demo-1.0.lock"

    def __init__(self, clock: FakeClock, free_at: float, *, note: bool = True) -> None:
        self.clock = clock
        self.free_at = free_at
        self.note = note
        self.attempts: list[float] = []

    def attempt(self) -> bool:
        self.attempts.append(self.clock.time)
        return self.clock.time >= self.free_at

    def note_seen(self) -> bool:
        return self.note and self.clock.time < self.free_at

    def holder(self) -> str:
        return "held by pod-a pid 7 for 3s"


SETTINGS = LockSettings(stale_after=8.0, heartbeat=2.0, wait_timeout=60.0)


def test_a_free_lock_is_taken_at_once_without_sleeping() -> None:
    clock = FakeClock()
    lock = FakeLock(clock, free_at=0.0)
    assert wait_and_take(lock, SETTINGS, clock=clock, announce=False) is True
    assert lock.attempts == [1000.0]
    assert clock.slept == []


def test_with_a_holders_note_the_waiter_only_looks_until_half_a_heartbeat() -> None:
    clock = FakeClock()
    lock = FakeLock(clock, free_at=1030.0)  # held for 30 s, its note there all along
    assert wait_and_take(lock, SETTINGS, clock=clock, announce=False) is True
    # The first attempt after half a heartbeat, then one per quarter heartbeat (to see a dead holder go stale),
    # and at once when the note goes: never every look.
    assert lock.attempts[0] == pytest.approx(1001.0)
    gaps = [b - a for a, b in zip(lock.attempts, lock.attempts[1:], strict=False)]
    assert all(gap >= 0.5 - 1e-9 for gap in gaps), gaps
    assert lock.attempts[-1] == pytest.approx(1030.0, abs=0.11)
    assert len(lock.attempts) <= 30 / 0.5 + 2


def test_without_a_note_a_waiter_retries_no_more_than_every_retry_gap() -> None:
    clock = FakeClock()
    lock = FakeLock(clock, free_at=1005.0, note=False)  # a holder that wrote no note (or one we cannot read)
    assert wait_and_take(lock, SETTINGS, clock=clock, announce=False) is True
    gaps = [b - a for a, b in zip(lock.attempts, lock.attempts[1:], strict=False)]
    assert min(gaps) >= 0.25 - 1e-9, gaps
    assert lock.attempts[-1] - 1005.0 < 0.5


def test_a_peers_publish_ends_the_wait_without_taking_the_lock() -> None:
    clock = FakeClock()
    lock = FakeLock(clock, free_at=2000.0)
    published_at = 1003.0
    taken = wait_and_take(lock, SETTINGS, ready=lambda: clock.time >= published_at, clock=clock, announce=False)
    assert taken is False
    assert clock.time - published_at <= 0.1 + 1e-9  # noticed within one look


def test_the_wait_gives_up_at_the_timeout_naming_the_holder() -> None:
    clock = FakeClock()
    lock = FakeLock(clock, free_at=5000.0)
    with pytest.raises(LockTimeout) as raised:
        wait_and_take(lock, SETTINGS._replace(wait_timeout=5.0), clock=clock, announce=False)
    assert clock.time == pytest.approx(1005.0)
    assert "gave up after 5s waiting for locks/env/demo/demo-1.0.lock: held by pod-a pid 7" in str(raised.value)


def test_a_zero_wait_timeout_tries_once() -> None:
    clock = FakeClock()
    lock = FakeLock(clock, free_at=5000.0)
    with pytest.raises(LockTimeout):
        wait_and_take(lock, SETTINGS._replace(wait_timeout=0.0), clock=clock, announce=False)
    assert lock.attempts == [1000.0]
