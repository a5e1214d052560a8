"""``Repo.ensure``: check, lock, check again, stage, install, verify, publish, record."""

from __future__ import annotations

import errno
import os
import threading
import time
from collections.abc import Callable, Iterable
from functools import partial
from typing import TYPE_CHECKING, NamedTuple, TypeVar

from . import _fs, _log, _manifest
from ._check import State, check
from ._errors import (
    ForeignLock,
    InstallError,
    InvalidInput,
    NotInstalled,
    RepoinstallError,
    RepoUnusable,
    ResolutionError,
)
from ._identity import TreeId, environment_tag
from ._layout import RECORDS, TREES, Layout, default_repo
from ._options import GC_OLDER_THAN, HEARTBEAT, INDEX_TTL, STALE_AFTER, WAIT_TIMEOUT, LockSettings
from ._requirements import Requested, parse_spec
from ._results import Action, EnsureResult, Event, Timing

if TYPE_CHECKING:
    import asyncio
    from concurrent.futures import ThreadPoolExecutor
    from contextlib import AbstractContextManager

    from packaging.version import Version

    from ._doctor import Finding
    from ._flight import SingleFlight
    from ._gc import Removal
    from ._lock import TreeLock, Unusable
    from ._locks import LockInfo
    from ._options import InstallOptions
    from ._resolve import Resolver
    from ._verify import TreeReport

T = TypeVar("T")


