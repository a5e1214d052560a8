"""How a waiter waits for a lock on the shared volume: when it looks at the holder's owner note, when it reads the
note's heartbeat touches, when it tries the lock itself, and when it says it still waits.

The strategy sees a lock only as a :class:`Contender` and time only through a :class:`Clock`, so it is tested on a
fake clock without waiting (and without filelock). Waiting costs the server little: a fleet of waiters costs it
under one metadata operation per pod per second. The lock only saves duplicate work: the rename that publishes a
tree is the commit point.
"""

from __future__ import annotations

import math
import random
import time
from typing import TYPE_CHECKING, Protocol

from .. import _log, _stop
from .._errors import LockTimeout
from .._options import LockSettings
from .taken import HELD, PEER_FINISHED, Taken

if TYPE_CHECKING:
    from collections.abc import Callable

#: A waiter looks (is the holder's note still there?) first after _LOOK_FIRST seconds, then at intervals that grow
#: by _LOOK_GROWTH up to _LOOK_MAX, each shortened by up to a quarter at random so a fleet that started together
#: spreads out. A look is one or two metadata operations on NFS: a fleet of waiters costs the server about one op
#: per pod per second, and each notices a publish (or a release) within _LOOK_MAX.
_LOOK_FIRST, _LOOK_GROWTH, _LOOK_MAX = 0.1, 1.5, 2.5
#: Every this many looks, a waiter also looks at the tree itself (a pod without the lock may have published it).
_TREE_EVERY = 8
#: A holder touches its owner note this many times a heartbeat, and a waiter reads the touch as often: while the
#: note's mtime moves the holder is alive, and the waiter leaves filelock's lock alone (an attempt reads the
#: lock's log: dozens of metadata operations on NFS). Once the mtime has not moved for two touches, the waiter
#: tries the lock once a quarter heartbeat, so filelock sees a dead holder's record from then on.
_BEATS = 4
#: The shortest gap between two attempts on the lock while no holder's note is seen.
_RETRY = 0.25
#: A waiter says it still waits this often (what ``kubectl logs`` shows of a pod waiting on a peer's install).
_SAY_EVERY = 30.0


class Clock(Protocol):
    """Monotonic time and sleeping, injectable so the wait strategy can be tested without waiting."""

    def now(self) -> float: ...

    def sleep(self, seconds: float) -> None: ...


class _SystemClock:
    def now(self) -> float:
        return time.monotonic()

    def sleep(self, seconds: float) -> None:
        _stop.sleep(seconds)  # a wait ends (Interrupted) as soon as this thread's batch or the process stops


SYSTEM_CLOCK: Clock = _SystemClock()


class Contender(Protocol):
    """One lock as a waiter sees it: one attempt that never waits, the holder's note, who holds it."""

    path: str

    def attempt(self) -> bool: ...

    def note_seen(self) -> bool: ...

    def note_beat(self) -> int | None: ...

    def holder(self) -> str: ...


