"""Two Ray tasks, two versions of one package, side by side, each installed once into a repo directory.

    RAY_RUNTIME_ENV_PLUGINS='[{"class": "repoinstall.ray.RepoInstallPlugin"}]' \
        python examples/ray/two_versions.py [--repo DIR] [--package six] [--versions 1.16.0 1.17.0]

Starts a local Ray (or joins the one ``RAY_ADDRESS`` names), asks for each version through
``repoinstall.ray.runtime_env`` and prints what each task imported. Packages come from PyPI, or from the index
``REPOINSTALL_INDEX_URL`` names (a local one, say).
"""

from __future__ import annotations

import argparse
import os
import tempfile

import ray

import repoinstall.ray


@ray.remote
def imported(package: str, module: str) -> str:
    import importlib
    import importlib.metadata

    loaded = importlib.import_module(module)
    return f"{package} {importlib.metadata.version(package)}: {module} from {loaded.__file__}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repo", default=os.path.join(tempfile.gettempdir(), "repoinstall-ray-example"))
    parser.add_argument("--package", default="six")
    parser.add_argument("--module", default=None, help="the module to import (default: the package name)")
    parser.add_argument("--versions", nargs=2, default=["1.16.0", "1.17.0"])
    args = parser.parse_args()
    index = os.environ.get("REPOINSTALL_INDEX_URL")
    install = {"index_url": index} if index else None
    repo = os.path.abspath(args.repo)

    ray.init()
    # runtime_env() checks the input, and that every node's Ray loaded the plugin (else it says how to register it).
    envs = [
        repoinstall.ray.runtime_env(f"{args.package}=={version}", repo=repo, install=install)
        for version in args.versions
    ]
    module = args.module or args.package.replace("-", "_")
    for line in ray.get([imported.options(runtime_env=env).remote(args.package, module) for env in envs]):
        print(line)


if __name__ == "__main__":
    main()
