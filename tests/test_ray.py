"""The Ray adapter on a real local Ray cluster: two raylet nodes (two runtime-env agents) sharing one repo, the
plugin registered the documented way (``RAY_RUNTIME_ENV_PLUGINS``), packages from the tests' index on 127.0.0.1.
One cluster for the module (a 2-node cluster takes ~10 s to start on 2 cores)."""

from __future__ import annotations

import os
import subprocess
import sys
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import rayworld
from helpers import isolated_env
from indexserver import IndexServer

from repoinstall import InvalidInput, Repo

# Every Ray process of this test on 127.0.0.1 (read when ray is imported: the driver's too, if this comes first).
os.environ.setdefault("RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER", "0")
ray = pytest.importorskip("ray")
from ray.cluster_utils import Cluster  # noqa: E402
from ray.exceptions import RuntimeEnvSetupError  # noqa: E402
from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy  # noqa: E402

import repoinstall.ray as rr  # noqa: E402

ROOT = Path(__file__).parent.parent


@pytest.fixture(scope="module", autouse=True)
def cluster() -> Iterator[Cluster]:
    """A head node and one more raylet node, 2 CPUs each, on 127.0.0.1, with the plugin registered, in a temp dir
    and environment of their own (tests/support/rayworld.py)."""
    with rayworld.temp_dir() as temp, pytest.MonkeyPatch.context() as patch:
        env = rayworld.environment(temp, rr.PLUGINS)
        for key in set(os.environ) - set(env):
            patch.delenv(key)
        for key, value in env.items():
            patch.setenv(key, value)
        node = {"num_cpus": 2, "object_store_memory": 80 << 20}
        built = Cluster(initialize_head=True, connect=True, head_node_args={**node, **rayworld.head_args(temp)})
        try:
            built.add_node(**node)
            built.wait_for_nodes()
            yield built
        finally:
            ray.shutdown()
            built.shutdown()


@pytest.fixture
def nodes(cluster: Cluster) -> list[str]:
    """The ids of the cluster's alive nodes, the head first."""
    alive = [n for n in ray.nodes() if n["Alive"]]
    head = cluster.head_node.node_id
    return sorted((n["NodeID"] for n in alive), key=lambda node: node != head)


def options(index: IndexServer) -> dict[str, Any]:
    return {"find_links": [index.url], "no_index": True}


@ray.remote(num_cpus=0)
def imported(module: str) -> dict[str, Any]:
    """On a worker: the module's version and file, this worker's node and sys.path."""
    import importlib

    loaded = importlib.import_module(module)
    return {
        "version": loaded.VERSION,
        "file": loaded.__file__,
        "node": ray.get_runtime_context().get_node_id(),
        "path": list(sys.path),
    }


@ray.remote(num_cpus=0)
class Holder:
    """An actor that imported one module at creation and keeps it."""

    def __init__(self, module: str) -> None:
        import importlib

        self.module = importlib.import_module(module)

    def version(self) -> tuple[str, str]:
        return self.module.VERSION, self.module.__file__

    def path(self) -> list[str]:
        return list(sys.path)


def trees_per_name(repo: Path) -> Counter[str]:
    with Repo(repo) as opened:
        return Counter(entry.name for entry, _ in opened.list())


# ---- what tasks and actors see -------------------------------------------------------------------------------


def test_two_versions_of_one_package_run_side_by_side(cluster: Cluster, repo: Path, index: IndexServer) -> None:
    """Two actors, each created with its own runtime_env asking for another version of adaptor-a, alive at once:
    each imports its version from its own tree, and neither sees the other's."""
    envs = [rr.runtime_env(f"adaptor-a=={v}", repo=repo, install=options(index)) for v in ("1.0", "2.0")]
    one, two = (Holder.options(runtime_env=env).remote("adaptor_a") for env in envs)  # type: ignore[attr-defined]
    try:
        (v1, file1), (v2, file2) = ray.get([one.version.remote(), two.version.remote()], timeout=300)
        assert (v1, v2) == ("1.0", "2.0")
        with Repo(repo) as opened:
            tree1, tree2 = opened.tree_path("adaptor-a==1.0"), opened.tree_path("adaptor-a==2.0")
        assert file1.startswith(tree1 + os.sep)
        assert file2.startswith(tree2 + os.sep)
        path1, path2 = ray.get([one.path.remote(), two.path.remote()], timeout=60)
        assert tree1 in path1 and tree2 not in path1
        assert tree2 in path2 and tree1 not in path2
        # Both still alive and still on their own version (one worker process each, side by side).
        assert ray.get([one.version.remote(), two.version.remote()], timeout=60) == [(v1, file1), (v2, file2)]
    finally:
        ray.kill(one)
        ray.kill(two)
    assert index.downloads("adaptor_a-1.0") == 1
    assert index.downloads("adaptor_a-2.0") == 1


