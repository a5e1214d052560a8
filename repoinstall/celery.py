"""Celery: tasks that run with repoinstall trees, ensured on the worker that runs them.

Per task, under ``@app.task``::

    from repoinstall.celery import requires

    @app.task
    @requires("python-dateutil==2.9.0.post0", repo="/shared/repo")
    def parse_date(text):
        from dateutil import parser  # python-dateutil 2.9.0.post0, from its tree
        return parser.isoparse(text).isoformat()

The first call in a worker process ensures the trees (each installed at most once cluster-wide; the other
processes and hosts wait for it or find it there) and remembers their paths; every call runs the body with them
first on ``sys.path`` (``Repo.activate``: refused with :class:`~repoinstall.ActivationConflict` if the process
already imported another version), or with ``isolated=True`` in a fresh interpreter that sees exactly them
(``Repo.call_isolated``). A failure reaches the caller's ``.get()`` as the :class:`~repoinstall.RepoinstallError`
subclass itself, its message the one line ``repoinstall ensure`` prints.

For a fixed set every task of a worker imports, in the tasks module::

    from repoinstall.celery import preload
    preload(app, "attrs==26.1.0", repo="/shared/repo")

The worker ensures the trees once when it starts, in its main process (``worker_init``, sent for every pool,
before the pool exists; prefork children, forked or spawned, inherit ``sys.path``), and puts them first on
``sys.path`` for good. Celery swallows exceptions in signal handlers; a failure here instead stops the worker
with exit status 1 and the one line, before it takes any task. ``worker_process_init`` re-checks each pool
process. Specs are checked where they are given (``requires``, ``preload``: at import of the tasks module),
without touching the repo or an index.
"""

from __future__ import annotations

import functools
import importlib
import inspect
import logging
import os
import signal
import sys
import threading
from collections import Counter
from collections.abc import Callable, Iterable, Iterator, Mapping
from contextlib import contextmanager
from typing import Any, ParamSpec, TypeVar

from celery import Celery, Task, signals
from celery.local import Proxy

from ._activate import _path_guard, call_isolated, check_together, conflict
from ._errors import ActivationConflict, InvalidInput, RepoinstallError, TreesConflict
from ._options import InstallOptions
from ._results import Event
from ._workers import Packages, one_line, put_first

__all__ = ["preload", "requires"]

P = ParamSpec("P")
R = TypeVar("R")

log = logging.getLogger("repoinstall.celery")

#: (module, qualified name) -> the undecorated body of each ``@requires`` task, for the fresh interpreter of an
#: isolated call (which imports the tasks module again and runs the body, not the Celery task around it).
_BODIES: dict[tuple[str, str], Callable[..., Any]] = {}

#: Packages -> their trees' paths, ensured once per process (the warm path: a dict lookup and a stat per tree).
_ensured: dict[Packages, list[str]] = {}
#: Packages -> the lock its first ensure in this process holds, so threads of one process ensure it once.
_ensuring: dict[Packages, threading.Lock] = {}
_ensuring_guard = threading.Lock()

#: Trees on sys.path right now, each with the number of running tasks that put it there (threads pools run
#: several at once), and the fixed set's trees, there for good. Changed only under ``_path_guard``.
_running: Counter[str] = Counter()
_fixed: list[str] = []

_TOP_LEVEL = (
    "isolated=True needs a function defined at the top level of an importable module (the fresh interpreter "
    "imports it by name)"
)
_ISOLATE_HINT = "; in a Celery task: @requires(..., isolated=True)"
_FIXED = "the worker's fixed set (preload)"
_RUNNING = "a task running now"


