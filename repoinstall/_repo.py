"""``Repo``: the API's facade. Settings and lifecycle, and thin sync and async entry points that only run the work
the plans of :mod:`repoinstall._ensuring` decide (on worker threads, or awaited); the rest is done by the chooser
(:mod:`repoinstall._choose`), the protocol (:mod:`repoinstall._install.protocol`), the operator commands
(:mod:`repoinstall._ops`) and activation."""

from __future__ import annotations

import contextlib
import os
import threading
import time
from collections.abc import Awaitable, Callable, Iterable
from functools import partial
from typing import TYPE_CHECKING, Any, Generic, Literal, NamedTuple, TypeVar, overload

from . import _log
from ._choose import Choice, Chooser, Offline
from ._disk.identity import TreeId, environment_tag, tree_env
from ._disk.layout import Layout, default_repo
from ._ensuring import Ensurer, Flow, bad_input_raised, gathered
from ._errors import InvalidInput, NotInstalled, RepoinstallError, os_errors
from ._options import (
    DEFAULT_CHOICE,
    GC_OLDER_THAN,
    HEARTBEAT,
    INDEX_TTL,
    STALE_AFTER,
    WAIT_TIMEOUT,
    InstallOptions,
    LockChoice,
    LockSettings,
    max_jobs,
    options_problem,
)
from ._requirements import Requested, parse_spec
from ._results import EnsureResult, Event

if TYPE_CHECKING:
    import asyncio
    from concurrent.futures import ThreadPoolExecutor
    from contextlib import AbstractContextManager

    from ._disk.inway import Obstacle
    from ._disk.manifest import TreeEntry
    from ._lockfile.known import Hint
    from ._oci.pull import Source
    from ._oci.push import Pushed
    from ._oci.reference import Reference
    from ._oci.settings import Settings
    from ._ops.checkup import Verification
    from ._ops.doctor import Finding
    from ._ops.gc import Removal
    from ._ops.lockinfo import LockInfo
    from ._ops.plan import Planned
    from ._ops.remove import Removed
    from ._ops.storeverify import DistReport
    from ._ops.verify import TreeReport
    from ._options import InstallOptions
    from ._store.identity import DistId
    from ._store.usage import StoreUsage

R = TypeVar("R")
T = TypeVar("T")


