"""What a worker runtime asks of the repo, said once where the work is submitted and carried to every worker: its
packages (specs, requirements files, lock files), the repo and its options. The engine adapters
(:mod:`repoinstall.dask`, :mod:`repoinstall.ray`, :mod:`repoinstall.celery`) are each a thin layer over this and
the public :class:`~repoinstall.Repo` API.

:class:`Packages` is plain data (it is pickled to workers, or read from a Ray ``runtime_env``). :meth:`check`
refuses bad input where it is given, before any worker starts and without touching the repo or an index;
:meth:`ensure` runs on a worker: each tree is installed at most once cluster-wide (the repo's protocol: lock,
re-check, stage, verify, publish by rename), and the trees' paths come back in the order given, the order
``repoinstall path`` prints them in, refused together if two hold different versions of one distribution.
"""

from __future__ import annotations

import inspect
import os
import sys
import threading
from collections.abc import Awaitable, Callable, Iterable, Mapping
from functools import partial
from typing import TYPE_CHECKING, Any, NamedTuple, TypeVar

from ._errors import InvalidInput, RepoinstallError
from ._options import InstallOptions, LockSettings

if TYPE_CHECKING:
    from concurrent.futures import ThreadPoolExecutor

    from ._requirements import Requested
    from ._results import Event


T = TypeVar("T")


def _repo_options() -> dict[str, inspect.Parameter]:
    """The keyword options :class:`Repo` takes that a worker runtime may set (not its path, install options or
    event callback, which are given apart or make no sense across processes)."""
    from ._repo import Repo

    parameters = inspect.signature(Repo.__init__).parameters
    return {name: p for name, p in parameters.items() if p.kind is p.KEYWORD_ONLY and name not in _NOT_OPTIONS}


_NOT_OPTIONS = ("install", "on_event")


class Packages(NamedTuple):
    """The trees a worker runtime needs, and where and how to install them."""

    specs: tuple[str, ...] = ()
    #: Requirements files and lock files (``pylock.toml``, hashed requirements), read as ``ensure -r`` reads them.
    files: tuple[str, ...] = ()
    #: The repo directory; ``None``: ``REPOINSTALL_REPO`` or the default, as :class:`Repo` finds it.
    repo: str | None = None
    #: :class:`Repo` keyword options (``lock``, ``wait_timeout``, ``jobs``, ...), sorted by name.
    options: tuple[tuple[str, Any], ...] = ()
    install: InstallOptions | None = None

    @classmethod
    def of(
        cls,
        specs: str | Iterable[str] = (),
        *,
        requirements: str | Iterable[str] = (),
        lock: str | Iterable[str] | bool = (),
        repo: str | os.PathLike[str] | None = None,
        install: InstallOptions | Mapping[str, Any] | None = None,
        **options: Any,
    ) -> Packages:
        """Specs (``"pkg==1.4"``, one string or several), ``requirements=``/``lock=`` files, a repo and its
        :class:`Repo` options; :class:`InvalidInput` (one line) for an option :class:`Repo` does not take.
        ``install`` may be a mapping of :class:`InstallOptions` fields (a Ray ``runtime_env`` is JSON). ``lock``
        names lock files; ``lock=True``/``False`` is :class:`Repo`'s own option (``False``: ``--no-lock``)."""
        if isinstance(lock, bool):
            options["lock"], lock = lock, ()
        known = _repo_options()
        if unknown := sorted(set(options) - set(known)):
            raise InvalidInput(f"{unknown[0]!r} is not a repo option (those are: {', '.join(sorted(known))})")
        if isinstance(install, Mapping):
            install = _install_options(install)
        elif install is not None and not isinstance(install, InstallOptions):
            kind = type(install).__name__
            raise InvalidInput(f"install must be InstallOptions or a mapping of its fields, got {kind}")
        return cls(
            _strings(specs, "specs"),
            _strings(requirements, "requirements") + _strings(lock, "lock"),
            None if repo is None else os.fspath(repo),
            tuple(sorted(options.items())),
            install,
        )

    def requests(self, *, installing: bool = True) -> list[Requested]:
        """What was asked, in order: the specs, then each file's requirements (a lock file: its one tree).
        ``installing``: read where it installs, so a lock's local artifacts are checked (see
        :func:`repoinstall._lockfile.request.read`); not on a driver, which may not see the worker's files."""
        from ._lockfile.request import read
        from ._requirements import parse_spec

        install = (self.install or InstallOptions()) if installing else None
        wanted = [parse_spec(spec, source="api") for spec in self.specs]
        for path in self.files:
            found = read(path, install=install)
            wanted.extend(found if isinstance(found, list) else [found])
        return wanted

    def check(self) -> None:
        """Refuse what cannot work before anything runs, without touching the repo or an index: nothing asked, a
        spec that does not parse, a file that cannot be read, an option out of range. Raises the one-line
        :class:`RepoinstallError` that ``repoinstall ensure`` would exit 2 with."""
        from ._options import options_problem
        from ._urls import check_sources

        if not self.specs and not self.files:
            raise InvalidInput("nothing to install: give package specs, requirements= or lock= files")
        given = dict(self.options)
        defaults = {name: p.default for name, p in _repo_options().items()}
        merged = {**defaults, **given}
        try:
            settings = LockSettings(merged["stale_after"], merged["heartbeat"], merged["wait_timeout"], merged["lock"])
            problem = options_problem(settings, merged["jobs"], self.install, merged["index_ttl"])
        except TypeError as error:
            raise InvalidInput(f"repo options: {error}") from None
        if problem is not None:
            raise InvalidInput(problem)
        if (install := self.install) is not None:
            # The URLs given here, as a worker's install checks them; its own pip configuration adds its URLs,
            # checked where it is read.
            named = [install.index_url] if install.index_url else []
            check_sources(() if install.no_index else [*named, *install.extra_index_urls], install.find_links)
        self.requests(installing=False)

    def ensure(self, on_event: Callable[[Event], None] | None = None) -> list[str]:
        """On a worker: make every tree exist (installed at most once cluster-wide) and return their paths in
        order; the first failure is raised as its one-line :class:`RepoinstallError`, and
        :class:`TreesConflict` if two trees hold different versions of one distribution. ``on_event``: the
        repo's events (``Repo(on_event=...)``), e.g. each tree's "ensured" with its action, for the worker's log."""
        from ._activate import check_together
        from ._repo import Repo

        wanted = self.requests()
        with Repo(self.repo, install=self.install, on_event=on_event, **dict(self.options)) as repo:
            results = repo.ensure_all(wanted)
        labelled = [(r.requirement, r.path) for r in results if r.path is not None]
        check_together(labelled)
        return [path for _, path in labelled]

    async def aensure(self, on_event: Callable[[Event], None] | None = None) -> list[str]:
        """:meth:`ensure` for an engine's event loop (a Ray runtime-env agent's, a Dask worker's): the same code, run
        on repoinstall's own threads, never the loop's default executor (the engine's own work uses that, and an
        ensure may wait minutes for a peer's install). Cancelling the awaiting task ends its wait at once; the
        ensure goes on to its end on its thread, as :meth:`Repo.aensure`'s install does, so no tree is left half
        made and every lock it took is released."""
        return await off_loop(partial(self.ensure, on_event))

    def describe(self) -> str:
        """A short label for logs: the specs and files asked for."""
        return ", ".join([*self.specs, *self.files]) or "nothing"