class _Offline(NamedTuple):
    """What the repo alone says about a spec: its tree (``None``: marker false, or nothing installed matches)
    and whether the index must be asked (nothing matches, or ``refresh``)."""

    requested: Requested
    tid: TreeId | None
    ask_index: bool


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
    ) -> None:
        self.settings = LockSettings(stale_after, heartbeat, wait_timeout, lock)
        if (problem := self.settings.validate()) is not None:
            raise InvalidInput(problem)
        if jobs < 1:
            raise InvalidInput(f"--jobs must be at least 1, got {jobs}")
        if install is not None and (problem := install.validate()) is not None:
            raise InvalidInput(problem)
        if not index_ttl >= 0:
            raise InvalidInput(f"--index-ttl must be zero or a positive number of seconds, got {index_ttl}")
        self._layout = Layout(default_repo() if path is None else path)
        self.env = environment_tag()
        self.jobs = jobs
        self._install_options = install
        self._on_event = on_event
        self._flights: SingleFlight[tuple[Action, Timing]] | None = None
        self._warned: set[str] = set()
        #: Unpinned specs: installed trees first (no network) unless ``refresh``; then the index, as pip would.
        self.refresh = refresh
        self.pre = pre
        self.index_ttl = index_ttl
        self._resolver: Resolver | None = None
        self._pool: ThreadPoolExecutor | None = None
        self._executor_guard = threading.Lock()
        #: Guards the lazily made resolver and single-flight table: threads (--jobs) may ask for them first at once.
        self._lazy_guard = threading.Lock()
        #: (event loop, tree) -> the install job tasks of that loop share.
        self._async_jobs: dict[tuple[int, TreeId], asyncio.Future[EnsureResult]] = {}

    @property
    def path(self) -> str:
        return self._layout.root

    def close(self) -> None:
        if self._pool is not None:
            self._pool.shutdown(wait=True)  # installs in flight finish (or fail) before the repo fd closes
        if self._resolver is not None:
            self._resolver.close()
        self._layout.close()

    def __enter__(self) -> Repo:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # ---- resolving what was asked to a tree ---------------------------------------------------------------

    def resolve(self, requested: Requested | str) -> TreeId | None:
        """The tree for a requirement, ``None`` if its marker is false.

        Pinned specs need no disk access. A range takes the highest installed version that matches, with no
        network at all; only if none does (or with ``refresh``) is the index asked, through the volume cache.
        """
        outcome = self._resolve_all([requested])[0]
        if isinstance(outcome, RepoinstallError):
            raise outcome
        return outcome

    async def aresolve(self, requested: Requested | str) -> TreeId | None:
        """:meth:`resolve` on the event loop: the index is asked with ``httpx.AsyncClient``."""
        outcome = (await self._aresolve_all([requested]))[0]
        if isinstance(outcome, RepoinstallError):
            raise outcome
        return outcome

    def _resolve_all(self, specs: Iterable[Requested | str]) -> list[TreeId | RepoinstallError | None]:
        offline = [self._offline(spec) for spec in specs]
        asking = [one.requested for one in offline if one.ask_index]
        answers = (self._resolver or self._make_resolver()).resolve(asking) if asking else []
        return self._settle(offline, answers)

    async def _aresolve_all(self, specs: Iterable[Requested | str]) -> list[TreeId | RepoinstallError | None]:
        offline = [self._offline(spec) for spec in specs]
        asking = [one.requested for one in offline if one.ask_index]
        answers: list[Version | ResolutionError] = []
        if asking:
            resolver = self._resolver if self._resolver is not None else await _to_thread(self._make_resolver)
            answers = await resolver.aresolve(asking)
        return self._settle(offline, answers)

    def _settle(
        self, offline: list[_Offline], answers: list[Version | ResolutionError]
    ) -> list[TreeId | RepoinstallError | None]:
        """Each spec's tree: from the repo alone, or from the index's answer (in order, for those that asked)."""
        pending = iter(answers)
        return [self._merge(one, next(pending)) if one.ask_index else one.tid for one in offline]

    def _offline(self, requested: Requested | str) -> _Offline:
        """What the repo alone says about a spec, with no network."""
        if isinstance(requested, str):
            requested = parse_spec(requested, source="api")
        if not requested.marker_applies():
            return _Offline(requested, None, False)
        version = requested.pinned_version()
        if version is not None:
            return _Offline(requested, TreeId(self.env, requested.name, version, requested.extras), False)
        installed = self._installed_match(requested)
        return _Offline(requested, installed, installed is None or self.refresh)

    def _installed_match(self, requested: Requested) -> TreeId | None:
        # The highest installed version the spec admits, by the same rule as the index: pip's pre-release rule.
        found = {
            tid.version: tid
            for tid in self._layout.discover(RECORDS, self.env, requested.name)
            if tid.extras == requested.extras
        }
        for candidate in requested.choose(found, pre=self.pre):
            tid = found[candidate]
            status = check(self._layout, tid)
            if status.state is State.PRESENT:
                return self._as_recorded(tid, status.record)
        return None

    def _merge(self, offline: _Offline, answer: Version | ResolutionError) -> TreeId | RepoinstallError:
        requested, installed = offline.requested, offline.tid
        if isinstance(answer, ResolutionError):
            if installed is None:
                return answer
            # --refresh with the index unreachable: what is installed still satisfies the spec.
            _log.logger().warning("%s; keeping installed %s", answer, installed)
            return installed
        if installed is not None and installed.version >= answer:
            return installed
        return TreeId(self.env, requested.name, answer, requested.extras)

    def _single_flight(self) -> SingleFlight[tuple[Action, Timing]]:
        # Made on first use (the warm path never needs it), once: two tables would let two threads install at once.
        if (flights := self._flights) is None:
            from ._flight import SingleFlight

            with self._lazy_guard:
                if self._flights is None:
                    self._flights = SingleFlight()
                flights = self._flights
        return flights

    def _make_resolver(self) -> Resolver:
        from ._indexcache import IndexCache
        from ._pipconfig import index_config
        from ._resolve import Resolver

        # One resolver (and so one HTTP client, closed by close()) however many threads ask first at once.
        with self._lazy_guard:
            if self._resolver is None:
                cache = IndexCache(self._layout, self.index_ttl, self.settings)
                self._resolver = Resolver(index_config(self._install_options, pre=self.pre), cache)
            return self._resolver

    # ---- the protocol -------------------------------------------------------------------------------------

    def ensure(self, requested: Requested | str) -> EnsureResult:
        """Make sure the tree for ``requested`` is installed; install it (once, cluster-wide) if not."""
        if isinstance(requested, str):
            requested = parse_spec(requested, source="api")
        tid = self.resolve(requested)
        return self._ensure(requested, tid)

    def ensure_all(
        self, specs: Iterable[Requested | str], *, return_exceptions: bool = False
    ) -> list[EnsureResult | RepoinstallError]:
        """Ensure several requirements, different trees in parallel (``jobs`` at a time), results in order.

        Every spec is parsed and resolved before anything is installed, so bad input writes nothing.
        """
        requested = [parse_spec(s, source="api") if isinstance(s, str) else s for s in specs]
        resolved = _raise_bad_input(self._resolve_all(requested))
        outcomes: list[EnsureResult | RepoinstallError | None] = [None] * len(requested)
        tids: list[TreeId | None] = [None] * len(requested)
        missing = []
        for index, (one, answer) in enumerate(zip(requested, resolved, strict=True)):
            if isinstance(answer, RepoinstallError):
                outcomes[index] = answer  # the index could not say: this one fails, the others go on
                continue
            tids[index] = tid = answer
            # The warm path stays on this thread: a pool costs more than a check of everything present.
            if tid is None or (present := self._present(one, tid)) is None:
                missing.append(index)
            else:
                outcomes[index] = present
        if len(missing) <= 1 or self.jobs == 1:
            for index in missing:
                outcomes[index] = self._capture(requested[index], tids[index])
        else:
            from concurrent.futures import ThreadPoolExecutor

            with ThreadPoolExecutor(max_workers=min(self.jobs, len(missing))) as pool:
                done = pool.map(self._capture, [requested[i] for i in missing], [tids[i] for i in missing])
                for index, outcome in zip(missing, done, strict=True):
                    outcomes[index] = outcome
        final = [outcome for outcome in outcomes if outcome is not None]
        if not return_exceptions:
            for outcome in final:
                if isinstance(outcome, RepoinstallError):
                    raise outcome
        return final

    # ---- asyncio --------------------------------------------------------------------------------------------

    async def aensure(self, requested: Requested | str) -> EnsureResult:
        """:meth:`ensure` for asyncio. The lock-free check runs on the loop (a few small opens); resolution
        uses ``httpx.AsyncClient``; an install, with its lock waits, runs on a worker thread.

        Tasks asking for the same tree share one install, and so do threads using the sync API. Cancelling
        a task only stops it waiting: the install it started goes on to its end (published whole, or cleaned
        up), so other tasks waiting for it, and the repo, never see it cut short.
        """
        if isinstance(requested, str):
            requested = parse_spec(requested, source="api")
        outcome = (await self._aresolve_all([requested]))[0]
        if isinstance(outcome, RepoinstallError):
            raise outcome
        return await self._aensure(requested, outcome)

    async def aensure_all(
        self, specs: Iterable[Requested | str], *, return_exceptions: bool = False
    ) -> list[EnsureResult | RepoinstallError]:
        """:meth:`ensure_all` for asyncio: resolved together, then installed concurrently (``jobs`` threads)."""
        import asyncio

        requested = [parse_spec(s, source="api") if isinstance(s, str) else s for s in specs]
        resolved = _raise_bad_input(await self._aresolve_all(requested))

        async def one(spec: Requested, answer: TreeId | RepoinstallError | None) -> EnsureResult | RepoinstallError:
            if isinstance(answer, RepoinstallError):
                return answer
            try:
                return await self._aensure(spec, answer)
            except RepoinstallError as error:
                return error

        outcomes = list(await asyncio.gather(*(one(r, a) for r, a in zip(requested, resolved, strict=True))))
        if not return_exceptions:
            for outcome in outcomes:
                if isinstance(outcome, RepoinstallError):
                    raise outcome
        return outcomes

    async def _aensure(self, requested: Requested, tid: TreeId | None) -> EnsureResult:
        import asyncio

        if tid is None:
            return self._skipped(requested)
        if (present := self._present(requested, tid)) is not None:
            return present
        loop = asyncio.get_running_loop()
        key = (id(loop), tid)
        # No await between this look-up and the insert below, so tasks of one loop cannot both start a job; threads
        # and other loops are deduplicated one level down, by the SingleFlight inside self._ensure.
        job = self._async_jobs.get(key)
        shared = job is not None
        started = time.monotonic()
        if job is None:
            job = loop.run_in_executor(self._executor(), self._ensure, requested, tid)
            self._async_jobs[key] = job
            job.add_done_callback(partial(_job_done, self._async_jobs, key))
        # shield: a cancelled waiter stops waiting; the install itself runs to its end on its thread.
        result = await asyncio.shield(job)
        if not shared:
            return result
        timing = Timing()
        timing.waited = time.monotonic() - started
        return self._result(requested, tid, "waited", timing)

    def _executor(self) -> ThreadPoolExecutor:
        with self._executor_guard:
            if self._pool is None:
                from concurrent.futures import ThreadPoolExecutor

                self._pool = ThreadPoolExecutor(max_workers=self.jobs, thread_name_prefix="repoinstall")
            return self._pool

    # ---- using trees ----------------------------------------------------------------------------------------

    def activate(self, *trees: Requested | str | EnsureResult) -> AbstractContextManager[list[str]]:
        """``with repo.activate("adaptor==1.4"): import adaptor``: the installed trees first on ``sys.path`` for
        the block (import caches invalidated), exactly them removed after. Specs must be installed (see
        :meth:`tree_path`); :class:`ActivationConflict` if a module of a tree is already imported from
        another version. Imported modules stay imported after the block."""
        from ._activate import activated

        return activated([self._path_of(tree) for tree in trees])

    def call_isolated(
        self,
        trees: Iterable[Requested | str | EnsureResult],
        target: str,
        *args: object,
        timeout: float | None = None,
        **kwargs: object,
    ) -> object:
        """Call ``"module:function"`` in a fresh interpreter whose path starts with the trees (ensured first),
        for full isolation between versions; returns its result or raises the exception it raised."""
        from ._activate import call_isolated

        wanted = [tree if isinstance(tree, EnsureResult) else self.ensure(tree) for tree in trees]
        return call_isolated([self._path_of(tree) for tree in wanted], target, args, kwargs, timeout)

    def _path_of(self, tree: Requested | str | EnsureResult) -> str:
        if isinstance(tree, EnsureResult):
            if tree.path is None:
                raise NotInstalled(f"{tree.requirement}: skipped (marker false), so it has no tree")
            return tree.path
        return self.tree_path(tree)

    def _capture(self, requested: Requested, tid: TreeId | None) -> EnsureResult | RepoinstallError:
        try:
            return self._ensure(requested, tid)
        except RepoinstallError as error:
            return error

    def _ensure(self, requested: Requested, tid: TreeId | None) -> EnsureResult:
        if tid is None:
            return self._skipped(requested)
        if (present := self._present(requested, tid)) is not None:
            return present
        # Threads of this process asking for the same tree share one install before touching the file lock.
        (action, timing), shared = self._single_flight().run(tid, lambda: self._install(requested, tid))
        return self._result(requested, tid, "waited" if shared else action, timing)

    def _skipped(self, requested: Requested) -> EnsureResult:
        _log.logger().info("skipped %s: its marker is false here", requested.text)
        self._emit(Event("ensured", "", "skipped", requirement=requested.text))
        return EnsureResult(requested.text, requested.name, None, None, "skipped")

    def _present(self, requested: Requested, tid: TreeId) -> EnsureResult | None:
        # Lock-free fast path: a record and matching METADATA mean installed. No lock, no network, no process.
        if check(self._layout, tid).state is State.PRESENT:
            _manifest.mark_used(self._layout, tid, time.time())
            return self._result(requested, tid, "present", Timing())
        return None

    def _result(self, requested: Requested, tid: TreeId, action: Action, timing: Timing) -> EnsureResult:
        if self._on_event is not None:
            total = timing.waited + timing.installing
            self._on_event(Event("ensured", str(tid), action, total, requested.text, timing.waited, timing.installing))
        return EnsureResult(
            requested.text,
            tid.name,
            tid.version_text,
            self._layout.tree_path(tid),
            action,
            tid.extras,
            timing.waited,
            timing.installing,
        )

    def _lock(self, tid: TreeId, ready: Callable[[], bool] | None = None) -> TreeLock:
        from ._lock import NoLock, Unusable, open_tree_lock

        if not self.settings.enabled:
            return NoLock()
        lock = open_tree_lock(self._layout, tid, self.settings, ready=ready)
        if isinstance(lock, Unusable):
            self._go_without(lock)
            return NoLock()
        return lock

    def _go_without(self, unusable: Unusable) -> None:
        # Once per kind of obstacle: a repo of a thousand trees on sshfs should say it once, not a thousand times.
        if unusable.kind not in self._warned:
            self._warned.add(unusable.kind)
            _log.logger().warning("%s", unusable.message)

    def _install(self, requested: Requested, tid: TreeId) -> tuple[Action, Timing]:
        from ._install import install_locked
        from ._lock import PeerFinished

        timing = Timing()
        self._emit(Event("start", str(tid)))
        started = time.monotonic()
        try:
            action: Action = self._locked(
                tid,
                lambda lock: install_locked(
                    self._layout, self._install_options, requested, tid, lock, timing, self.settings.heartbeat
                ),
                # While we wait, a peer's publish ends the wait at once: the tree is there, no lock needed.
                ready=lambda: check(self._layout, tid).state is State.PRESENT,
            )
        except PeerFinished:
            action = "waited"
        timing.waited = max(0.0, time.monotonic() - started - timing.installing)
        self._emit(Event("done", str(tid), action, time.monotonic() - started))
        _log.logger().info("%s %s (%.1fs)", action, tid, time.monotonic() - started)
        return action, timing

    def _locked(self, tid: TreeId, step: Callable[[TreeLock], T], *, ready: Callable[[], bool] | None = None) -> T:
        """Run ``step`` holding the tree's lock, with filesystem errors turned into clear ones. With ``ready``,
        :class:`PeerFinished` if it comes true while waiting for the lock (``step`` is then not run)."""
        try:
            self._layout.writable_fd()
            try:
                with self._lock(tid, ready) as lock:
                    return step(lock)
            except ForeignLock as foreign:
                # Another UID created the lock between our look and our acquire.
                from ._lock import NoLock, foreign_lock

                self._go_without(foreign_lock(tid, foreign.owner))
                with NoLock() as lock:
                    return step(lock)
        except OSError as error:
            _log.logger().debug("%s: %s", tid, error, exc_info=True)  # -v: where it happened
            raise _os_error(error, self._layout.root, tid) from None

    def _emit(self, event: Event) -> None:
        if self._on_event is not None:
            self._on_event(event)

    # ---- queries ------------------------------------------------------------------------------------------

    def verify(self, specs: Iterable[Requested | str] = ()) -> list[TreeReport]:
        """Verify the trees for ``specs`` file by file, or every tree in the repo (all environments) if none."""
        from ._verify import verify

        wanted = [parse_spec(s, source="api") if isinstance(s, str) else s for s in specs]
        self._layout.existing_fd()
        if wanted:
            tids = [tid for tid in (self._resolve_any(r) for r in wanted) if tid is not None]
        else:
            seen = set(self._layout.discover(RECORDS)) | set(self._layout.discover(TREES))
            tids = [self._as_recorded(t) for t in sorted(seen, key=lambda t: (t.env, t.name, t.version, t.extras))]
        return [verify(self._layout, tid) for tid in tids]

    def repair(self, report: TreeReport) -> str:
        """Fix what ``verify`` found, under the tree's lock: re-record a whole tree or reinstall a broken one."""
        from ._install import repair_locked

        if report.ok:
            return "ok"
        if report.tid.env != self.env:
            raise InstallError(f"{report.tid} ({report.tid.env}): built for another environment; repair it there")
        return self._locked(
            report.tid,
            lambda lock: repair_locked(self._layout, self._install_options, report.tid, lock, self.settings.heartbeat),
        )

    def _as_recorded(self, tid: TreeId, record: _manifest.TreeEntry | None = None) -> TreeId:
        # A tree found on disk is named by its canonical version ("1"); its record says how it is spelled ("1.0").
        record = record or _manifest.read(self._layout, tid)
        if record is None or record.version == tid.version_text:
            return tid
        from packaging.version import Version

        return TreeId(tid.env, tid.name, Version(record.version), tid.extras)

    def _resolve_any(self, requested: Requested) -> TreeId | None:
        # For verify: a pinned spec names its tree even when that tree is missing or broken.
        offline = self._offline(requested)
        if offline.ask_index and offline.tid is None:
            raise NotInstalled(f"{requested.text}: no installed version matches")
        return offline.tid

    def locks(self) -> list[LockInfo]:
        """Every install lock in the repo: holder, heartbeat age, stale by this repo's ``stale_after``."""
        from ._locks import list_locks

        self._layout.existing_fd()
        return list_locks(self._layout, self.settings.stale_after)

    def gc(
        self, *, older_than: float = GC_OLDER_THAN, unused_for: float | None = None, dry_run: bool = False
    ) -> list[Removal]:
        """Remove crashed installers' leftovers older than ``older_than`` seconds (and, with ``unused_for``,
        trees not ensured for that long); see :mod:`repoinstall._gc` for why each removal is safe."""
        from ._gc import Collector

        self._layout.existing_fd()
        return Collector(
            self._layout, self.env, self.settings, older_than=older_than, unused_for=unused_for, dry_run=dry_run
        ).run()

    def doctor(self) -> list[Finding]:
        """Probe the repo's filesystem for what repoinstall relies on."""
        from ._doctor import probe

        self._layout.existing_fd()  # probes an existing directory; ensure is what creates a repo
        return probe(self._layout)

    def tree_path(self, requested: Requested | str) -> str:
        """The installed tree's path for ``requested``; :class:`NotInstalled` if it is not installed."""
        if isinstance(requested, str):
            requested = parse_spec(requested, source="api")
        tid, ask_index = self._offline(requested)[1:]
        if tid is None:
            if ask_index:
                raise NotInstalled(f"{requested.text}: not installed in {self.path}")
            raise NotInstalled(f"{requested.text}: its marker is false here, so it has no tree")
        if check(self._layout, tid).state is not State.PRESENT:
            raise NotInstalled(f"{tid}: not installed in {self.path}")
        return self._layout.tree_path(tid)

    def list(self) -> list[tuple[_manifest.TreeEntry, str]]:
        """Every recorded tree in the repo, all environments, with its path."""
        root = self._layout.existing_fd()
        found = []
        for tid in self._layout.discover(RECORDS):
            record = _manifest.read(self._layout, tid)
            tree = _fs.open_dir(root, (*self._layout.tree_dir(tid), tid.leaf))
            if tree is None:
                continue  # a record whose tree is gone (removed by hand, or mid-gc) is not an installed tree
            os.close(tree)
            if record is not None:
                found.append((record, self._layout.tree_path(tid)))
        return found


