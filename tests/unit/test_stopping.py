"""Stopping as one: a batch interrupted in its waiting thread drops what it has not started and ends its work at
once; a scope's stop kills its installers (and only its own), including one that starts while it stops; waits
of an install end. Real threads, real processes, real signals; the process-wide scope is never stopped here."""

from __future__ import annotations

import asyncio
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from functools import partial
from pathlib import Path

import pytest

from repoinstall import _stop
from repoinstall._batch import Batch
from repoinstall._errors import Interrupted
from repoinstall._install.flight import SingleFlight

BENCH = Path(__file__).parents[2] / "bench"


@pytest.fixture
def alarm() -> Iterator[None]:
    """SIGALRM raises KeyboardInterrupt in the main thread, as Ctrl-C does."""

    def interrupt(signum: int, frame: object) -> None:
        raise KeyboardInterrupt

    before = signal.signal(signal.SIGALRM, interrupt)
    yield
    signal.setitimer(signal.ITIMER_REAL, 0)
    signal.signal(signal.SIGALRM, before)


def test_a_batch_returns_every_result_in_order() -> None:
    def task(i: int) -> int:
        time.sleep(0.001 * (i % 3))
        return i

    assert Batch([partial(task, i) for i in range(50)], 4).run() == list(range(50))
    assert Batch([], 4).run() == []


def test_a_task_that_raises_ends_the_batch_and_its_error_is_raised() -> None:
    ran: list[int] = []

    def task(i: int) -> int:
        ran.append(i)
        if i == 3:
            raise ValueError("a bug")
        return i

    with pytest.raises(ValueError, match="a bug"):
        Batch([partial(task, i) for i in range(1000)], 2).run()
    assert len(ran) < 10  # no task is taken after it


def test_an_interrupted_wait_stops_the_batch_at_once(alarm: None) -> None:
    started: list[int] = []

    def task(i: int) -> None:
        started.append(i)
        _stop.sleep(30)  # a lock wait, say: ends with Interrupted once the batch stops

    batch = Batch([partial(task, i) for i in range(20_000)], 4)
    signal.setitimer(signal.ITIMER_REAL, 0.3)
    begun = time.monotonic()
    with pytest.raises(KeyboardInterrupt):
        batch.run()
    assert time.monotonic() - begun < 3  # behaviour, not speed: far from the 30s each task would have slept
    assert not batch.alive()  # every worker left before the interrupt went on
    assert sorted(started) == [0, 1, 2, 3]  # nothing queued was started


def test_cancelling_an_async_batch_stops_it() -> None:
    started: list[int] = []

    def task(i: int) -> None:
        started.append(i)
        _stop.sleep(30)

    batch = Batch([partial(task, i) for i in range(1000)], 2)

    async def scenario() -> None:
        with pytest.raises(TimeoutError):
            await asyncio.wait_for(batch.arun(), 0.3)

    begun = time.monotonic()
    asyncio.run(scenario())
    assert time.monotonic() - begun < 3
    assert not batch.alive() and sorted(started) == [0, 1]


def _in_scope(scope: _stop.Scope, work: Callable[[], object]) -> threading.Thread:
    """Run ``work`` on a new thread that belongs to ``scope``, as a batch's worker does."""

    def body() -> None:
        _stop.enter(scope)
        work()

    thread = threading.Thread(target=body)
    thread.start()
    return thread


def _sleeper() -> subprocess.Popen[bytes]:
    return subprocess.Popen(["sleep", "60"])


def _register(procs: dict[str, subprocess.Popen[bytes]], name: str) -> None:
    procs[name] = _sleeper()
    _stop.started(procs[name])


def test_a_stop_kills_the_installers_of_its_scope_and_no_other() -> None:
    mine, theirs = _stop.Scope(), _stop.Scope()
    procs: dict[str, subprocess.Popen[bytes]] = {}
    for name, scope in (("mine", mine), ("theirs", theirs)):
        _in_scope(scope, partial(_register, procs, name)).join()
    try:
        mine.stop()
        assert procs["mine"].wait(10) == -signal.SIGKILL
        assert procs["theirs"].poll() is None
    finally:
        for proc in procs.values():
            proc.kill()
            proc.wait()
            _stop.ended(proc)


def test_an_installer_that_starts_as_its_scope_stops_is_killed_at_once() -> None:
    # The interleaving that a check before Popen alone would miss: the check passed, then the stop came.
    scope = _stop.Scope()
    got: list[subprocess.Popen[bytes]] = []

    def start_late() -> None:
        _stop.check()  # not stopped yet
        proc = _sleeper()
        scope.stop()  # ... and now it is, before the installer was registered
        _stop.started(proc)
        got.append(proc)

    _in_scope(scope, start_late).join()
    try:
        assert got[0].wait(10) == -signal.SIGKILL
    finally:
        _stop.ended(got[0])


def test_a_thread_waiting_for_a_shared_install_stops_waiting_when_its_batch_stops() -> None:
    flights: SingleFlight[int] = SingleFlight()
    leading, release = threading.Event(), threading.Event()

    def lead() -> int:
        leading.set()
        release.wait(30)
        return 1

    leader = threading.Thread(target=lambda: flights.run("tree", lead))
    leader.start()
    assert leading.wait(10)
    scope = _stop.Scope()
    outcome: list[object] = []

    def follow() -> None:
        try:
            outcome.append(flights.run("tree", lambda: 2))
        except Interrupted as error:
            outcome.append(error)

    follower = _in_scope(scope, follow)
    time.sleep(0.2)
    begun = time.monotonic()
    scope.stop()
    follower.join(10)
    assert isinstance(outcome[0], Interrupted) and time.monotonic() - begun < 3
    release.set()
    leader.join(10)


def test_the_warm_path_loads_none_of_it(tmp_path: Path) -> None:
    # Everything present: checked on the calling thread, with no worker, no stop state and no signal work.
    probe = f"""
import sys
sys.path.insert(0, {str(BENCH)!r})
from pathlib import Path
from warm import populate
from repoinstall import Repo
specs = populate(Path({str(tmp_path / "repo")!r}), 3)
with Repo({str(tmp_path / "repo")!r}) as repo:
    assert {{r.action for r in repo.ensure_all(specs)}} == {{"present"}}
    assert repo.ensure(specs[0]).action == "present"
print(sorted(m for m in sys.modules if m in ("repoinstall._stop", "repoinstall._batch", "concurrent.futures")))
"""
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True)
    assert done.stdout.strip() == "[]"