def test_trees_go_first_and_the_pythonpath_given_stays_behind(repo: Path, index: IndexServer, tmp_path: Path) -> None:
    """The trees are first on the worker's path; a PYTHONPATH in the runtime_env's env_vars follows them."""
    mine = tmp_path / "mine"
    mine.mkdir()
    env = {
        **rr.runtime_env(["adaptor-b==1.0", "adaptor-d==1.0"], repo=repo, install=options(index)),
        "env_vars": {"PYTHONPATH": str(mine)},
    }
    seen = ray.get(imported.options(runtime_env=env).remote("adaptor_b"), timeout=300)
    with Repo(repo) as opened:
        trees = [opened.tree_path("adaptor-b==1.0"), opened.tree_path("adaptor-d==1.0")]
    assert seen["version"] == "1.0"
    assert seen["path"].index(trees[0]) < seen["path"].index(trees[1]) < seen["path"].index(str(mine))


# ---- installed once --------------------------------------------------------------------------------------------


def test_one_install_per_tree_with_workers_on_two_nodes(repo: Path, index: IndexServer, nodes: list[str]) -> None:
    """Three tasks per node, each with its own runtime_env (so each agent creates three envs at once, on two
    nodes), all asking for the same two packages while their downloads are held back: each wheel is downloaded
    once, the repo holds one tree per spec, and every task imports the same trees."""
    assert len(nodes) == 2
    index.delays["adaptor_b"] = 1.5
    index.delays["adaptor_e"] = 1.5
    asked = rr.runtime_env(["adaptor-b==1.0", "adaptor-e==1.0"], repo=repo, install=options(index))
    refs = [
        imported.options(
            runtime_env={**asked, "env_vars": {"WHICH": f"{node}-{n}"}},
            scheduling_strategy=NodeAffinitySchedulingStrategy(node, soft=False),
        ).remote(module)
        for node in nodes
        for n, module in enumerate(["adaptor_b", "adaptor_e", "dep_c"])
    ]
    seen = ray.get(refs, timeout=300)
    assert {s["node"] for s in seen} == set(nodes)
    assert {s["version"] for s in seen} == {"1.0"}
    for wheel in ("adaptor_b-1.0", "adaptor_e-1.0", "dep_c-1.0"):
        assert index.downloads(wheel) == 1, wheel
    assert trees_per_name(repo) == Counter({"adaptor-b": 1, "adaptor-e": 1})
    with Repo(repo) as opened:
        tree_b = opened.tree_path("adaptor-b==1.0")
    assert {s["file"] for s in seen if s["file"].endswith("adaptor_b/__init__.py")} == {
        os.path.join(tree_b, "adaptor_b", "__init__.py")
    }


# ---- failures --------------------------------------------------------------------------------------------------


def test_a_failed_install_fails_the_task_and_the_actor_with_its_error(repo: Path, index: IndexServer) -> None:
    """A package whose dependency is on no index: the task fails with RuntimeEnvSetupError carrying
    repoinstall's one-line error (then pip's reason), so does the actor's first call; Ray's retries of the
    creation get the same error without running the installer again."""
    index.hashes = False  # a plain find-links page: pip downloads the wheel itself, one count per installer run
    env = rr.runtime_env("needs-missing==1.0", repo=repo, install=options(index))
    with pytest.raises(RuntimeEnvSetupError) as failed:
        ray.get(imported.options(runtime_env=env).remote("needs_missing"), timeout=300)
    text = str(failed.value)
    assert "InstallError: needs-missing==1.0: pip failed" in text
    assert "not-on-the-index" in text
    assert index.downloads("needs_missing") == 1  # one installer run for Ray's three attempts
    actor = Holder.options(runtime_env=env).remote("needs_missing")  # type: ignore[attr-defined]
    with pytest.raises((RuntimeEnvSetupError, ray.exceptions.ActorDiedError)) as died:
        ray.get(actor.version.remote(), timeout=300)
    assert "needs-missing==1.0: pip failed" in str(died.value)
    assert trees_per_name(repo) == Counter()