class Repo:
    """A repo directory of install trees shared by many processes and hosts."""

    def __init__(
        self,
        path: str | os.PathLike[str] | None = None,
        *,
        lock: bool = True,
        stale_after: float = STALE_AFTER,
        heartbeat: float = HEARTBEAT,
        wait_timeout: float = WAIT_TIMEOUT,
        jobs: int = 4,
        install: InstallOptions | None = None,
        on_event: Callable[[Event], None] | None = None,
        refresh: bool = False,
        pre: bool = False,
        index_ttl: float = INDEX_TTL,
        pull_from: Reference | None = None,
        registry: Settings | None = None,
    ) -> None:
        self.settings = LockSettings(stale_after, heartbeat, wait_timeout, lock)
        if (problem := options_problem(self.settings, jobs, install, index_ttl)) is not None:
            raise InvalidInput(problem)
        self._layout = Layout(default_repo() if path is None else path)
        #: The environment of this repo's trees: the interpreter's environment tag, with ``.nopyc`` after it when
        #: they carry no bytecode (``install.bytecode`` false): other trees than those with it.
        self.env = tree_env(environment_tag(), install is None or install.bytecode)
        #: Trees installed at once: ``jobs``, held to twice the CPUs this process may use (at least 2, at most 32).
        self.jobs = min(jobs, max_jobs())
        self._install_options = install
        #: Unpinned specs: installed trees first (no network) unless ``refresh``; then the index, as pip would.
        self._chooser = Chooser(
            self._layout,
            self.env,
            self.settings,
            install,
            refresh=refresh,
            pre=pre,
            index_ttl=index_ttl,
            look_up_artifacts=pull_from is None,
        )
        #: Guards the lazily made thread pools: threads may ask for them first at once.
        self._lazy_guard = threading.Lock()
        #: The async API's installs (``aensure``), and everything else it does that blocks (parsing lock files,
        #: finding a lock's artifacts, walking records, the lock-free check, the index cache): the repo's own
        #: threads, never the loop's default executor, which a Ray or Dask worker needs for its own work. Two
        #: pools, so a check of a tree that is there never queues behind installs waiting for peers' locks.
        self._pool: ThreadPoolExecutor | None = None
        self._lookup_pool: ThreadPoolExecutor | None = None
        #: (event loop, tree) -> the install job tasks of that loop share.
        self._async_jobs: dict[tuple[int, TreeId], asyncio.Future[EnsureResult]] = {}
        #: An interrupted batch's workers outlived STOP_GRACE: they may still use the repo's descriptors.
        self._left_running = False
        #: Where a missing tree's image is looked for first (``ensure --from``), and how registries are reached.
        self._registry_settings = registry
        self._source: Source | None = None
        if pull_from is not None:
            from ._oci.pull import Source as _Source
            from ._oci.settings import Settings as _Settings

            self._source = _Source(pull_from, registry or _Settings())
        #: What every ensure decides, and the steps its work runs, for the sync and async paths alike.
        self._ensurer = Ensurer(self._layout, self._chooser, self.settings, install, self._source, on_event)

    @property
    def path(self) -> str:
        return self._layout.root

    def close(self) -> None:
        self._close(interrupted=False)

    def _close(self, *, interrupted: bool) -> None:
        for pool in (self._pool, self._lookup_pool):
            if pool is not None:
                # Installs and look-ups in flight finish (or fail) before the repo fd closes (a cancelled task's
                # too); on an interrupt, queued ones never start.
                pool.shutdown(wait=True, cancel_futures=interrupted)
        if self._left_running:
            # Interrupted installs still cleaning up past STOP_GRACE may use these descriptors: closed, their
            # numbers could be reused under them. The process is going down; it closes them.
            return
        if self._source is not None:
            self._source.close()
        self._chooser.close()
        self._layout.close()

    async def aclose(self) -> None:
        """:meth:`close` for asyncio: waits for the installs in flight (a cancelled task's too) to end without
        blocking the loop, on a thread of its own (not one of the pools it shuts down). Cancelled, it stops
        waiting; the close goes on."""
        await self._aclose(interrupted=False)

    async def _aclose(self, *, interrupted: bool) -> None:
        import asyncio

        loop = asyncio.get_running_loop()
        closed: asyncio.Future[None] = loop.create_future()

        def closing() -> None:
            outcome: BaseException | None = None
            try:
                self._close(interrupted=interrupted)
            except BaseException as error:  # handed to the loop, which raises it in the awaiting task
                outcome = error
            with contextlib.suppress(RuntimeError):  # the loop is closed: nobody waits any more
                loop.call_soon_threadsafe(_settle, closed, outcome)

        threading.Thread(target=closing, name="repoinstall-close", daemon=True).start()
        await closed

    async def __aenter__(self) -> Repo:
        return self

    async def __aexit__(self, kind: type[BaseException] | None, *exc: object) -> None:
        # As __exit__: a cancellation or an interrupt drops the installs not started yet.
        await self._aclose(interrupted=kind is not None and not issubclass(kind, Exception))

    def __enter__(self) -> Repo:
        return self

    def __exit__(self, kind: type[BaseException] | None, *exc: object) -> None:
        # KeyboardInterrupt, SystemExit (a SIGTERM handler's): not an error of the block, the process is stopping.
        self._close(interrupted=kind is not None and not issubclass(kind, Exception))

    # ---- resolving what was asked to a tree ---------------------------------------------------------------

    def _parsed(self, requested: Requested | str) -> Requested:
        """A spec parsed; a lock's request with each pin resolved to its artifact (see :meth:`Chooser.pinned`)."""
        return self._chooser.pinned(parse_spec(requested, source="api") if isinstance(requested, str) else requested)

    def resolve(self, requested: Requested | str) -> TreeId | None:
        """The tree for a requirement, ``None`` if its marker is false.

        Pinned specs need no disk access. A range takes the highest installed version that matches, with no
        network at all; only if none does (or with ``refresh``) is the index asked, through the volume cache.
        """
        return _raise(self._chooser.choose([self._parsed(requested)])[0])

    async def aresolve(self, requested: Requested | str) -> TreeId | None:
        """:meth:`resolve` for asyncio: the index is asked with ``httpx.AsyncClient``, and everything that blocks
        (a lock's artifacts found, the repo's records walked, the index cache) runs on the repo's own threads."""
        return _raise((await self._achosen([requested]))[1][0])

    async def _achosen(self, specs: Iterable[Requested | str]) -> tuple[list[Requested], list[Choice]]:
        """:meth:`_parsed` and :meth:`Chooser.choose` for asyncio: the specs parsed and pinned off the loop (finding
        a hashed lock's artifacts asks the index: the same code as the sync path's, on the repo's threads), then
        chosen from the loop."""
        requested = await self._off_loop(partial(self._all_parsed, specs))
        return requested, await self._chooser.achoose(requested, self._off_loop)

    def _all_parsed(self, specs: Iterable[Requested | str]) -> list[Requested]:
        return [self._parsed(s) for s in specs]

    # ---- ensuring: the plans are the Ensurer's; these only run their work (threads, or awaited) -------------

    def ensure(self, requested: Requested | str) -> EnsureResult:
        """Make sure the tree for ``requested`` is installed; install it (once, cluster-wide) if not."""
        requested = self._parsed(requested)
        return self._ensure_one(requested, _raise(self._chooser.choose([requested])[0]))

    @overload
    def ensure_all(
        self, specs: Iterable[Requested | str], *, return_exceptions: Literal[False] = False
    ) -> list[EnsureResult]: ...

    @overload
    def ensure_all(
        self, specs: Iterable[Requested | str], *, return_exceptions: Literal[True]
    ) -> list[EnsureResult | RepoinstallError]: ...

    def ensure_all(
        self, specs: Iterable[Requested | str], *, return_exceptions: bool = False
    ) -> list[EnsureResult] | list[EnsureResult | RepoinstallError]:
        """Ensure several requirements, different trees in parallel (``jobs`` at a time), results in order.

        Every spec is parsed and resolved before anything is installed, so bad input writes nothing.
        """
        requested = [self._parsed(s) for s in specs]
        plan = self._ensurer.batch(requested, bad_input_raised(self._chooser.choose(requested)))
        return gathered(self._run(plan), return_exceptions)

    def _run(self, plan: Flow[T]) -> T:
        """Drive a plan on worker threads, this thread waiting for each step's work."""
        try:
            work = next(plan)
            while True:
                work = plan.send(self._installing(work))
        except StopIteration as done:
            result: T = done.value
            return result

    def _installing(self, tasks: list[Callable[[], R]]) -> list[R]:
        """Run install tasks on ``jobs`` worker threads while this thread waits. Interrupted (Ctrl-C, a SIGTERM
        handler's SystemExit), it stops them: tasks not started are dropped, installers killed, staging dirs
        removed and locks released (within STOP_GRACE), and the interrupt propagates. See _batch."""
        from ._batch import Batch

        _log.logger().debug("%d to install, %d at a time", len(tasks), min(self.jobs, len(tasks)))
        batch = Batch(tasks, self.jobs)
        try:
            return batch.run()
        except BaseException:
            self._left_running = self._left_running or batch.alive()
            raise

    def _ensure_one(self, requested: Requested, tid: TreeId | None) -> EnsureResult:
        """One tree, its install (if any) on a worker thread, so an interrupt of this thread stops it whole."""
        if (settled := self._ensurer.settle(requested, tid)) is not None:
            return settled  # the warm path: on this thread
        return self._installing([partial(self._ensurer.ensure, requested, tid)])[0]

    def ensure_together(self, specs: Iterable[Requested | str]) -> EnsureResult:
        """Make sure one tree holds all of ``specs`` and their dependencies, resolved by the installer in one
        go, so it holds one version of every distribution (trees ensured one by one may disagree: see
        :class:`TreesConflict`). Each spec is chosen as :meth:`ensure_all` chooses it; the tree is keyed by
        the set of chosen versions, so the same set in any order is one tree. Specs whose marker is false
        here are left out; a set of one is that spec's own tree."""
        from ._install.together import combined

        requested = [self._parsed(s) for s in specs]
        chosen = [_raise(c) for c in bad_input_raised(self._chooser.choose(requested))]
        members = [(one, tid) for one, tid in zip(requested, chosen, strict=True) if tid is not None]
        if not members:
            raise InvalidInput("nothing to ensure together: every spec's marker is false here")
        if len(members) == 1:
            return self._ensure_one(*members[0])
        return self._ensure_one(*combined(self.env, members))

    def ensure_lock(
        self, path: str, *, extras: Iterable[str] = (), groups: Iterable[str] | None = None
    ) -> EnsureResult:
        """Make sure the tree of the lock file ``path`` is installed: a PEP 751 ``pylock.toml`` (or
        ``pylock.<name>.toml``), or a requirements file whose every line is pinned and hashed (pip-compile's and
        ``uv pip compile --generate-hashes``' output). The tree holds exactly the packages the lock names for this
        environment, each from the artifact it names, every hash checked, nothing resolved; it is keyed by that
        set of (name, version, hash), so files with the same content here share it. Anything else (a requirements
        file not fully hashed, a malformed lock): :class:`RequirementsFileError` saying why (exit 2).

        ``extras`` and ``groups``: which of a ``pylock.toml``'s extras and dependency groups it installs (PEP 751;
        default: no extras, the lock's ``default-groups``; ``groups`` given replaces those, as
        ``uv pip install --group`` does); another choice is another tree. An extra or group the lock does not
        declare, or either for a requirements file: :class:`RequirementsFileError` (exit 2). Packages are selected
        for the interpreter the tree is for (``InstallOptions.python``): its markers and wheel tags.

        Once a file's tree is named, the name is remembered per user under the file's exact bytes, this environment
        and the choice of extras and groups (see :mod:`repoinstall._lockfile.known`): asked again, the file is read
        once and hashed, and if that tree is there (checked as any tree is), nothing is parsed."""
        choice = LockChoice.of(extras, groups)
        hint = self._lock_hint(path, choice)
        if (known := self._settled_lock(hint)) is not None:
            return known
        result = self.ensure(_lock_request(path, self._install_options, choice))
        self._remember_lock(hint, result)
        return result

    async def aensure_lock(
        self, path: str, *, extras: Iterable[str] = (), groups: Iterable[str] | None = None
    ) -> EnsureResult:
        """:meth:`ensure_lock` for asyncio: the file read and its artifacts found on the repo's own threads, as
        :meth:`aensure` runs the rest. Cancelling it: as :meth:`aensure`."""
        choice = LockChoice.of(extras, groups)
        hint = await self._off_loop(partial(self._lock_hint, path, choice))
        if (known := await self._off_loop(partial(self._settled_lock, hint))) is not None:
            return known
        result = await self.aensure(await self._off_loop(partial(_lock_request, path, self._install_options, choice)))
        await self._off_loop(partial(self._remember_lock, hint, result))
        return result

    def _lock_hint(self, path: str, choice: LockChoice) -> Hint | None:
        """The lock file at ``path`` read for its key (with ``choice``), with the tree an earlier ensure named for
        it, if any."""
        from ._lockfile.known import look

        return look(
            path,
            env=self.env,
            install=self._install_options,
            look_up_artifacts=self._chooser.look_up_artifacts,
            extras=choice.extras,
            groups=choice.groups,
        )

    def _settled_lock(self, hint: Hint | None) -> EnsureResult | None:
        """The result for ``hint``'s file if the tree remembered for it is there (the warm check: its record and the
        METADATA it names), else ``None``: then the file is read and its tree chosen as if nothing were
        remembered, so a stale or wrong entry never skips an install."""
        if hint is None or hint.tree is None:
            return None
        from packaging.version import Version

        try:
            tid = TreeId(self.env, hint.tree, Version("1"))
        except RepoinstallError:
            return None  # a name no tree can have (too long): the entry is ignored
        requested = Requested(os.path.abspath(hint.path), tid.name, (), tid.version, source=hint.path)
        return self._ensurer.settle(requested, tid)

    def _remember_lock(self, hint: Hint | None, result: EnsureResult | RepoinstallError) -> None:
        """Remember the tree ``result`` names for ``hint``'s file (see :func:`repoinstall._lockfile.known.remember`)."""
        if hint is not None and isinstance(result, EnsureResult) and result.path is not None:
            from ._lockfile.known import remember

            remember(hint, result.name)

    async def aensure(self, requested: Requested | str) -> EnsureResult:
        """:meth:`ensure` for asyncio. Nothing that blocks runs on the event loop: the index is asked with
        ``httpx.AsyncClient``; the rest (a lock's artifacts found, the repo's records walked, the lock-free check
        of a tree that is there, an install and its lock waits) runs on the repo's own threads, never the loop's
        default executor. Tasks asking for the same tree share one install, and so do threads using the sync API.

        Cancelling the awaiting task ends its wait at once (``CancelledError``). An install it started goes on, on
        its thread, to its end: published whole (the rename into place is its commit point), or failed and cleaned
        up, its staging dir removed; either way its lock is released then, so other tasks waiting for it, later
        ensures and the repo never see it cut short. :meth:`close` waits for it. (:meth:`aensure_all` cancelled
        stops its installs instead.)
        """
        one, offline, settled = await self._off_loop(partial(self._front, requested))
        if settled is not None:
            return settled  # the warm path: one trip to a look-up thread
        if offline.ask_index:
            (tid,) = await self._chooser.aanswered([offline], self._off_loop)
            return await self._aensure(one, _raise(tid))
        assert offline.tid is not None  # settled otherwise
        return await self._ainstall(one, offline.tid)

    def _front(self, requested: Requested | str) -> tuple[Requested, Offline, EnsureResult | None]:
        """What :meth:`aensure` needs before it may await: the spec parsed (a lock's pins resolved), what the repo
        says of it, and its result where it needs neither the index nor an install: the warm path, in one go."""
        one = self._parsed(requested)
        offline = self._chooser.offline(one)
        return one, offline, None if offline.ask_index else self._ensurer.settle(one, offline.tid)

    @overload
    async def aensure_all(
        self, specs: Iterable[Requested | str], *, return_exceptions: Literal[False] = False
    ) -> list[EnsureResult]: ...

    @overload
    async def aensure_all(
        self, specs: Iterable[Requested | str], *, return_exceptions: Literal[True]
    ) -> list[EnsureResult | RepoinstallError]: ...

    async def aensure_all(
        self, specs: Iterable[Requested | str], *, return_exceptions: bool = False
    ) -> list[EnsureResult] | list[EnsureResult | RepoinstallError]:
        """:meth:`ensure_all` for asyncio: resolved together, then installed concurrently (``jobs`` threads); as
        in :meth:`aensure`, nothing that blocks runs on the event loop.

        Cancelling the task that awaits it stops the batch as an interrupt stops :meth:`ensure_all`: specs not
        started are dropped and its installers killed, their staging dirs removed and locks released, before the
        cancellation propagates. (An install another caller shares goes on for that caller.)"""
        requested, chosen = await self._achosen(specs)
        plan = self._ensurer.batch(requested, bad_input_raised(chosen))
        return gathered(await self._arun(plan), return_exceptions)

    async def _arun(self, plan: Flow[T]) -> T:
        """:meth:`_run` for asyncio: each step's work on the same worker threads, awaited; the plan's own code
        between them (the lock-free checks, the results) on the repo's look-up threads."""
        from ._batch import Batch

        work = await self._off_loop(partial(_advance, plan, None))
        while not isinstance(work, _Done):
            batch = Batch(work, self.jobs)
            try:
                results = await batch.arun()
            except BaseException:
                self._left_running = self._left_running or batch.alive()
                raise
            work = await self._off_loop(partial(_advance, plan, results))
        result: T = work.value
        return result

    async def _aensure(self, requested: Requested, tid: TreeId | None) -> EnsureResult:
        if (settled := await self._off_loop(partial(self._ensurer.settle, requested, tid))) is not None:
            return settled  # the lock-free check, on a look-up thread (on NFS an open may hang)
        assert tid is not None  # settled otherwise
        return await self._ainstall(requested, tid)

    async def _ainstall(self, requested: Requested, tid: TreeId) -> EnsureResult:
        """The install of a tree the lock-free check found missing, on the repo's install threads, awaited."""
        import asyncio

        loop = asyncio.get_running_loop()
        key = (id(loop), tid)
        # No await between this look-up and the insert below, so tasks of one loop cannot both start a job; threads
        # and other loops are deduplicated one level down, by the SingleFlight inside Ensurer.ensure.
        job = self._async_jobs.get(key)
        shared = job is not None
        started = time.monotonic()
        if job is None:
            job = loop.run_in_executor(self._executor(), self._ensurer.ensure, requested, tid)
            self._async_jobs[key] = job
            job.add_done_callback(partial(_job_done, self._async_jobs, key))
        # shield: a cancelled waiter stops waiting; the install itself runs to its end on its thread.
        result = await asyncio.shield(job)
        if not shared:
            return result
        return self._ensurer.result(requested, tid, "waited", time.monotonic() - started)

    def push(self, trees: Iterable[EnsureResult], to: Reference, *, skip_pulled: bool = False) -> list[Pushed]:
        """Push each installed tree of ``trees`` to ``to`` as an image (see :mod:`repoinstall._oci.push`);
        ``skip_pulled``: leave out trees that were made from an image."""
        import tempfile

        from packaging.version import Version

        from ._disk.manifest import read
        from ._oci.auth import lookup
        from ._oci.client import Registry
        from ._oci.pull import INSTALLER
        from ._oci.push import check, push
        from ._oci.settings import Settings as _Settings
        from ._oci.wheels import Fetcher, push_wheels

        wanted: list[tuple[TreeId, TreeEntry]] = []
        checked: set[DistId] = set()
        for tree in trees:
            if tree.path is None or tree.version is None:
                continue  # skipped: its marker is false here
            tid = TreeId(self.env, tree.name, Version(tree.version), tree.extras)
            record = read(self._layout, tid)
            if record is None:
                raise NotInstalled(f"{tid}: not installed in {self.path}")
            if skip_pulled and record.installer == INSTALLER:
                continue
            # Every tree's stored distributions hashed against their RECORDs before the first blob goes up: a
            # damaged one fails every later pull of its tag, so it stops the push with nothing sent.
            with os_errors(self._layout.root, tid):
                check(self._layout, tid, record, checked)
            wanted.append((tid, record))
        pushed: list[Pushed] = []
        fetch = Fetcher(self._install_options)
        with (
            Registry(to, self._registry_settings or _Settings(), lookup(to.host), push=True) as registry,
            tempfile.TemporaryDirectory(prefix="repoinstall-wheels-") as scratch,
        ):
            try:
                for tid, record in wanted:
                    with os_errors(self._layout.root, tid):
                        # Its wheels first, each checked against its sha256: a mismatch stops before its image.
                        sent = push_wheels(registry, tid, record, fetch, scratch)
                        done = push(self._layout, registry, tid, record)
                    pushed.append(done._replace(wheels=sent.wheels, wheels_uploaded=sent.uploaded,
                                                wheels_uploaded_bytes=sent.uploaded_bytes))  # fmt: skip
            finally:
                fetch.close()
        return pushed

    def _executor(self) -> ThreadPoolExecutor:
        with self._lazy_guard:
            if self._pool is None:
                from concurrent.futures import ThreadPoolExecutor

                self._pool = ThreadPoolExecutor(max_workers=self.jobs, thread_name_prefix="repoinstall")
            return self._pool

    def _off_loop(self, call: Callable[[], R]) -> Awaitable[R]:
        """``call()`` on the repo's look-up threads, awaited (an :class:`~repoinstall._index.http.Offload`).
        Cancelling the awaiting task cancels a call not yet started; a started one runs to its end, unawaited."""
        import asyncio

        with self._lazy_guard:
            if self._lookup_pool is None:
                from concurrent.futures import ThreadPoolExecutor

                self._lookup_pool = ThreadPoolExecutor(max_workers=self.jobs, thread_name_prefix="repoinstall-lookup")
            pool = self._lookup_pool
        return asyncio.wrap_future(pool.submit(call))

    # ---- using trees ----------------------------------------------------------------------------------------

    def activate(self, *trees: Requested | str | EnsureResult) -> AbstractContextManager[list[str]]:
        """``with repo.activate("attrs==26.1.0"): import attrs``: the installed trees first on ``sys.path`` for
        the block (import caches invalidated), exactly them removed after. Specs must be installed (see
        :meth:`tree_path`); :class:`ActivationConflict` if a module of a tree is already imported from
        another version, :class:`TreesConflict` if two of the trees hold different versions of one
        distribution, :class:`RepoUnusable` (one line) if a tree is mounted ``noexec`` (no C extension would load)
        or holds no ``*.dist-info`` (an image volume mounted empty). Imported modules stay imported after the
        block."""
        from ._activate import activated, check_together

        labelled = [(self._label_of(tree), self._path_of(tree)) for tree in trees]
        check_together(labelled)
        return activated([path for _, path in labelled])

    def call_isolated(
        self,
        trees: Iterable[Requested | str | EnsureResult],
        target: str,
        *args: object,
        timeout: float | None = None,
        **kwargs: object,
    ) -> object:
        """Call ``"module:function"`` in a fresh interpreter whose path starts with the trees (ensured first),
        for full isolation between versions; returns its result or raises the exception it raised. Its trees'
        mounts are checked as :meth:`activate` checks them."""
        from ._activate import call_isolated, check_together

        wanted = [tree if isinstance(tree, EnsureResult) else self.ensure(tree) for tree in trees]
        labelled = [(self._label_of(tree), self._path_of(tree)) for tree in wanted]
        check_together(labelled)
        return call_isolated([path for _, path in labelled], target, args, kwargs, timeout)

    @staticmethod
    def _label_of(tree: Requested | str | EnsureResult) -> str:
        if isinstance(tree, EnsureResult):
            return tree.requirement
        return tree if isinstance(tree, str) else tree.text

    def _path_of(self, tree: Requested | str | EnsureResult) -> str:
        if isinstance(tree, EnsureResult):
            if tree.path is None:
                raise NotInstalled(f"{tree.requirement}: skipped (marker false), so it has no tree")
            return tree.path
        return self.tree_path(tree)

    def tree_path(self, requested: Requested | str) -> str:
        """The installed tree's path for ``requested``; :class:`NotInstalled` if it is not installed."""
        from ._disk.check import present

        requested = self._parsed(requested)
        tid, ask_index = self._chooser.offline(requested)[1:]
        if tid is None:
            if ask_index:
                raise NotInstalled(f"{requested.text}: not installed in {self.path}")
            raise NotInstalled(f"{requested.text}: its marker is false here, so it has no tree")
        # Not there by this client's cache: ask again as the server has it (a peer on another NFS client may have
        # just published it).
        if not present(self._layout, tid) and not present(self._layout, tid, fresh=True):
            raise NotInstalled(f"{tid}: not installed in {self.path}")
        return self._layout.tree_path(tid)

    # ---- operator commands ----------------------------------------------------------------------------------

    def verify(self, specs: Iterable[Requested | str] = (), *, repair: bool = False) -> Verification:
        """Verify the trees for ``specs`` file by file, or every tree in the repo (all environments) if none, and the
        stored distributions they are composed from (as ``repoinstall verify`` does).

        ``repair``: then fix what was found (``verify --repair``), the store first: each damaged stored distribution
        is set aside (:meth:`repair_stored`), then each damaged tree is re-recorded or reinstalled under its lock
        (:meth:`repair`), so the trees composed from a damaged distribution install it afresh, never linking its
        changed files again. A repair that fails is in :attr:`Verification.failed` with its error; the others still
        run. The reports are those found before repairing: ``verify()`` again says what stands now."""
        from ._disk.dists import Hashed
        from ._ops.checkup import Verification, repair_all
        from ._ops.storeverify import verify_store
        from ._ops.verify import every_tree, unproven, verify

        wanted = [self._parsed(s) for s in specs]
        self._layout.existing_fd()
        named = [tid for tid in (self._chooser.named_tree(r) for r in wanted) if tid is not None] if wanted else None
        every = self._layout.retrying(every_tree, self._layout)
        hashed = Hashed()  # a file the store links into many trees is hashed once
        trees = [
            self._layout.retrying(verify, self._layout, tid, hashed) for tid in (every if named is None else named)
        ]
        store = self._layout.retrying(verify_store, self._layout, every, named)
        # A tree composed from a stored distribution a registry's annotation named is whole as it looks, and
        # broken all the same (see _ops.verify.UNPROVEN).
        suspect = {tid for report in store if report.unproven for tid in report.trees}
        trees = [unproven(report) if report.tid in suspect else report for report in trees]
        return Verification(trees, store, repair_all(trees, store, self.repair_stored, self.repair) if repair else ())

    def verify_store(self, specs: Iterable[Requested | str] = ()) -> list[DistReport]:
        """Verify the stored distributions the trees for ``specs`` are composed from, or the whole store if none;
        each report names the trees whose records name it."""
        from ._ops.storeverify import verify_store
        from ._ops.verify import every_tree

        wanted = [self._parsed(s) for s in specs]
        self._layout.existing_fd()
        trees = self._layout.retrying(every_tree, self._layout)
        named = [tid for tid in (self._chooser.named_tree(r) for r in wanted) if tid is not None] if wanted else None
        return self._layout.retrying(verify_store, self._layout, trees, named)

    def repair_stored(self, report: DistReport) -> str:
        """Set a damaged stored distribution aside, so the trees composed from it (repaired next) install it
        afresh: "ok" or "set aside"."""
        from ._ops.repair import repair_stored

        if report.ok:
            return "ok"
        with os_errors(self._layout.root, report):
            return self._layout.retrying(repair_stored, self._layout, report, self.env)

    def repair(self, report: TreeReport) -> str:
        """Fix what ``verify`` found, under the tree's lock: re-record a whole tree or reinstall a broken one."""
        from ._ops.repair import repair_tree

        if report.ok:
            return "ok"
        with os_errors(self._layout.root, report.tid):
            return self._layout.retrying(
                repair_tree,
                self._layout,
                self._ensurer.tree_locks(),
                self._install_options,
                report.tid,
                self.env,
                unproven=report.unproven,
            )

    def obstacles(self) -> list[Obstacle]:
        """What stands where a directory of the store, its locks or the trees' locks belongs (``store/<env>/<name>``,
        ``store-locks/...``, ``locks/...``): a symlink, a file, a FIFO, a socket or a device, with its kind. An
        install that needs that directory refuses it (exit 2); ``verify`` and ``locks`` name it, gc leaves it."""
        from ._disk.inway import below
        from ._disk.layout import LOCKS, STORE, STORE_LOCKS

        self._layout.existing_fd()
        return [
            found for top in (STORE, STORE_LOCKS, LOCKS) for found in self._layout.retrying(below, self._layout, top)
        ]

    def locks(self) -> list[LockInfo]:
        """Every install lock in the repo: holder, heartbeat age, stale by this repo's ``stale_after``."""
        from ._ops.lockinfo import list_locks

        self._layout.existing_fd()
        return self._layout.retrying(list_locks, self._layout, self.settings.stale_after)

    def gc(
        self, *, older_than: float = GC_OLDER_THAN, unused_for: float | None = None, dry_run: bool = False
    ) -> list[Removal]:
        """Remove crashed installers' leftovers older than ``older_than`` seconds (and, with ``unused_for``,
        trees not ensured for that long); see :mod:`repoinstall._ops.gc` for why each removal is safe."""
        from ._ops.gc import Collector

        self._layout.existing_fd()
        collector = Collector(
            self._layout, self.env, self.settings, older_than=older_than, unused_for=unused_for, dry_run=dry_run
        )
        # Every removal is proven safe on its own and set aside before it is deleted, so a second pass after a
        # stale handle removes only what is still there to remove.
        return self._layout.retrying(collector.run)

    def remove(self, specs: Iterable[Requested | str], *, dry_run: bool = False, forget: bool = False) -> list[Removed]:
        """Remove the trees ``specs`` name in this environment, as gc ``--unused-for`` removes unused ones: under
        each tree's lock, record first, then the tree renamed into trash/ and deleted there. ``name==version``
        names one tree; a bare name or a range every installed tree of that name (and those extras) it admits.

        One :class:`Removed` per tree named (``removed``, or ``would-remove`` with ``dry_run``), or ``kept`` with
        the reason when a process is using it (its lock is held, or a process on this host has it as its working
        directory, on its PYTHONPATH or command line, or a file of it open or mapped) or a symlink stands on its
        path: that tree is left whole, the others still go. A spec that names no installed tree is ``skipped``
        (with a warning), as pip's uninstall skips a package that is not installed. Every spec is parsed before
        anything is removed. A removed tree's closure is kept, so ensuring it again installs the same
        distributions from the same artifacts; ``forget`` drops it too, so the next install resolves afresh."""
        from ._ops.remove import remove_trees

        wanted = [self._parsed(s) for s in specs]
        self._layout.existing_fd()
        with os_errors(self._layout.root, "remove"):
            return remove_trees(self._layout, self.env, self.settings, wanted, dry_run=dry_run, forget=forget)

    def doctor(self) -> list[Finding]:
        """Probe the repo's filesystem for what repoinstall relies on."""
        from ._ops.doctor import probe

        self._layout.existing_fd()  # probes an existing directory; ensure is what creates a repo
        return self._layout.retrying(probe, self._layout, self.settings)

    def export(self, specs: Iterable[Requested | str]) -> str:
        """A PEP 751 lock file (``pylock.toml``'s text) of the installed trees of ``specs``: every distribution they
        hold, each with the URL and sha256 of the artifact installed, so pip, uv or ``ensure -r`` on another
        cluster install the same bytes. :class:`NotInstalled` for a spec with no installed tree; trees that hold
        different versions of one distribution: :class:`InvalidInput`."""
        from ._ops.export import closure, pylock

        tids = []
        for one in map(self._parsed, specs):
            self.tree_path(one)  # installed, or NotInstalled saying so
            tid = self._chooser.offline(one)[1]
            if tid is not None:
                tids.append(tid)
        return pylock(self._layout.retrying(closure, self._layout, tids))

    def plan(self, specs: Iterable[Requested | str]) -> list[Planned]:
        """What ensuring ``specs`` would do, with nothing done (``ensure --dry-run``): each present tree's path, and
        for each missing one the distributions it would hold, stored already or to store, and which of those would
        be downloaded. Nothing in the repo is written or locked; the installer resolves what no lock pins."""
        from ._ops.plan import plan

        wanted = [self._parsed(s) for s in specs]
        return plan(self._layout, self.env, self._install_options or InstallOptions(), wanted, self.tree_path)

    def list(self) -> list[tuple[TreeEntry, str]]:
        """Every recorded tree in the repo, all environments, with its path."""
        from ._ops.listing import installed

        return self._layout.retrying(installed, self._layout)

    def store_usage(self) -> StoreUsage:
        """The store's figures, all environments: stored distributions, their bytes (each inode once), and the bytes
        hard links save the trees (what the trees' files would take as copies minus what they take on disk)."""
        from ._store.usage import usage

        return self._layout.retrying(usage, self._layout)


