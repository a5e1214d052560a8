"""repoinstall.dask on a real LocalCluster (worker processes under nannies), a real index on 127.0.0.1 and real
wheels: every worker, present and later, gets its trees, each installed once cluster-wide; bad input is refused
before anything runs; what only a worker can tell fails registration with repoinstall's message and closes the
workers that could not get their packages, so they never take a task.

One cluster for the module (the machine is shared): tests that close workers bring two fresh ones back.
"""

from __future__ import annotations

import os
import sys
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from dask import config as dask_config
from distributed import Client, LocalCluster, get_worker
from helpers import isolated_env, run, wait_until
from indexserver import IndexServer
from wheels import make_wheel

from repoinstall import (
    ActivationConflict,
    InstallError,
    InstallOptions,
    InvalidInput,
    InvalidRequirement,
    Repo,
    RequirementsFileError,
    TreesConflict,
)
from repoinstall._workers import Packages
from repoinstall.dask import EVENT_TOPIC, RepoInstall

ROOT = Path(__file__).resolve().parent.parent
WORKERS = 2
TIMEOUT = 240  # generous: the machine runs other engines' tests at the same time


class Cluster:
    """The module's LocalCluster, its client and index."""

    def __init__(self, cluster: LocalCluster, client: Client, index: IndexServer) -> None:
        self.cluster, self.client, self.index = cluster, client, index
        self.options = InstallOptions(find_links=(index.url,), no_index=True)

    def plugin(self, repo: Path, *specs: str, **kwargs: Any) -> RepoInstall:
        return RepoInstall(list(specs), repo=repo, install=self.options, stale_after=5, heartbeat=1, **kwargs)

    def addresses(self) -> set[str]:
        return set(self.client.scheduler_info()["workers"])

    def start_fresh(self, n: int) -> None:
        """Replace every worker by ``n`` new ones. A worker that closed itself stays in the cluster's book (under
        a name a new worker would take) until the cluster is scaled to nothing."""
        self.cluster.scale(0)
        wait_until(lambda: not self.cluster.workers and not self.addresses(), TIMEOUT, what="the workers to go")
        self.cluster.scale(n)

    def fresh_workers(self, n: int = WORKERS) -> None:
        self.start_fresh(n)
        self.client.wait_for_workers(n, timeout=TIMEOUT)

    def events(self, plugin: RepoInstall) -> list[dict[str, Any]]:
        return [msg for _, msg in self.client.get_events(EVENT_TOPIC) if msg["plugin"] == plugin.name]


