"""Ray: N tasks start at once asking for the same 3 packages, with repoinstall's runtime_env plugin beside Ray's own
``runtime_env={"pip": ...}``, both from one local index (pypiserver on 127.0.0.1).

    python bench/engine_ray.py [--quick] [--nodes 1|2]

One Ray cluster (``ray.cluster_utils.Cluster``: a head and, with ``--nodes 2``, one more raylet node, each with its
own runtime-env agent and resources dir, 2 CPUs each). For N = 2 and 4 tasks spread over the nodes, all submitted
at once with the same ``runtime_env``: seconds until the first task has imported the 3 packages and until the
last has, what was installed (repoinstall: trees in the shared repo; pip: one virtualenv per node, each with the
whole closure) and wheel downloads (from the index's request log). Each round asks for a fresh install: a new repo
for repoinstall, a new pip option value (so a new virtualenv on each node) for Ray's pip. No pip cache for either.
Targets: repoinstall installs 3 trees and downloads each of the 7 wheels once for every N and node count.
Ray's pip runtime_env needs ``virtualenv`` (in ``ray[default]``): without it the baseline lines say "not run".
"""

from __future__ import annotations

import argparse
import importlib.util
import os
import re
import statistics
import subprocess
import time
from pathlib import Path
from typing import Any, NamedTuple

from common import PACKAGES, machine
from common import build as build_wheels
from rayworld import environment, head_args, head_temp_dir, temp_dir  # tests/support, put on sys.path by common
from servers import _bin, _wait_up, free_port

from repoinstall import Repo

SPECS = [f"{name}==1.0" for name in PACKAGES[:3]]
MODULES = [name.replace("-", "_") for name in PACKAGES[:3]]
PLUGINS = '[{"class": "repoinstall.ray.RepoInstallPlugin"}]'
#: The wheels the 3 packages need: themselves and the 4 libraries between them.
WHEELS = 7


class CountingPypiServer:
    """``pypi-server run -v`` over a directory: its log has one line per request, so wheel downloads can be
    counted (bench/servers.py's PypiServer, plus the request log)."""

    def __init__(self, packages: Path, workdir: Path) -> None:
        self.log = workdir / "pypiserver.log"
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.simple = self.url + "/simple/"
        command = [_bin("pypi-server"), "run", "-v", "-p", str(self.port), "-i", "127.0.0.1", "-a", ".", "-P", "."]
        with open(self.log, "wb") as out:
            self.proc = subprocess.Popen(
                [*command, str(packages)], stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL
            )
        _wait_up(self.url + "/", self.proc, self.log)

    def downloads(self) -> int:
        return len(re.findall(r"GET \S+/packages/\S+\.whl>", self.log.read_text()))

    def stop(self) -> None:
        self.proc.terminate()
        self.proc.wait(timeout=30)


class Start(NamedTuple):
    first: float  # seconds from submitting the N tasks until the first has imported the packages
    last: float
    installs: int  # repoinstall: trees in the repo; pip: virtualenvs created
    dists: int  # distributions installed: distinct ones in the repo's trees; summed over the virtualenvs
    downloads: int


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="one round instead of three")
    parser.add_argument("--nodes", type=int, choices=(1, 2), default=2)
    args = parser.parse_args()
    rounds = 1 if args.quick else 3
    with temp_dir("rayb-") as work:  # short: Ray's sockets are under it
        build_wheels(work / "wheels")
        server = CountingPypiServer(work / "wheels", work)
        try:
            run(work, server, args.nodes, rounds)
        finally:
            server.stop()