def _os_error(error: OSError, root: str, tid: TreeId) -> RepoinstallError:
    if error.errno in (errno.ENOSPC, errno.EDQUOT):
        return InstallError(f"{tid}: the repo's filesystem is full ({root}): {error.strerror}")
    if error.errno == errno.EROFS:
        return RepoUnusable(f"repo {root} is read-only: cannot install {tid}")
    if error.errno in (errno.EACCES, errno.EPERM):
        return RepoUnusable(f"repo {root}: permission denied at {error.filename or root}")
    return InstallError(f"{tid}: {error.strerror or error} ({error.filename or root})")


def _raise_bad_input(resolved: list[TreeId | RepoinstallError | None]) -> list[TreeId | RepoinstallError | None]:
    # Bad input fails the whole call before anything is installed; an index that could not answer fails its spec.
    for answer in resolved:
        if isinstance(answer, RepoinstallError) and not isinstance(answer, ResolutionError):
            raise answer
    return resolved


def _job_done(
    jobs: dict[tuple[int, TreeId], asyncio.Future[EnsureResult]],
    key: tuple[int, TreeId],
    done: asyncio.Future[EnsureResult],
) -> None:
    jobs.pop(key, None)
    # Every waiter may have been cancelled: fetch the outcome so asyncio does not warn it was never retrieved.
    if not done.cancelled():
        done.exception()


async def _to_thread(function: Callable[[], T]) -> T:
    import asyncio

    return await asyncio.to_thread(function)