@pytest.fixture(scope="module")
def dask(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    wheels = tmp_path_factory.mktemp("dask-wheels")
    make_wheel(wheels, "dk-a", "1.0")
    make_wheel(wheels, "dk-b", "1.0", requires=("dk-c<2",))
    for version in ("1.0", "2.0"):
        make_wheel(wheels, "dk-c", version)
        make_wheel(wheels, "dk-e", version)
    for name in ("dk-d", "dk-f", "dk-g", "dk-h", "dk-r"):
        make_wheel(wheels, name, "1.0")
    index = IndexServer(wheels).start()
    # Every worker process, the first two and each one added later, gets pip isolated from this machine, imports
    # repoinstall from this checkout and has the cluster's temp dir as its own; the scheduler's and the workers'
    # scratch spaces are there too (Dask's "temporary-directory", which the nannies hand their workers).
    temp = tmp_path_factory.mktemp("dask-tmp")
    worker_env = {k: v for k, v in isolated_env(PYTHONPATH=str(ROOT)).items() if k.startswith(("PIP_", "UV_"))}
    worker_env.update(NETRC=os.devnull, PYTHONPATH=str(ROOT), TMPDIR=str(temp))
    with pytest.MonkeyPatch.context() as env, dask_config.set({"temporary-directory": str(temp)}):
        for key in [k for k in os.environ if k.startswith(("PIP_", "UV_", "REPOINSTALL_"))]:
            env.delenv(key)
        for key, value in worker_env.items():
            env.setenv(key, value)
        cluster = LocalCluster(
            n_workers=WORKERS, threads_per_worker=1, processes=True, dashboard_address=None, env=worker_env
        )
        client = Client(cluster)
        try:
            yield Cluster(cluster, client, index)
        finally:
            client.close()
            cluster.close()
            index.stop()


@pytest.fixture
def cluster(dask: Cluster) -> Iterator[Cluster]:
    """The module's cluster with its index counts at zero; a test's plugins are unregistered after it, so a
    worker added by a later test does not run them."""
    dask.index.started.clear()
    dask.index.completed.clear()
    dask.index.delays.clear()
    before = set(_plugins(dask.client))
    yield dask
    for name in set(_plugins(dask.client)) - before:
        dask.client.unregister_worker_plugin(name)
    if len(dask.addresses()) != WORKERS:
        dask.fresh_workers()


def _plugins(client: Client) -> list[str]:
    return client.run_on_scheduler(lambda dask_scheduler: list(dask_scheduler.worker_plugins))  # type: ignore[no-any-return]


def _imported(module: str) -> dict[str, str]:
    """On a worker: the module's version and file, and the worker's first sys.path entries."""
    imported = __import__(module)
    return {"version": imported.VERSION, "file": imported.__file__, "path": os.pathsep.join(sys.path[:4])}


def _where() -> str:
    return get_worker().address  # type: ignore[no-any-return]


# ---- one install, every worker ------------------------------------------------------------------------------


def test_every_worker_imports_the_trees_each_installed_once(cluster: Cluster, tmp_path: Path) -> None:
    repo = tmp_path / "repo"
    # The first download is held back, so both workers are inside setup at once: one installs, one waits.
    cluster.index.delays["dk_a"] = 1.5
    plugin = cluster.plugin(repo, "dk-a==1.0", "dk-b==1.0")
    responses = cluster.client.register_plugin(plugin)
    assert set(responses) == cluster.addresses() and len(responses) == WORKERS
    assert all(r["status"] == "OK" for r in responses.values())

    for module, version in (("dk_a", "1.0"), ("dk_b", "1.0"), ("dk_c", "1.0")):
        seen = cluster.client.run(_imported, module)
        assert len(seen) == WORKERS
        assert {s["version"] for s in seen.values()} == {version}
        assert all(s["file"].startswith(str(repo)) for s in seen.values())
    # Each wheel downloaded once, one tree per spec, whichever worker installed it.
    assert {n: cluster.index.downloads(n) for n in ("dk_a", "dk_b", "dk_c")} == {"dk_a": 1, "dk_b": 1, "dk_c": 1}
    with Repo(repo) as r:
        trees = sorted(f"{entry.name}=={entry.version}" for entry, _ in r.list())
    assert trees == ["dk-a==1.0", "dk-b==1.0"]
    # First on every worker's sys.path, in the order `repoinstall path` prints them.
    printed = run("path", "dk-a==1.0", "dk-b==1.0", "--repo", repo)
    assert printed.returncode == 0, printed.stderr
    for seen in cluster.client.run(_imported, "dk_a").values():
        assert seen["path"].startswith(printed.stdout.strip())
    assert sorted(e["worker"] for e in cluster.events(plugin)) == sorted(cluster.addresses())


def test_a_second_registration_of_the_same_packages_is_a_no_op(cluster: Cluster, tmp_path: Path) -> None:
    repo = tmp_path / "repo"
    first = cluster.plugin(repo, "dk-d==1.0")
    assert len(cluster.client.register_plugin(first)) == WORKERS
    again = cluster.plugin(repo, "dk-d==1.0")  # another instance, the same packages: the same name
    assert again.name == first.name
    assert cluster.client.register_plugin(again) == {}  # no worker ran it again
    assert len(cluster.events(first)) == WORKERS
    assert cluster.index.downloads("dk_d") == 1
    other = cluster.plugin(repo, "dk-d==1.0", wait_timeout=60)  # other options: another plugin
    assert other.name != first.name


def test_the_install_runs_off_the_workers_event_loop(cluster: Cluster, tmp_path: Path) -> None:
    cluster.index.delays["dk_f"] = 6
    plugin = cluster.plugin(tmp_path / "repo", "dk-f==1.0")
    registered: list[object] = []
    thread = threading.Thread(target=lambda: registered.append(cluster.client.register_plugin(plugin)))
    thread.start()
    try:
        cluster.index.wait_for_download("dk_f", timeout=TIMEOUT)
        # client.run calls the function on each worker's event loop: it answers while the install is still
        # downloading, so setup left the loop free (heartbeats, the scheduler's messages).
        answered = cluster.client.run(os.getpid)
        assert cluster.index.downloading("dk_f") == 1
    finally:
        thread.join(TIMEOUT)
    assert len(answered) == WORKERS
    assert len(registered[0]) == WORKERS  # type: ignore[arg-type]


def test_a_requirements_file_is_read_where_given_and_on_every_worker(cluster: Cluster, tmp_path: Path) -> None:
    requirements = tmp_path / "requirements.txt"
    requirements.write_text("# what the workers need\ndk-r==1.0\n")
    plugin = RepoInstall(requirements=str(requirements), repo=tmp_path / "repo", install=cluster.options)
    assert len(cluster.client.register_plugin(plugin)) == WORKERS
    assert {s["version"] for s in cluster.client.run(_imported, "dk_r").values()} == {"1.0"}
    assert cluster.index.downloads("dk_r") == 1
    requirements.write_text("dk-r==1.0\ndk-d==1.0\n")  # edited: another plugin, not a no-op
    assert RepoInstall(requirements=str(requirements), repo=tmp_path / "repo", install=cluster.options).name != (
        plugin.name
    )


# ---- refused before anything runs ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("args", "kwargs", "error", "message"),
    [
        (["dk-a=>1.0"], {}, InvalidRequirement, "dk-a=>1.0"),
        ([], {}, InvalidInput, "nothing to install"),
        (["dk-a==1.0"], {"wait_timeout": -1}, InvalidInput, "wait"),
        (["dk-a==1.0"], {"colour": "blue"}, InvalidInput, "'colour' is not a repo option"),
        (["dk-a==1.0"], {"install": {"index": "x"}}, InvalidInput, "'index' is not an install option"),
        ([], {"requirements": "/nonexistent/requirements.txt"}, RequirementsFileError, "requirements.txt"),
        (["dk-a==1.0"], {"install": {"index_url": "simple/"}}, InvalidInput, "index URL simple/"),
        (["dk-a==1.0"], {"install": {"find_links": ["htp://x/"]}}, InvalidInput, "find-links URL"),
    ],
)
def test_bad_input_is_refused_where_the_plugin_is_made(
    tmp_path: Path, args: list[str], kwargs: dict[str, Any], error: type[Exception], message: str
) -> None:
    repo = tmp_path / "repo"
    with pytest.raises(error, match=None) as refused:
        RepoInstall(args, repo=repo, **kwargs)
    assert message in str(refused.value)
    assert len(str(refused.value).splitlines()) == 1
    assert not repo.exists()  # nothing touched, nothing registered: no cluster needed to refuse it