def _lock_request(path: str, install: InstallOptions | None, choice: LockChoice = DEFAULT_CHOICE) -> Requested:
    from ._install.markerenv import lock_environment
    from ._lockfile.request import read

    install = install or InstallOptions()
    environment = lock_environment(install.python)
    found = read(path, require_hashes=True, install=install, choice=choice, environment=environment)
    assert not isinstance(found, list)  # with require_hashes: a lock, or an error saying why not
    return found


class _Done(NamedTuple, Generic[T]):
    """A plan's value: handed back through a future, where a ``StopIteration`` may not go."""

    value: T


def _advance(plan: Flow[T], results: list[Any] | None) -> list[Callable[[], Any]] | _Done[T]:
    """The plan's next work, or its value: one stretch of its own code, between two steps."""
    try:
        return next(plan) if results is None else plan.send(results)
    except StopIteration as done:
        return _Done(done.value)


def _settle(future: asyncio.Future[None], outcome: BaseException | None) -> None:
    if future.done():
        return  # its waiter was cancelled
    if outcome is None:
        future.set_result(None)
    else:
        future.set_exception(outcome)


def _raise(choice: Choice) -> TreeId | None:
    if isinstance(choice, RepoinstallError):
        raise choice
    return choice


def _job_done(
    jobs: dict[tuple[int, TreeId], asyncio.Future[EnsureResult]],
    key: tuple[int, TreeId],
    done: asyncio.Future[EnsureResult],
) -> None:
    jobs.pop(key, None)
    # Every waiter may have been cancelled: fetch the outcome so asyncio does not warn it was never retrieved.
    if not done.cancelled():
        done.exception()
