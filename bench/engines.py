"""Worker runtimes on real engines: N workers starting at once with the same packages, through repoinstall and
through each engine's own way, one engine after another.

    python bench/engines.py [--quick] [dask] [ray] [celery]

Runs ``bench/engine_<name>.py`` for each engine named (all three by default) and prints what each printed: installs
(trees installed and wheel downloads: distinct trees, not N) and seconds to the first task, beside Dask's
``PipInstall``, Ray's ``runtime_env={"pip": ...}`` and, for Celery (which has no mechanism of its own), a
``pip install --target`` in each worker process. Each engine's benchmark runs on its own too.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
from pathlib import Path

ENGINES = ("dask", "ray", "celery")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="one round each (for CI)")
    parser.add_argument("engines", nargs="*", metavar="ENGINE", help=f"any of {', '.join(ENGINES)} (default: all)")
    args = parser.parse_args()
    if unknown := sorted(set(args.engines) - set(ENGINES)):
        parser.error(f"{unknown[0]}: not one of {', '.join(ENGINES)}")
    failed = []
    for engine in args.engines or ENGINES:
        print(f"=== {engine}", flush=True)
        command = [sys.executable, str(Path(__file__).with_name(f"engine_{engine}.py"))]
        done = subprocess.run([*command, *(["--quick"] if args.quick else [])], check=False)
        if done.returncode != 0:
            failed.append(engine)
    if failed:
        sys.exit(f"failed: {', '.join(failed)}")


if __name__ == "__main__":
    main()