# ---- what only a worker can tell ----------------------------------------------------------------------------


def test_a_version_the_index_lacks_fails_registration_and_no_worker_without_it_takes_a_task(
    cluster: Cluster, tmp_path: Path
) -> None:
    repo = tmp_path / "repo"
    plugin = cluster.plugin(repo, "dk-a==9.9")
    before = cluster.addresses()
    with pytest.raises(InstallError) as failed:
        cluster.client.register_plugin(plugin)
    # repoinstall's own message: what Repo.ensure says for the same spec.
    with Repo(tmp_path / "other", install=cluster.options) as r, pytest.raises(InstallError) as direct:
        r.ensure("dk-a==9.9")
    assert str(failed.value).splitlines()[0] == str(direct.value).splitlines()[0]
    assert "dk-a==9.9" in str(failed.value).splitlines()[0]
    # Both workers that could not get it closed, nannies too (none restarted into the same failure).
    wait_until(lambda: not cluster.addresses(), TIMEOUT, what="the failed workers to close")
    assert sorted(e["worker"] for e in cluster.events(plugin)) == sorted(before)

    # The plugin stays registered: a worker added later tries, fails, and leaves without taking the task
    # that waits for a worker.
    task = cluster.client.submit(_where, pure=False)
    cluster.start_fresh(1)
    wait_until(lambda: len(cluster.events(plugin)) == 3, TIMEOUT, what="the added worker to fail")
    wait_until(lambda: not cluster.addresses(), TIMEOUT, what="the added worker to close")
    assert task.status == "pending"  # had it joined and run on, it would have run this task
    assert "error" in cluster.events(plugin)[-1]

    cluster.client.unregister_worker_plugin(plugin.name)
    cluster.fresh_workers()
    assert task.result(timeout=TIMEOUT) in cluster.addresses()


