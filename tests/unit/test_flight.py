"""Single-flight: threads asking for the same key share one run, its result and its exception."""

from __future__ import annotations

import threading

import pytest

from repoinstall._install.flight import SingleFlight


def _waiting_on(flights: SingleFlight[int], key: str, count: int) -> None:
    """Wait until ``count`` callers are blocked on the running flight's outcome (its condition's waiters)."""
    future = flights._running[key]
    for _ in range(1000):
        if len(future._condition._waiters) >= count:  # type: ignore[attr-defined]
            return
        threading.Event().wait(0.01)
    raise AssertionError(f"{count} callers never joined the flight")


def test_callers_during_a_run_share_it() -> None:
    flights: SingleFlight[int] = SingleFlight()
    started, release = threading.Event(), threading.Event()
    runs: list[str] = []

    def work() -> int:
        runs.append(threading.current_thread().name)
        started.set()
        release.wait(10)
        return 42

    results: list[tuple[int, bool]] = []
    leader = threading.Thread(target=lambda: results.append(flights.run("tree", work)))
    leader.start()
    assert started.wait(10)
    followers = [threading.Thread(target=lambda: results.append(flights.run("tree", work))) for _ in range(5)]
    for thread in followers:
        thread.start()
    _waiting_on(flights, "tree", 5)
    release.set()
    for thread in [leader, *followers]:
        thread.join(10)
    assert runs == [leader.name]
    assert sorted(results) == [(42, False), *[(42, True)] * 5]


def test_an_exception_reaches_the_leader_and_the_callers_that_joined() -> None:
    flights: SingleFlight[int] = SingleFlight()
    started, release = threading.Event(), threading.Event()

    def work() -> int:
        started.set()
        release.wait(10)
        raise ValueError("pip failed")

    errors: list[str] = []

    def call() -> None:
        try:
            flights.run("tree", work)
        except ValueError as error:
            errors.append(str(error))

    leader = threading.Thread(target=call)
    leader.start()
    assert started.wait(10)
    follower = threading.Thread(target=call)
    follower.start()
    _waiting_on(flights, "tree", 1)  # it waits on the leader's outcome, not running work itself
    release.set()
    leader.join(10)
    follower.join(10)
    assert errors == ["pip failed", "pip failed"]


def test_a_caller_after_the_run_runs_again() -> None:
    flights: SingleFlight[int] = SingleFlight()
    calls = iter([1, 2])
    assert flights.run("tree", lambda: next(calls)) == (1, False)
    assert flights.run("tree", lambda: next(calls)) == (2, False)


def test_different_keys_do_not_share() -> None:
    flights: SingleFlight[str] = SingleFlight()
    assert flights.run("a", lambda: "a") == ("a", False)
    assert flights.run("b", lambda: "b") == ("b", False)


def test_a_failed_run_is_not_remembered() -> None:
    flights: SingleFlight[int] = SingleFlight()
    with pytest.raises(RuntimeError):
        flights.run("tree", lambda: (_ for _ in ()).throw(RuntimeError("once")))
    assert flights.run("tree", lambda: 3) == (3, False)
