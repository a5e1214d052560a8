"""The async API never blocks the event loop, proven without a clock: every answer of the index (its pages and its
downloads) is held back until the loop has ticked a few times since the request came in. A call that blocks the
loop while it waits for such an answer stops the ticks, so the answer never comes: the gate then gives up after
``WATCHDOG`` seconds (the deadlock breaker) and records it, and the test fails. Also: what cancelling an ``aensure``
does to its install and its lock, and that the engines' ensures stay off the loop's default executor."""

from __future__ import annotations

import asyncio
import subprocess
import sys
import threading
from collections.abc import Awaitable, Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import TypeVar

import pytest
from helpers import isolated_env
from indexserver import IndexServer

from repoinstall import EnsureResult, InstallOptions, Repo
from repoinstall._repo import _lock_request
from repoinstall._workers import Packages

T = TypeVar("T")
#: Loop ticks each held answer waits for.
TICKS = 3
CLI_INDEX = ("--no-index", "--find-links")
#: How long a held answer waits for those ticks before it goes anyway, recorded as stalled: below the index client's
#: 15 s timeout, so a call that blocks the loop gets its answer late, and the test fails on the record.
WATCHDOG = 10.0


class LoopGate:
    """Holds each answer of the index until the loop's ticker (:func:`ticking`) has ticked ``TICKS`` times since the
    request came in. Called on the server's threads; the ticks come from the loop."""

    def __init__(self) -> None:
        self._ticked = threading.Condition()
        self.ticks = 0
        #: Answers held back, in all; those the loop never let go (it was blocked), by what was asked.
        self.held = 0
        self.stalled: list[str] = []
        #: Events to set once the loop has ticked so far: (tick, event).
        self._later: list[tuple[int, threading.Event]] = []

    def tick(self) -> None:
        with self._ticked:
            self.ticks += 1
            for due, event in self._later:
                if self.ticks >= due:
                    event.set()
            self._ticked.notify_all()

    def hold(self, what: str) -> None:
        with self._ticked:
            self.held += 1
            due = self.ticks + TICKS
            if not self._ticked.wait_for(lambda: self.ticks >= due, WATCHDOG):
                self.stalled.append(what)

    def set_after_ticks(self, event: threading.Event) -> None:
        """Set ``event`` once the loop has ticked ``TICKS`` more times."""
        with self._ticked:
            self._later.append((self.ticks + TICKS, event))

    def check(self) -> None:
        assert self.held > 0, "no answer of the index went through the gate: the test proved nothing"
        assert not self.stalled, f"the event loop was blocked while these were asked for: {self.stalled}"


async def ticking(gate: LoopGate, awaitable: Awaitable[T]) -> T:
    """Await ``awaitable`` while a task on the same loop ticks ``gate`` every 10 ms."""
    done = asyncio.Event()

    async def ticker() -> None:
        while not done.is_set():
            gate.tick()
            await asyncio.sleep(0.01)

    task = asyncio.create_task(ticker())
    try:
        return await awaitable
    finally:
        done.set()
        await task


@pytest.fixture
def gate(index: IndexServer) -> Iterator[LoopGate]:
    """Every page and download of ``index`` held until the loop ticked."""
    held = LoopGate()
    index.before_page = held.hold
    index.before_download = held.hold
    yield held
    index.before_page = index.before_download = None


def make_repo(path: Path, index: IndexServer, **kwargs: object) -> Repo:
    options = InstallOptions(find_links=(index.url,), no_index=True)
    return Repo(path, install=options, stale_after=5, heartbeat=1, **kwargs)  # type: ignore[arg-type]


def hashed_requirements(tmp_path: Path, index: IndexServer, *pins: str) -> Path:
    """A requirements file of ``name==version --hash=sha256:...`` lines for the index's wheels (pip-compile's
    ``--generate-hashes`` output): ensuring it looks each pin's artifact up on the index first."""
    lines = []
    for pin in pins:
        name, version = pin.split("==")
        (wheel,) = [p for p in index.files(name) if p.name.split("-")[1] == version]
        lines.append(f"{pin} --hash=sha256:{index.sha256(wheel)}")
    path = tmp_path / "locked.txt"
    path.write_text("\n".join(lines) + "\n")
    return path


