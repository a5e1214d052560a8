"""Ensuring trees, decided once for :class:`~repoinstall.Repo`'s sync and async paths.

As httpx's ``BaseClient`` builds every request and its ``Client`` and ``AsyncClient`` only send it, and as its
``Auth.auth_flow`` is one generator that ``sync_auth_flow`` and ``async_auth_flow`` both drive, :class:`Ensurer`
makes every decision of an ensure: what needs no install (a marker false here, a tree present), which trees a
batch stores first, what each install is told, and the results. A batch's plan (:meth:`Ensurer.batch`) is a
generator: it yields the work to run, a list of callables, and is sent back their results. ``Repo.ensure_all``
runs that work on worker threads and waits; ``Repo.aensure_all`` awaits the same work, run on the same threads.
Nothing here knows which of the two runs it."""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Callable, Generator, Mapping, Sequence
from functools import partial
from typing import TYPE_CHECKING, Any, NamedTuple, TypeVar

from . import _log
from ._disk.check import in_use
from ._disk.identity import TreeId
from ._errors import Interrupted, LockTimeout, NotOnIndex, RepoinstallError, ResolutionError, os_errors
from ._results import Action, EnsureResult, Event

if TYPE_CHECKING:
    from packaging.version import Version

    from ._choose import Choice, Chooser
    from ._disk.closures import Closure
    from ._disk.dists import Hashed
    from ._disk.layout import Layout
    from ._install.flight import SingleFlight
    from ._install.protocol import Filler, Outcome
    from ._lock.locks import TreeLocks
    from ._oci.pull import Source
    from ._options import FileIndex, InstallOptions, LockSettings
    from ._requirements import Requested
    from ._store.identity import DistId

T = TypeVar("T")
#: A plan: yields the work to run (callables, run on worker threads), is sent their results, returns its own.
Flow = Generator[list[Callable[[], Any]], list[Any], T]
Outcomes = list[EnsureResult | RepoinstallError]


class Prepared(NamedTuple):
    """What storing a batch first did for one of its trees: its closure, if resolved there, and how many
    distributions it installed that this tree is the first of the batch to hold."""

    closure: Closure | None = None
    stored: int = 0
    #: The stored distributions the batch stored or hashed whole, for this tree's composing to trust.
    checked: frozenset[DistId] = frozenset()
    #: What the batch hashed of the files it stored, for this tree's verify to find them hashed (see
    #: :class:`repoinstall._install.fill.batch.Prefilled`).
    hashed: Hashed | None = None
    #: A pinned tree the batch could not resolve: its listing is looked at first (see :meth:`Ensurer.capture`).
    look_up: bool = False
    #: Seconds the batch's run took: part of this tree's install, which waited for all of it.
    seconds: float = 0.0


NOTHING = Prepared()


