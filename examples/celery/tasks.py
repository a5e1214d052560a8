"""Celery tasks that run with repoinstall trees: a fixed set for every task, and versions per task.

    pip install 'repoinstall[celery]'
    python examples/celery/tasks.py [--repo DIR]

starts a worker (``celery -A tasks worker``, prefork, 2 processes), sends it three tasks, prints what each saw
and stops it. The broker is ``CELERY_BROKER_URL`` (``redis://127.0.0.1:6379/0``, say), or, if unset, a
filesystem broker under the repo directory, so it runs on a fresh machine with no server. Packages come from
``INDEX_URL`` if set, else from the index pip is configured for (PyPI).
"""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
from importlib import metadata
from pathlib import Path

from celery import Celery

from repoinstall.celery import preload, requires

REPO = os.environ.get("EXAMPLE_REPO") or str(Path(tempfile.gettempdir(), "repoinstall-celery-example"))
INSTALL = {"index_url": os.environ["INDEX_URL"]} if os.environ.get("INDEX_URL") else None
OPTIONS = {"repo": REPO, "install": INSTALL}


def make_app() -> Celery:
    broker = os.environ.get("CELERY_BROKER_URL")
    if broker:
        return Celery("tasks", broker=broker, backend=broker)
    folder = Path(REPO, "celery-broker")
    for sub in ("queue", "processed", "results", "control"):
        (folder / sub).mkdir(parents=True, exist_ok=True)
    app = Celery("tasks", broker="filesystem://", backend=f"file://{folder / 'results'}")
    app.conf.broker_transport_options = {
        "data_folder_in": str(folder / "queue"),
        "data_folder_out": str(folder / "queue"),
        "processed_folder": str(folder / "processed"),
        "control_folder": str(folder / "control"),
    }
    return app


app = make_app()

# Every worker of this app starts with tomli-w 1.0.0 first on sys.path (ensured once, before the pool starts;
# a worker that cannot have it exits with the one-line error instead of serving tasks).
preload(app, "tomli-w==1.0.0", **OPTIONS)


def seen(project: str, module: object) -> str:
    return f"{project} {metadata.version(project)} from {Path(str(getattr(module, '__file__', '?'))).parent}"


@app.task
def fixed() -> str:
    import tomli_w

    return seen("tomli-w", tomli_w)


@app.task
@requires("tomli-w==1.1.0", isolated=True, **OPTIONS)  # this process holds 1.0.0: a fresh interpreter for 1.1.0
def newer() -> str:
    import tomli_w

    return seen("tomli-w", tomli_w)


@app.task
@requires("tomli-w==1.1.0", **OPTIONS)  # refused in-process: the worker imported 1.0.0 (use isolated=True)
def newer_in_process() -> str:
    import tomli_w

    return seen("tomli-w", tomli_w)


def main() -> None:
    if sys.argv[1:2] == ["--repo"]:
        os.environ["EXAMPLE_REPO"] = sys.argv[2]
    here = str(Path(__file__).resolve().parent)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [here, os.environ.get("PYTHONPATH")]))}
    command = [sys.executable, "-m", "celery", "-A", "tasks", "worker", "-P", "prefork", "-c", "2", "-l", "warning",
               "--without-gossip", "--without-mingle", "--without-heartbeat"]  # fmt: skip
    worker = subprocess.Popen(command, env=env, cwd=here)
    try:
        sys.path.insert(0, here)
        import tasks  # this file as the worker imports it (its tasks' names are tasks.*)

        print("fixed:           ", tasks.fixed.delay().get(timeout=300))
        print("newer (isolated):", tasks.newer.delay().get(timeout=300))
        try:
            tasks.newer_in_process.delay().get(timeout=300)
        except Exception as error:  # ActivationConflict, with its one line
            print("newer in-process: refused:", type(error).__name__, error)
    finally:
        worker.terminate()
        worker.wait(timeout=60)


if __name__ == "__main__":
    main()