def no_lock_held(repo: Path, index: IndexServer) -> None:
    with make_repo(repo, index) as r:
        held = [info for info in r.locks() if info.held]
    assert not held, held
    assert not list((repo / "staging").rglob("owner.json"))


# ---- each async entry point, the loop ticking through it -------------------------------------------------------


def test_aensure_lock_of_a_hashed_requirements_file(tmp_path: Path, index: IndexServer, gate: LoopGate) -> None:
    # The issue's case: the pins' artifacts are looked up on the index before anything is chosen.
    locked = hashed_requirements(tmp_path, index, "adaptor-b==1.0", "dep-c==1.0")
    with make_repo(tmp_path / "repo", index) as r:
        result = asyncio.run(ticking(gate, r.aensure_lock(str(locked))))
    assert result.action == "installed" and result.name.startswith("locked-")
    gate.check()


def test_aensure_and_aresolve(tmp_path: Path, index: IndexServer, gate: LoopGate) -> None:
    locked = hashed_requirements(tmp_path, index, "adaptor-a==1.0")
    with make_repo(tmp_path / "repo", index) as r:

        async def scenario() -> tuple[EnsureResult, object, EnsureResult]:
            # First, while the index cache is empty: the lock's artifact looked up on the index.
            from_lock = await r.aensure(_lock_request(str(locked), None))
            resolved = await r.aresolve("adaptor-a>=1.1")  # the index asked which version
            return from_lock, resolved, await r.aensure("adaptor-a>=1.1")

        from_lock, resolved, ranged = asyncio.run(ticking(gate, scenario()))
    assert str(resolved).endswith("adaptor-a==2.0")
    assert (ranged.version, ranged.action) == ("2.0", "installed")
    assert from_lock.action == "installed" and from_lock.name.startswith("locked-")
    gate.check()


def test_aensure_all(tmp_path: Path, index: IndexServer, gate: LoopGate) -> None:
    locked = hashed_requirements(tmp_path, index, "adaptor-d==1.0")
    with make_repo(tmp_path / "repo", index) as r:
        specs = [_lock_request(str(locked), None), "adaptor-e>=1", "adaptor-f==1.0"]
        results = asyncio.run(ticking(gate, r.aensure_all(specs)))
    assert [x.action for x in results] == ["installed"] * 3
    gate.check()