def wait_and_take(
    lock: Contender,
    settings: LockSettings,
    *,
    ready: Callable[[], bool] | None = None,
    clock: Clock = SYSTEM_CLOCK,
    announce: bool = True,
    jitter: Callable[[], float] = random.random,
) -> Taken:
    """Take the lock, waiting up to the wait timeout: held once taken, or a peer finished if ``ready()`` came true
    while waiting (the lock is not taken); :class:`LockTimeout` after the wait timeout.

    The lock is tried at once unless a holder's note is there. While it is, the waiter looks at the note, backing
    off to one look every _LOOK_MAX seconds (one metadata operation on NFS), and reads the note's mtime _BEATS
    times a heartbeat: while the holder keeps touching it, the waiter does not try the lock; once the touches stop
    for two beats (a dead or paused holder, or one of a version that does not touch), it tries the lock every
    _BEATS-th of a heartbeat until filelock has seen the holder's record unchanged for the stale threshold. It
    tries at once when the note goes (the holder released: published, or failed), and looks at the tree
    (``ready``) then and every _TREE_EVERY looks. So a dead holder is taken over within the stale threshold plus
    about one heartbeat of its death, a finished peer's tree ends the wait within about _LOOK_MAX, and a fleet of
    waiters costs the server under one metadata operation per pod per second. The lock only saves duplicate
    work: the rename is the commit point.
    """
    started = clock.now()
    deadline = started + settings.wait_timeout
    beat_every = settings.heartbeat / _BEATS
    # A note means a live holder (or a dead one, which takes the stale threshold anyway): no attempt yet.
    defer = settings.wait_timeout > beat_every and lock.note_seen()
    next_try = math.inf if defer else started
    beat, beat_moved, next_beat = lock.note_beat() if defer else None, started, started + beat_every
    interval = _LOOK_FIRST
    looks = 0
    last_try = -_RETRY
    logged, said = False, started
    holder = ""  # who held it when last looked at, for the event that ends a wait that was said
    drawn: _log.Phase | None = None  # the wait, once said, as a terminal draws it live
    while True:
        if clock.now() >= next_try:
            if lock.attempt():
                return _waited(HELD, "taken", lock, holder, clock.now() - started, drawn) if logged else HELD
            last_try = clock.now()
            suspect = lock.note_seen() and clock.now() - beat_moved > 2 * beat_every
            next_try = last_try + (beat_every if suspect else math.inf if lock.note_seen() else max(_RETRY, interval))
        if announce and not logged:
            holder = lock.holder()
            _log.logger().info("waiting for %s: %s", lock.path, holder)
            logged, said = True, clock.now()
            drawn = _log.Phase("lock.waited", f"waiting for {lock.path}: {holder}", "", None, "")
            _log.shown(drawn)  # the wait, live on a terminal
        elif announce and clock.now() - said >= _SAY_EVERY:
            waited, holder = clock.now() - started, lock.holder()
            _log.logger().info("still waiting for %s after %.0fs: %s", lock.path, waited, holder)
            said = clock.now()
        if clock.now() >= deadline:
            if logged:
                _waited(HELD, "timed out", lock, holder, clock.now() - started, drawn)
            raise LockTimeout(f"gave up after {settings.wait_timeout:g}s waiting for {lock.path}: {lock.holder()}")
        clock.sleep(max(0.0, min(interval * (1 - jitter() / 4), next_beat - clock.now(), deadline - clock.now())))
        interval = min(_LOOK_MAX, interval * _LOOK_GROWTH)
        looks += 1
        released = not lock.note_seen()
        if ready is not None and (released or looks % _TREE_EVERY == 0) and ready():
            return (
                _waited(PEER_FINISHED, "a peer finished", lock, holder, clock.now() - started, drawn)
                if logged
                else PEER_FINISHED
            )
        if released:
            next_try = min(next_try, max(clock.now(), last_try + _RETRY))
        if clock.now() >= next_beat:
            next_beat = clock.now() + beat_every
            if not released and (seen := lock.note_beat()) != beat:
                beat, beat_moved = seen, clock.now()
            elif not released and clock.now() - beat_moved > 2 * beat_every:
                next_try = min(next_try, clock.now())  # the touches stopped: let filelock judge the holder


def _waited(
    taken: Taken, outcome: str, lock: Contender, holder: str, seconds: float, drawn: _log.Phase | None
) -> Taken:
    """``taken``, once the event ending a wait that was said is logged (``lock.waited``): for how long, which lock,
    how it ended (``outcome``) and who held it when last looked at; ``drawn``, the wait as a terminal shows it live,
    ended. (A wait that raises, stopped, leaves its line until the command's display closes, as it ends.)"""
    if drawn is not None:
        _log.shown(drawn, ended=True)
    _log.emit(
        "lock.waited",
        "waited %.1fs for %s (%s): %s",
        seconds,
        lock.path,
        outcome,
        holder,
        seconds=round(seconds, 3),
        lock=lock.path,
        outcome=outcome,
        holder=holder,
    )
    return taken