def test_trees_that_conflict_are_refused_at_registration(cluster: Cluster, tmp_path: Path) -> None:
    repo = tmp_path / "repo"
    plugin = cluster.plugin(repo, "dk-b==1.0", "dk-c==2.0")  # dk-b's tree holds dk-c 1.0
    with pytest.raises(TreesConflict) as refused:
        cluster.client.register_plugin(plugin)
    with pytest.raises(TreesConflict) as direct:
        Packages.of(["dk-b==1.0", "dk-c==2.0"], repo=str(repo), install=cluster.options).ensure()
    assert str(refused.value) == str(direct.value)
    assert len(str(refused.value).splitlines()) == 1
    wait_until(lambda: not cluster.addresses(), TIMEOUT, what="the refused workers to close")


def test_a_module_a_worker_imported_from_another_version_is_refused(cluster: Cluster, tmp_path: Path) -> None:
    repo = tmp_path / "repo"
    assert len(cluster.client.register_plugin(cluster.plugin(repo, "dk-e==1.0"))) == WORKERS
    assert {s["version"] for s in cluster.client.run(_imported, "dk_e").values()} == {"1.0"}
    with pytest.raises(ActivationConflict) as refused:
        cluster.client.register_plugin(cluster.plugin(repo, "dk-e==2.0"))
    assert "dk_e" in str(refused.value) or "dk-e" in str(refused.value)
    assert len(str(refused.value).splitlines()) == 1
    wait_until(lambda: not cluster.addresses(), TIMEOUT, what="the refused workers to close")


# ---- workers added later -------------------------------------------------------------------------------------


def test_a_worker_added_later_gets_the_trees_without_installing_again(cluster: Cluster, tmp_path: Path) -> None:
    repo = tmp_path / "repo"
    plugin = cluster.plugin(repo, "dk-g==1.0", "dk-h==1.0")
    assert len(cluster.client.register_plugin(plugin)) == WORKERS
    first = cluster.addresses()
    cluster.cluster.scale(WORKERS + 1)
    cluster.client.wait_for_workers(WORKERS + 1, timeout=TIMEOUT)
    (added,) = cluster.addresses() - first
    for module in ("dk_g", "dk_h"):
        seen = cluster.client.run(_imported, module, workers=[added])
        assert seen[added]["version"] == "1.0" and seen[added]["file"].startswith(str(repo))
    assert cluster.index.downloads("dk_g") == 1 and cluster.index.downloads("dk_h") == 1
    assert sorted(e["worker"] for e in cluster.events(plugin)) == sorted([*first, added])
    # Its tasks see them too (a task runs in a worker thread of the same process).
    task = cluster.client.submit(_imported, "dk_g", workers=[added], pure=False)
    assert task.result(timeout=TIMEOUT)["version"] == "1.0"
    cluster.cluster.scale(WORKERS)
    wait_until(lambda: len(cluster.addresses()) == WORKERS, TIMEOUT, what="the added worker to retire")
