"""The lock's wait strategy, driven by a fake clock and a fake lock: when it tries the lock, when it only looks,
when it gives up, and that a peer's publish ends the wait. No process, no filesystem, no real waiting."""

from __future__ import annotations

import pytest

from repoinstall._errors import LockTimeout
from repoinstall._lock.taken import HELD, PEER_FINISHED, Taken
from repoinstall._lock.wait import _BEATS, _LOOK_MAX, _RETRY, _TREE_EVERY, wait_and_take
from repoinstall._options import LockSettings


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
    """A lock held by a peer until ``free_at`` (clock time), its note there while it is held and touched
    _BEATS times a heartbeat until ``dies_at``; ``taken_at``: when an attempt succeeds (filelock's own verdict)."""

    path = "locks/env/demo/demo-1.0.lock"

    def __init__(
        self,
        clock: FakeClock,
        free_at: float,
        *,
        note: bool = True,
        dies_at: float = float("inf"),
        taken_at: float | None = None,
        heartbeat: float = 2.0,
    ) -> None:
        self.clock = clock
        self.free_at = free_at
        self.note = note
        self.dies_at = dies_at
        self.taken_at = free_at if taken_at is None else taken_at
        self.touch = heartbeat / _BEATS
        self.attempts: list[float] = []
        self.looks: list[float] = []
        self.beats: list[float] = []

    def attempt(self) -> bool:
        self.attempts.append(self.clock.time)
        return self.clock.time >= self.taken_at

    def note_seen(self) -> bool:
        self.looks.append(self.clock.time)
        return self.note and self.clock.time < self.free_at

    def note_beat(self) -> int | None:
        self.beats.append(self.clock.time)
        if not self.note or self.clock.time >= self.free_at:
            return None
        return int(min(self.clock.time, self.dies_at) / self.touch)

    def holder(self) -> str:
        return "held by pod-a pid 7 for 3s"


SETTINGS = LockSettings(stale_after=8.0, heartbeat=2.0, wait_timeout=60.0)
DEFAULTS = LockSettings()  # 120 s stale, 20 s heartbeat


def wait(lock: FakeLock, settings: LockSettings = SETTINGS, **kwargs: object) -> Taken:
    return wait_and_take(lock, settings, clock=lock.clock, announce=False, jitter=lambda: 0.5, **kwargs)  # type: ignore[arg-type]


def test_a_free_lock_is_taken_at_once_without_sleeping() -> None:
    clock = FakeClock()
    lock = FakeLock(clock, free_at=0.0)
    assert wait(lock) == HELD
    assert lock.attempts == [1000.0]
    assert clock.slept == []


def test_a_live_holder_is_never_tried_and_its_release_is_taken_within_one_look() -> None:
    clock = FakeClock()
    lock = FakeLock(clock, free_at=1030.0)  # alive and touching its note for 30 s
    assert wait(lock) == HELD
    assert len(lock.attempts) == 1  # filelock's lock is left alone while the holder touches its note
    assert 1030.0 <= lock.attempts[0] <= 1030.0 + _LOOK_MAX + 1e-9


def test_a_dead_holder_is_taken_over_within_stale_plus_a_heartbeat() -> None:
    clock = FakeClock()
    died = 1040.0
    lock = FakeLock(clock, free_at=9999.0, dies_at=died, taken_at=died + DEFAULTS.stale_after, heartbeat=20.0)
    assert wait(lock, DEFAULTS) == HELD
    assert not [t for t in lock.attempts if t < died]
    # filelock sees the record from within half a heartbeat of the death, so it judges it stale in time.
    assert lock.attempts[0] - died <= DEFAULTS.heartbeat * 3 / _BEATS + _LOOK_MAX
    assert lock.attempts[-1] - died <= DEFAULTS.stale_after + DEFAULTS.heartbeat


def test_a_waiting_pod_costs_under_one_look_a_second() -> None:
    clock = FakeClock()
    lock = FakeLock(clock, free_at=1600.0, heartbeat=20.0)
    assert wait(lock, DEFAULTS) == HELD
    settled = [t for t in lock.looks + lock.beats if 1010.0 <= t < 1600.0]
    assert len(settled) / (1600.0 - 1010.0) < 1.0  # each a metadata operation on NFS (a beat: two on NFSv4)
    assert len(lock.attempts) == 1


def test_without_a_note_a_waiter_retries_no_more_than_every_retry_gap() -> None:
    clock = FakeClock()
    lock = FakeLock(clock, free_at=1005.0, note=False)  # a holder that wrote no note (or one we cannot read)
    assert wait(lock) == HELD
    gaps = [b - a for a, b in zip(lock.attempts, lock.attempts[1:], strict=False)]
    assert min(gaps) >= _RETRY - 1e-9, gaps
    assert lock.attempts[-1] - 1005.0 <= _LOOK_MAX


def test_a_publish_and_release_end_the_wait_within_one_look() -> None:
    clock = FakeClock()
    lock = FakeLock(clock, free_at=1043.0, heartbeat=20.0)  # the holder publishes, then releases: its note goes
    taken = wait(lock, DEFAULTS, ready=lambda: clock.time >= 1043.0)
    assert taken == PEER_FINISHED
    assert clock.time - 1043.0 <= _LOOK_MAX + 1e-9


def test_a_publish_by_a_pod_without_the_lock_is_seen_while_the_note_stays() -> None:
    clock = FakeClock()
    lock = FakeLock(clock, free_at=5000.0, heartbeat=20.0)
    taken = wait(lock, DEFAULTS, ready=lambda: clock.time >= 1043.0)
    assert taken == PEER_FINISHED
    assert clock.time - 1043.0 <= _TREE_EVERY * _LOOK_MAX + 1e-9


def test_the_wait_gives_up_at_the_timeout_naming_the_holder() -> None:
    clock = FakeClock()
    lock = FakeLock(clock, free_at=5000.0)
    with pytest.raises(LockTimeout) as raised:
        wait(lock, SETTINGS._replace(wait_timeout=5.0))
    assert clock.time == pytest.approx(1005.0)
    assert "gave up after 5s waiting for locks/env/demo/demo-1.0.lock: held by pod-a pid 7" in str(raised.value)


def test_a_zero_wait_timeout_tries_once() -> None:
    clock = FakeClock()
    lock = FakeLock(clock, free_at=5000.0)
    with pytest.raises(LockTimeout):
        wait(lock, SETTINGS._replace(wait_timeout=0.0))
    assert lock.attempts == [1000.0]


def test_a_waiter_says_it_still_waits_every_thirty_seconds(caplog: pytest.LogCaptureFixture) -> None:
    import logging

    clock = FakeClock()
    lock = FakeLock(clock, free_at=1095.0, heartbeat=20.0)
    with caplog.at_level(logging.INFO, "repoinstall"):
        assert wait_and_take(lock, DEFAULTS, clock=clock, jitter=lambda: 0.5) == HELD
    lines = [r.getMessage() for r in caplog.records]
    assert lines[0] == f"waiting for {lock.path}: held by pod-a pid 7 for 3s"
    still = [line for line in lines if line.startswith("still waiting for")]
    assert len(still) == 3 and "after 30s" in still[0] and "after 90s" in still[-1], lines
