"""Give every Dask worker its packages from a shared repo: installed once, however many workers start.

    python examples/dask/example.py [--repo DIR] [--workers N] [--index-url URL] [SPEC ...]

Starts a LocalCluster of N worker processes, registers ``RepoInstall(SPECs)`` on it, adds one more worker (it finds
the trees already there), and runs a task on every worker that imports the first spec's module. The index is pip's
default (PyPI) unless ``--index-url`` or ``INDEX_URL`` names another one.
"""

from __future__ import annotations

import argparse
import os
import tempfile

from distributed import Client, LocalCluster
from packaging.requirements import Requirement

from repoinstall import InstallOptions, RepoinstallError
from repoinstall.dask import RepoInstall


def imported(module: str) -> str:
    """On a worker: where ``module`` comes from."""
    loaded = __import__(module)
    version = getattr(loaded, "__version__", getattr(loaded, "VERSION", "?"))
    return f"{module} {version} from {os.path.dirname(loaded.__file__ or '?')}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("specs", nargs="*", default=["six==1.17.0"], metavar="SPEC")
    parser.add_argument("--repo", default=os.path.join(tempfile.gettempdir(), "repoinstall-dask-example"))
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--index-url", default=os.environ.get("INDEX_URL"))
    parser.add_argument("--module", help="the module to import (default: the first spec's name)")
    args = parser.parse_args()

    try:
        # A bad spec or option is refused here, before any worker is asked.
        plugin = RepoInstall(args.specs, repo=args.repo, install=InstallOptions(index_url=args.index_url))
    except RepoinstallError as error:
        raise SystemExit(f"repoinstall: error: {error}") from None
    module = args.module or Requirement(args.specs[0]).name.replace("-", "_")
    cluster = LocalCluster(n_workers=args.workers, threads_per_worker=1, dashboard_address=None)
    with cluster, Client(cluster) as client:
        client.register_plugin(plugin)  # every worker now has the trees first on sys.path
        cluster.scale(args.workers + 1)  # a worker that joins later gets them too
        client.wait_for_workers(args.workers + 1)
        for worker, line in sorted(client.run(imported, module).items()):
            print(f"{worker}: {line}")
    print(f"trees in {args.repo}: repoinstall list --repo {args.repo}")


if __name__ == "__main__":
    main()