@pytest.mark.parametrize(
    ("value", "error"),
    [
        ({"packages": ["adaptor-a==="]}, "is not a valid version"),
        ({"packages": []}, "nothing to install"),
        ({"packages": ["adaptor-a==1.0"], "repo": "relative/repo"}, "repo must be an absolute path"),
        ({"packages": ["adaptor-a==1.0"], "colour": "blue"}, "'colour' is not a repo option"),
        ({"packages": ["adaptor-a==1.0"], "jobs": 0}, "jobs"),
        ({"packages": ["adaptor-a==1.0"], "install": {"installer": "conda"}}, "--installer must be one of"),
        ("adaptor-a==1.0", "must be a mapping"),
    ],
)
def test_bad_input_is_refused_before_anything_runs(
    cluster: Cluster, repo: Path, index: IndexServer, value: Any, error: str
) -> None:
    """A runtime_env the helper would refuse at once, given to Ray as is: the plugin's validate refuses it on
    the node with the same one line; the repo is not created and the index is not asked."""
    value = {"repo": str(repo), "install": options(index), **value} if isinstance(value, dict) else value
    with pytest.raises(InvalidInput) as here:
        rr.packages_of(value).check()
    assert error in str(here.value)
    assert len(str(here.value).splitlines()) == 1
    with pytest.raises(RuntimeEnvSetupError) as there:
        ray.get(imported.options(runtime_env={rr.NAME: value}).remote("adaptor_a"), timeout=300)
    assert str(here.value) in str(there.value)
    assert not repo.exists()
    assert not index.pages
    assert not index.started


def test_the_helper_refuses_bad_input_with_one_line(repo: Path) -> None:
    for call, error in [
        (lambda: rr.runtime_env("adaptor-a===", repo=repo), "is not a valid version"),
        (lambda: rr.runtime_env(repo=repo), "nothing to install"),
        (lambda: rr.runtime_env("adaptor-a==1.0", repo="rel"), "repo must be an absolute path"),
        (lambda: rr.runtime_env("adaptor-a==1.0", repo=repo, wait_timeout=-1), "wait"),
        (lambda: rr.runtime_env("adaptor-a==1.0", repo=repo, install=3), "install must be"),
    ]:
        with pytest.raises(InvalidInput) as refused:
            call()
        assert error in str(refused.value)
        assert len(str(refused.value).splitlines()) == 1
    assert not repo.exists()


# ---- the plugin not registered ---------------------------------------------------------------------------------


def test_a_node_without_the_plugin_is_named_before_anything_runs(
    cluster: Cluster, repo: Path, index: IndexServer
) -> None:
    """A node whose Ray was started without RAY_RUNTIME_ENV_PLUGINS ignores the "repoinstall" key (the task then
    fails with an ImportError): check_registered(), which runtime_env() calls, names that node instead."""
    rr.check_registered()  # the two nodes with the plugin
    bare = cluster.add_node(num_cpus=0, object_store_memory=80 << 20, env_vars={"RAY_RUNTIME_ENV_PLUGINS": ""})
    try:
        cluster.wait_for_nodes()
        with pytest.raises(rr.PluginNotRegistered) as refused:
            rr.runtime_env("adaptor-a==1.0", repo=repo, install=options(index))
        assert bare.node_id in str(refused.value)
        assert 'RAY_RUNTIME_ENV_PLUGINS=\'[{"class": "repoinstall.ray.RepoInstallPlugin"}]\'' in str(refused.value)
        # What the check prevents: Ray runs the task without the trees.
        value = rr.runtime_env("adaptor-a==1.0", repo=repo, install=options(index), check=False)
        pinned = NodeAffinitySchedulingStrategy(bare.node_id, soft=False)
        with pytest.raises(ray.exceptions.RayTaskError, match="No module named 'adaptor_a'"):
            ray.get(imported.options(runtime_env=value, scheduling_strategy=pinned).remote("adaptor_a"), timeout=300)
        assert not repo.exists()
    finally:
        cluster.remove_node(bare)


def test_before_ray_init_the_drivers_environment_is_checked(tmp_path: Path) -> None:
    """Before ray.init() (which hands this process's environment to the local cluster it starts), the helper
    reads RAY_RUNTIME_ENV_PLUGINS: without the plugin in it, one line says how to register it."""
    code = "import repoinstall.ray as r; print(r.runtime_env('adaptor-a==1.0', repo='/shared/repo'))"
    without = isolated_env(PYTHONPATH=str(ROOT))
    without.pop("RAY_RUNTIME_ENV_PLUGINS", None)
    done = subprocess.run([sys.executable, "-c", code], env=without, capture_output=True, text=True, check=False)
    assert done.returncode == 1
    last = done.stderr.strip().splitlines()[-1]
    assert last.startswith("repoinstall.ray.PluginNotRegistered: the repoinstall Ray plugin is not registered")
    with_it = {**without, "RAY_RUNTIME_ENV_PLUGINS": rr.PLUGINS}
    done = subprocess.run([sys.executable, "-c", code], env=with_it, capture_output=True, text=True, check=False)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "{'repoinstall': {'packages': ['adaptor-a==1.0'], 'repo': '/shared/repo'}}"
