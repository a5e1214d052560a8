"""repoinstall.celery on a real Redis broker (Debian's redis-server on 127.0.0.1) with real ``celery worker``
processes: ``@requires`` tasks each see their version (isolated when a process holds another; a threads pool
never puts two versions on one path), a process ensures once and then remembers the trees, the fixed set
(``preload``) is installed once by two workers starting together and imported by their tasks in a prefork and a
threads pool, a failing ensure reaches ``.get()`` as its one-line error, and a fixed set that cannot be installed
stops the worker before it takes a task."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any, NamedTuple

import pytest
import redis
from celery import Celery
from helpers import Pod, isolated_env, wait_for_stderr, wait_until
from indexserver import IndexServer
from wheels import make_wheel

from repoinstall import ActivationConflict, InstallError, InvalidInput, RepoinstallError

ROOT = Path(__file__).parent.parent
REDIS = "/usr/bin/redis-server"
TIMEOUT = 120

#: The tasks module the workers run (``celery -A tasks``): formatted with the repo, the index and the broker.
TASKS = '''
import os, sys, time
from celery import Celery
from repoinstall.celery import preload, requires

REPO = {repo!r}
INSTALL = {{"find_links": ({index!r},), "no_index": True}}
OPTIONS = dict(repo=REPO, install=INSTALL, stale_after=5, heartbeat=1)

app = Celery("tasks", broker={broker!r}, backend={broker!r})
preload(app, "adaptor-b==1.0", **OPTIONS)


def hold(mark, count, release):
    """Say this task started (a file in ``mark``), then wait for ``count`` of them and for ``release``."""
    if mark:
        open(os.path.join(mark, f"{{os.getpid()}}-{{time.monotonic_ns()}}"), "w").close()
    deadline = time.monotonic() + 100
    while (mark and len(os.listdir(mark)) < count) or (release and not os.path.exists(release)):
        if time.monotonic() > deadline:
            raise TimeoutError("held too long")
        time.sleep(0.02)


@app.task
def fixed():
    import adaptor_b, dep_c
    return adaptor_b.VERSION, dep_c.VERSION, adaptor_b.__file__, os.getpid()


@app.task
@requires("adaptor-a==1.0", **OPTIONS)
def one(mark=None, count=0, release=None):
    hold(mark, count, release)
    import adaptor_a
    return adaptor_a.VERSION, os.getpid()


@app.task
def on_path():
    return [path for path in sys.path if os.sep + "adaptor-a" + os.sep in path + os.sep]


@app.task
@requires("adaptor-a==2.0", **OPTIONS)
def two():
    import adaptor_a
    return adaptor_a.VERSION, os.getpid()


@app.task
@requires("adaptor-a==2.0", isolated=True, **OPTIONS)
def two_isolated(*args):
    import adaptor_a
    return adaptor_a.version(*args), os.getpid(), "adaptor_b" in sys.modules


@app.task
@requires("adaptor-a==9.9", **OPTIONS)
def missing():
    return "ran"


@app.task
@requires("needs-missing==1.0", **OPTIONS)
def unresolvable():
    return "ran"
'''

#: A worker whose fixed set cannot be installed (the version is not on the index).
BAD = """
from celery import Celery
from repoinstall.celery import preload

app = Celery("bad", broker={broker!r}, backend={broker!r})
preload(app, "adaptor-a==9.9", repo={repo!r}, install={{"find_links": ({index!r},), "no_index": True}})


@app.task
def never(marker):
    open(marker, "w").close()
