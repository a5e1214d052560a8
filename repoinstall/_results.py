"""What an ensure returns and reports: plain values, below every module that produces them."""

from __future__ import annotations

from typing import Literal, NamedTuple

Action = Literal["present", "installed", "repaired", "waited", "skipped"]


class EnsureResult(NamedTuple):
    """The outcome of one ensure: which tree satisfies the requirement, where it is, and what it took."""

    requirement: str
    name: str
    version: str | None
    path: str | None
    action: Action
    extras: tuple[str, ...] = ()
    seconds_waited: float = 0.0
    seconds_installing: float = 0.0
    #: Distributions this ensure installed into the repo's store (0: none, or its tree was composed of stored ones).
    stored: int = 0

    def as_dict(self) -> dict[str, object]:
        return {
            "requirement": self.requirement,
            "name": self.name,
            "version": self.version,
            "path": self.path,
            "action": self.action,
            "stored": self.stored,
        }


class Event(NamedTuple):
    """Reported to ``Repo(on_event=...)``: when an install starts ("start") and ends ("done"), and once per
    ensure ("ensured": the requirement, its action, seconds waited for a peer and seconds installing), which is
    what a worker runtime reports. Hooks run on the thread that did the work: keep them short."""

    kind: Literal["start", "done", "ensured"]
    tree: str
    action: Action | None = None
    seconds: float = 0.0
    requirement: str = ""
    seconds_waited: float = 0.0
    seconds_installing: float = 0.0
