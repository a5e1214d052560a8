"""What asking for a lock came to: one value for every way of asking (waiting for it, one attempt that never
waits, gc's take-and-run), and why no lock can be had here at all."""

from __future__ import annotations

from dataclasses import dataclass
from typing import NamedTuple


class Unusable(NamedTuple):
    """Why no lock can be had here for what it guards (a tree); ``kind`` tells warnings apart ("foreign",
    "replaced", "links", "unreadable": filelock could not read its state at an attempt, "directory": something not
    a directory where its lock directory belongs)."""

    kind: str
    message: str


@dataclass(frozen=True)
class Taken:
    """One of three answers:

    * held (``held``): ours until released;
    * a peer finished (``peer_finished``): what the lock guards appeared while we waited, so the lock was not taken
      and nothing is left to do;
    * not taken (neither): a peer holds it (an attempt that never waits; ``holder`` says who, as its owner note
      tells), or no lock can be had here at all (``without`` says why). Going on without one stays correct: the
      rename that publishes is the commit point, and the lock only saves duplicate work.
    """

    held: bool = False
    peer_finished: bool = False
    without: Unusable | None = None
    holder: str = ""

    def __post_init__(self) -> None:
        assert self.held + self.peer_finished + (self.without is not None) <= 1, self


HELD = Taken(held=True)
PEER_FINISHED = Taken(peer_finished=True)
NOT_TAKEN = Taken()


def busy(holder: str) -> Taken:
    """Not taken: a peer holds the lock (``holder``: who, and for how long)."""
    return Taken(holder=holder)


def without(why: Unusable) -> Taken:
    """Not taken: no lock can be had here (``why``)."""
    return Taken(without=why)
