"""Dask: N worker processes get the same 3 packages at once, repoinstall's RepoInstall beside Dask's PipInstall.

    python bench/engine_dask.py [--quick] [--rounds R]

For N = 2 and 4 workers (a LocalCluster of worker processes, started before the clock), each plugin is registered
on all of them at once, from the same local index (IndexServer on 127.0.0.1, which counts wheel downloads), and
the clock stops when a task that imports the 3 packages has run: seconds to that first task, installs (repoinstall:
trees installed in the repo; PipInstall: pip runs) and wheel downloads. Then one more worker joins: seconds until
it has run the same task, and what it installed and downloaded.

The baseline is Dask's own ``PipInstall(packages, pip_options=[...])``. It pip-installs on the scheduler (this
process) and then on every worker, one at a time per host (a semaphore), into the environment unless told
otherwise: here it is told ``--target <a fresh directory per run>``, and its tasks put that directory on
``sys.path``, so this machine's site-packages is never written. Every pip and every worker runs with pip's
configuration switched off and no download cache (each download reaches the index and is counted).
"""

from __future__ import annotations

import argparse
import logging
import os
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import NamedTuple

from common import LIBRARIES, PACKAGES, ROOT, build, machine
from helpers import isolated_env
from indexserver import IndexServer

from repoinstall import InstallOptions, Repo

#: Three adaptors of bench/common.py's set, each needing two of its four libraries: 3 trees, 7 distinct dists.
ADAPTORS = PACKAGES[:3]
SPECS = [f"{name}==1.0" for name in ADAPTORS]


class Run(NamedTuple):
    first_task: float  # seconds from registering the plugin to the first task that imports the 3 packages
    installs: int  # repoinstall: trees installed in the repo; PipInstall: pip runs
    downloads: int  # wheel downloads the index served
    added: float  # seconds from scale(N + 1) until the new worker ran the task
    added_installs: int
    added_downloads: int


def imports(target: str | None = None) -> list[str]:
    """The task: import the 3 adaptors (from ``target`` first, for PipInstall's ``--target``) and use them."""
    import importlib

    if target is not None and target not in sys.path:
        sys.path.insert(0, target)
    loaded = [importlib.import_module(name.replace("-", "_")) for name in ADAPTORS]
    return [module.VERSION for module in loaded]


def downloads(index: IndexServer) -> int:
    return sum(index.downloads(name.replace("-", "_")) for name in [*ADAPTORS, *LIBRARIES])


def one_run(workers: int, plugin: object, index: IndexServer, target: str | None, installs: Callable[[], int]) -> Run:
    from distributed import Client, LocalCluster

    index.started.clear()
    index.completed.clear()
    cluster = LocalCluster(
        n_workers=workers, threads_per_worker=1, processes=True, dashboard_address=None, silence_logs=logging.ERROR
    )
    with cluster, Client(cluster) as client:
        client.wait_for_workers(workers)
        started = time.perf_counter()
        client.register_plugin(plugin)  # type: ignore[arg-type]
        assert client.submit(imports, target, pure=False).result() == ["1.0"] * 3
        first = time.perf_counter() - started
        assert all(seen == ["1.0"] * 3 for seen in client.run(imports, target).values())  # every worker has them
        before = (installs(), downloads(index))
        present = set(client.scheduler_info()["workers"])
        started = time.perf_counter()
        cluster.scale(workers + 1)
        client.wait_for_workers(workers + 1)
        (new,) = set(client.scheduler_info()["workers"]) - present
        assert client.submit(imports, target, workers=[new], pure=False).result() == ["1.0"] * 3
        added = time.perf_counter() - started
        after = (installs(), downloads(index))
    return Run(first, *before, added, after[0] - before[0], after[1] - before[1])


def repoinstall_run(workers: int, index: IndexServer, work: Path) -> Run:
    from repoinstall.dask import RepoInstall

    repo = work / "repo"
    plugin = RepoInstall(SPECS, repo=repo, install=InstallOptions(index_url=index.url + "simple/"))

    def trees() -> int:
        with Repo(repo) as opened:
            return len(opened.list())

    return one_run(workers, plugin, index, None, trees)


def pipinstall_run(workers: int, index: IndexServer, work: Path) -> Run:
    from distributed.diagnostics.plugin import PipInstall

    target = work / "target"
    options = ["--target", str(target), "--index-url", index.url + "simple/", "--no-input"]
    plugin = PipInstall(SPECS, pip_options=options)
    # Each pip run downloads the first adaptor once (a --target run re-downloads what the directory has).
    return one_run(workers, plugin, index, str(target), lambda: index.downloads(ADAPTORS[0].replace("-", "_")))


def median(runs: list[Run]) -> Run:
    return Run(
        statistics.median(r.first_task for r in runs),
        max(r.installs for r in runs),
        max(r.downloads for r in runs),
        statistics.median(r.added for r in runs),
        max(r.added_installs for r in runs),
        max(r.added_downloads for r in runs),
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="one round (for CI)")
    parser.add_argument("--rounds", type=int, default=3, help="rounds per N (the median is shown)")
    args = parser.parse_args()
    rounds = 1 if args.quick else args.rounds
    with tempfile.TemporaryDirectory(prefix="daskb-") as tmp:
        # Workers are processes started from here: they get pip isolated, import repoinstall from this checkout
        # and have ``tmp`` as their temp dir; the scheduler's and the workers' scratch spaces are there too
        # (Dask's "temporary-directory", which the nannies hand their workers).
        os.environ.clear()
        os.environ.update(isolated_env(PYTHONPATH=str(ROOT), TMPDIR=tmp))
        import dask
        import distributed

        dask.config.set({"temporary-directory": tmp})
        print(f"{machine()}; distributed {distributed.__version__}; {rounds} round(s), medians")
        print(f"packages: {', '.join(SPECS)} (3 trees, {len(ADAPTORS) + len(LIBRARIES)} distinct wheels)")
        wheels = Path(tmp, "wheels")
        build(wheels)
        index = IndexServer(wheels).start()
        missed = []
        try:
            for workers in (2, 4):
                ours, theirs = [], []
                for round_ in range(rounds):
                    work = Path(tmp, f"{workers}-{round_}")
                    ours.append(repoinstall_run(workers, index, work / "ours"))
                    theirs.append(pipinstall_run(workers, index, work / "pip"))
                mine, base = median(ours), median(theirs)
                print(
                    f"N={workers} at once  | RepoInstall: {mine.installs} trees installed, {mine.downloads} wheel "
                    f"downloads, first task {mine.first_task:.1f} s | PipInstall --target: {base.installs} pip runs, "
                    f"{base.downloads} wheel downloads, first task {base.first_task:.1f} s"
                )
                print(
                    f"N={workers} +1 later  | RepoInstall: {mine.added_installs} trees installed, "
                    f"{mine.added_downloads} wheel downloads, its first task {mine.added:.1f} s | PipInstall --target: "
                    f"{base.added_installs} pip runs, {base.added_downloads} wheel downloads, "
                    f"its first task {base.added:.1f} s"
                )
                if (mine.installs, mine.downloads, mine.added_installs, mine.added_downloads) != (3, 7, 0, 0):
                    missed.append(workers)
        finally:
            index.stop()
    verdict = "ok" if not missed else f"MISSED for N={', '.join(map(str, missed))}"
    print(f"RepoInstall: 3 trees installed, 7 wheel downloads for every N, none for the worker added later: {verdict}")
    if missed:
        sys.exit(1)


if __name__ == "__main__":
    main()
