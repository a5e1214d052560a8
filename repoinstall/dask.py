"""Dask: a :class:`distributed.WorkerPlugin` that gives every worker, present and future, its packages from a repo.

    from repoinstall.dask import RepoInstall

    client.register_plugin(RepoInstall(["pandas==2.2.3", "attrs==26.1.0"], repo="/shared/repo"))

On each worker (the ones running now, and each one that joins later, ``cluster.scale``, a nanny's restart)
:meth:`RepoInstall.setup` ensures the trees, each installed once cluster-wide however many workers start at once
(the others wait for it or find it present), then puts them first on the worker process's ``sys.path`` in the
order ``repoinstall path`` prints them; trees holding different versions of one distribution are refused
(:class:`~repoinstall.TreesConflict`), as is a tree whose modules the worker already imported from another
version (:class:`~repoinstall.ActivationConflict`), as :meth:`Repo.activate` refuses them.

Bad input is refused where the plugin is made, before anything is registered, with a one-line
:class:`~repoinstall.InvalidInput`: a spec that does not parse, a requirements file that cannot be read, an option
out of range (:meth:`Packages.check`), a malformed index or find-links URL. What only a worker can tell (a
version the index does not have, an index that is down, trees that conflict) fails that worker loudly:
repoinstall's error, as ``repoinstall ensure`` prints it, reaches ``register_plugin``'s caller, and the worker
closes together with its nanny, so that a worker without its packages never takes a task (distributed itself logs
a failing ``setup`` and lets the worker run on). The plugin stays registered (distributed keeps it): each worker
added later tries again, and closes if it fails too. Unregister it
(``client.unregister_worker_plugin(plugin.name)``) before registering a corrected one.

This is written as distributed's own ``PipInstall`` (its ``_InstallWorkerPlugin``) is: a ``name``, idempotent
registration, the work in ``setup(worker)``. Unlike it, the install runs off the worker's event loop (it can take
minutes; the worker keeps its heartbeats and answers the scheduler), nothing is installed on the scheduler, and no
per-host semaphore is needed: the repo's per-tree locks keep each install to one worker, cluster-wide.
"""

from __future__ import annotations

import hashlib
import logging
import os
from collections.abc import Iterable, Mapping
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING, Any, cast

from distributed.core import Status
from distributed.diagnostics.plugin import WorkerPlugin

from ._options import InstallOptions
from ._workers import Packages, off_loop, one_line, put_first

if TYPE_CHECKING:
    from distributed import Worker

__all__ = ["RepoInstall"]

#: Under ``distributed``'s logger, so the line shows in the worker's log as distributed configures it.
logger = logging.getLogger("distributed.repoinstall")

#: The topic of the events each worker logs on the scheduler (``client.get_events("repoinstall")``): which trees
#: it activated, or why it closed.
EVENT_TOPIC = "repoinstall"


class RepoInstall(WorkerPlugin):
    """Install ``specs`` (and ``requirements=``/``lock=`` files) into ``repo`` once cluster-wide and activate them on
    every worker. ``install``: :class:`~repoinstall.InstallOptions` (or a mapping of its fields); the other keywords
    are :class:`~repoinstall.Repo`'s options (``lock``, ``wait_timeout``, ``jobs``, ...).

    Requirements and lock files are read here (to refuse a bad one now) and again by each worker at the same path:
    keep them where the workers see them, as the repo is.
    """

    #: A second registration of the same packages (same repo, options and file contents) is a no-op.
    idempotent = True
    name: str

    def __init__(
        self,
        specs: str | Iterable[str] = (),
        *,
        requirements: str | Iterable[str] = (),
        lock: str | Iterable[str] | bool = (),
        repo: str | os.PathLike[str] | None = None,
        install: InstallOptions | Mapping[str, Any] | None = None,
        **options: Any,
    ) -> None:
        self.packages = Packages.of(specs, requirements=requirements, lock=lock, repo=repo, install=install, **options)
        self.packages.check()  # InvalidInput (one line) before anything is registered
        self.name = f"repoinstall-{_digest(self.packages)}"
        #: On a worker, once set up: the trees it activated, in order.
        self.paths: list[str] = []

    async def setup(self, worker: Worker) -> None:
        """Ensure the trees (off the event loop) and put them first on this worker process's ``sys.path``; on any
        failure close the worker (and its nanny) and raise the error to whoever registered the plugin."""
        try:
            # Many workers may run this at once, in one process or many hosts: each tree is still installed
            # once, because Packages.ensure takes the repo's per-tree lock and re-checks under it.
            # On repoinstall's threads, not the worker's loop nor its default executor: the ensure, and put_first's
            # look into each tree (sys.path is per process; put_first edits it under activation's lock).
            paths = await off_loop(partial(_ensured_first, self.packages))
        except Exception as error:
            line = one_line(error)
            logger.error("repoinstall: closing worker %s: %s", worker.address, error)  # all of it: pip's tail too
            worker.log_event(EVENT_TOPIC, {"worker": worker.address, "plugin": self.name, "error": str(error)})
            # A worker without its packages must not take a task: from now on it runs nothing (not even what it
            # was already sent) and the scheduler sends it nothing more; then it goes, as its own task, since this
            # setup's error must first travel back to register_plugin's caller (or the new worker finish joining).
            worker.status = Status.closing_gracefully
            worker.loop.add_callback(_leave, worker, f"repoinstall: {line}")
            raise
        self.paths = paths
        logger.info("repoinstall: %s: activated %s", self.packages.describe(), ", ".join(paths))
        worker.log_event(EVENT_TOPIC, {"worker": worker.address, "plugin": self.name, "paths": paths})


def _ensured_first(packages: Packages) -> list[str]:
    paths = packages.ensure()
    put_first(paths)
    return paths


async def _leave(worker: Worker, reason: str) -> None:
    """Close ``worker`` for good: its nanny closes (stopping the worker process as it does) rather than restarting it
    into the same failure; without a nanny the worker closes itself."""
    # Typed as a Nanny, it holds the nanny's address (Worker.close calls it the same way).
    if address := cast("str | None", worker.nanny):
        try:
            async with worker.rpc(address) as nanny:
                await nanny.terminate(reason=reason)
        except OSError:
            pass  # the nanny stopped this process while we waited for its answer (CommClosedError)
    await worker.close(nanny=False, reason=reason)


def _digest(packages: Packages) -> str:
    """What makes two registrations the same: the packages, repo and options, and the files' contents (a file
    edited since is a new plugin, not a no-op)."""
    digest = hashlib.sha256(repr(packages).encode())
    for name in packages.files:
        digest.update(Path(name).read_bytes())  # check() has just read each one
    return digest.hexdigest()[:16]