class Ensurer:
    """The install side of a repo, shared by its sync and async paths: the plans, and the steps their work runs."""

    def __init__(
        self,
        layout: Layout,
        chooser: Chooser,
        settings: LockSettings,
        install: InstallOptions | None,
        source: Source | None,
        on_event: Callable[[Event], None] | None,
    ) -> None:
        self._layout = layout
        self._chooser = chooser
        self._settings = settings
        self._install_options = install
        self._source = source
        self._on_event = on_event
        self._locks: TreeLocks | None = None
        self._flights: SingleFlight[Outcome] | None = None
        #: Guards the lazily made locks and single-flight table: threads may ask for them first at once.
        self._lazy_guard = threading.Lock()

    # ---- the plans ----------------------------------------------------------------------------------------

    def settle(self, requested: Requested, tid: TreeId | None) -> EnsureResult | None:
        """The result where no install is needed (its marker false here, or its tree present), else ``None``.
        The warm path: lock-free, on the caller's thread or loop, no worker started for it."""
        if tid is None:
            return self.skipped(requested)
        if in_use(self._layout, tid):
            return self.result(requested, tid, "present")
        return None

    def batch(self, requested: list[Requested], chosen: list[Choice]) -> Flow[Outcomes]:
        """The plan of ``ensure_all`` and ``aensure_all``: each spec settled where it needs no install; the missing
        trees' distributions stored first in one installer run; then each missing tree installed (the runner runs
        ``jobs`` at a time); results in the order of ``requested``, an index that could not answer failing its
        spec alone."""
        outcomes: list[EnsureResult | RepoinstallError | None] = [None] * len(requested)
        missing = []
        for index, (one, tid) in enumerate(zip(requested, chosen, strict=True)):
            if isinstance(tid, RepoinstallError):
                outcomes[index] = tid  # the index could not say: this one fails, the others go on
            elif (settled := self.settle(one, tid)) is not None:
                outcomes[index] = settled
            else:
                missing.append(index)
        if missing:
            # Storing a batch first installs from the index: not where the trees' images are looked for first.
            prepared: dict[Choice, Prepared] = {}
            if self._source is None:
                (prepared,) = yield [partial(self.prefill, requested, chosen, missing)]
            done = yield [
                partial(self.capture, requested[i], chosen[i], prepared.get(chosen[i], NOTHING)) for i in missing
            ]
            for index, outcome in zip(missing, done, strict=True):
                outcomes[index] = outcome
        return [o for o in outcomes if o is not None]

    # ---- the steps the plans' work runs, on worker threads ------------------------------------------------------

    def prefill(self, requested: list[Requested], chosen: list[Choice], missing: list[int]) -> dict[Choice, Prepared]:
        """Store the distributions the ``missing`` trees need, in one resolution and one installer run (see
        :mod:`repoinstall._install.fill.batch`); each tree's closure, for those resolved here. Only a saving: whatever
        fails here is left to each tree's own install, which reports it."""
        from ._install.fill.batch import prefill

        every = [(requested[i], tid) for i in missing if isinstance(tid := chosen[i], TreeId)]
        # One run per index setting: a requirements file's index lines apply to its own trees only.
        groups: dict[FileIndex | None, list[tuple[Requested, TreeId]]] = {}
        for one, tid in every:
            groups.setdefault(one.file_index, []).append((one, tid))
        found: dict[Choice, Prepared] = {}
        for index, items in groups.items():
            found.update(self._prefill_group(prefill, index, items))
        return found

    def _prefill_group(
        self, prefill: Any, index: FileIndex | None, items: list[tuple[Requested, TreeId]]
    ) -> dict[Choice, Prepared]:
        """:meth:`prefill` for trees that share their index settings (``index``: their file's lines)."""
        if len(items) < 2:
            return {}  # one tree: its own protocol resolves and stores what it needs, under its own lock
        from ._options import for_file

        prepared: dict[Choice, Prepared] = {}
        started = time.monotonic()
        if any(not (one.locked or one.members or one.hashes) for one, _ in items):
            # Its trees resolved together may ask the index, after the installer's run, whether the resolution held
            # a tree's dependency back (see fill.batch's _newest): the HTTP client is made meanwhile, not then.
            threading.Thread(target=self._warm, args=(index,), name="repoinstall-warm", daemon=True).start()
        try:
            with os_errors(self._layout.root, items[0][1]):
                done = self._layout.retrying(
                    prefill,
                    self._layout,
                    self.tree_locks(),
                    for_file(self._install_options, index),
                    items,
                    partial(self._newest, index=index),
                )
            seconds = time.monotonic() - started
            if done.closures:
                _log.logger().info(
                    "stored the distributions of %d trees in one run (%.1fs)", len(done.closures), seconds
                )
            prepared = {
                tid: Prepared(
                    done.closures.get(tid),
                    done.stored.get(tid, 0),
                    done.checked,
                    done.hashed,
                    seconds=seconds if tid in done.closures else 0.0,
                )
                for _, tid in items
            }
        except (Interrupted, LockTimeout):
            raise  # stopping, or a peer's distribution waited for past --wait-timeout: exit 3, as for a tree
        except RepoinstallError as error:
            _log.logger().debug("storing the batch first failed (%s); installing tree by tree", error)
        return self._absent(items, prepared)

    def _absent(
        self, items: list[tuple[Requested, TreeId]], prepared: dict[Choice, Prepared]
    ) -> dict[Choice, Prepared]:
        """``prepared``, with the pinned trees the batch did not resolve marked to be looked up, each by the
        worker about to install it, so that one no source lists costs no installer run. Looked up there, not
        all here: a batch of 20,000 pins would wait for 20,000 listings before its first install."""
        unresolved = {
            tid
            for one, tid in items
            if prepared.get(tid, NOTHING).closure is None and one.pinned and not (one.locked or one.members)
        }
        if len(unresolved) < 2:
            return prepared  # one tree: its installer's error says as much, for one run
        return {**prepared, **{tid: prepared.get(tid, NOTHING)._replace(look_up=True) for tid in unresolved}}

    def _warm(self, index: FileIndex | None) -> None:
        """The resolver of ``index`` and its HTTP client made (see :meth:`_prefill_group`). Only a saving: whatever
        fails here fails again, and is reported, where the index is asked."""
        with contextlib.suppress(Exception):
            self._chooser._make_resolver(index).warm()

    def _newest(
        self,
        specs: Sequence[Requested],
        known: Mapping[tuple[str, str], str | None],
        *,
        index: FileIndex | None = None,
    ) -> list[Version | ResolutionError]:
        """The newest version the index offers for each spec (as the chooser asks for a tree's own version);
        ``known``: the Requires-Python of files the batch stored, by name and version, not fetched again."""
        return self._chooser._make_resolver(index).resolve(specs, known)

    def capture(
        self, requested: Requested, tid: Choice, prepared: Prepared = NOTHING
    ) -> EnsureResult | RepoinstallError:
        """:meth:`ensure` for one tree of a batch: its error returned, for the batch's others to go on."""
        if prepared.look_up:
            answer = self._chooser._make_resolver(requested.file_index).resolve([requested])[0]
            if isinstance(answer, NotOnIndex):
                return answer  # every source's listing says so: no installer run would find it
        try:
            if isinstance(tid, RepoinstallError):
                raise tid
            return self.ensure(requested, tid, prepared)
        except RepoinstallError as error:
            return error

    def ensure(self, requested: Requested, tid: TreeId | None, prepared: Prepared = NOTHING) -> EnsureResult:
        """One tree ensured, on this (worker) thread: settled if it needs no install (again: a peer may have
        finished it meanwhile), else installed once for all threads of this process."""
        if (settled := self.settle(requested, tid)) is not None:
            return settled
        assert tid is not None  # settled otherwise
        filler = self._from_registry(requested, tid) if self._source is not None else None
        # Threads of this process asking for the same tree share one install before touching the file lock.
        while True:
            try:
                outcome, shared = self.single_flight().run(
                    tid,
                    partial(
                        self._install,
                        requested,
                        tid,
                        prepared.closure,
                        prepared.checked,
                        filler,
                        prepared.seconds,
                        prepared.hashed,
                    ),
                )
                break
            except Interrupted:
                from . import _stop

                if _stop.stopped():
                    raise
                # The install this thread shared was stopped with its own caller's batch, not ours: run it anew.
        action = "waited" if shared else outcome.action
        stored = prepared.stored + (0 if shared else outcome.stored)
        installing = outcome.installing + (0.0 if shared else prepared.seconds)  # its batch's run was its install
        return self.result(requested, tid, action, outcome.waited, installing, stored)

    def _install(
        self,
        requested: Requested,
        tid: TreeId,
        resolved: Closure | None = None,
        checked: frozenset[DistId] = frozenset(),
        filler: Filler | None = None,
        batch: float = 0.0,
        hashed: Hashed | None = None,
    ) -> Outcome:
        """The protocol for ``tid``; ``batch``: seconds a batch's run took to store its distributions first (the
        time reported for it includes them); ``hashed``: what that run hashed of the files it stored."""
        from ._install.protocol import ensure_tree
        from ._options import for_file

        self.emit(Event("start", str(tid)))
        started = time.monotonic()
        with os_errors(self._layout.root, tid):
            # A handle gone stale mid-protocol (another NFS client replaced what it named) unwinds this run like a
            # crash would (staging removed, lock released) and runs the protocol again from fresh lookups.
            outcome = self._layout.retrying(
                ensure_tree,
                self._layout,
                self.tree_locks(),
                for_file(self._install_options, requested.file_index),  # its file's index lines, if any
                requested,
                tid,
                resolved,
                checked,
                filler,
                hashed,
            )
        seconds = time.monotonic() - started + batch
        self.emit(Event("done", str(tid), outcome.action, seconds))
        size = f", {outcome.size / 1e6:.1f} MB" if outcome.size else ""
        with_batch = ", its batch's run included" if batch else ""
        _log.emit(
            "install.done",
            "%s %s (%.1fs%s%s)",
            outcome.action,
            tid,
            seconds,
            size,
            with_batch,
            tree=str(tid),
            action=outcome.action,
            seconds=round(seconds, 3),
            bytes=outcome.size,
            waited=round(outcome.waited, 3),
        )
        return outcome

    def _from_registry(self, requested: Requested, tid: TreeId) -> Filler | None:
        """Step 5 from the tree's image where ``--from``'s registry has one (``None``: install as without it); for
        a lock's tree, from the lock's wheels there (see :mod:`repoinstall._oci.wheels`). The options are those of
        the file that asked for it (its index lines), if any."""
        from ._errors import SourceRefused
        from ._options import InstallOptions, for_file

        assert self._source is not None
        options = for_file(self._install_options, requested.file_index) or InstallOptions()
        if requested.locked:
            # A layer cannot be checked against a wheel's sha256: a hashed lock installs the wheels its hashes name
            # (fetched by digest), so what it stores is wheel-verified, never the image's layers.
            from ._oci.wheels import fill_locked

            return partial(fill_locked, self._source, options)
        if requested.hashes:
            # A hash names a wheel, which no layer can be checked against: installed as without --from.
            _log.logger().info("%s: hashed; installing it as without --from", tid)
            return None
        try:
            with os_errors(self._layout.root, tid):
                found = self._source.find(tid)
        except SourceRefused as refusal:
            if not options.index_allowed():
                raise  # the refusal is the answer: an attack is never hidden
            _log.logger().warning("%s; installing %s from the index instead", refusal, tid)
            return None
        if found is None:
            _log.logger().info("%s: no image in %s; installing it", tid, self._source.reference)
            return None
        from ._install.markerenv import marker_environment

        return partial(self._source.fill, found, environment=marker_environment(options.python))

    # ---- made on first use ----------------------------------------------------------------------------------

    def tree_locks(self) -> TreeLocks:
        # Made on first use (the warm path takes no lock), once: it remembers which obstacles were reported.
        with self._lazy_guard:
            if self._locks is None:
                from ._lock.locks import TreeLocks

                self._locks = TreeLocks(self._layout, self._settings)
            return self._locks

    def single_flight(self) -> SingleFlight[Outcome]:
        # Made on first use (the warm path never needs it), once: two tables would let two threads install at once.
        if (flights := self._flights) is None:
            from ._install.flight import SingleFlight

            with self._lazy_guard:
                if self._flights is None:
                    self._flights = SingleFlight()
                flights = self._flights
        return flights

    # ---- results and events -------------------------------------------------------------------------------

    def skipped(self, requested: Requested) -> EnsureResult:
        _log.logger().info("skipped %s: its marker is false here", requested.text)
        self.emit(Event("ensured", "", "skipped", requirement=requested.text))
        return EnsureResult(requested.text, requested.name, None, None, "skipped")

    def result(
        self,
        requested: Requested,
        tid: TreeId,
        action: Action,
        waited: float = 0.0,
        installing: float = 0.0,
        stored: int = 0,
    ) -> EnsureResult:
        self.emit(Event("ensured", str(tid), action, waited + installing, requested.text, waited, installing))
        path = self._layout.tree_path(tid)
        return EnsureResult(
            requested.text, tid.name, tid.version_text, path, action, tid.extras, waited, installing, stored
        )

    def emit(self, event: Event) -> None:
        if self._on_event is not None:
            self._on_event(event)


def gathered(outcomes: Outcomes, return_exceptions: bool) -> Outcomes:
    """The batch's outcomes, or its first error raised (``return_exceptions`` false)."""
    if not return_exceptions:
        for outcome in outcomes:
            if isinstance(outcome, RepoinstallError):
                raise outcome
    return outcomes


def bad_input_raised(chosen: list[Choice]) -> list[Choice]:
    """``chosen``, once no spec of it is bad input: that fails the whole call before anything is installed (an
    index that could not answer fails its own spec only, in the plan)."""
    for choice in chosen:
        if isinstance(choice, RepoinstallError) and not isinstance(choice, ResolutionError):
            raise choice
    return chosen
