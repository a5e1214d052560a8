"""SIGTERM and Ctrl-C end a batch of any size at once, at any moment of it, on any --jobs: exit 143 or 130, every
installer killed, specs not started dropped, staging dirs removed and locks released; a second signal is never
lost. As for the command line, so for ``Repo.ensure_all`` and ``aensure_all`` in a worker process of one's own.

The batch is 20,000 pinned specs whose files the find-links page lists but which are not wheels (empty files), so
no listing proves one absent: every install is a pip run that fails, and the run would go on for hours. Each
signal goes to the process alone (as Kubernetes sends it to PID 1), never to its group; each process runs in a
session of its own, so an installer left behind would still be found by it.
"""

from __future__ import annotations

import os
import signal
import sys
import time
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from functools import partial
from pathlib import Path
from typing import TypeVar

import pytest
from helpers import Pod, isolated_env, start, wait_until
from indexserver import IndexServer

from repoinstall import Repo

T = TypeVar("T")
SPECS = 20_000
#: The run must be over by then (it takes well under a second): a generous bound, not a speed target.
ENDS_WITHIN = 5.0
SIGNALS = {"SIGTERM": (signal.SIGTERM, 143), "SIGINT": (signal.SIGINT, 130)}


@pytest.fixture(scope="module")
def many(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """20,000 pinned specs, each of a project the test index lists (see :func:`index`)."""
    path = tmp_path_factory.mktemp("batch") / "many.txt"
    path.write_text("".join(f"absent-{i}==1.0\n" for i in range(SPECS)))
    return path


@pytest.fixture(scope="module")
def broken_wheels(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """An empty file named as each spec's wheel: listed, so the batch cannot prove a spec absent without an
    installer (it would fail it at once, with none run), and not a wheel, so each installer run fails."""
    directory = tmp_path_factory.mktemp("broken")
    for i in range(SPECS):
        (directory / f"absent_{i}-1.0-py3-none-any.whl").touch()
    return directory


@pytest.fixture
def index(broken_wheels: Path) -> Iterator[IndexServer]:
    server = IndexServer(broken_wheels)
    server.hashes = False  # a plain find-links page: no file is read to list it
    server.start()
    yield server
    server.stop()


# ---- watching the process ------------------------------------------------------------------------------------


def _stat(pid: int) -> list[str] | None:
    """``/proc/<pid>/stat`` after the command name: state, ppid, pgrp, ...; ``None`` once the process is gone."""
    try:
        text = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    return text[text.rfind(")") + 2 :].split()


def _running(pid: int) -> bool:
    fields = _stat(pid)
    return fields is not None and fields[0] not in ("Z", "X")  # a zombie has ended; only its parent must reap it


def _group(pgid: int) -> list[int]:
    """The live processes of a process group: after the run, any would be an installer it left behind."""
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit() and (fields := _stat(int(entry.name))) is not None and int(fields[2]) == pgid:
            found.append(int(entry.name))
    return [pid for pid in found if _running(pid)]


def _descendants(pid: int) -> set[int]:
    found: set[int] = set()
    todo = [pid]
    while todo:
        for task in Path(f"/proc/{todo.pop()}/task").glob("*"):
            try:
                children = {int(c) for c in (task / "children").read_text().split()}
            except OSError:
                continue
            todo += children - found
            found |= children
    return found


def _handles_sigterm(pid: int) -> bool:
    """Whether the process has its SIGTERM handler installed (``SigCgt`` in /proc/<pid>/status)."""
    try:
        status = Path(f"/proc/{pid}/status").read_text()
    except OSError:
        return False
    caught = next(line for line in status.splitlines() if line.startswith("SigCgt:")).split()[1]
    return bool(int(caught, 16) & (1 << (signal.SIGTERM - 1)))


def _count(pod: Pod, text: str) -> int:
    return "".join(pod.err).count(text)


def _reach(pod: Pod, moment: str, line: str) -> None:
    """Return at ``moment`` of the run: ``line`` is what the process writes when an install starts."""
    if moment == "parsing":  # 20,000 specs take about a second to parse, right after the handler is installed
        wait_until(lambda: _handles_sigterm(pod.pid), 30, "the SIGTERM handler")
        time.sleep(0.1)
    elif moment == "submission" or moment.startswith("+"):  # the specs are chosen, the workers are being started
        wait_until(lambda: _count(pod, "to install, ") > 0 or pod.poll() is not None, 60, "the batch to start")
        if moment.startswith("+"):  # ... and this long after that
            time.sleep(float(moment[1:]))
    else:  # an installer is being started (the line comes just before it), after one ran (with --jobs 1)
        wait_until(lambda: _count(pod, line) >= 2 or pod.poll() is not None, 60, "the second install")
        if moment == "installing":  # and then well into its run, as others end and start
            time.sleep(0.3)
    assert pod.poll() is None, "".join(pod.err)[-3000:]


class Ended:
    """How a run that was sent a signal ended: its exit code, seconds from the signal, what it wrote."""

    def __init__(self, code: int, seconds: float, err: str, installers: set[int]) -> None:
        self.code, self.seconds, self.err, self.installers = code, seconds, err, installers


def _interrupt(pod: Pod, sig: signal.Signals, moment: str, line: str, *, again_after: float | None = None) -> Ended:
    """Send ``sig`` to the process alone at ``moment`` (and once more after ``again_after``); how it ended."""
    try:
        _reach(pod, moment, line)
        installers = _descendants(pod.pid)  # whatever it runs now: each must be gone afterwards
        sent = time.monotonic()
        pod.send_signal(sig)
        if again_after is not None:
            time.sleep(again_after)
            if pod.poll() is None:
                pod.send_signal(sig)
        try:
            pod.wait(timeout=30)
        except Exception:
            pytest.fail(f"still running 30s after {sig.name} at {moment}: {''.join(pod.err)[-3000:]}")
        seconds = time.monotonic() - sent
    finally:
        if pod.poll() is None:
            os.killpg(pod.pid, signal.SIGKILL)
    code, _, err = pod.finish(30)
    return Ended(code, seconds, err, installers)


def _assert_no_installer_left(pod: Pod, ended: Ended) -> None:
    assert _group(pod.pid) == [], f"left running in its process group: {_group(pod.pid)}"
    assert [pid for pid in ended.installers if _running(pid)] == []


def _assert_clean(repo: Path, pod: Pod, ended: Ended) -> None:
    """No installer outlived the run, no staging dir or set-aside one is left, and no lock is held."""
    _assert_no_installer_left(pod, ended)
    if not repo.exists():
        return  # stopped before anything was installed
    left = [*(repo / "staging").glob("*/*"), *(repo / "trash").glob("*")]
    assert left == [], (left, ended.err[-4000:])
    assert list((repo / "locks").rglob("*.owner")) == []  # an owner note says "held"
    with Repo(repo) as store:
        assert [info.tid for info in store.locks() if info.held] == []


def _both(*runs: Callable[[], T]) -> list[T]:
    """Run each at the same time on a thread of its own: two runs of a test cost the time of one."""
    with ThreadPoolExecutor(len(runs)) as pool:
        return list(pool.map(lambda run: run(), runs))


@pytest.fixture(autouse=True)
def _report(request: pytest.FixtureRequest) -> Iterator[None]:
    yield
    for line in getattr(request.node, "measured", []):
        print(f"\n{request.node.name}: {line}", end="")


# ---- the command line ----------------------------------------------------------------------------------------


def _cli(repo: Path, index: IndexServer, many: Path, jobs: int) -> Pod:
    args = ["ensure", "-r", many, "--repo", repo, "--no-index", "--find-links", index.url, "--jobs", str(jobs), "-v"]
    return start(*args, env=isolated_env(REPOINSTALL_INSTALLER="pip"))


@pytest.mark.parametrize("moment", ["parsing", "submission", "start-up", "installing"])
@pytest.mark.parametrize("jobs", [1, 4])
def test_sigterm_and_ctrl_c_end_a_big_batch_at_once(
    request: pytest.FixtureRequest, tmp_path: Path, index: IndexServer, many: Path, jobs: int, moment: str
) -> None:
    # Each signal to a run of its own, both runs at once.
    def run(name: str) -> tuple[str, Path, Pod, Ended]:
        repo = tmp_path / name
        pod = _cli(repo, index, many, jobs)
        return name, repo, pod, _interrupt(pod, SIGNALS[name][0], moment, "with pip")

    runs = _both(*(partial(run, name) for name in SIGNALS))
    request.node.measured = [f"{name}: exit {ended.code} {ended.seconds:.2f}s after it" for name, *_, ended in runs]
    for name, repo, pod, ended in runs:
        assert ended.code == SIGNALS[name][1], ended.err[-3000:]
        assert ended.seconds < ENDS_WITHIN
        assert "Traceback" not in ended.err
        _assert_clean(repo, pod, ended)
        if moment == "parsing":
            assert not repo.exists()  # it landed before anything was installed


@pytest.mark.parametrize("offsets", [("+0.05", "+0.3"), ("+0.6", "+1.2")])
def test_a_signal_at_any_moment_of_the_installs(
    request: pytest.FixtureRequest, tmp_path: Path, index: IndexServer, many: Path, offsets: tuple[str, str]
) -> None:
    # More moments, seconds after the batch started: SIGTERM with --jobs 4 and Ctrl-C with --jobs 1.
    def run(name: str, jobs: int, moment: str) -> tuple[str, Path, Pod, Ended]:
        repo = tmp_path / name
        pod = _cli(repo, index, many, jobs)
        return name, repo, pod, _interrupt(pod, SIGNALS[name][0], moment, "with pip")

    runs = _both(partial(run, "SIGTERM", 4, offsets[0]), partial(run, "SIGINT", 1, offsets[1]))
    request.node.measured = [f"{name}: exit {ended.code} {ended.seconds:.2f}s after it" for name, *_, ended in runs]
    for name, repo, pod, ended in runs:
        assert ended.code == SIGNALS[name][1], ended.err[-3000:]
        assert ended.seconds < ENDS_WITHIN
        _assert_clean(repo, pod, ended)


def test_a_second_signal_is_never_lost(
    request: pytest.FixtureRequest, tmp_path: Path, index: IndexServer, many: Path
) -> None:
    # The second comes while the first is being handled (installers killed, staging dirs removed, locks released)
    # and ends the run there and then, as a second Ctrl-C does pip's: what it cut short is a dead process's.
    def run(name: str) -> tuple[str, Path, Pod, Ended]:
        repo = tmp_path / name
        pod = _cli(repo, index, many, 4)
        return name, repo, pod, _interrupt(pod, SIGNALS[name][0], "installing", "with pip", again_after=0.005)

    runs = _both(*(partial(run, name) for name in SIGNALS))
    request.node.measured = [f"{name}: exit {ended.code} {ended.seconds:.2f}s after two" for name, *_, ended in runs]
    for name, repo, pod, ended in runs:
        assert ended.code == SIGNALS[name][1], ended.err[-3000:]
        assert ended.seconds < ENDS_WITHIN
        _assert_no_installer_left(pod, ended)
        with Repo(repo) as store:
            store.gc(older_than=0)  # a staging dir left is gc's at once: its owner is gone
            assert [*(repo / "staging").glob("*/*"), *(repo / "trash").glob("*")] == []
            assert {info.pid for info in store.locks() if info.held} <= {pod.pid}  # a dead holder: taken over


# ---- the API in a worker process of one's own ---------------------------------------------------------------

WORKER = """
import asyncio, signal, sys
from repoinstall import InstallOptions, Repo

repo, url, jobs, how = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4]
# A worker's own SIGTERM handler, as many have: SystemExit, like sys.exit() anywhere in the main thread.
signal.signal(signal.SIGTERM, lambda signum, frame: sys.exit(143))


def said(event):
    if event.kind == "start":
        print("starting", event.tree, file=sys.stderr, flush=True)


specs = [f"absent-{i}==1.0" for i in range(20_000)]
store = Repo(repo, install=InstallOptions(find_links=(url,), no_index=True), jobs=jobs, on_event=said)
try:
    if how == "async":
        asyncio.run(store.aensure_all(specs, return_exceptions=True))
    else:
        store.ensure_all(specs, return_exceptions=True)
except KeyboardInterrupt:
    print("interrupted", file=sys.stderr)
    sys.exit(130)
print("ran to the end", file=sys.stderr)
"""


@pytest.mark.parametrize("how", ["sync", "async"])
def test_the_api_stops_a_big_batch_on_an_interrupt(
    request: pytest.FixtureRequest, tmp_path: Path, index: IndexServer, how: str
) -> None:
    # ensure_all / aensure_all in the main thread of a worker process of one's own, with no handler of ours:
    # Ctrl-C (KeyboardInterrupt; asyncio.run's cancels the task) and SIGTERM (the worker's SystemExit).
    script = tmp_path / "worker.py"
    script.write_text(WORKER)

    def run(name: str, jobs: int) -> tuple[str, Path, Pod, Ended]:
        repo = tmp_path / name
        pod = Pod([sys.executable, str(script), str(repo), index.url, str(jobs), how], isolated_env())
        return name, repo, pod, _interrupt(pod, SIGNALS[name][0], "installing", "starting ")

    jobs = {"SIGINT": 1, "SIGTERM": 4} if how == "sync" else {"SIGINT": 4, "SIGTERM": 1}
    runs = _both(*(partial(run, name, count) for name, count in jobs.items()))
    request.node.measured = [
        f"{name} (--jobs {jobs[name]}): exit {ended.code} {ended.seconds:.2f}s after it" for name, *_, ended in runs
    ]
    for name, repo, pod, ended in runs:
        assert ended.code == SIGNALS[name][1], ended.err[-3000:]
        assert ended.seconds < ENDS_WITHIN
        assert "Traceback" not in ended.err and "ran to the end" not in ended.err
        _assert_clean(repo, pod, ended)
