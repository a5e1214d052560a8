"""``verify`` whole: the trees' reports and their stored distributions', and (``repair``) what was done about them,
in the one order that is safe: the store first, then the trees (see :func:`repair_all`)."""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from typing import TYPE_CHECKING, NamedTuple, TypeVar, overload

from .._errors import RepoinstallError

if TYPE_CHECKING:
    from .storeverify import DistReport
    from .verify import TreeReport

D = TypeVar("D", "TreeReport", "DistReport")


class Repaired(NamedTuple):
    """One damaged tree or stored distribution ``verify(repair=True)`` repaired, or could not."""

    #: The damaged one, as verify reported it: a :class:`TreeReport` or a :class:`DistReport`.
    report: TreeReport | DistReport
    #: ``set aside`` (a stored distribution), ``re-recorded`` or ``reinstalled`` (a tree), ``ok`` (a peer had
    #: repaired it meanwhile); empty with ``error``.
    action: str = ""
    #: Why it could not be repaired (the others were still tried); ``None`` once repaired.
    error: RepoinstallError | None = None

    def as_dict(self) -> dict[str, str]:
        from .verify import TreeReport

        what = self.report
        if isinstance(what, TreeReport):
            return {"tree": what.tid.pin, "env": what.tid.env, "action": self.action}
        return {"dist": str(what), "env": what.stored.env, "action": self.action}


class Verification(Sequence["TreeReport"]):
    """What :meth:`Repo.verify <repoinstall.Repo.verify>` found and did. A sequence of the trees' reports (as
    ``verify`` returned before it checked the store too), with the reports of the stored distributions they are
    composed from in :attr:`store` and, with ``repair``, what was done in :attr:`repaired`."""

    def __init__(
        self, trees: Sequence[TreeReport], store: Sequence[DistReport], repaired: Sequence[Repaired] = ()
    ) -> None:
        #: Each tree's report, in order: what iterating gives.
        self.trees: tuple[TreeReport, ...] = tuple(trees)
        #: Each stored distribution's report (the whole store, or what the trees named are composed from).
        self.store: tuple[DistReport, ...] = tuple(store)
        #: Each damaged stored distribution, then each damaged tree, as repaired (or not); empty without ``repair``.
        self.repaired: tuple[Repaired, ...] = tuple(repaired)

    @property
    def failed(self) -> list[Repaired]:
        """The repairs that could not be made, each with its error."""
        return [done for done in self.repaired if done.error is not None]

    @property
    def ok(self) -> bool:
        """Every tree and stored distribution whole, or repaired."""
        fixed = [done.report for done in self.repaired if done.error is None]
        trees_ok = all(report.ok or report in fixed for report in self.trees)
        return trees_ok and all(report.ok or report in fixed for report in self.store)

    @overload
    def __getitem__(self, index: int) -> TreeReport: ...

    @overload
    def __getitem__(self, index: slice) -> Sequence[TreeReport]: ...

    def __getitem__(self, index: int | slice) -> TreeReport | Sequence[TreeReport]:
        return self.trees[index]

    def __len__(self) -> int:
        return len(self.trees)

    def __iter__(self) -> Iterator[TreeReport]:
        return iter(self.trees)

    def __repr__(self) -> str:
        return f"Verification(trees={self.trees!r}, store={self.store!r}, repaired={self.repaired!r})"


def repair_all(
    trees: Sequence[TreeReport],
    store: Sequence[DistReport],
    repair_stored: Callable[[DistReport], str],
    repair_tree: Callable[[TreeReport], str],
) -> list[Repaired]:
    """Repair what verify found, the store first: each damaged stored distribution is set aside, so the trees
    composed from it, repaired next, install it afresh (new inodes) and never link its changed files again; each
    step is done once and named in what is returned. A repair that fails is returned with its error; the others
    still run."""
    stored = [_tried(repair_stored, damaged) for damaged in store if not damaged.ok]
    return stored + [_tried(repair_tree, damaged) for damaged in trees if not damaged.ok]


def _tried(repair: Callable[[D], str], damaged: D) -> Repaired:
    try:
        return Repaired(damaged, repair(damaged))
    except RepoinstallError as error:
        return Repaired(damaged, error=error)