def requires(
    *specs: str,
    requirements: str | Iterable[str] = (),
    lock: str | Iterable[str] | bool = (),
    repo: str | os.PathLike[str] | None = None,
    install: InstallOptions | Mapping[str, Any] | None = None,
    isolated: bool = False,
    timeout: float | None = None,
    **options: Any,
) -> Callable[[Callable[P, R]], Callable[P, R]]:
    """Decorate a task body (under ``@app.task``) to run with these trees: specs (``"pkg==1.4"``),
    ``requirements=``/``lock=`` files, the repo (``None``: ``REPOINSTALL_REPO`` or the default), its
    :class:`~repoinstall.InstallOptions` (or a mapping of them) and :class:`~repoinstall.Repo` options
    (``wait_timeout=``, ``jobs=``, ...). ``isolated=True``: run the body in a fresh interpreter (arguments and
    result travel pickled; ``timeout`` seconds at most). Bad input raises :class:`~repoinstall.InvalidInput`
    here, at import of the tasks module."""
    packages = Packages.of(specs, requirements=requirements, lock=lock, repo=repo, install=install, **options)
    packages.check()
    if not isinstance(isolated, bool):
        raise InvalidInput(f"isolated must be True or False, got {isolated!r}")
    if timeout is not None and not isolated:
        raise InvalidInput("timeout= applies to isolated=True tasks only")

    def decorate(body: Callable[P, R]) -> Callable[P, R]:
        if issubclass(type(body), (Task, Proxy)):
            raise InvalidInput("@requires goes under @app.task (it decorates the task's function, not the task)")
        if not callable(body):
            raise InvalidInput(f"@requires decorates a function, got {type(body).__name__}")
        where = (getattr(body, "__module__", None) or "", getattr(body, "__qualname__", ""))
        if isolated and ("<locals>" in where[1] or not all(where)):
            raise InvalidInput(f"{where[1] or body!r}: {_TOP_LEVEL}")
        _BODIES[where] = body

        @functools.wraps(body)
        def run(*args: P.args, **kwargs: P.kwargs) -> R:
            if isolated:
                if where[0] == "__main__":  # a script's tasks as it runs itself; a worker imports them by name
                    raise InvalidInput(f"{where[1]}: {_TOP_LEVEL}, not __main__")
                if args and isinstance(args[0], Task):
                    raise InvalidInput(f"{where[1]}: an isolated task cannot be bound (bind=True): the task object "
                                       "does not travel to the fresh interpreter")  # fmt: skip
            paths = _trees(packages)
            if isolated:
                target = f"{__name__}:_call_body"
                return call_isolated(paths, target, (*where, args, kwargs), {}, timeout)  # type: ignore[return-value]
            with _activated(paths):
                return body(*args, **kwargs)

        # Celery checks a call's arguments against the task's signature (``.delay(1, 2, 3)`` on a body of one
        # argument fails at the caller): give it the body's, not ``*args, **kwargs``.
        run.__signature__ = inspect.signature(body)  # type: ignore[attr-defined]
        return run

    return decorate


def preload(
    app: Celery,
    *specs: str,
    requirements: str | Iterable[str] = (),
    lock: str | Iterable[str] | bool = (),
    repo: str | os.PathLike[str] | None = None,
    install: InstallOptions | Mapping[str, Any] | None = None,
    **options: Any,
) -> None:
    """Make every worker of ``app`` start with these trees first on ``sys.path`` for good (arguments as
    :func:`requires`). They are ensured when the worker starts, before its pool; if that fails, the worker exits
    with status 1 and the one-line error instead of serving tasks. Bad input raises
    :class:`~repoinstall.InvalidInput` here."""
    packages = Packages.of(specs, requirements=requirements, lock=lock, repo=repo, install=install, **options)
    packages.check()
    uid = f"repoinstall.celery.preload:{id(app)}:{hash(packages)}"

    said: list[str] = []
    main: list[int] = []  # the worker's main process, where worker_init ran

    def on_worker_init(sender: Any = None, **_: Any) -> None:
        if getattr(sender, "app", app) is not app:
            return  # another app's worker in this process
        main.append(os.getpid())
        try:
            _load_fixed(packages, said.append)
        except RepoinstallError as error:
            # Signal.send() logs and drops an Exception; SystemExit is not one: it leaves app.Worker() before
            # the pool or the consumer exist, so no task is taken, and the interpreter prints the line (logging
            # is not set up yet).
            raise SystemExit(f"repoinstall: error: {one_line(error)}") from None

    def on_after_setup(**_: Any) -> None:
        for line in said:
            log.info("%s", line)  # the worker's logging is set up now
        said.clear()

    def on_process_init(**_: Any) -> None:
        if os.getpid() in main:
            return  # the solo pool sends it in the main process: worker_init did it there
        # A pool process, forked or spawned by the main process: the trees are on its sys.path already, unless
        # something took them off.
        try:
            _load_fixed(packages)
        except RepoinstallError as error:
            log.critical("repoinstall: error: %s", one_line(error))
            if main and os.getppid() == main[0]:
                os.kill(main[0], signal.SIGTERM)  # stop the worker rather than have it start this process again
            os._exit(1)

    signals.worker_init.connect(on_worker_init, weak=False, dispatch_uid=uid)
    signals.celeryd_after_setup.connect(on_after_setup, weak=False, dispatch_uid=uid)
    signals.worker_process_init.connect(on_process_init, weak=False, dispatch_uid=uid)