"""


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """A Redis of the tests' own on 127.0.0.1: no persistence, stopped after the module."""
    if not os.access(REDIS, os.X_OK):
        pytest.skip(f"{REDIS} is not installed (Debian: apt-get install redis-server)")
    port = free_port()
    workdir = tmp_path_factory.mktemp("redis")
    command = [REDIS, "--port", str(port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no",
               "--dir", str(workdir)]  # fmt: skip
    proc = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
    client = redis.Redis(host="127.0.0.1", port=port)

    def answers() -> bool:
        if proc.poll() is not None:
            raise AssertionError(f"redis-server exited: {proc.stdout.read() if proc.stdout else ''!r}")
        try:
            return bool(client.ping())
        except redis.ConnectionError:
            return False

    wait_until(answers, 60, what="redis-server to answer PING")
    yield f"redis://127.0.0.1:{port}/0"
    client.close()
    proc.terminate()
    proc.wait(timeout=30)


@pytest.fixture(scope="module")
def module_index(wheel_dir: Path) -> Iterator[IndexServer]:
    server = IndexServer(wheel_dir).start()
    yield server
    server.stop()


def worker(app_dir: Path, module: str, pool: str, queue: str) -> Pod:
    """``celery -A <module> worker`` as a process of its own, pip isolated, this checkout's repoinstall."""
    command = [
        sys.executable, "-m", "celery", "-A", module, "worker", "-P", pool, "-c", "2", "-Q", queue,
        "-n", f"{queue}@%h", "--without-gossip", "--without-mingle", "--without-heartbeat", "-l", "info",
    ]  # fmt: skip
    env = isolated_env(PYTHONPATH=os.pathsep.join([str(ROOT), str(app_dir)]))
    return Pod(command, env)


def stop(pod: Pod) -> str:
    """Warm shutdown (SIGTERM to the worker's process group); its whole output."""
    if pod.poll() is None:
        os.killpg(pod.pid, signal.SIGTERM)
    _, out, err = pod.finish(TIMEOUT)
    return out + err


class Cluster(NamedTuple):
    client: Celery
    repo: Path
    index: IndexServer
    work: Path
    prefork: Pod
    threads: Pod

    def call(self, task: str, queue: str, *args: Any) -> Any:
        return self.client.send_task(f"tasks.{task}", args=args, queue=queue).get(timeout=TIMEOUT)


@pytest.fixture(scope="module")
def cluster(broker: str, module_index: IndexServer, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    """Two workers of one tasks module started at once: a prefork pool (queue ``a``) and a threads pool (queue
    ``b``), concurrency 2 each, one repo. The fixed set's download is slowed so that their ensures overlap."""
    work = tmp_path_factory.mktemp("celery")
    repo = work / "repo"
    (work / "tasks.py").write_text(TASKS.format(repo=str(repo), index=module_index.url, broker=broker))
    module_index.delays["adaptor_b"] = 2.5
    pods = [worker(work, "tasks", "prefork", "a"), worker(work, "tasks", "threads", "b")]
    client = Celery("client", broker=broker, backend=broker)
    try:
        for pod in pods:
            wait_for_stderr(pod, " ready.", timeout=TIMEOUT)
        module_index.delays.clear()
        yield Cluster(client, repo, module_index, work, *pods)
    finally:
        outputs = [stop(pod) for pod in pods]
        client.close()
    for pod, output in zip(pods, outputs, strict=True):
        assert pod.returncode == 0, output[-3000:]


def test_bad_input_fails_where_it_is_given(tmp_path: Path) -> None:
    from repoinstall.celery import preload, requires

    app = Celery("here")
    repo = tmp_path / "repo"
    cases = [
        (lambda: requires("adaptor-a=>1", repo=repo), "adaptor-a=>1"),
        (lambda: requires("adaptor-a==1.0", repo=repo, wait_timout=3), "'wait_timout' is not a repo option"),
        (lambda: requires("adaptor-a==1.0", repo=repo, jobs=0), "jobs"),
        (lambda: requires(repo=repo), "nothing to install"),
        (lambda: requires("adaptor-a==1.0", repo=repo, timeout=5), "isolated=True tasks only"),
        (lambda: preload(app, "adaptor-a==1.0", repo=repo, install={"index": "x"}), "'index' is not an install"),
        (lambda: preload(app, repo=repo), "nothing to install"),
    ]
    for make, text in cases:
        with pytest.raises(InvalidInput) as refused:
            make()
        assert text in str(refused.value) and "\n" not in str(refused.value), str(refused.value)

    def local() -> None: ...

    with pytest.raises(InvalidInput, match="top level of an importable module"):
        requires("adaptor-a==1.0", repo=repo, isolated=True)(local)
    task = app.task(lambda: None, name="t")
    with pytest.raises(InvalidInput, match=r"goes under @app\.task"):
        requires("adaptor-a==1.0", repo=repo)(task)

    def body(path: str) -> str:
        return path

    checked = app.task(requires("adaptor-a==1.0", repo=repo)(body), name="checked")
    with pytest.raises(TypeError):  # Celery checks the call against the body's signature, at the caller
        checked.delay(1, 2)
    assert not repo.exists()


def test_two_workers_starting_together_install_the_fixed_set_once(cluster: Cluster) -> None:
    # Both workers ensured adaptor-b (and its dependency dep-c) at start, one of them while the other installed.
    assert cluster.index.downloads("adaptor_b") == 1
    assert cluster.index.downloads("dep_c") == 1
    logs = ["".join(cluster.prefork.err), "".join(cluster.threads.err)]
    said = [log.split("repoinstall: adaptor-b==1.0: ")[1].split()[0] for log in logs if "adaptor-b==1.0: " in log]
    assert sorted(said) == ["installed", "waited"], logs  # one installed it, the other waited for that install
    assert all(log.count("repoinstall: adaptor-b==1.0 first on sys.path") == 1 for log in logs), logs


@pytest.mark.parametrize("queue", ["a", "b"])
def test_tasks_import_the_fixed_set_in_every_pool_process(cluster: Cluster, queue: str) -> None:
    results = [cluster.client.send_task("tasks.fixed", queue=queue) for _ in range(6)]
    for result in results:
        version, dependency, where, _ = result.get(timeout=TIMEOUT)
        assert (version, dependency) == ("1.0", "1.0")
        assert Path(where).is_relative_to(cluster.repo)


def test_each_task_sees_its_version_and_isolated_is_for_a_process_that_holds_another(cluster: Cluster) -> None:
    client = cluster.client
    first = client.send_task("tasks.one", queue="a")
    other = client.send_task("tasks.two_isolated", args=(1, 2), queue="a")
    assert first.get(timeout=TIMEOUT)[0] == "1.0"
    ((version, args), isolated_pid, sees_fixed) = other.get(timeout=TIMEOUT)
    assert (version, args) == ("2.0", [1, 2])
    assert sees_fixed is False  # a fresh interpreter: nothing of the worker's imports
    # Both pool processes import adaptor-a 1.0 (each waits until the other started, so each gets one).
    mark = cluster.work / "both"
    mark.mkdir()
    held = [client.send_task("tasks.one", args=(str(mark), 2), queue="a") for _ in range(2)]
    pids = {result.get(timeout=TIMEOUT)[1] for result in held}
    assert len(pids) == 2 and isolated_pid not in pids
    # Now 2.0 on the path is refused in either process, to .get(), as its one line ...
    with pytest.raises(ActivationConflict) as refused:
        cluster.call("two", "a")
    message = str(refused.value)
    assert "adaptor-a 2.0" in message and "adaptor-a 1.0" in message and "isolated=True" in message, message
    assert "\n" not in message
    # ... and the isolated task still sees 2.0; each version was installed once.
    assert cluster.call("two_isolated", "a")[0][0] == "2.0"
    assert cluster.call("one", "a")[0] == "1.0"
    assert cluster.index.downloads("adaptor_a-1.0") == 1 and cluster.index.downloads("adaptor_a-2.0") == 1


def test_threads_pool_refuses_a_second_version_while_a_task_runs_with_the_first(cluster: Cluster) -> None:
    # In a threads pool two tasks share sys.path: while one() has 1.0 on the path (not imported yet), two() must
    # not put 2.0 ahead of it (one() would import 2.0). A threads worker of its own (queue c): in the module's,
    # another test's one() may have imported adaptor-a already, which refuses two() for that reason instead.
    pod = worker(cluster.work, "tasks", "threads", "c")
    mark, release = cluster.work / "running", cluster.work / "release"
    mark.mkdir()
    try:
        wait_for_stderr(pod, " ready.", timeout=TIMEOUT)
        running = cluster.client.send_task("tasks.one", args=(str(mark), 1, str(release)), queue="c")
        wait_until(lambda: any(mark.iterdir()), TIMEOUT, what="one() to start")
        with pytest.raises(ActivationConflict) as refused:
            cluster.call("two", "c")
        assert "a task running now holds adaptor-a 1.0, this task holds adaptor-a 2.0" in str(refused.value)
        release.touch()
        assert running.get(timeout=TIMEOUT)[0] == "1.0"
    finally:
        release.touch()
        output = stop(pod)
    assert pod.returncode == 0, output[-3000:]


def test_threads_pool_takes_a_tree_off_the_path_when_its_last_task_ends(cluster: Cluster) -> None:
    # Two tasks (the pool's two threads) run with the same tree; the one that put it on the path ends first.
    marks = [cluster.work / "first", cluster.work / "second"]
    releases = [cluster.work / "first-go", cluster.work / "second-go"]
    running = []
    for mark, release in zip(marks, releases, strict=True):
        mark.mkdir()
        running.append(cluster.client.send_task("tasks.one", args=(str(mark), 1, str(release)), queue="b"))
        wait_until(lambda mark=mark: any(mark.iterdir()), TIMEOUT, what="one() to start")
    for release, result in zip(releases, running, strict=True):
        release.touch()
        assert result.get(timeout=TIMEOUT)[0] == "1.0"
    assert cluster.call("on_path", "b") == []


def test_a_process_ensures_once_then_remembers_the_trees(cluster: Cluster) -> None:
    # The threads worker is one process: its first one() ensured adaptor-a 1.0 (a line in its log); later calls
    # use the remembered path (no repo, no parsing, no line).
    for _ in range(3):
        assert cluster.call("one", "b")[0] == "1.0"
    log = "".join(cluster.threads.err)
    assert log.count("repoinstall: adaptor-a==1.0: ") == 1, log[-3000:]


def test_a_failing_ensure_reaches_get_as_its_one_line_error(cluster: Cluster) -> None:
    for queue in ("a", "b"):
        with pytest.raises(InstallError) as missing:
            cluster.call("missing", queue)
        with pytest.raises(InstallError) as unresolvable:
            cluster.call("unresolvable", queue)
        for error in (missing.value, unresolvable.value):
            assert isinstance(error, RepoinstallError) and str(error) and "\n" not in str(error), repr(error)
        assert str(missing.value).startswith("adaptor-a==9.9: pip failed"), str(missing.value)
        assert "Could not find a version that satisfies the requirement adaptor-a==9.9" in str(missing.value)
        assert "not-on-the-index" in str(unresolvable.value), str(unresolvable.value)
    # Nothing of them installed; the workers go on serving.
    assert not [p for p in cluster.repo.rglob("*") if p.name.startswith(("adaptor_a-9.9", "needs_missing"))]
    assert cluster.call("fixed", "a")[0] == cluster.call("fixed", "b")[0] == "1.0"


@pytest.mark.parametrize("pool", ["prefork", "threads", "solo"])
def test_a_fixed_set_that_cannot_be_installed_stops_the_worker(
    broker: str, module_index: IndexServer, tmp_path: Path, pool: str
) -> None:
    (tmp_path / "bad.py").write_text(BAD.format(repo=str(tmp_path / "repo"), index=module_index.url, broker=broker))
    queue = f"bad-{pool}"
    marker = tmp_path / "served"
    client = Celery("client", broker=broker, backend=broker)
    client.send_task("bad.never", args=(str(marker),), queue=queue)
    pod = worker(tmp_path, "bad", pool, queue)
    code, out, err = pod.finish(TIMEOUT)
    client.close()
    assert code == 1, out + err
    line = "repoinstall: error: adaptor-a==9.9: "
    assert line in err and " ready." not in err, err[-3000:]
    assert not marker.exists()
    assert redis.Redis.from_url(broker).llen(queue) == 1  # the task is still waiting in the queue
    shown = [text for text in err.splitlines() if line in text]
    assert shown and all("\n" not in text for text in shown)


def test_the_example_runs(broker: str, tmp_path: Path) -> None:
    wheels = tmp_path / "wheels"
    wheels.mkdir()
    for version in ("1.0.0", "1.1.0"):
        make_wheel(wheels, "tomli-w", version)
    server = IndexServer(wheels).start()
    try:
        env = isolated_env(
            PYTHONPATH=str(ROOT), CELERY_BROKER_URL=broker, INDEX_URL=server.simple, EXAMPLE_REPO=str(tmp_path / "r")
        )
        done = subprocess.run(
            [sys.executable, str(ROOT / "examples" / "celery" / "tasks.py")],
            env=env, capture_output=True, text=True, timeout=TIMEOUT, check=False,
        )  # fmt: skip
    finally:
        server.stop()
    assert done.returncode == 0, done.stdout + done.stderr[-3000:]
    lines = done.stdout.splitlines()
    assert any(line.startswith("fixed:") and "tomli-w 1.0.0 from " + str(tmp_path / "r") in line for line in lines)
    assert any(line.startswith("newer (isolated):") and "tomli-w 1.1.0 from " in line for line in lines), lines
    assert any("refused: ActivationConflict" in line and "isolated=True" in line for line in lines), lines
    assert server.downloads("tomli_w-1.0.0") == server.downloads("tomli_w-1.1.0") == 1