def run(work: Path, server: CountingPypiServer, nodes: int, rounds: int) -> None:
    # Every Ray process, this one too: this machine's pip configuration off and no pip cache (so both ways
    # download what they install), no token auth, no usage stats, 127.0.0.1, ``work`` as Ray's temp dir (nothing
    # from an earlier Ray needed, nothing left behind), this checkout of repoinstall, the plugin registered.
    os.environ.clear()
    os.environ.update(environment(work, PLUGINS))
    import ray
    from ray.cluster_utils import Cluster

    import repoinstall.ray as rr

    node = {"num_cpus": 2, "object_store_memory": 80 << 20}
    cluster = Cluster(
        initialize_head=True,
        connect=True,
        head_node_args={**node, **head_args(work), "runtime_env_dir_name": "rr0"},
    )
    try:
        for n in range(1, nodes):
            cluster.add_node(**node, runtime_env_dir_name=f"rr{n}")
        cluster.wait_for_nodes()
        rr.check_registered()  # once, before any timing (it starts one probe worker per node)
        print(f"# {machine()}, Ray {ray.__version__}, {nodes} node(s), packages {', '.join(SPECS)}")
        # Ray's pip runtime_env makes its virtualenvs with virtualenv (in ray[default], not in plain ray).
        baseline = importlib.util.find_spec("virtualenv") is not None
        ours: dict[int, Start] = {}
        for tasks in (2, 4):
            mine: list[Start] = []
            theirs: list[Start] = []
            for round_ in range(rounds):
                repo = work / f"repo-{tasks}-{round_}"
                asked = rr.runtime_env(SPECS, repo=repo, install={"index_url": server.simple}, check=False)
                mine.append(start(ray, asked, tasks, server, lambda r=repo: in_repo(r)))
                if not baseline:
                    continue
                # A pip option that changes nothing but the env's hash: a new virtualenv on each node each round.
                options = ["--index-url", server.simple, "--retries", str(100 + 10 * tasks + round_)]
                pip = {"pip": {"packages": SPECS, "pip_install_options": options}}
                theirs.append(start(ray, pip, tasks, server, lambda: in_venvs(work)))
            show(f"N={tasks} repoinstall plugin", mine)
            if baseline:
                show(f"N={tasks} ray pip runtime_env", theirs)
            else:
                print(f"N={tasks} ray pip runtime_env: not run (it needs virtualenv: pip install virtualenv)")
            ours[tasks] = max(mine, key=lambda s: (s.installs, s.downloads))
        each = ", ".join(f"N={n}: {s.installs} trees, {s.downloads} downloads" for n, s in ours.items())
        good = all(s.installs == len(SPECS) and s.downloads == WHEELS for s in ours.values())
        print(f"repoinstall: {len(SPECS)} trees and {WHEELS} wheel downloads for every N ({each}): {_verdict(good)}")
    finally:
        ray.shutdown()
        cluster.shutdown()


def start(ray: Any, runtime_env: dict[str, Any], tasks: int, server: CountingPypiServer, installed: Any) -> Start:
    from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

    nodes = sorted(n["NodeID"] for n in ray.nodes() if n["Alive"])
    task = ray.remote(imports)
    before = server.downloads()
    started = time.perf_counter()
    refs = [
        task.options(
            num_cpus=0,
            runtime_env=runtime_env,
            scheduling_strategy=NodeAffinitySchedulingStrategy(nodes[i % len(nodes)], soft=False),
        ).remote(MODULES)
        for i in range(tasks)
    ]
    ray.wait(refs, num_returns=1, timeout=900)
    first = time.perf_counter() - started
    versions = ray.get(refs, timeout=900)
    last = time.perf_counter() - started
    assert all(v == ["1.0"] * len(MODULES) for v in versions), versions
    installs, dists = installed()
    return Start(first, last, installs, dists, server.downloads() - before)


def imports(modules: list[str]) -> list[str]:
    import importlib

    return [importlib.import_module(m).VERSION for m in modules]


def in_repo(repo: Path) -> tuple[int, int]:
    with Repo(repo) as opened:
        trees = [path for _, path in opened.list()]
    return len(trees), len({d.name for t in trees for d in Path(t).glob("*.dist-info")})  # a shared lib: once


_seen_venvs: set[Path] = set()
#: What a new virtualenv holds before pip installs into it.
_SEEDS = ("pip-", "setuptools-", "wheel-", "_virtualenv")


def in_venvs(work: Path) -> tuple[int, int]:
    """Virtualenvs Ray's pip plugin made since the last call, and the distributions pip installed into them."""
    sessions = head_temp_dir(work)
    found = {p.resolve() for p in sessions.glob("session_*/rr*/pip/*/virtualenv")}  # session_latest too
    venvs = found - _seen_venvs
    _seen_venvs.update(venvs)
    dists = [d for v in venvs for d in v.glob("lib/python*/site-packages/*.dist-info")]
    return len(venvs), sum(not d.name.startswith(_SEEDS) for d in dists)


def _verdict(good: bool) -> str:
    return "ok" if good else "MISSED"


def show(label: str, starts: list[Start]) -> None:
    first = statistics.median(s.first for s in starts)
    last = statistics.median(s.last for s in starts)
    s = starts[-1]
    what = "trees" if "repoinstall" in label else "virtualenvs"
    print(
        f"{label:30s} first task {first:5.1f} s, all {last:5.1f} s, installed {s.installs} {what} "
        f"({s.dists} dists), wheel downloads {s.downloads}"
    )


if __name__ == "__main__":
    main()