#: The threads engines' ensures run on (the pool made on first use, under the guard; a thread only when no idle one is
#: there): as many at once as a default executor would run, so a warm ensure seldom queues behind installs waiting
#: for peers' locks.
_ENGINE_THREADS = 32
_engine_pool: ThreadPoolExecutor | None = None
_engine_guard = threading.Lock()


def off_loop(call: Callable[[], T]) -> Awaitable[T]:
    """``call()`` on repoinstall's engine threads, awaited from the running loop (see :meth:`Packages.aensure`)."""
    import asyncio

    return asyncio.wrap_future(_engine_threads().submit(call))


def _engine_threads() -> ThreadPoolExecutor:
    global _engine_pool
    with _engine_guard:
        if _engine_pool is None:
            from concurrent.futures import ThreadPoolExecutor

            _engine_pool = ThreadPoolExecutor(max_workers=_ENGINE_THREADS, thread_name_prefix="repoinstall-engine")
        return _engine_pool


def put_first(paths: Iterable[str]) -> list[str]:
    """Put ``paths`` first on this process's ``sys.path`` for good, in order (a worker process lives for its
    trees), skipping one already there; those added. :class:`ActivationConflict` (nothing changed) if a module a
    tree provides is already imported from another version, as :meth:`Repo.activate` refuses it."""
    import importlib
    import os

    from ._activate import _path_guard, conflict
    from ._errors import ActivationConflict

    wanted = [os.path.abspath(path) for path in paths]
    for tree in wanted:
        if (problem := conflict(tree)) is not None:
            raise ActivationConflict(problem)
    with _path_guard:
        added = [path for path in dict.fromkeys(wanted) if path not in sys.path]
        sys.path[:0] = added
        importlib.invalidate_caches()
    return added


def one_line(error: BaseException) -> str:
    """A failure as one line: repoinstall's line (``repoinstall: error: ...`` without the prefix). An installer's
    failure says what failed on its first line, ending in ``:``, and why further down (pip's ``ERROR:`` lines):
    the line keeps both, for an engine that shows its caller one line."""
    text = str(error) if isinstance(error, RepoinstallError) else f"{type(error).__name__}: {error}"
    first, *rest = text.splitlines() or [type(error).__name__]
    reasons = [line.strip() for line in rest if line.strip()]
    if first.endswith(":") and reasons:
        first = f"{first} {next((r for r in reasons if 'error' in r.lower()[:12]), reasons[0])}"
    return first


def _strings(value: str | Iterable[str], what: str) -> tuple[str, ...]:
    if isinstance(value, str):
        return (value,)
    try:
        items = tuple(value)
    except TypeError:
        raise InvalidInput(f"{what} must be a string or a list of strings, got {type(value).__name__}") from None
    for item in items:
        if not isinstance(item, str):
            raise InvalidInput(f"{what} must be a string or a list of strings, got a {type(item).__name__}")
    return items


def _install_options(fields: Mapping[str, Any]) -> InstallOptions:
    # file_index is set by repoinstall for a requirements file's trees, not given.
    known = tuple(name for name in InstallOptions._fields if name != "file_index")
    if unknown := sorted(set(fields) - set(known)):
        raise InvalidInput(f"{unknown[0]!r} is not an install option (those are: {', '.join(known)})")
    values: dict[str, Any] = {name: tuple(v) if isinstance(v, list) else v for name, v in fields.items()}
    return InstallOptions(**values)