# ---- in the worker -----------------------------------------------------------------------------------------


def _trees(packages: Packages, say: Callable[[str], None] | None = None) -> list[str]:
    """The trees' paths, ensured on the first call in this process (threads wait for one ensure), then
    remembered while they exist; ``say`` gets a line per tree ensured (logged at info by default). The first
    failure is raised as its one-line error."""
    if (known := _ensured.get(packages)) is not None and all(map(os.path.isdir, known)):
        return known
    with _ensuring_guard:
        first = _ensuring.setdefault(packages, threading.Lock())
    with first:
        if (known := _ensured.get(packages)) is not None and all(map(os.path.isdir, known)):
            return known  # another thread of this process ensured them meanwhile
        told = say or functools.partial(log.info, "%s")
        try:
            paths = packages.ensure(on_event=lambda event: _tell(event, told))
        except RepoinstallError as error:
            raise _one_line(error) from None
        _ensured[packages] = paths
        return paths


def _tell(event: Event, say: Callable[[str], None]) -> None:
    if event.kind == "ensured":
        spent = f" ({event.seconds_waited:.2f}s waiting, {event.seconds_installing:.2f}s installing)"
        say(f"repoinstall: {event.requirement}: {event.action}{spent if event.action != 'present' else ''}")


def _load_fixed(packages: Packages, say: Callable[[str], None] | None = None) -> None:
    """Ensure the fixed set and put it first on ``sys.path`` for good (nothing to do in a pool process that
    inherited both)."""
    paths = _trees(packages, say)
    with _path_guard:
        missing = [path for path in paths if path not in sys.path]
    if missing:
        put_first(paths)
    with _path_guard:
        _fixed.extend(path for path in paths if path not in _fixed)
    if say is not None:
        say(f"repoinstall: {packages.describe()} first on sys.path: {os.pathsep.join(paths)}")


@contextmanager
def _activated(paths: list[str]) -> Iterator[None]:
    """``paths`` first on ``sys.path`` for the block, taken off when the last running task that needs them ends.

    Invariant (kept under ``_path_guard``): a tree goes on the path only if no module it provides is imported
    from another version and no tree on the path (a running task's, the fixed set's) holds another version of
    one of its distributions; so a task, in any pool, imports its own versions or is refused.
    """
    with _path_guard:
        for tree in paths:
            if (problem := conflict(tree)) is not None:
                raise ActivationConflict(problem + _ISOLATE_HINT)
        added = [path for path in dict.fromkeys(paths) if not _running[path] and path not in _fixed]
        there = [(_FIXED, tree) for tree in _fixed] + [(_RUNNING, tree) for tree in _running if tree not in _fixed]
        if added and there:
            # The trees on the path and this task's new ones, checked as activate checks trees used together.
            try:
                check_together([*there, *(("this task", tree) for tree in added)])
            except TreesConflict as clash:
                raise ActivationConflict(str(clash) + _ISOLATE_HINT) from None
        for path in dict.fromkeys(paths):
            _running[path] += 1
        sys.path[:0] = added
        importlib.invalidate_caches()
    try:
        yield
    finally:
        with _path_guard:
            for path in dict.fromkeys(paths):
                _running[path] -= 1
                if not _running[path]:
                    # The last task that needs it: take off the entry the first one put there (whichever task).
                    del _running[path]
                    if path not in _fixed and path in sys.path:
                        sys.path.remove(path)
            importlib.invalidate_caches()


def _one_line(error: RepoinstallError) -> RepoinstallError:
    """The same error with its one line (:func:`one_line`) as its message: what Celery sends back to ``.get()``
    (type and message); the whole text goes to the worker's log."""
    line = one_line(error)
    if str(error) == line:
        return error
    log.warning("repoinstall: %s", error)
    try:
        return type(error)(line)
    except Exception:
        return error


def _call_body(module: str, qualname: str, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
    """In the fresh interpreter of an isolated call: import the tasks module and run the undecorated body."""
    importlib.import_module(module)
    body = _BODIES.get((module, qualname))
    if body is None:
        raise LookupError(f"{module}:{qualname}: no @requires task of that name after importing {module}")
    return body(*args, **kwargs)