def test_a_lock_held_by_another_process_is_waited_for_off_the_loop(
    tmp_path: Path, index: IndexServer, gate: LoopGate
) -> None:
    # Another process installs the tree; its download is let go only once this loop has ticked, after our ensure
    # started waiting for its lock.
    repo = tmp_path / "repo"
    let_go = threading.Event()
    index.holds["slow_pkg"] = let_go
    holder = subprocess.Popen(
        [sys.executable, "-m", "repoinstall", "ensure", "slow-pkg==1.0", "--repo", str(repo), *CLI_INDEX, index.url],
        env=isolated_env(),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    try:

        async def scenario(r: Repo) -> EnsureResult:
            while not index.downloading("slow_pkg"):
                await asyncio.sleep(0.01)  # the other process is installing, under the tree's lock
            task = asyncio.create_task(r.aensure("slow-pkg==1.0"))
            gate.set_after_ticks(let_go)
            return await task

        with make_repo(repo, index, wait_timeout=WATCHDOG) as r:
            result = asyncio.run(ticking(gate, scenario(r)))
        assert holder.wait(timeout=60) == 0
    finally:
        let_go.set()
        holder.kill()
        holder.wait()
    assert result.action in ("waited", "present") and result.path is not None
    gate.check()


# ---- cancelling --------------------------------------------------------------------------------------------------


def test_a_cancelled_aensure_lets_its_install_finish_and_release_the_lock(
    tmp_path: Path, index: IndexServer, gate: LoopGate
) -> None:
    # Cancelling ends the task's wait at once; the install it started publishes whole, then its lock is released.
    # Leaving ``async with`` waits for it without blocking the loop: its download goes on only once the loop ticked.
    repo = tmp_path / "repo"
    locked = hashed_requirements(tmp_path, index, "slow-pkg==1.0")
    let_go = threading.Event()
    stalled: list[str] = []

    def download(name: str) -> None:
        if not let_go.wait(WATCHDOG):
            stalled.append(name)

    index.before_download = download

    async def scenario() -> None:
        async with make_repo(repo, index) as r:
            task = asyncio.create_task(r.aensure_lock(str(locked)))
            while not index.downloading("slow_pkg"):
                await asyncio.sleep(0.01)  # the installer is downloading, under the tree's lock
            task.cancel()
            with pytest.raises(asyncio.CancelledError):
                await task
            assert [info.held for info in await asyncio.to_thread(r.locks)] == [True]  # the install goes on
            gate.set_after_ticks(let_go)

    asyncio.run(ticking(gate, scenario()))
    assert not stalled, "leaving `async with` blocked the loop"
    # Published whole, lock released, no staging left.
    no_lock_held(repo, index)
    with make_repo(repo, index) as r:
        assert r.ensure_lock(str(locked)).action == "present"
        assert [report.ok for report in r.verify()] == [True]
    assert index.downloads("slow_pkg") == 1
    gate.check()


def test_a_cancelled_aensure_all_stops_its_install_and_releases_the_lock(tmp_path: Path, index: IndexServer) -> None:
    # Cancelling a batch stops it: its installer killed, its staging removed, its lock released; nothing published.
    repo = tmp_path / "repo"
    locked = hashed_requirements(tmp_path, index, "slow-pkg==1.0")
    let_go = threading.Event()
    index.holds["slow_pkg"] = let_go

    async def scenario(r: Repo) -> None:
        task = asyncio.create_task(r.aensure_all([_lock_request(str(locked), None)]))
        while not index.downloading("slow_pkg"):
            await asyncio.sleep(0.01)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task

    try:
        with make_repo(repo, index) as r:
            asyncio.run(scenario(r))
        no_lock_held(repo, index)
        with make_repo(repo, index) as r:
            assert r.list() == []  # nothing published
    finally:
        let_go.set()
    with make_repo(repo, index) as r:
        assert r.ensure_lock(str(locked)).action == "installed"


# ---- the engines' async paths -----------------------------------------------------------------------------------


def _with_busy_default_executor(awaitable: Awaitable[T]) -> T:
    """Await ``awaitable`` on a loop whose default executor has one thread, kept busy until it is done: work queued
    there (``run_in_executor(None, ...)``, ``asyncio.to_thread``) would wait for it, which waits for the watchdog
    and then fails the test."""

    async def scenario() -> T:
        loop = asyncio.get_running_loop()
        loop.set_default_executor(ThreadPoolExecutor(max_workers=1))
        finished = threading.Event()
        busy = loop.run_in_executor(None, finished.wait, WATCHDOG)
        try:
            result = await awaitable
        finally:
            finished.set()
        assert await busy, "the loop's default executor ran repoinstall's work"
        return result

    return asyncio.run(scenario())


def test_packages_aensure_runs_on_its_own_threads(tmp_path: Path, index: IndexServer, gate: LoopGate) -> None:
    # What the Dask plugin's setup and the Ray plugin's create await.
    packages = Packages.of(
        ["adaptor-g==1.0"], repo=str(tmp_path / "repo"), install={"find_links": [index.url], "no_index": True}
    )
    paths = _with_busy_default_executor(ticking(gate, packages.aensure()))
    assert len(paths) == 1 and Path(paths[0]).is_dir()
    gate.check()


def test_the_ray_plugin_creates_off_the_loop(tmp_path: Path, index: IndexServer, gate: LoopGate) -> None:
    ray = pytest.importorskip("repoinstall.ray")

    class Context:
        def __init__(self) -> None:
            self.env_vars: dict[str, str] = {}

    value = {
        "packages": ["adaptor-h==1.0"],
        "repo": str(tmp_path / "repo"),
        "install": {"find_links": [index.url], "no_index": True},
    }
    plugin = ray.RepoInstallPlugin()
    context = Context()
    _with_busy_default_executor(ticking(gate, plugin.create(None, {ray.NAME: value}, context)))
    plugin.modify_context([], {ray.NAME: value}, context)
    (tree,) = context.env_vars[ray.TREES_ENV].split(":")
    assert Path(tree).is_dir()
    gate.check()
